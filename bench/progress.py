"""Progress reporting of the benches: the callback their passes take, and rich bars that implement it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Progress = Callable[[str, int], None]  # (label, num_done) after each finished request of a labelled pass


@contextmanager
def progress_bars(total: int) -> Iterator[Progress]:
    """Yield progress(label, num_done): the first call for a label adds its bar (thread-safe)."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bars

    tasks: dict[str, int] = {}
    lock = threading.Lock()
    with Bars(TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()) as bars:

        def progress(label: str, num_done: int) -> None:
            with lock:
                if label not in tasks:
                    tasks[label] = bars.add_task(label, total=total)
                bars.update(tasks[label], completed=num_done)

        yield progress
