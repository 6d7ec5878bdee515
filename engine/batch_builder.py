"""BatchBuilder: turns the scheduled chunks of one step into a ForwardBatch.

A chunk (req, num_new) feeds tokens[num_computed : num_computed + num_new]
of a request; its kv slots are all slots of tokens [0, num_computed +
num_new), read off req.pages. Only chunks that reach the end of the
request's tokens need logits (the last prefill chunk, or a decode token);
prefill-only requests (pins) never do. A decode chunk may carry drafts
(engine.speculation): they are fed after its token, on the slots that follow,
and every fed token of it returns logits. A chunk that starts at or past the
request's prompt feeds only generated tokens (``seq_is_generated``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from engine.forward_batch import ForwardBatch

if TYPE_CHECKING:
    from engine.request import Request


@dataclass
class ScheduledChunk:
    req: Request
    num_new: int
    draft: list[int] = field(default_factory=list)  # speculated tokens fed after the decode token

    @property
    def num_fed(self) -> int:
        return self.num_new + len(self.draft)

    @property
    def num_logit_rows(self) -> int:
        """Rows of logits it gets back: its last token's, plus one per draft."""
        return (1 + len(self.draft)) if self.needs_logits else 0

    @property
    def is_last(self) -> bool:
        """True when this chunk feeds the request's final pending token."""
        return self.req.num_computed + self.num_new == self.req.num_tokens

    @property
    def needs_logits(self) -> bool:
        return self.is_last and not self.req.is_prefill_only


def kv_slots(pages: list[int], num_tokens: int, page_size: int) -> torch.Tensor:
    """Slots of tokens [0, num_tokens) of a page table; (num_tokens,) long."""
    page_ids = torch.tensor(pages[: -(-num_tokens // page_size)], dtype=torch.long)
    offsets = torch.arange(page_size, dtype=torch.long)
    return (page_ids[:, None] * page_size + offsets).reshape(-1)[:num_tokens]


def build_forward_batch(chunks: list[ScheduledChunk], page_size: int, device: torch.device | str) -> ForwardBatch:
    """One ragged ForwardBatch over every chunk, in order; logits for chunks that need them."""
    input_ids: list[int] = []
    positions: list[torch.Tensor] = []
    seq_slots: list[torch.Tensor] = []
    for chunk in chunks:
        start, end = chunk.req.num_computed, chunk.req.num_computed + chunk.num_fed
        input_ids.extend(chunk.req.tokens[start : start + chunk.num_new])
        input_ids.extend(chunk.draft)
        positions.append(torch.arange(start, end, dtype=torch.long))
        seq_slots.append(kv_slots(chunk.req.pages, end, page_size).to(device))
    out_slots = torch.cat([slots[-chunk.num_fed :] for slots, chunk in zip(seq_slots, chunks)])
    logit_rows = [i for i, chunk in enumerate(chunks) if chunk.needs_logits]
    logit_chunks = [chunks[i] for i in logit_rows]
    return ForwardBatch(
        input_ids=torch.tensor(input_ids, dtype=torch.long, device=device),
        positions=torch.cat(positions).to(device),
        out_slots=out_slots,
        seq_q_lens=[chunk.num_fed for chunk in chunks],
        seq_kv_slots=seq_slots,
        logit_rows=logit_rows,
        num_logit_tokens=[chunk.num_logit_rows for chunk in logit_chunks] if any(c.draft for c in logit_chunks) else None,
        seq_is_generated=[chunk.req.num_computed >= chunk.req.num_prompt_tokens for chunk in chunks],
    )
