"""Settings of limits shared through Redis: off unless redis_url is set (env, config or --redis-url),
its section is strict, and the URL's password never reaches a log line."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gateway.settings import Settings
from gateway.shared_state import build_shared_state, masked_url


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in ("RADIXGATE_REDIS_URL", "RADIXGATE_SHARED_LIMITS__LEASE_S", "RADIXGATE_RATE_LIMIT_WINDOW_S",
                 "RADIXGATE_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env


def test_without_redis_url_nothing_is_shared():
    settings = Settings()
    assert settings.redis_url is None and settings.rate_limit_window_s == 60.0
    assert build_shared_state(settings) is None


def test_redis_url_and_the_lease_come_from_the_environment_and_the_flag_wins(monkeypatch):
    from gateway.cli.serve import load_settings

    monkeypatch.setenv("RADIXGATE_REDIS_URL", "redis://10.0.0.5:6379/0")
    monkeypatch.setenv("RADIXGATE_SHARED_LIMITS__LEASE_S", "3")
    settings = Settings()
    assert settings.redis_url == "redis://10.0.0.5:6379/0" and settings.shared_limits.lease_s == 3.0
    assert load_settings(redis_url="redis://127.0.0.1:7000/1").redis_url == "redis://127.0.0.1:7000/1"


def test_building_the_shared_state_connects_to_nothing_yet():
    shared = build_shared_state(Settings(redis_url="redis://127.0.0.1:1/0", shared_limits={"lease_s": 6}))
    assert shared is not None and shared.link.is_up  # lazily connected: a Redis down at start is "away" later
    assert shared.slots.lease_ms == 6000 and shared.buckets.window_ms == 60_000


@pytest.mark.parametrize("section", [{"lease": 3}, {"lease_s": 0}, {"key_prefix": ""}])
def test_the_shared_limits_section_is_strict(section):
    with pytest.raises(ValidationError):
        Settings(shared_limits=section)


def test_a_redis_password_is_masked_for_logs():
    assert masked_url("redis://:s3cret@redis.internal:6379/0") == "redis://:***@redis.internal:6379/0"
    assert masked_url("rediss://app:s3cret@redis.internal/2") == "rediss://app:***@redis.internal/2"
    assert masked_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
