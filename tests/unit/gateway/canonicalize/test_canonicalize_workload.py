"""canonicalize() against the `canonical` field of every request in the shared agent/RAG workload.

The workload's `canonical` lists tools in the tenant's usual order; the
canonicalizer sorts them by name, so tools compare as sets of canonical JSON.
Dynamic content compares as the hoisted sentences joined by one space.
"""

from __future__ import annotations

import json
from collections import Counter

from gateway.canonicalize import canonicalize, to_json

FIELDS = ("system", "tools", "context", "history", "dynamic", "question")


def observed(sections) -> dict:
    return {
        "system": sections.system,
        "tools": sorted(to_json(tool) for tool in sections.tools),
        "context": [doc.id for doc in sections.context],
        "history": sections.history,
        "dynamic": " ".join(sections.dynamic),
        "question": sections.question,
    }


def expected(canonical: dict) -> dict:
    return {**canonical, "tools": sorted(to_json(tool) for tool in canonical["tools"])}


def test_every_workload_request_matches_its_canonical_sections(agent_rag_rows):
    mismatches = Counter()
    for row in agent_rag_rows:
        got, want = observed(canonicalize(row["body"])), expected(row["canonical"])
        for field in FIELDS:
            if got[field] != want[field]:
                mismatches[(row["style"], field)] += 1
    agreement = 1 - sum(mismatches.values()) / (len(agent_rag_rows) * len(FIELDS))
    print(f"canonicalizer agreement with `canonical`: {agreement:.4f} over {len(agent_rag_rows)} requests")
    assert len(agent_rag_rows) == 300
    assert not mismatches, json.dumps({f"{style}/{field}": n for (style, field), n in mismatches.items()})


def test_signals_follow_the_client_style(agent_rag_rows):
    for row in agent_rag_rows:
        signals = canonicalize(row["body"]).signals
        assert signals.dynamic_hoisted == (row["style"] in ("dynamic-top", "personalized")), row["id"]
        if row["style"] in ("dynamic-top", "personalized", "context-first", "context-in-user", "whitespace"):
            assert not signals.was_canonical, row["id"]
        if row["style"] == "dynamic-top":
            assert {"iso_datetime", "uuid", "request_id"} <= set(signals.dynamic_patterns)


def test_context_documents_match_the_field_text_of_the_same_id(agent_rag_rows):
    """Documents pulled out of <context> messages equal the `context` field docs of other requests,
    so a document renders identically whichever way its client sent it."""
    field_text = {doc["id"]: doc["text"] for row in agent_rag_rows for doc in row["body"].get("context", [])}
    num_compared = 0
    for row in agent_rag_rows:
        if row["style"] in ("context-first", "context-in-user"):
            for doc in canonicalize(row["body"]).context:
                if doc.id in field_text:
                    assert doc.text == field_text[doc.id]
                    num_compared += 1
    assert num_compared > 50
