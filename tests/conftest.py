"""Shared test fixtures: paths to the shared workloads and the repository root.

Before any test (and before xdist starts its workers) the session runs `radixgate warmup`'s
steps in-process: the native kernels' compile and the default model's dequantize then happen
once, outside every deadline, rather than inside the first server start of an e2e test. With
both cached it takes seconds; `--no-warmup` skips it.
"""

import contextlib
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT, SHARED


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--no-warmup", action="store_true",
                     help="do not build the native kernels and the default model's cache before the session")


def pytest_configure(config: pytest.Config) -> None:
    is_xdist_worker = hasattr(config, "workerinput")  # the controller warmed up before starting it
    if is_xdist_worker or config.getoption("--no-warmup") or config.getoption("collectonly"):
        return
    from engine import EngineConfig
    from gateway.cli.warmup import warm_up

    capture = config.pluginmanager.getplugin("capturemanager")  # None under -p no:capture
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        try:
            warm_up(EngineConfig().model, print)
        except (OSError, ValueError) as exc:  # the tests that load the model report it themselves
            print(f"warmup: cannot cache the default model: {exc}")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The ../shared folder beside the checkout (CI lays it there)."""
    if not SHARED.is_dir():
        pytest.fail(f"../shared is missing at {SHARED}; CI lays it beside the checkout")
    return SHARED
