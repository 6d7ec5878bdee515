"""CPU kernels: oneDNN-packed linears within measured row ranges, the bfloat16-or-float32 probe, CPU facts.

Imported through engine.kernels (the seam); inside, imports run one way:
cpu_info, row_range <- packed_linear <- dtype_probe.
"""
