"""Compute kernels behind one seam: CPU (packed linears, row ranges, dtype probe) and CUDA (FlashInfer)."""
