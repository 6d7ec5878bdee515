"""torch's CPU threads for the benches that run the model in this process."""

from __future__ import annotations

THREADS_HELP = "torch CPU threads (0: torch's default); 1 avoids oversubscription on a busy machine."


def set_torch_threads(threads: int) -> None:
    """Pin torch's intra-op threads; 0 keeps torch's default."""
    if threads:
        import torch

        torch.set_num_threads(threads)
