"""Settings: precedence init > env > config file > defaults, nested engine settings, TOML and YAML files."""

from __future__ import annotations

import pytest

import dataclasses

from pydantic import ValidationError

from engine.config import EngineConfig
from gateway.settings import EngineSettings, Settings, read_config_file


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in ("RADIXGATE_PORT", "RADIXGATE_CONFIG_FILE", "RADIXGATE_ENGINE__MODEL", "RADIXGATE_ENGINE__PAGE_SIZE", "RADIXGATE_DB_URL",
                 "RADIXGATE_NATIVE_KERNELS", "RADIXGATE_CACHE_DIR", "RADIXGATE_ENGINE__NATIVE_KERNELS",
                 "RADIXGATE_ENGINE__CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env


def test_defaults_serve_the_default_model_on_sqlite():
    settings = Settings()
    assert settings.db_url == "sqlite:///./radixgate.db" and settings.port == 8000
    assert settings.engine.model == "smollm2-135m" and settings.remotes == []
    assert settings.resolved_templates_dir().joinpath("chat.j2").is_file()


def test_env_overrides_nested_engine_settings(monkeypatch):
    monkeypatch.setenv("RADIXGATE_PORT", "9100")
    monkeypatch.setenv("RADIXGATE_ENGINE__PAGE_SIZE", "32")
    settings = Settings()
    assert settings.port == 9100 and settings.engine.page_size == 32 and settings.engine.model == "smollm2-135m"


def test_config_file_is_below_env_and_init(monkeypatch, tmp_path):
    path = tmp_path / "radixgate.toml"
    path.write_text('port = 9001\ndb_url = "sqlite:///x.db"\n[engine]\nmodel = "tiny"\npage_size = 8\n')
    monkeypatch.setenv("RADIXGATE_ENGINE__PAGE_SIZE", "64")
    settings = Settings(config_file=path, port=9002)
    assert settings.port == 9002 and settings.db_url == "sqlite:///x.db"
    assert settings.engine.model == "tiny" and settings.engine.page_size == 64


def test_yaml_config_file_from_env_with_remotes(monkeypatch, tmp_path):
    path = tmp_path / "radixgate.yaml"
    path.write_text("remotes:\n  - {name: a, model: m, api_base: 'http://127.0.0.1:1/v1'}\nlog_queue_max: 5\n")
    monkeypatch.setenv("RADIXGATE_CONFIG_FILE", str(path))
    settings = Settings()
    assert settings.log_queue_max == 5 and settings.remotes[0].api_base == "http://127.0.0.1:1/v1"


def test_config_file_errors_are_explicit(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_config_file(tmp_path / "missing.toml")
    bad = tmp_path / "radixgate.ini"
    bad.write_text("x")
    with pytest.raises(ValueError, match="toml"):
        read_config_file(bad)


def test_engine_settings_become_an_engine_config():
    config = EngineSettings(page_size=8, kv_cache_tokens=1024, max_queue=3).to_engine_config()
    assert (config.page_size, config.kv_cache_tokens, config.max_queue, config.model) == (8, 1024, 3, "smollm2-135m")


def test_the_fair_policy_is_the_default_and_queue_wait_and_weights_come_from_env(monkeypatch):
    monkeypatch.setenv("RADIXGATE_ENGINE__MAX_QUEUE_WAIT_S", "5")
    monkeypatch.setenv("RADIXGATE_ENGINE__TENANT_WEIGHTS", '{"acme": 2.0}')
    settings = Settings()
    config = settings.engine.to_engine_config()
    assert (config.policy, config.max_queue_wait_s) == ("fair", 5.0)
    assert settings.engine.tenant_weights == {"acme": 2.0}


def test_serve_flags_override_engine_settings_and_keep_the_rest_from_env(monkeypatch):
    from gateway.cli.serve import load_settings

    monkeypatch.setenv("RADIXGATE_ENGINE__PAGE_SIZE", "32")
    settings = load_settings(model="tiny", engine={"policy": "lpm", "max_queue_wait_s": None})
    assert (settings.engine.model, settings.engine.policy, settings.engine.page_size) == ("tiny", "lpm", 32)
    assert settings.engine.max_queue_wait_s == EngineConfig().max_queue_wait_s  # a flag left unset: the default


def test_host_tier_settings_reach_the_engine_config():
    from gateway.settings import EngineSettings

    config = EngineSettings(host_tier_tokens=4096, host_tier_name="shared").to_engine_config()
    assert (config.host_tier_tokens, config.host_tier_name, config.is_host_tier_enabled) == (4096, "shared", True)
    assert not EngineSettings().to_engine_config().is_host_tier_enabled  # off by default


@pytest.mark.parametrize(("env", "value"), [("RADIXGATE_NATIVE_KERNELS", "0"), ("RADIXGATE_ENGINE__NATIVE_KERNELS", "false")])
def test_native_kernels_switch_off_through_either_environment_name(monkeypatch, env, value):
    monkeypatch.setenv(env, value)
    assert Settings().engine.to_engine_config().native_kernels is False


def test_cache_dir_comes_from_either_environment_name_the_nested_one_first(monkeypatch):
    assert Settings().engine.to_engine_config().cache_dir is None
    monkeypatch.setenv("RADIXGATE_CACHE_DIR", "/tmp/short")
    assert Settings().engine.to_engine_config().cache_dir == "/tmp/short"
    monkeypatch.setenv("RADIXGATE_ENGINE__CACHE_DIR", "/tmp/nested")
    assert Settings().engine.to_engine_config().cache_dir == "/tmp/nested"


def test_engine_settings_take_every_engine_field_with_its_default():
    settings = EngineSettings()
    for field in dataclasses.fields(EngineConfig):
        assert getattr(settings, field.name) == getattr(EngineConfig(), field.name), field.name
    assert settings.to_engine_config() == EngineConfig()


def test_a_none_engine_value_means_the_engine_default():
    assert EngineSettings(max_queue_wait_s=None, quantization=None).to_engine_config() == EngineConfig()


@pytest.mark.parametrize("build", [
    lambda tmp_path: EngineSettings(max_runing=4),
    lambda tmp_path: Settings(engine={"max_runing": 4}),
    lambda tmp_path: Settings(port_number=1),
    lambda tmp_path: Settings(routing={"mdoe": "random"}),
], ids=["engine-kwargs", "nested-kwargs", "top-level-kwargs", "routing-kwargs"])
def test_an_unknown_key_in_kwargs_is_an_error_naming_it(tmp_path, build):
    with pytest.raises(ValidationError, match="max_runing|port_number|mdoe"):
        build(tmp_path)


@pytest.mark.parametrize(("text", "key"), [
    ('prot = 9001\n', "prot"),
    ('[engine]\nmax_runing = 4\n', "max_runing"),
    ('[limits]\nmax_tool = 4\n', "max_tool"),
])
def test_an_unknown_key_in_the_config_file_is_an_error_naming_it(tmp_path, text, key):
    path = tmp_path / "radixgate.toml"
    path.write_text(text)
    with pytest.raises(ValidationError, match=key):
        Settings(config_file=path)


def test_an_unknown_nested_engine_variable_is_an_error_and_an_unknown_top_level_one_is_ignored(monkeypatch):
    monkeypatch.setenv("RADIXGATE_SOMETHING_ELSE", "1")  # another tool's, or an old version's: ignored
    assert Settings().port == 8000
    monkeypatch.setenv("RADIXGATE_ENGINE__MAX_RUNING", "4")
    with pytest.raises(ValidationError, match="max_runing"):
        Settings()


def test_a_dotenv_file_may_hold_other_programs_variables(tmp_path):
    (tmp_path / ".env").write_text("OPENAI_API_KEY=x\nRADIXGATE_SOMETHING_ELSE=1\nRADIXGATE_PORT=9003\n")
    assert Settings().port == 9003


def test_a_value_the_engine_rejects_fails_when_the_settings_are_built():
    with pytest.raises(ValidationError, match="policy must be one of"):
        Settings(engine={"policy": "fastest"})
