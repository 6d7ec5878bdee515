"""Helpers to run `radixgate serve` as a real process in e2e tests (shared by conftest.py and test modules)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.ports import free_port

__all__ = ["RADIXGATE", "free_port"]

RADIXGATE = Path(sys.executable).with_name("radixgate")
