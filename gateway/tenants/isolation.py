"""Tenant isolation: the one rule that decides whose prefix cache a request may read and write.

A tenant's cache is its own (`tenant:<id>`) unless it names a cache group (`group:<name>`), which
tenants of the same group share. The model id is part of the namespace, so two models never share
cached prefixes. A `cache_salt` (vLLM's field; an edge gateway sends its tenants' salts) only splits
the caller's own namespace further, never joins another's. Pins, both shadow indexes, generation
and the edge's salts all derive from `cache_namespace`, so no tenant can detect another's prompts
by timing.
"""

from __future__ import annotations


def cache_namespace(tenant_id: int, cache_group: str | None, model_id: str) -> str:
    """The prefix-cache namespace of a tenant for one model."""
    owner = f"group:{cache_group}" if cache_group else f"tenant:{tenant_id}"
    return f"{owner}|{model_id}"


def salted_namespace(namespace: str, salt: str | None) -> str:
    """`namespace` split further by a client's cache salt (unchanged without one)."""
    return f"{namespace}|salt:{salt}" if salt else namespace
