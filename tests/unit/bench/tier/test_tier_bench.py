"""bench tier's accounting: which prompt tokens of the second half the first half computed."""

from bench.policy.prompts import AgentRequest
from bench.tier.run import shared_prefix_tokens, unique_pages


def request(namespace: str, tokens: list[int]) -> AgentRequest:
    return AgentRequest("r", namespace, tokens, 4)


def test_shared_prefix_tokens_counts_page_aligned_prefixes_per_namespace():
    first = [request("a", list(range(40))), request("b", [9] * 40)]
    second = [request("a", list(range(20)) + [99] * 20), request("b", list(range(40))), request("a", list(range(40)))]
    # 16 of the shared 20 (page-aligned); another namespace shares nothing; the last token never counts
    assert shared_prefix_tokens(first, second, 8) == [16, 0, 32]


def test_unique_pages_counts_a_shared_prefix_once():
    assert unique_pages([request("a", list(range(32))), request("a", list(range(16)) + [7] * 16)], 8) == 6
