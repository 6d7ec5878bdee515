"""Retrieved documents: the `context` extra field, <context> wrappers and <document> blocks.

Accepted shapes (all yield Doc(id, text), text stripped of surrounding blank space):
  body["context"]: a list of strings (anonymous docs) or {"id", "text"} objects;
  <context> ... </context>: its <document id="..."> ... </document> blocks, and any
    other non-blank text inside the wrapper as one anonymous doc;
  <document id="..."> ... </document> blocks outside a wrapper.
"""

from __future__ import annotations

import re

from gateway.canonicalize.sections import Doc

_DOCUMENT = re.compile(
    r"<document(?:\s+id\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>]+)))?\s*>(.*?)</document\s*>",
    re.DOTALL | re.IGNORECASE,
)
_CONTEXT = re.compile(r"<context\s*>(.*?)</context\s*>", re.DOTALL | re.IGNORECASE)
_LEADING_BLOCK = re.compile(
    r"\s*(?:<context\s*>.*?</context\s*>|<document\b[^>]*>.*?</document\s*>)", re.DOTALL | re.IGNORECASE
)


def docs_from_field(value: object) -> list[Doc]:
    """Docs of the `context` extra field; a malformed entry raises ValueError."""
    if value is None:
        return []
    if isinstance(value, (str, dict)):
        value = [value]
    if not isinstance(value, list):
        raise ValueError("context must be a list of strings or {'id', 'text'} objects")
    return [doc_from_entry(entry, index) for index, entry in enumerate(value)]


def doc_from_entry(entry: object, index: int) -> Doc:
    if isinstance(entry, str):
        return Doc(None, entry.strip())
    if isinstance(entry, dict) and isinstance(entry.get("text"), str):
        doc_id = entry.get("id")
        return Doc(None if doc_id is None else str(doc_id), entry["text"].strip())
    raise ValueError(f"context[{index}] must be a string or an object with a string 'text'")


def extract_docs(text: str) -> tuple[list[Doc], str]:
    """All <context> wrappers and <document> blocks of `text`, and the text left over."""
    docs: list[Doc] = []

    def take_context(match: re.Match) -> str:
        docs.extend(parse_context_body(match.group(1)))
        return ""

    rest = _CONTEXT.sub(take_context, text)
    rest = _DOCUMENT.sub(lambda match: docs.append(doc_from_match(match)) or "", rest)
    return docs, rest


def extract_leading_docs(text: str) -> tuple[list[Doc], str]:
    """Docs in <context>/<document> blocks at the very start of `text` (a user
    turn), and the rest of it. Blocks later in the turn are the user's words."""
    end = 0
    while match := _LEADING_BLOCK.match(text, end):
        end = match.end()
    if end == 0:
        return [], text
    docs, _ = extract_docs(text[:end])
    return docs, text[end:]


def parse_context_body(body: str) -> list[Doc]:
    """Docs inside one <context> wrapper; loose text becomes an anonymous doc."""
    docs = [doc_from_match(match) for match in _DOCUMENT.finditer(body)]
    loose = _DOCUMENT.sub("", body).strip()
    if loose:
        docs.append(Doc(None, loose))
    return docs


def doc_from_match(match: re.Match) -> Doc:
    doc_id = next((group for group in match.group(1, 2, 3) if group is not None), None)
    return Doc(doc_id, match.group(4).strip())


def dedupe_docs(docs: list[Doc]) -> list[Doc]:
    """First occurrence wins: a doc sent twice (same id, or same anonymous text) is kept once."""
    seen, unique = set(), []
    for doc in docs:
        key = ("id", doc.id) if doc.id is not None else ("text", doc.text)
        if key not in seen:
            seen.add(key)
            unique.append(doc)
    return unique


def sort_docs_by_id(docs: list[Doc]) -> list[Doc]:
    """Docs with ids in id order, then anonymous docs in their original order."""
    return sorted(docs, key=lambda doc: (doc.id is None, doc.id or ""))
