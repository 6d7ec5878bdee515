"""A CacheDiagnosis in each wire format's words.

    header_value(d)                    x-radixgate-cache-diagnosis: compact JSON of CacheDiagnosis.to_dict
    openai_prompt_cache_diagnostics(d) Responses' `prompt_cache_diagnostics` (comparison_response_id)
    anthropic_diagnostics(d, named)    Messages' `diagnostics` (beta cache-diagnosis-2026-04-07)

OpenAI's shape: {"type": "cache_hit" | "cache_miss" | "comparison_response_not_found" | "unavailable"};
a miss carries `reason` (model_changed, prompt_cache_key_changed, tools_changed, input_changed, ...),
`cache_missed_tokens` and `comparison_reusable_tokens`. Anthropic's: {"cache_miss_reason": {"type":
"model_changed" | "system_changed" | "tools_changed" | "messages_changed", "cache_missed_input_tokens"}
| {"type": "previous_message_not_found"} | {"type": "unavailable"}}, and the whole object null when
the prompts did not diverge or there was no previous message. Both vocabularies describe structure
only; radixgate's own reasons (eviction, another cache domain, dynamic content, section order) map
onto the nearest of theirs and ride along, exactly, under the extra key "radixgate".
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.insight.cache_diagnosis import CacheDiagnosis

HEADER = "x-radixgate-cache-diagnosis"
ANTHROPIC_BETA = "cache-diagnosis-2026-04-07"
OPENAI_REASONS = {
    "model_changed": "model_changed",
    "cache_domain": "prompt_cache_key_changed",
    "tools_changed": "tools_changed",
    "evicted": "evicted",  # radixgate's: the prefix matched, the cache no longer held it
}
ANTHROPIC_SECTIONS = {"system": "system_changed", "tools": "tools_changed"}


def header_value(diagnosis: CacheDiagnosis) -> str:
    """The header's value: ASCII JSON on one line."""
    return json.dumps(diagnosis.to_dict(), separators=(",", ":"), ensure_ascii=True)


def openai_prompt_cache_diagnostics(diagnosis: CacheDiagnosis) -> dict:
    """Responses' `prompt_cache_diagnostics` for a request that named a comparison response."""
    extra = {"radixgate": diagnosis.to_dict()}
    if diagnosis.reason == "previous_not_found":
        return {"type": "comparison_response_not_found", **extra}
    if diagnosis.reason == "cold_start":
        return {"type": "unavailable", **extra}
    if not diagnosis.is_miss:
        return {"type": "cache_hit", **extra}
    return {"type": "cache_miss", "reason": OPENAI_REASONS.get(diagnosis.reason, "input_changed"),
            "cache_missed_tokens": diagnosis.missed_tokens,
            "comparison_reusable_tokens": diagnosis.reusable_tokens, **extra}


def anthropic_diagnostics(diagnosis: CacheDiagnosis | None, previous_message_id: str | None) -> dict | None:
    """Messages' `diagnostics` for a request that sent the `diagnostics` object: None (JSON null) on a first
    turn (`previous_message_id` null) or when the prompt did not diverge from the previous one."""
    if previous_message_id is None or diagnosis is None:
        return None
    extra = {"radixgate": diagnosis.to_dict()}
    if diagnosis.reason == "previous_not_found":
        return {"cache_miss_reason": {"type": "previous_message_not_found"}, **extra}
    if not diagnosis.is_miss:
        return None
    kind = anthropic_reason(diagnosis)
    if kind is None:
        return {"cache_miss_reason": {"type": "unavailable"}, **extra}
    return {"cache_miss_reason": {"type": kind, "cache_missed_input_tokens": diagnosis.missed_tokens}, **extra}


def anthropic_reason(diagnosis: CacheDiagnosis) -> str | None:
    """Anthropic's name for where the prompts diverged; None when theirs has none (eviction, another domain)."""
    if diagnosis.reason in ("model_changed", "system_changed", "tools_changed", "messages_changed"):
        return diagnosis.reason
    if diagnosis.reason in ("dynamic_content", "section_order", "template_changed"):
        return ANTHROPIC_SECTIONS.get(diagnosis.section or "", "messages_changed")
    return None


def requested_comparison(extra: dict | None) -> str | None:
    """`prompt_cache_options.comparison_response_id` of a request body's extra fields (None: not asked)."""
    options = (extra or {}).get("prompt_cache_options")
    value = options.get("comparison_response_id") if isinstance(options, dict) else None
    return value if isinstance(value, str) and value else None


def diagnosis_headers(diagnosis: CacheDiagnosis | None) -> dict[str, str]:
    """{HEADER: value} for a response (empty when there is no diagnosis)."""
    return {} if diagnosis is None else {HEADER: header_value(diagnosis)}
