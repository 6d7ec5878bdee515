"""Tenant salts end to end: two tenants send the same long prompt through an edge to ONE upstream.

Tenants apart (no cache group) must get no cached tokens from each other, by the upstream's own
`cached_tokens`; two tenants of one cache group must (the second reuses the first's prefill); the
first tenant repeating itself must too (so a 0 above is the salt's doing, not a cold cache).
"""

from __future__ import annotations

import uuid

import httpx

from bench.cluster.replay import create_tenant, stream_chat

LONG_PROMPT_WORDS = 600


def long_body(model: str = "default") -> dict:
    words = " ".join(f"clause-{i % 97} of the shared policy text" for i in range(LONG_PROMPT_WORDS // 6))
    system = f"You are a compliance assistant. The policy follows.\n{words}"
    return {"model": model, "messages": [{"role": "system", "content": system},
                                         {"role": "user", "content": "Summarize the policy in one line."}],
            "max_tokens": 2, "temperature": 0}


def salt_check(url: str, admin_key: str, model: str = "default") -> dict:
    """The upstream's cached_tokens for: A, then B (apart), then A again, then C and D (one group)."""
    tag = uuid.uuid4().hex[:6]
    body = long_body(model)
    with httpx.Client(timeout=600) as http:
        keys = {
            "a": create_tenant(http, url, admin_key, f"salt-a-{tag}"),
            "b": create_tenant(http, url, admin_key, f"salt-b-{tag}"),
            "c": create_tenant(http, url, admin_key, f"salt-c-{tag}", cache_group=f"grp-{tag}"),
            "d": create_tenant(http, url, admin_key, f"salt-d-{tag}", cache_group=f"grp-{tag}"),
        }
        cached, prompt = {}, 0
        for label, tenant in (("a_first", "a"), ("b_after_a", "b"), ("a_again", "a"), ("c_first", "c"),
                              ("d_after_c_same_group", "d")):
            outcome, usage = stream_chat(http, url, keys[tenant], body)
            if outcome != "completed":
                raise RuntimeError(f"salt check request {label} failed: {outcome}")
            prompt = usage["prompt_tokens"]
            cached[label] = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    return {
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "apart_share_nothing": cached["b_after_a"] == 0,
        "group_shares": bool(cached["d_after_c_same_group"]),
        "same_tenant_hits": bool(cached["a_again"]),
    }
