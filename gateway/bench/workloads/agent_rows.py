"""Agent/RAG workload for bench policy: the shared jsonl by path, or a generated one of the same shape.

Each row is {"id", "tenant", "style", "body", "canonical"}; the bench renders
`canonical` (system, tools, context ids, history, dynamic, question) with the
model's chat template in canonical order:

    system message: system text, tools (sorted, compact JSON), documents
    earlier turns:  history
    last user turn: dynamic content, then the question

so everything static forms one shared token prefix per tenant (and per
document set). Document texts come from the rows' `context` fields or from
<document id="..."> blocks inside their messages.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

from gateway.bench.workloads.rag import render_chat

DOCUMENT_BLOCK = re.compile(r'<document id="([^"]+)">\n(.*?)\n</document>', re.S)
TENANTS = {
    "acme-support": "You are Acme Cloud's support agent. Answer questions about storage, billing and networking.",
    "lexbase": "You are LexBase, a legal research assistant. Cite the retrieved documents and never give advice.",
    "devpilot": "You are DevPilot, a coding agent. Prefer short, runnable examples and explain trade-offs.",
}
WORDS = ("queue socket buffer timeout retry invoice region contract clause tenant lease payment schedule "
         "parser token cache thread signal archive backup policy quota ledger").split()


@dataclass
class AgentRequest:
    request_id: str
    namespace: str
    token_ids: list[int]
    max_tokens: int


def document_texts(rows: list[dict]) -> dict[str, str]:
    texts: dict[str, str] = {}
    for row in rows:
        for doc in row["body"].get("context") or []:
            texts.setdefault(doc["id"], doc["text"])
        for message in row["body"].get("messages", []):
            content = message.get("content")
            if isinstance(content, str):
                for doc_id, text in DOCUMENT_BLOCK.findall(content):
                    texts.setdefault(doc_id, text)
    return texts


def render_canonical(tokenizer, canonical: dict, texts: dict[str, str]) -> list[int]:
    tools = sorted(canonical.get("tools") or [], key=lambda t: t.get("function", {}).get("name", ""))
    parts = [canonical["system"]]
    if tools:
        parts.append("# Tools\n" + "\n".join(json.dumps(t, sort_keys=True, separators=(",", ":")) for t in tools))
    for doc_id in canonical.get("context") or []:
        parts.append(f'<document id="{doc_id}">\n{texts.get(doc_id, doc_id)}\n</document>')
    question = canonical["question"]
    question = question["content"] if isinstance(question, dict) else question
    last = "\n\n".join(p for p in (canonical.get("dynamic") or "", question) if p)
    messages = [{"role": "system", "content": "\n\n".join(parts)}, *canonical.get("history", []),
                {"role": "user", "content": last}]
    return render_chat(tokenizer, [m for m in messages if isinstance(m.get("content"), str)])


def load_agent_rows(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def generate_agent_rows(*, seed: int = 7, num_requests: int = 300, docs_per_tenant: int = 12) -> list[dict]:
    """Three tenants, each with its system prompt, tools and a document pool; 1-3 documents a request."""
    rng = random.Random(seed)
    docs = {tenant: [(f"{tenant}-doc{i}", " ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 140))))
                     for i in range(docs_per_tenant)] for tenant in TENANTS}
    rules = {tenant: " ".join(rng.choice(WORDS) for _ in range(150)) for tenant in TENANTS}
    rows = []
    for index in range(num_requests):
        tenant = rng.choice(list(TENANTS))
        chosen = rng.sample(docs[tenant][: 4 + index % 8], rng.randint(1, 3))
        question = f"Question {index}: how does {rng.choice(WORDS)} relate to {rng.choice(WORDS)}?"
        canonical = {"system": f"{TENANTS[tenant]} Rules: {rules[tenant]}",
                     "tools": [{"type": "function", "function": {"name": f"{tenant}_lookup", "parameters": {}}}],
                     "context": [doc_id for doc_id, _ in chosen], "history": [], "dynamic": "", "question": question}
        body = {"model": "default", "max_tokens": 8, "temperature": 0,
                "context": [{"id": doc_id, "text": text} for doc_id, text in chosen],
                "messages": [{"role": "system", "content": TENANTS[tenant]}, {"role": "user", "content": question}]}
        rows.append({"id": f"g{index:05d}", "tenant": tenant, "style": "clean", "body": body, "canonical": canonical})
    return rows


def agent_requests(tokenizer, rows: list[dict]) -> list[AgentRequest]:
    texts = document_texts(rows)
    return [AgentRequest(row["id"], row["tenant"], render_canonical(tokenizer, row["canonical"], texts),
                         int(row["body"].get("max_tokens") or 8)) for row in rows]
