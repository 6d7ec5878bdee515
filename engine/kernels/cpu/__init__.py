"""CPU kernels: oneDNN-packed linears with measured row ranges, the bfloat16-or-float32 probe, CPU facts."""
