"""Token-id traces of agent/RAG traffic: load the shared .npz format or generate one.

Format (numpy .npz, see ../shared/traces/README.md): tokens int32 (total,),
offsets int64 (n+1,), tenant int16 (n,), doc_ids int16 (n, 3) (-1 = none),
hist_len int16 (n,), meta str (JSON of the generator parameters).

Each generated request = its tenant's system prompt + 1..3 shared documents
in random order + 0..hist_max private history tokens + a private question.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

VOCAB_SIZE = 128256


@dataclass(frozen=True)
class TraceShape:
    """Generator parameters; the defaults give the shape of the shared trace."""

    num_requests: int = 5000
    num_tenants: int = 20
    sys_len: int = 1500
    num_docs: int = 200
    doc_len: int = 400
    docs_min: int = 1
    docs_max: int = 3
    hist_min: int = 0
    hist_max: int = 300
    question_len: int = 40
    vocab: int = VOCAB_SIZE
    seed: int = 7


@dataclass(frozen=True)
class Trace:
    tokens: np.ndarray  # (total,) int32
    offsets: np.ndarray  # (num_requests + 1,) int64
    tenant: np.ndarray  # (num_requests,) int16
    meta: dict

    @property
    def num_requests(self) -> int:
        return len(self.offsets) - 1

    @property
    def num_tokens(self) -> int:
        return int(self.offsets[-1])

    def request(self, index: int) -> np.ndarray:
        return self.tokens[self.offsets[index] : self.offsets[index + 1]]

    def request_bytes(self) -> list[bytes]:
        """Every request's token ids as int32 bytes (what the radix cache keys on)."""
        raw = self.tokens.astype(np.int32, copy=False).tobytes()
        offsets = (self.offsets * 4).tolist()
        return [raw[offsets[i] : offsets[i + 1]] for i in range(self.num_requests)]

    def save(self, path: str | Path) -> None:
        np.savez(path, tokens=self.tokens, offsets=self.offsets, tenant=self.tenant, meta=json.dumps(self.meta))


def load_trace(path: str | Path) -> Trace:
    with np.load(path) as data:
        meta = json.loads(str(data["meta"])) if "meta" in data.files else {}
        return Trace(
            tokens=np.ascontiguousarray(data["tokens"], dtype=np.int32),
            offsets=data["offsets"].astype(np.int64),
            tenant=data["tenant"].astype(np.int16),
            meta=meta,
        )


def generate_trace(shape: TraceShape = TraceShape()) -> Trace:
    """A seeded synthetic trace; token ids uniform in [0, vocab)."""
    rng = np.random.default_rng(shape.seed)
    systems = rng.integers(0, shape.vocab, (shape.num_tenants, shape.sys_len), dtype=np.int32)
    docs = rng.integers(0, shape.vocab, (shape.num_docs, shape.doc_len), dtype=np.int32)
    tenants = rng.integers(0, shape.num_tenants, shape.num_requests).astype(np.int16)
    parts: list[np.ndarray] = []
    offsets = [0]
    for tenant in tenants.tolist():
        num_docs = int(rng.integers(shape.docs_min, shape.docs_max + 1))
        chosen = rng.choice(shape.num_docs, size=num_docs, replace=False)
        hist_len = int(rng.integers(shape.hist_min, shape.hist_max + 1))
        private = rng.integers(0, shape.vocab, hist_len + shape.question_len, dtype=np.int32)
        request = np.concatenate([systems[tenant], *docs[chosen], private])
        parts.append(request)
        offsets.append(offsets[-1] + len(request))
    meta = {"generator": "radixgate", **shape.__dict__}
    return Trace(np.concatenate(parts), np.array(offsets, dtype=np.int64), tenants, meta)
