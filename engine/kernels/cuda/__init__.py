"""CUDA kernels: FlashInfer paged attention (imported only when flashinfer is installed)."""
