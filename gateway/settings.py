"""All configuration in one place: `Settings`, read from init kwargs, RADIXGATE_* env vars and an optional file.

Precedence, highest first: keyword arguments (the CLI's flags), environment
(`RADIXGATE_PORT`, nested with `__`: `RADIXGATE_ENGINE__MODEL`), the short
environment names kept from before they were engine settings (LEGACY_ENV:
`RADIXGATE_NATIVE_KERNELS`, `RADIXGATE_CACHE_DIR`), a `.env` file, the config
file (TOML or YAML; `config_file=` or `RADIXGATE_CONFIG_FILE`), then defaults. Settings are built in the app's lifespan or the CLI, never at
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

from gateway.routing.policy import SPILL_FLOOR_TOKENS
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

ENV_PREFIX = "RADIXGATE_"
# short environment names -> the engine setting each stands for (RADIXGATE_ENGINE__<NAME> wins over them)
LEGACY_ENV = {f"{ENV_PREFIX}NATIVE_KERNELS": "native_kernels", f"{ENV_PREFIX}CACHE_DIR": "cache_dir"}


class EngineSettings(BaseModel):
    """The embedded engine's knobs; None means the engine's own default."""

    enabled: bool = True
    model: str = "smollm2-135m"
    device: str = "auto"
    dtype: str | None = None
    quantization: str | None = Field(None, description="Quantization: none | int8 | int4 (weight-only) | w4a8 "
                                     "(int4 weights, int8 activations) | w8a8 | auto (the weight-only mode the CPU's "
                                     "probe times faster at decode).")
    prefer: str | None = Field(None, description="speed | accuracy: what an auto dtype / quantization favours; "
                               "accuracy runs the float32 model.")
    page_size: int = 16
    kv_cache_tokens: int | None = None
    num_pages: int | None = None
    max_batch_tokens: int | None = None
    max_running: int | None = None
    max_queue: int | None = None
    max_context: int | None = None
    policy: str = Field(default="fair", description="Waiting-queue order: fair (across tenants, longest cached "
                        "prefix first within one), lpm, dfs-weight or fcfs.")
    max_queue_wait_s: float | None = Field(default=None, description="Longest a request waits before it is first "
                                           "scheduled (engine default 60 s); past it: 503 with Retry-After.")
    fair_cached_token_cost: float | None = Field(default=None, description="Under the fair policy, what a cached "
                                                 "prompt token costs a tenant relative to a computed one (0..1, "
                                                 "engine default 0.5).")
    enable_radix_cache: bool = True
    speculative_tokens: int | None = Field(default=None, ge=0, description="Prompt-lookup speculation: drafts per "
                                           "greedy decode step, verified exactly (engine default 7; 0 turns it off).")
    speculative_max_batch: int | None = Field(default=None, ge=0, description="Speculate only in steps decoding at "
                                              "most this many sequences (engine default 4).")
    # each tenant's share of the engine under the fair policy, by tenant name; a tenant not listed has 1.0
    tenant_weights: dict[str, float] = Field(default_factory=dict)
    max_pinned_fraction: float | None = None  # the share of the KV pool all pins may hold (engine default 0.5)
    # The host KV tier (engine.host_tier): off unless a size is given, in bytes or tokens
    # (RADIXGATE_ENGINE__HOST_TIER_BYTES / __HOST_TIER_TOKENS); gateways given the same
    # host_tier_name on one machine share one shared-memory store.
    host_tier_tokens: int | None = None
    host_tier_bytes: int | None = None
    host_tier_name: str | None = None
    host_tier_lease_s: float | None = None
    native_kernels: bool = Field(default=True, description="Run radixgate's native CPU kernels where they build "
                                 "(false: torch's kernels run every row). Also RADIXGATE_NATIVE_KERNELS.")
    cache_dir: str | None = Field(default=None, description="radixgate's cache directory; GGUF models are "
                                  "dequantized under <cache_dir>/models (default ~/.cache/radixgate). "
                                  "Also RADIXGATE_CACHE_DIR.")

    def to_engine_config(self) -> Any:
        """Build `engine.EngineConfig`, passing only fields set here and known to EngineConfig."""
        from engine import EngineConfig

        known = {f.name for f in dataclasses.fields(EngineConfig)}
        values = self.model_dump(exclude={"enabled", "tenant_weights"})
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


REMOTE_KINDS = ("radixgate", "vllm", "sglang", "openai")


class RemoteSettings(BaseModel):
    """One remote OpenAI-compatible engine reached through litellm (SGLang, vLLM, another radixgate).

    `kind` decides what the gateway may ask of it: radixgate, vLLM and SGLang take a `cache_salt`
    (the gateway's per-tenant salt, gateway/routing/salt.py) and report load on an endpoint of their
    own; a plain "openai" upstream gets neither. Its `cached_tokens` are trusted (logged) only
    when the remote keeps tenants apart: it takes the salt, or `report_cached_tokens` says so."""

    name: str
    model: str
    api_base: str
    api_key: SecretStr | None = None
    weight: float = 1.0
    kind: str = Field(default="openai", pattern="^(radixgate|vllm|sglang|openai)$")
    cache_salt: bool | None = None  # None: by kind (every kind but "openai" takes one)
    # True: the remote keeps each caller in its own cache domain although it takes no salt (e.g. a
    # radixgate reached with a key no one else uses); otherwise its cached_tokens are "unknown".
    report_cached_tokens: bool = False
    timeout_s: float = 600.0  # the whole request (connect, queue, prefill, decode)
    connect_timeout_s: float = 5.0
    cooldown_s: float = 10.0  # out of rotation after a failure; then one half-open probe request
    health_path: str | None = None  # None: by kind ("/healthz" for radixgate, "/health" otherwise)
    load_path: str | None = None  # None: by kind ("/v1/load" for radixgate, "/metrics" for vLLM/SGLang)

    @property
    def takes_cache_salt(self) -> bool:
        return self.kind != "openai" if self.cache_salt is None else self.cache_salt


class RoutingSettings(BaseModel):
    """How the router spreads requests over several backends (gateway/routing/policy.py)."""

    mode: str = Field(default="affinity", pattern="^(affinity|random|round_robin|least_load)$")
    epsilon: float = 0.5  # bounded load: a node takes a key while its load < (1 + epsilon) * mean
    spill_floor_tokens: int = SPILL_FLOOR_TOKENS  # ... or while its load is under this (no spilling at low load)
    overload_tokens: int = 0  # a node reporting more queued + running tokens is skipped (0: no threshold)
    health_interval_s: float = 2.0  # active health and load checks of each remote (0: passive only)
    health_timeout_s: float = 5.0  # an active check slower than this marks the remote down
    affinity_keys: int = 100_000  # prefix keys the router remembers a node for (LRU)
    index_tokens_per_tenant: int = 200_000  # the router's own index of what it sent where, per node and domain
    seed: int | None = None  # random mode's generator seed, for a reproducible bench or test (None: fresh)


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
    default_tenant_requests_per_minute: int | None = None  # a tenant without its own limit gets this (None: unlimited)
    default_tenant_tokens_per_minute: int | None = None  # prompt + max_tokens charged, the unused part refunded
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
        return init_settings, env_settings, legacy_source, dotenv_settings, file_source, file_secret_settings

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


class LegacyEnvSource(PydanticBaseSettingsSource):
    """The engine settings that LEGACY_ENV's short environment names set, as {"engine": {...}}."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        engine = {name: os.environ[env] for env, name in LEGACY_ENV.items() if os.environ.get(env)}
        return {"engine": engine} if engine else {}


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
