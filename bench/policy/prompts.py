"""The agent workload's rows as the requests bench policy submits to the engine.

Each row's `canonical` sections are rendered with the model's chat template in
canonical order:

    system message: system text, tools (sorted by name, compact JSON), documents
    earlier turns:  history
    last user turn: dynamic content, then the question

so everything static forms one shared token prefix per tenant (and per
document set). A request's namespace is its tenant, as in the gateway.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from bench.workloads.agent import document_texts
from bench.workloads.chat_template import render_chat


@dataclass
class AgentRequest:
    request_id: str
    namespace: str
    token_ids: list[int]
    max_tokens: int


def render_canonical(tokenizer, canonical: dict, texts: dict[str, str]) -> list[int]:
    """The prompt token ids of one row's canonical sections; `texts` maps document ids to their text."""
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


def agent_requests(tokenizer, rows: list[dict]) -> list[AgentRequest]:
    """One request per row, in order; max_tokens from the row's body (8 when absent)."""
    texts = document_texts(rows)
    return [AgentRequest(row["id"], row["tenant"], render_canonical(tokenizer, row["canonical"], texts),
                         int(row["body"].get("max_tokens") or 8)) for row in rows]
