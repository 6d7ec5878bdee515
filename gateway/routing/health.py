"""BackendHealth: one remote's up/down state, from passive failures and active checks.

States: "up" (takes requests), "down" (a failure: out of rotation for `cooldown_s`), "half_open"
(the cooldown is over: exactly one request, or the next active check, probes it; success brings
it back up, failure starts another cooldown). Transitions are logged at WARNING (down) and INFO
(back up), so an operator's log says when a node left and came back.

Event-loop only (no locking): the router, the remote's stream and the active checker all run on it.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("gateway.routing")

UP, DOWN, HALF_OPEN = "up", "down", "half_open"


class BackendHealth:
    def __init__(self, name: str, cooldown_s: float) -> None:
        self.name = name
        self.cooldown_s = cooldown_s
        self._is_down = False
        self._down_until = 0.0
        self._is_probing = False
        self.num_failures = 0
        self.num_recoveries = 0
        self.last_error: str | None = None

    @property
    def state(self) -> str:
        if not self._is_down:
            return UP
        return DOWN if time.monotonic() < self._down_until else HALF_OPEN

    def admits(self) -> bool:
        """Whether the router may send a request now (half-open: only while no probe is out)."""
        state = self.state
        return state == UP or (state == HALF_OPEN and not self._is_probing)

    def begin(self) -> None:
        """A request starts; in half-open it is the probe."""
        if self.state == HALF_OPEN:
            self._is_probing = True

    def record_success(self) -> None:
        self._is_probing = False
        if self._is_down:
            self._is_down = False
            self.num_recoveries += 1
            log.info("backend %s is back up", self.name)

    def record_failure(self, reason: str) -> None:
        self._is_probing = False
        self.num_failures += 1
        self.last_error = reason
        if not self._is_down or time.monotonic() >= self._down_until:
            log.warning("backend %s is down for %.0f s: %s", self.name, self.cooldown_s, reason)
        self._is_down = True
        self._down_until = time.monotonic() + self.cooldown_s

    def end_probe(self) -> None:
        """A probe request ended with neither success nor failure (e.g. the client left)."""
        self._is_probing = False
