"""The multi-tenant agent/RAG workload: the shared jsonl by path, or a seeded one of the same shape.

One generator serves both benches of this traffic: `bench agent` sends each row's `body` through
a gateway, `bench policy` renders each row's `canonical` sections straight into the engine
(bench.policy.prompts). The shape is that of ../shared/workloads/agent_rag_300.jsonl:
one JSON object a line,

    {"id", "tenant", "style", "body": <chat completion body>, "canonical": {...}}

Three tenants (a support agent, a legal RAG assistant, a coding agent; see agent_tenants) send
OpenAI chat bodies; `body` may carry the extra field `context` (documents as {"id", "text"}).
Documents are real English text: docstrings of the running Python's standard library. Each
request names its client `style` (how that client scrambles its prompt):

    clean            system first, tools as given, documents in `context`, question last
    dynamic-top      a timestamp and request id as the first line of the system prompt
    context-first    documents in a `<context>` system message before the system prompt
    context-in-user  documents in `<context>...</context>` at the start of the last user turn
    tools-shuffled   tools in random order, JSON keys in random order
    personalized     "You are speaking with <name>." and today's date inside the system prompt
    whitespace       doubled spaces / trailing whitespace drift in the system prompt

`canonical` holds the sections a perfect canonicalizer would find: system and question (text),
tools (as the tenant defines them), context (document ids), history (earlier turns) and dynamic
(the hoisted text, "" when none). The same seed gives the same rows.
"""

from __future__ import annotations

import importlib
import inspect
import json
import random
import re
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

from bench.workloads.agent_tenants import TENANTS, TenantSpec

STYLES = ("clean", "dynamic-top", "context-first", "context-in-user", "tools-shuffled", "personalized", "whitespace")
QUESTIONS = (
    "How do I use {name} correctly?",
    "What errors can {name} raise?",
    "Give me a short example that uses {name}.",
    "Is {name} safe to call from several threads at once?",
    "Summarize what the documentation says about {name} in two sentences.",
    "Which arguments of {name} are optional, and what are their defaults?",
)
PEOPLE = ("Ines Duarte", "Hiro Tanaka", "Chen Wei", "Amara Okafor", "Lena Fischer", "Diego Ramos")
DOC_MODULES = ("asyncio", "socket", "statistics", "inspect", "functools", "json", "os", "shutil", "gzip", "typing")
MAX_DOC_CHARS = 900
MIN_DOC_CHARS = 250
DOCUMENT_BLOCK = re.compile(r'<document id="([^"]+)">\n(.*?)\n</document>', re.S)  # context_block's form


@dataclass(frozen=True)
class Doc:
    id: str
    text: str


def stdlib_docs(rng: random.Random, num_docs: int) -> list[Doc]:
    """`num_docs` distinct documents: stdlib docstrings of at least MIN_DOC_CHARS, cut at MAX_DOC_CHARS."""
    found: dict[str, str] = {}
    for module_name in DOC_MODULES:
        module = importlib.import_module(module_name)
        for attr in sorted(dir(module)):
            if attr.startswith("_"):
                continue
            with warnings.catch_warnings():  # typing.io / typing.re warn when touched
                warnings.simplefilter("ignore", DeprecationWarning)
                doc = inspect.getdoc(getattr(module, attr, None)) or ""
            if len(doc) >= MIN_DOC_CHARS and doc not in found.values():
                found[f"{module_name}.{attr}"] = doc[:MAX_DOC_CHARS]
    names = sorted(found)
    return [Doc(name, found[name]) for name in rng.sample(names, min(num_docs, len(names)))]


def zipf_pick(rng: random.Random, items: list, exponent: float = 1.1):
    weights = [1.0 / (rank + 1) ** exponent for rank in range(len(items))]
    return rng.choices(items, weights=weights, k=1)[0]


def shuffled_json(rng: random.Random, value):
    """`value` with every dict's keys in random order (same content)."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: shuffled_json(rng, value[k]) for k in keys}
    if isinstance(value, list):
        return [shuffled_json(rng, v) for v in value]
    return value


def whitespace_drift(rng: random.Random, text: str) -> str:
    """Doubled spaces after sentences and trailing spaces on lines, as sloppy clients send."""
    text = text.replace(". ", ".  ") if rng.random() < 0.7 else text
    return "\n".join(line + " " * rng.randint(0, 2) for line in text.split("\n")) + ("\n" if rng.random() < 0.5 else "")


def context_block(docs: list[Doc]) -> str:
    """Documents inlined as context-first and context-in-user clients send them (DOCUMENT_BLOCK reads them)."""
    inner = "\n".join(f'<document id="{d.id}">\n{d.text}\n</document>' for d in docs)
    return f"<context>\n{inner}\n</context>"


class WorkloadBuilder:
    """Builds one request at a time for a tenant; conversations grow for a few turns, then restart."""

    def __init__(self, spec: TenantSpec, docs: list[Doc], rng: random.Random) -> None:
        self.spec, self.docs, self.rng = spec, docs, rng
        self.history: list[dict] = []

    def next_turn_history(self) -> list[dict]:
        if len(self.history) >= 4 or self.rng.random() < 0.45:
            self.history = []
        return list(self.history)

    def build(self, request_id: str, style: str, when: str) -> dict:
        rng = self.rng
        docs = [zipf_pick(rng, self.docs)]
        if rng.random() < 0.55:
            extra = zipf_pick(rng, self.docs)
            docs = docs + [extra] if extra != docs[0] else docs
        history = self.next_turn_history()
        question = rng.choice(QUESTIONS).format(name=docs[-1].id)
        system, dynamic, tools = self.spec.system, [], [dict(t) for t in self.spec.tools]
        body: dict = {"model": "default", "max_tokens": 8, "temperature": 0}
        messages: list[dict] = []
        if style == "dynamic-top":
            dynamic = [f"Current time: {when}. Request id: {uuid.UUID(int=rng.getrandbits(128))}."]
            system = dynamic[0] + "\n" + system
        elif style == "personalized":
            dynamic = [f"You are speaking with {rng.choice(PEOPLE)}.", f"Today is {when[:10]}."]
            system = f"{dynamic[0]} {system} {dynamic[1]}"
        elif style == "whitespace":
            system = whitespace_drift(rng, system)
        elif style == "tools-shuffled":
            rng.shuffle(tools)
            tools = [shuffled_json(rng, t) for t in tools]
        if style == "context-first":
            messages.append({"role": "system", "content": context_block(docs)})
        messages.append({"role": "system", "content": system})
        messages += history
        if style == "context-in-user":
            messages.append({"role": "user", "content": context_block(docs) + "\n\n" + question})
        else:
            messages.append({"role": "user", "content": question})
        if style not in ("context-first", "context-in-user"):
            body["context"] = [{"id": d.id, "text": d.text} for d in docs]
        body["tools"], body["messages"] = tools, messages
        answer = f"Here is what the documentation says: {docs[-1].text[:300]}"
        self.history = history + [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        canonical = {
            "system": self.spec.system, "tools": self.spec.tools, "context": [d.id for d in docs],
            "history": history, "dynamic": " ".join(dynamic), "question": question,
        }
        return {"id": request_id, "tenant": self.spec.name, "style": style, "body": body, "canonical": canonical}


def generate_workload(num_requests: int = 300, seed: int = 0) -> list[dict]:
    """The seeded workload: requests interleaved across tenants, each tenant with its own style mix."""
    rng = random.Random(seed)
    all_docs = stdlib_docs(rng, 20 * len(TENANTS))
    builders = [WorkloadBuilder(spec, all_docs[i * 20 : (i + 1) * 20], random.Random(seed * 1000 + i)) for i, spec in enumerate(TENANTS)]
    rows = []
    for index in range(num_requests):
        builder = rng.choice(builders)
        style = rng.choices(STYLES, weights=builder.spec.style_weights, k=1)[0]
        when = f"2026-11-02T{9 + index // 60:02d}:{index % 60:02d}:00Z"
        rows.append(builder.build(f"r{index:05d}", style, when))
    return rows


def load_workload(path: str | Path | None, num_requests: int = 300, seed: int = 0) -> list[dict]:
    """Rows from a JSONL file (all of them), or the generated workload when `path` is None."""
    if path is None:
        return generate_workload(num_requests, seed)
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_workload(rows: list[dict], path: str | Path) -> None:
    with open(path, "w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def document_texts(rows: list[dict]) -> dict[str, str]:
    """Document id -> text over all rows: from `body.context`, or from the <document> blocks that
    context-first and context-in-user clients put inside their messages."""
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
