"""Shared test fixtures: paths to the shared workloads and the repository root."""

from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT, SHARED


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The ../shared folder beside the checkout (CI lays it there)."""
    if not SHARED.is_dir():
        pytest.fail(f"../shared is missing at {SHARED}; CI lays it beside the checkout")
    return SHARED
