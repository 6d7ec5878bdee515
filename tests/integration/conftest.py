"""Integration fixtures shared across modules: ONE real engine on the default model per test session.

`shared_engine` loads SmolLM2-135M-Instruct once (a few seconds once the GGUF is
dequantized and cached) and is injected into every app a test builds
(`create_app(settings, engine=...)`); an app never shuts down an injected engine.
Tests that use it are `slow`.

Tenant ids restart at 1 in every fresh database, so two tests' tenants can map
to the same cache namespace on the shared engine: take `engine` (the shared
engine with its unpinned cache flushed first) when a test asserts on
cached_tokens. `client` is a TestClient on a fresh app (tmp_path SQLite) over `engine`;
a module that needs another app defines its own `client`.

`smollm` (the default model loaded once, no engine) and `runners` (fp32 CPU ModelRunners
over it, one per pool shape) serve the engine and bench tests that drive the runner directly.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from gateway.db import migrate
from tests.support.db import BACKENDS, create_pg_database, drop_pg_database

TEST_KV_CACHE_TOKENS = 16384


@pytest.fixture(scope="session")
def shared_engine() -> Iterator:
    from engine import Engine, EngineConfig

    engine = Engine(EngineConfig(kv_cache_tokens=TEST_KV_CACHE_TOKENS, device="cpu")).start()
    yield engine
    engine.shutdown()


@pytest.fixture()
def engine(shared_engine):
    """The shared engine with every unlocked, unpinned cached page evicted (no hits left over from other tests)."""
    shared_engine.flush_cache()
    return shared_engine


@pytest.fixture()
def client(tmp_path, engine) -> Iterator:
    from tests.support.app import make_client

    with make_client(tmp_path, engine) as test_client:
        yield test_client


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path) -> Iterator[str]:
    """An empty database: a new SQLite file, or a new PostgreSQL database dropped afterwards."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'radixgate.db'}"
        return
    url = create_pg_database()
    try:
        yield url
    finally:
        drop_pg_database(url)


@pytest.fixture
def migrated_url(db_url) -> str:
    migrate.upgrade(db_url)
    return db_url


@pytest.fixture(scope="session")
def smollm():
    from engine.models.loader import load_model

    return load_model("smollm2-135m")


@pytest.fixture(scope="session")
def runners(smollm):
    """(num_pages, page_size) -> an fp32 CPU ModelRunner over its own KVPool, built once."""
    from engine import KVPool
    from engine.models.llama import ModelShape
    from engine.runner import ModelRunner

    built = {}

    def get(num_pages: int, page_size: int):
        if (num_pages, page_size) not in built:
            shape = ModelShape.from_config(smollm.config)
            pool = KVPool(num_pages, page_size, num_layers=shape.num_layers, num_kv_heads=shape.num_kv_heads,
                          head_dim=shape.head_dim, dtype=torch.float32)
            built[num_pages, page_size] = ModelRunner(smollm, pool, torch.float32, "cpu")
        return built[num_pages, page_size]

    return get
