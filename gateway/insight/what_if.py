"""What-if: a tenant's sampled requests replayed through template versions on a token-level oracle.

Each variant (the draft, the published version) gets its own fresh ShadowIndex, the tensor-less
radix index of shadow.py, at the engine's page size, with one namespace. The samples are taken
in the order they were sent; each is prepared exactly as /v1/chat/completions would prepare it
(`prepare_for_tenant`, with the sample's own arrival time as the template's `now`), and its token
ids are observed: match, then insert. As in the engine, the last prompt token is never matched
(one token must stay to feed), so:

    cached    = page-aligned match of token_ids[:-1] against the variant's earlier samples
    prefilled = len(token_ids) - cached

The model is a cache that starts cold and holds every one of these requests (up to the shadow's
bound): what replaying them on a fresh namespace of the engine serves. No model runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from gateway.insight.shadow import ShadowIndex

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from gateway.prompt_templates.samples import Sample

NAMESPACE = "what-if"


@dataclass
class VariantEstimate:
    """One variant's replay: totals, the token-weighted hit rate and each request's prefilled tokens."""

    template_version: int | None
    num_requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    static_prefix_tokens: int = 0  # of the last sample: where the cacheable prefix ends
    prefilled_tokens: list[int] = field(default_factory=list)

    @property
    def hit_rate(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None

    def to_dict(self) -> dict:
        return {**asdict(self), "hit_rate": self.hit_rate}


def replay(
    samples: Sequence[Sample], prepare: Callable[[Sample], tuple[Sequence[int], int]], *, page_size: int,
    max_tokens: int, template_version: int | None,
) -> VariantEstimate:
    """Replay `samples` through `prepare` (sample -> (prompt token ids, static prefix length)) on a fresh oracle."""
    index = ShadowIndex(page_size=page_size, max_tokens_per_tenant=max(max_tokens, page_size), max_namespaces=1)
    result = VariantEstimate(template_version=template_version)
    for sample in samples:
        token_ids, static_len = prepare(sample)
        cached = index.observe(NAMESPACE, list(token_ids)[:-1]) if len(token_ids) > 1 else 0
        result.num_requests += 1
        result.prompt_tokens += len(token_ids)
        result.cached_tokens += cached
        result.static_prefix_tokens = static_len
        result.prefilled_tokens.append(len(token_ids) - cached)
    return result
