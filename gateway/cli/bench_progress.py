"""Rich progress bars for the engine benches: one bar per labelled pass."""

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
