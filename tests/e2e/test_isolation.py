"""Cache isolation against a real server: cached_tokens is an exact hit oracle, so a tenant may only
ever hit its own cache domain. Another tenant's exact system prompt gives 0 cached tokens unless both
tenants name the same cache_group."""

from __future__ import annotations

import uuid

import pytest
from openai import OpenAI

pytestmark = pytest.mark.slow

SYSTEM = (
    "You are the records clerk of the Harbor Street clinic. Answer scheduling questions only, never give "
    "medical advice, and refer anything urgent to the front desk. Patients' names and dates of birth are "
    "confidential: never repeat them back. Opening hours are eight to six on weekdays. " * 2
)


def cached_tokens(gateway_server, key: str, question: str) -> int:
    client = OpenAI(base_url=gateway_server.api_base, api_key=key, max_retries=0)
    response = client.chat.completions.create(
        model="default",
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
        max_tokens=1,
        temperature=0,
    )
    return response.usage.prompt_tokens_details.cached_tokens


def new_key(gateway_server, **fields) -> str:
    return gateway_server.create_tenant(**fields)["api_key"]["key"]


def test_other_tenants_exact_system_prompt_is_not_a_hit(gateway_server):
    first, second = new_key(gateway_server), new_key(gateway_server)
    assert cached_tokens(gateway_server, first, "Can I book Tuesday at ten?") == 0
    assert cached_tokens(gateway_server, first, "Can I book Wednesday at ten?") > 0  # first's own cache is warm
    assert cached_tokens(gateway_server, second, "Can I book Tuesday at ten?") == 0


def test_tenants_of_one_cache_group_share_their_prefixes(gateway_server):
    group = f"g-{uuid.uuid4().hex[:8]}"
    first, second = new_key(gateway_server, cache_group=group), new_key(gateway_server, cache_group=group)
    outsider = new_key(gateway_server, cache_group=f"other-{group}")
    assert cached_tokens(gateway_server, first, "Is the clinic open on Friday?") == 0
    assert cached_tokens(gateway_server, second, "Is the clinic open on Friday?") > 0
    assert cached_tokens(gateway_server, outsider, "Is the clinic open on Friday?") == 0
