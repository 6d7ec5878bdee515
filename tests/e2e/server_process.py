"""Helpers to run `radixgate serve` as a real process in e2e tests (shared by conftest.py and test modules)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

RADIXGATE = Path(sys.executable).with_name("radixgate")


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
