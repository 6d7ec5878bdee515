"""All configuration in one place: `Settings`, read from init kwargs, RADIXGATE_* env vars and an optional file.

Precedence, highest first: keyword arguments (the CLI's flags), environment
(`RADIXGATE_PORT`, nested with `__`: `RADIXGATE_ENGINE__MODEL`), a `.env`
file, the config file (TOML or YAML; `config_file=` or `RADIXGATE_CONFIG_FILE`),
then defaults. Settings are built in the app's lifespan or the CLI, never at
import time. The engine never reads them: `EngineSettings.to_engine_config()`
turns them into the engine's frozen `EngineConfig`.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

ENV_PREFIX = "RADIXGATE_"


class EngineSettings(BaseModel):
    """The embedded engine's knobs; None means the engine's own default."""

    enabled: bool = True
    model: str = "smollm2-135m"
    device: str = "auto"
    dtype: str | None = None
    page_size: int = 16
    kv_cache_tokens: int | None = None
    num_pages: int | None = None
    max_batch_tokens: int | None = None
    max_running: int | None = None
    max_queue: int | None = None
    max_context: int | None = None
    policy: str = "lpm"
    enable_radix_cache: bool = True
    # The host KV tier (engine.host_tier): off unless a size is given, in bytes or tokens
    # (RADIXGATE_ENGINE__HOST_TIER_BYTES / __HOST_TIER_TOKENS); gateways given the same
    # host_tier_name on one machine share one shared-memory store.
    host_tier_tokens: int | None = None
    host_tier_bytes: int | None = None
    host_tier_name: str | None = None
    host_tier_lease_s: float | None = None

    def to_engine_config(self) -> Any:
        """Build `engine.EngineConfig`, passing only fields set here and known to EngineConfig."""
        from engine import EngineConfig

        known = {f.name for f in dataclasses.fields(EngineConfig)}
        values = self.model_dump(exclude={"enabled"})
        return EngineConfig(**{k: v for k, v in values.items() if v is not None and k in known})


class LimitSettings(BaseModel):
    """What one request may carry and cost; every limit is enforced before the work it bounds
    (README, SECURITY, lists them with these defaults)."""

    max_body_bytes: int = 4 * 1024 * 1024  # 413 before the body is parsed, before authentication
    max_messages: int = 1024
    max_tools: int = 128
    max_documents: int = 256
    max_field_chars: int = 1_000_000  # any one string in a body (a message, a document, a tool's JSON)
    max_stop: int = 4
    max_stop_chars: int = 256
    max_seed: int = 2**63 - 1  # seeds run from -(max_seed + 1) to max_seed
    max_pin_ttl_s: int = 30 * 24 * 3600
    max_prompt_chars: int = 4_000_000  # the whole prompt's text, checked before tokenizing
    template_timeout_s: float = 0.5
    template_max_output_chars: int = 1_000_000
    template_max_value_len: int = 1_000_000
    template_max_int_bits: int = 4096
    template_max_source_chars: int = 200_000  # stored and inline template sources alike
    pin_rewarm_timeout_s: float = 30.0  # per pin, at start-up (re-warming runs beside serving)

    def template_limits(self):
        """The prompt_templates.TemplateLimits these settings call for."""
        from gateway.prompt_templates.bounds import TemplateLimits

        return TemplateLimits(
            timeout_s=self.template_timeout_s,
            max_output_chars=self.template_max_output_chars,
            max_value_len=self.template_max_value_len,
            max_int_bits=self.template_max_int_bits,
            max_source_chars=self.template_max_source_chars,
        )


class RemoteSettings(BaseModel):
    """One remote OpenAI-compatible engine reached through litellm (SGLang, vLLM, another radixgate)."""

    name: str
    model: str
    api_base: str
    api_key: SecretStr | None = None
    weight: float = 1.0
    # True only when the remote keeps each caller in its own cache domain (e.g. a radixgate tenant
    # key no one else uses); otherwise its cached_tokens would leak across tenants, so we report 0.
    report_cached_tokens: bool = False


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", env_file=".env", extra="ignore"
    )

    host: str = "127.0.0.1"
    port: int = 8000
    db_url: str = "sqlite:///./radixgate.db"
    admin_key: SecretStr | None = None
    config_file: Path | None = None
    templates_dir: Path | None = Field(default=None, description="Built-in templates; default: the repo's templates/.")
    log_queue_max: int = 10_000
    log_batch_size: int = 200
    log_flush_interval_s: float = 0.5
    auth_cache_ttl_s: float = 0.0  # how long a key is trusted without re-reading the DB (0: read every time)
    auth_cache_stale_s: float = 600.0  # beyond the TTL, how long a cached key still serves while the DB is down
    dashboard_port: int = 8501
    default_max_tokens: int = 256
    default_tenant_concurrency: int = 64
    shadow_max_tokens_per_tenant: int = 1_000_000  # raw-order shadow: token ids kept per cache domain (LRU)
    canonical_shadow: bool = True  # the canonical-order shadow (canonical_hit_rate, the doctor's counterfactuals)
    canonical_shadow_max_tokens_per_tenant: int = 1_000_000  # its token ids kept per cache domain (LRU)
    shadow_max_namespaces: int = 1024  # cache domains each shadow keeps (LRU)
    engine_snapshot_interval_s: float = 60.0  # how often engine cache stats are stored for the dashboard
    rewarm_pins: bool = True
    log_level: str = "INFO"
    protect_metrics: bool = False  # True: /metrics needs the admin key or metrics_token
    protect_docs: bool = False  # True: /docs, /redoc and /openapi.json need the admin key
    metrics_token: SecretStr | None = None  # a scrape-only bearer token for /metrics
    limits: LimitSettings = Field(default_factory=LimitSettings)
    engine: EngineSettings = Field(default_factory=EngineSettings)
    remotes: list[RemoteSettings] = Field(default_factory=list)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        file_source = ConfigFileSource(settings_cls, init_settings)
        return init_settings, env_settings, dotenv_settings, file_source, file_secret_settings

    def resolved_templates_dir(self) -> Path:
        if self.templates_dir is not None:
            return self.templates_dir
        return Path(__file__).resolve().parents[1] / "templates"


class ConfigFileSource(PydanticBaseSettingsSource):
    """Values from the TOML/YAML file named by `config_file=` or RADIXGATE_CONFIG_FILE (lowest priority but defaults)."""

    def __init__(self, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self._init_settings = init_settings

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = self._init_settings().get("config_file") or os.environ.get(f"{ENV_PREFIX}CONFIG_FILE")
        return read_config_file(Path(path)) if path else {}


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a TOML (.toml) or YAML (.yaml/.yml) config file into a dict; raises ValueError on other suffixes."""
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".toml":
        return tomllib.loads(path.read_text())
    if suffix in (".yaml", ".yml"):
        return yaml.safe_load(path.read_text()) or {}
    raise ValueError(f"config file must be .toml, .yaml or .yml: {path}")
