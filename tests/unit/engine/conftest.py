"""Fixtures for the engine unit tests: engines over a fake runner (tests/support/fake_runner.py)."""

import pytest
from tests.support.fake_runner import FakeRunner

from engine import Engine, EngineConfig


@pytest.fixture
def make_engine():
    """make_engine(num_pages=..., page_size=..., runner_class=FakeRunner, **config) -> a started Engine over
    runner_class(num_pages, page_size); every engine is checked for leaked pages after the test."""
    engines = []

    def make(num_pages: int = 256, page_size: int = 4, runner_class=FakeRunner, **overrides) -> Engine:
        runner = runner_class(num_pages, page_size)
        config = EngineConfig(model="fake", page_size=page_size, num_pages=num_pages, **overrides)
        engine = Engine(config, runner=runner).start()
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.shutdown()
        engine.flush_cache()
        assert engine.pool.num_free_pages == engine.pool.num_pages, "pages leaked"
