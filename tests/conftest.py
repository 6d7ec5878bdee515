"""Shared test fixtures: paths to the shared workloads and the repository root.

Before any test (and before xdist starts its workers) the session runs `radixgate warmup`'s
steps in-process: the native kernels' compile and the default model's dequantize then happen
once, outside every deadline, rather than inside the first server start of an e2e test. With
both cached it takes seconds; `--no-warmup` skips it.

The test session owns its process, as `radixgate serve` owns a server's: like serve, it tells
litellm to read its bundled model cost map (gateway/cli/serve.py, LITELLM_ENV) before any test
imports litellm, so no test reaches the network for it.
"""

import contextlib
import os
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT, SHARED

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--no-warmup", action="store_true",
                     help="do not build the native kernels and the default model's cache before the session")


def pytest_configure(config: pytest.Config) -> None:
    is_xdist_worker = hasattr(config, "workerinput")  # the controller warmed up before starting it
    if is_xdist_worker or config.getoption("--no-warmup") or config.getoption("collectonly"):
        return
    from gateway.cli.warmup import warm_up
    from gateway.settings import Settings

    capture = config.pluginmanager.getplugin("capturemanager")  # None under -p no:capture
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        try:
            engine = Settings().engine  # RADIXGATE_CACHE_DIR, RADIXGATE_NATIVE_KERNELS as a server reads them
            warm_up(engine.model, print, cache_dir=engine.cache_dir, native=engine.native_kernels)
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


@pytest.fixture(scope="module")
def redis_server():
    """A real `redis-server` of this module's own on a free loopback port (tests/support/redis_server.py),
    never the machine's Redis on 6379: a test may stop and restart it. Skipped only where
    redis-server is not installed (`make test` installs it)."""
    from tests.support.redis_server import REDIS_SERVER, RedisServer

    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (Debian package redis-server; `make test` installs it)")
    with RedisServer() as server:
        yield server
