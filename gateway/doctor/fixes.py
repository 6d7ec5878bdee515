"""Evidence and fix text for each cache-doctor cause: concrete, with the tenant's own numbers."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.db.doctor_queries import LossGroup

TITLES = {
    "dynamic_content": "Dynamic content in the prefix",
    "section_order": "Inconsistent section order",
    "tools_vary": "Tool lists or JSON keys that vary",
    "context_first": "Context placed before the system prompt",
    "eviction": "Eviction pressure (prefixes evicted before reuse)",
    "cold_start": "Cold starts (too few requests per prefix)",
    "isolation": "Tenant isolation (same prefix in other tenants)",
}
# The per-request cache diagnosis reason (gateway/insight/cache_diagnosis.py REASONS: the x-radixgate-cache-diagnosis
# header, the request log's miss_cause) each doctor cause sums up: one vocabulary for a request and a window.
DIAGNOSIS_REASONS = {
    "dynamic_content": "dynamic_content",
    "section_order": "section_order",
    "tools_vary": "tools_changed",
    "context_first": "section_order",
    "eviction": "evicted",
    "cold_start": "cold_start",
    "isolation": "cache_domain",
}
COUNTERFACTUALS = {
    "dynamic_content": "canonical order (dynamic content hoisted), unbounded cache",
    "section_order": "canonical order, unbounded cache",
    "tools_vary": "canonical order / static prefix cached before first use",
    "context_first": "canonical order, unbounded cache",
    "eviction": "unbounded cache of the tenant's traffic",
    "cold_start": "static prefix cached (pinned) before first use",
    "isolation": "one cache group with the tenants that sent the same system prefix",
}


@dataclass
class CauseFacts:
    """What the doctor noticed while classifying, used to word details and fixes."""

    tenant: object
    groups: list[LossGroup]
    num_active_pins: int = 0
    num_tool_lists: int = 0
    patterns: Counter = field(default_factory=Counter)
    partners: dict = field(default_factory=lambda: defaultdict(set))
    names_other_tenants: bool = True  # False: the isolation text gives a count, no names or hashes

    def note_patterns(self, comma_list: str, num_requests: int = 1) -> None:
        for name in comma_list.split(","):
            if name:
                self.patterns[name] += num_requests

    def note_isolation(self, system_key: tuple, sightings: list) -> None:
        for sighting in sightings:
            self.partners[sighting.tenant_name].add(system_key[0])


def describe_cause(code: str, facts: CauseFacts) -> tuple[str, str, str]:
    """(title, detail, fix) for `code`."""
    describe = {
        "dynamic_content": describe_dynamic,
        "section_order": describe_order,
        "tools_vary": describe_tools,
        "context_first": describe_context,
        "eviction": describe_eviction,
        "cold_start": describe_cold_start,
        "isolation": describe_isolation,
    }[code]
    detail, fix = describe(facts)
    return TITLES[code], detail, fix


def describe_dynamic(facts: CauseFacts) -> tuple[str, str]:
    ranked = ", ".join(f"{name} ({count} requests)" for name, count in facts.patterns.most_common())
    top = facts.patterns.most_common(1)[0][0] if facts.patterns else "dynamic"
    return (
        f"patterns found in the system prompt: {ranked or 'unknown'}",
        f"Move the `{top}` text out of the system prompt into the last user turn, or turn on "
        "canonicalization for this tenant: the gateway then hoists it after the cacheable prefix.",
    )


def describe_order(facts: CauseFacts) -> tuple[str, str]:
    return (
        "requests arrive with system messages after other turns or with unnormalized whitespace",
        "Always send [system, tools, context, history, question] in that order with the same "
        "whitespace, or turn on canonicalization so the gateway reorders them.",
    )


def describe_tools(facts: CauseFacts) -> tuple[str, str]:
    return (
        f"{facts.num_tool_lists} distinct tool lists sent; unsorted tools and changed lists break the prefix",
        "Send one fixed, complete tool list on every request, sorted by name and serialized with sorted "
        "keys (or turn on canonicalization, which sorts them); the model ignores tools it does not need.",
    )


def describe_context(facts: CauseFacts) -> tuple[str, str]:
    return (
        "retrieved documents are embedded in messages ahead of or inside the system prompt",
        "Pass documents in the request's `context` field (or after the system prompt), "
        "or turn on canonicalization so they move after the static system + tools prefix.",
    )


def describe_eviction(facts: CauseFacts) -> tuple[str, str]:
    num_requests = sum(g.num_eviction for g in facts.groups)
    quota = getattr(facts.tenant, "pin_quota_tokens", 0) or 0
    return (
        f"{num_requests} requests prefilled prefixes an unbounded cache of this tenant's traffic still held; "
        f"{facts.num_active_pins} active pins, pin quota {quota} tokens",
        "Pin the tenant's hottest static prefixes (POST /v1/pins, raise pin_quota_tokens if needed) and/or "
        "give the engine a larger KV cache (RADIXGATE_ENGINE__KV_CACHE_TOKENS).",
    )


def describe_cold_start(facts: CauseFacts) -> tuple[str, str]:
    num_cold = sum(g.num_cold for g in facts.groups)
    num_requests = sum(g.requests for g in facts.groups)
    return (
        f"{num_cold} of {num_requests} requests sent a static prefix (system, tools, documents) "
        "new to the tenant's cache domain",
        "Reduce distinct prefixes (one template version, a fixed tool list, sort_context_by_id for RAG) "
        "and pin the prefixes you know are hot so their first request hits too.",
    )


def describe_isolation(facts: CauseFacts) -> tuple[str, str]:
    partners = sorted(facts.partners)
    if not facts.names_other_tenants:
        return (
            f"the same system prefix is also sent by {len(partners)} other tenant(s) outside your cache group",
            "Ask the gateway's operator for a shared cache_group with those tenants (only for tenants "
            "allowed to share timing side channels).",
        )
    hashes = sorted({h for hs in facts.partners.values() for h in hs if h})
    group = getattr(facts.tenant, "cache_group", None) or f"{facts.tenant.name}-shared"
    return (
        f"the same system prefix (system_hash {', '.join(hashes[:3])}) is also sent by: {', '.join(partners)}",
        f"Put {facts.tenant.name} and {', '.join(partners)} in one cache_group (e.g. `{group}`) so they "
        "share the cached prefix (only do this for tenants allowed to share timing side channels).",
    )
