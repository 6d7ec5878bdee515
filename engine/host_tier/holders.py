"""Holder leases: who holds references and reservations, and taking them back from the dead.

Each attached process registers as a holder: a row with its pid, a generation
(bumped on every reuse of the row, so a stale handle is recognised) and a lease
expiry it renews on every store operation. sweep() returns what a holder held
(its references and its reserved, uncommitted slots) once its process is gone
or its lease ran out without renewal. All functions run under the store lock.
"""

from __future__ import annotations

import os
import time

import numpy as np

from engine.host_tier.layout import FREE, RESERVED, Layout


class LeaseExpiredError(RuntimeError):
    """This process's holder row was swept (lease expired); its references are gone."""


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def register(layout: Layout, lease_s: float) -> tuple[int, int]:
    """Take a free holder row for this process; returns (row, generation)."""
    sweep(layout)
    free = np.flatnonzero(layout.holder_pid == 0)
    if not len(free):
        raise RuntimeError(f"host page store has no free holder row ({len(layout.holder_pid)} processes attached)")
    row = int(free[0])
    layout.holder_pid[row] = os.getpid()
    layout.holder_generation[row] += 1
    layout.holder_expiry[row] = time.time() + lease_s
    return row, int(layout.holder_generation[row])


def renew(layout: Layout, row: int, generation: int, lease_s: float) -> bool:
    """Extend this holder's lease; False (nothing renewed) if the row was swept meanwhile."""
    if int(layout.holder_generation[row]) != generation or int(layout.holder_pid[row]) != os.getpid():
        return False
    layout.holder_expiry[row] = time.time() + lease_s
    return True


def drop_holder(layout: Layout, row: int) -> int:
    """Return a holder's references and reserved slots and free its row; returns slots touched."""
    refs = layout.holder_refs[row]
    held = np.flatnonzero(refs)
    layout.refcount[held] -= refs[held]
    refs[held] = 0
    reserved = np.flatnonzero((layout.state == RESERVED) & (layout.owner == row))
    layout.state[reserved] = FREE
    layout.owner[reserved] = -1
    layout.parent[reserved] = -1
    layout.holder_pid[row] = 0
    layout.holder_expiry[row] = 0.0
    return len(held) + len(reserved)


def sweep(layout: Layout, now: float | None = None) -> int:
    """Drop every holder whose process died or whose lease expired; returns slots given back."""
    now = time.time() if now is None else now
    returned = 0
    for row in np.flatnonzero(layout.holder_pid):
        pid = int(layout.holder_pid[row])
        if not is_alive(pid) or layout.holder_expiry[row] < now:
            returned += drop_holder(layout, int(row))
    return returned
