"""The Templates page's pure helpers: shaded preview, lint beside the lines, sample bodies, pin bodies.

No Streamlit and no I/O here: HTML strings and dicts from the API's answers, so they can be tested alone.
"""

from __future__ import annotations

import html
import json

import pandas as pd

SECTION_COLORS = {
    "system": "#dbeafe", "tools": "#ede9fe", "context": "#dcfce7", "history": "#f1f5f9",
    "dynamic": "#ffedd5", "question": "#fef9c3", "generation": "#fce7f3",
}
STATIC_SECTIONS = ("system", "tools", "context")
DEFAULT_BODY = {
    "model": "default",
    "messages": [
        {"role": "system", "content": "You are a support assistant for ACME. Answer briefly."},
        {"role": "user", "content": "How do I reset my password?"},
    ],
    "max_tokens": 16,
}

def shaded_prompt(preview: dict) -> str:
    """The rendered prompt as HTML, each segment shaded by its section, with its token count and a
    marker where the cacheable static prefix ends (tokens and whole pages)."""
    parts, static_done = [], False
    for segment in preview["segments"]:
        section = segment["section"]
        if not static_done and section not in STATIC_SECTIONS:
            parts.append(static_marker(preview))
            static_done = True
        color = SECTION_COLORS.get(section, "#eeeeee")
        parts.append(
            f'<div style="background:{color};padding:4px 8px;margin:2px 0;border-radius:4px">'
            f'<small><b>{html.escape(section)}</b> · {segment["num_tokens"]:,} tokens</small>'
            f'<pre style="white-space:pre-wrap;margin:0;background:none">{html.escape(segment["text"])}</pre></div>'
        )
    if not static_done:
        parts.append(static_marker(preview))
    return "".join(parts)


def static_marker(preview: dict) -> str:
    return (
        '<div style="border-top:3px dashed #1f6fb4;margin:6px 0;padding-top:2px"><small>▲ cacheable static prefix '
        f'ends here: <b>{preview["static_prefix_len"]:,} tokens</b> = <b>{preview["static_prefix_pages"]:,} pages</b> '
        f'of {preview["page_size"]} tokens</small></div>'
    )


def lint_table(source: str, findings: list[dict]) -> pd.DataFrame:
    """The source line by line, each line's lint findings beside it (findings without a line go on line 1)."""
    by_line: dict[int, list[str]] = {}
    for finding in findings:
        by_line.setdefault(finding.get("line") or 1, []).append(f"{finding['severity']}: {finding['rule']}: {finding['message']}")
    rows = [{"line": number, "source": text, "lint": "\n".join(by_line.get(number, []))}
            for number, text in enumerate(source.splitlines() or [""], start=1)]
    return pd.DataFrame(rows, columns=["line", "source", "lint"])


def sample_text(samples: list[dict]) -> str:
    """The editor's sample body: the newest sampled request (its template field dropped), else DEFAULT_BODY."""
    body = dict(samples[-1]["body"]) if samples else dict(DEFAULT_BODY)
    body.pop("template", None)
    body.pop("stream", None)
    return json.dumps(body, indent=2, ensure_ascii=False)


def parse_body(text: str) -> dict:
    """The sample body as a dict; ValueError with a readable message when it is not a JSON object."""
    body = json.loads(text)
    if not isinstance(body, dict):
        raise ValueError("the sample body must be a JSON object (a chat completion request)")
    return body


def pin_body(body: dict, template_ref: str) -> dict:
    """A POST /v1/pins body for the static prefix `body` starts with under `template_ref`."""
    system = "\n\n".join(m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "system"
                         and isinstance(m.get("content"), str))
    pin = {"system": system, "template": template_ref}
    for field in ("tools", "context"):
        if body.get(field):
            pin[field] = body[field]
    return pin


def what_if_frame(estimate: dict) -> pd.DataFrame:
    """Long frame (variant, request, prefilled_tokens) of the estimate's variants."""
    rows = []
    for key, label in (("draft", "draft"), ("current", "current")):
        variant = estimate.get(key)
        if not variant:
            continue
        name = label if key == "draft" else f"current (v{variant['template_version']})"
        rows += [{"variant": name, "request": i, "prefilled_tokens": n}
                 for i, n in enumerate(variant["prefilled_tokens"], start=1)]
    return pd.DataFrame(rows, columns=["variant", "request", "prefilled_tokens"])
