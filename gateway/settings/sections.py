"""The settings sections beside the engine's: request limits, remote engines, routing. Each is strict:
a key it does not know is an error that names it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from gateway.routing.policy import SPILL_FLOOR_TOKENS


class StrictModel(BaseModel):
    """A settings section: a key it does not know is an error that names it (a typo never passes silently)."""

    model_config = ConfigDict(extra="forbid")


class LimitSettings(StrictModel):
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


class RemoteSettings(StrictModel):
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
    # the remote's KV-event stream (vLLM's --kv-events-config endpoint; routing/kv_subscriber.py): "tcp://*:PORT"
    # (the remote binds; we connect to its host) or "tcp://HOST:PORT" (the remote connects; we bind it). None: a
    # radixgate remote's own, from its GET /kv_event_sources; other kinds then publish none (predicted index).
    kv_events_endpoint: str | None = None
    kv_events_replay_endpoint: str | None = None  # its ROUTER socket for replay after a gap (vLLM's replay_endpoint)
    kv_events_topic: str = ""  # the topic it publishes under ("" takes every topic)

    @property
    def takes_cache_salt(self) -> bool:
        return self.kind != "openai" if self.cache_salt is None else self.cache_salt


class RoutingSettings(StrictModel):
    """How the router spreads requests over several backends (gateway/routing/policy.py)."""

    mode: str = Field(default="affinity", pattern="^(precise|affinity|random|round_robin|least_load)$")
    epsilon: float = 0.5  # bounded load: a node takes a key while its load < (1 + epsilon) * mean
    spill_floor_tokens: int = SPILL_FLOOR_TOKENS  # ... or while its load is under this (no spilling at low load)
    overload_tokens: int = 0  # a node reporting more queued + running tokens is skipped (0: no threshold)
    health_interval_s: float = 2.0  # active health and load checks of each remote (0: passive only)
    health_timeout_s: float = 5.0  # an active check slower than this marks the remote down
    affinity_keys: int = 100_000  # prefix keys the router remembers a node for (LRU)
    index_tokens_per_tenant: int = 200_000  # the router's own index of what it sent where, per node and domain
    seed: int | None = None  # random mode's generator seed, for a reproducible bench or test (None: fresh)


class SharedLimitSettings(StrictModel):
    """How edge replicas share tenants' limits through Redis (used only with `redis_url`;
    gateway/shared_state/)."""

    lease_s: float = Field(default=30.0, gt=0)  # a crashed replica's concurrency slots come back within this
    retry_interval_s: float = Field(default=5.0, gt=0)  # Redis away: local limits, and one retry this often
    timeout_s: float = Field(default=2.0, gt=0)  # a Redis call slower than this counts as Redis away (a busy event loop is not)
    key_prefix: str = Field(default="radixgate", min_length=1)  # replicas sharing limits use the same prefix
    owner_ttl_s: float = Field(default=600.0, gt=0)  # a cold routing key's recorded owner lives this long
