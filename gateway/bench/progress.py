"""What the engine benches' commands share: rich progress bars (one per labelled pass) and thread setup."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_bars(total: int) -> Iterator[Callable[[str, int], None]]:
    """Yield progress(label, num_done): the first call for a label adds its bar (thread-safe)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    tasks: dict[str, int] = {}
    lock = threading.Lock()
    with Progress(TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn()) as bars:

        def progress(label: str, num_done: int) -> None:
            with lock:
                if label not in tasks:
                    tasks[label] = bars.add_task(label, total=total)
                bars.update(tasks[label], completed=num_done)

        yield progress


THREADS_HELP = "torch CPU threads (0: torch's default); 1 avoids oversubscription on a busy machine."


def set_torch_threads(threads: int) -> None:
    """Pin torch's intra-op threads; 0 keeps torch's default."""
    if threads:
        import torch

        torch.set_num_threads(threads)
