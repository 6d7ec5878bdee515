"""All configuration in one place: `Settings`, read from init kwargs, RADIXGATE_* env vars and an optional file.

Precedence, highest first: keyword arguments (the CLI's flags), environment
(`RADIXGATE_PORT`, nested with `__`: `RADIXGATE_ENGINE__MODEL`), the short
environment names kept from before they were engine settings (sources.LEGACY_ENV:
`RADIXGATE_NATIVE_KERNELS`, `RADIXGATE_CACHE_DIR`), a `.env` file, the config
file (TOML or YAML; `config_file=` or `RADIXGATE_CONFIG_FILE`), then defaults.
A key that no section knows, in kwargs, a config file or a nested variable
(`RADIXGATE_ENGINE__TYPO`), is an error naming it; other programs' variables and
unknown top-level RADIXGATE_* names in the environment or .env are ignored.
Settings are built in the app's lifespan or the CLI, never at import time. The
engine never reads them: `EngineSettings.to_engine_config()` turns them into the
engine's frozen `EngineConfig`, whose fields and defaults they take (settings/engine.py).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from gateway.settings.engine import EngineSettings
from gateway.settings.sections import (
    REMOTE_KINDS, LimitSettings, RemoteSettings, RoutingSettings, SharedLimitSettings,
)
from gateway.settings.sources import (
    ENV_PREFIX, LEGACY_ENV, ConfigFileSource, KnownNamesSource, LegacyEnvSource, read_config_file,
)

__all__ = ["ENV_PREFIX", "LEGACY_ENV", "REMOTE_KINDS", "EngineSettings", "LimitSettings", "RemoteSettings",
           "RoutingSettings", "Settings", "SharedLimitSettings", "read_config_file"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", env_file=".env", extra="forbid"
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
    default_tenant_requests_per_minute: int | None = None  # a tenant without its own limit gets this (None: unlimited)
    default_tenant_tokens_per_minute: int | None = None  # prompt + max_tokens charged, the unused part refunded
    # the "minute" of the per-minute limits, in seconds (tests scale it; an operator keeps 60, as OpenAI's are)
    rate_limit_window_s: float = Field(default=60.0, gt=0)
    # Redis shared by edge replicas: tenants' rate buckets and concurrency slots are fleet-wide (None: per process)
    redis_url: str | None = None
    shared_limits: SharedLimitSettings = Field(default_factory=SharedLimitSettings)
    db_pool_size: int = 10  # PostgreSQL / SQLite-file connection pool (SQLAlchemy QueuePool)
    db_pool_max_overflow: int = 10  # connections past db_pool_size while busy
    db_pool_timeout_s: float = 5.0  # waiting longer for a pooled connection answers 503 with Retry-After
    log_spool_path: Path | None = None  # request-log spool (JSON lines); default: beside a SQLite file, else ./
    log_spool_max_bytes: int = 256 * 1024 * 1024  # past this, rows that cannot be written wait in memory only
    log_spool_fsync: bool = False  # True: fsync each spooled row (survives power loss, not only a crash)
    shutdown_timeout_s: float = 30.0  # SIGTERM: open streams may finish this long before they are cut
    shadow_max_tokens_per_tenant: int = 1_000_000  # raw-order shadow: token ids kept per cache domain (LRU)
    canonical_shadow: bool = True  # the canonical-order shadow (canonical_hit_rate, the doctor's counterfactuals)
    canonical_shadow_max_tokens_per_tenant: int = 1_000_000  # its token ids kept per cache domain (LRU)
    shadow_max_namespaces: int = 1024  # cache domains each shadow keeps (LRU)
    engine_snapshot_interval_s: float = 60.0  # how often engine cache stats are stored for the dashboard
    rewarm_pins: bool = True
    # multiplies every cache breakpoint's TTL (Anthropic's 5m / 1h); 1.0 in production, tests and benches shorten it
    cache_ttl_scale: float = Field(default=1.0, gt=0)
    # request bodies kept per tenant template for the studio's preview and what-if (0: keep none)
    template_sample_size: int = Field(default=50, ge=0, le=1000)
    what_if_max_requests: int = Field(default=200, ge=1, le=5000)  # most samples one estimate replays
    log_level: str = "INFO"
    protect_metrics: bool = False  # True: /metrics needs the admin key or metrics_token
    protect_docs: bool = False  # True: /docs, /redoc and /openapi.json need the admin key
    metrics_token: SecretStr | None = None  # a scrape-only bearer token for /metrics
    limits: LimitSettings = Field(default_factory=LimitSettings)
    engine: EngineSettings = Field(default_factory=EngineSettings)
    remotes: list[RemoteSettings] = Field(default_factory=list)
    routing: RoutingSettings = Field(default_factory=RoutingSettings)
    # the tokenizer and chat format of the remotes' model with no embedded engine: a local HF
    # directory or a model spec as engine.model takes (None: engine.model, e.g. the default model's cache)
    remote_tokenizer: str | None = None
    remote_max_context: int | None = None  # None: the model config's max_position_embeddings
    cache_salt_secret: SecretStr | None = None  # HMAC key of tenants' cache salts (None: derived from admin_key)

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
        legacy_source = LegacyEnvSource(settings_cls)
        dotenv_source = KnownNamesSource(settings_cls, dotenv_settings)
        return init_settings, env_settings, legacy_source, dotenv_source, file_source, file_secret_settings

    def resolved_templates_dir(self) -> Path:
        if self.templates_dir is not None:
            return self.templates_dir
        return Path(__file__).resolve().parents[2] / "templates"
