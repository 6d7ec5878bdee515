"""Shared test fixtures: paths to the shared workloads and the repository root.

The test session owns its process, as `radixgate serve` owns a server's: like serve, it tells
litellm to read its bundled model cost map (gateway/cli/serve.py, LITELLM_ENV) before any test
imports litellm, so no test reaches the network for it.
"""

import os
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT, SHARED

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The ../shared folder beside the checkout (CI lays it there)."""
    if not SHARED.is_dir():
        pytest.fail(f"../shared is missing at {SHARED}; CI lays it beside the checkout")
    return SHARED
