"""The Templates page's pure helpers: shading, lint beside lines, sample and pin bodies, the what-if frame."""

from __future__ import annotations

import json

import pytest

from dashboard import studio

PREVIEW = {
    "segments": [
        {"section": "system", "text": "<b>sys</b>", "num_tokens": 40},
        {"section": "question", "text": "q?", "num_tokens": 5},
    ],
    "static_prefix_len": 40, "static_prefix_pages": 2, "page_size": 16,
}


def test_shaded_prompt_escapes_text_and_marks_the_end_of_the_static_prefix():
    html = studio.shaded_prompt(PREVIEW)
    assert "&lt;b&gt;sys&lt;/b&gt;" in html and "<b>sys</b>" not in html
    assert html.index("system") < html.index("40 tokens</b> = <b>2 pages") < html.index("question")


def test_lint_findings_sit_beside_the_lines_they_name():
    table = studio.lint_table("a\nb\nc", [{"severity": "error", "rule": "r", "message": "m", "line": 2}])
    assert table["lint"].tolist() == ["", "error: r: m", ""] and table["line"].tolist() == [1, 2, 3]


def test_sample_text_drops_the_template_and_pin_body_takes_the_static_parts():
    body = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}], "template": "t@p",
            "tools": [{"type": "function", "function": {"name": "f"}}]}
    text = studio.sample_text([{"body": body}])
    assert "template" not in json.loads(text)
    assert studio.pin_body(studio.parse_body(text), "t@3") == {"system": "S", "template": "t@3", "tools": body["tools"]}
    with pytest.raises(ValueError):
        studio.parse_body("[1, 2]")


def test_what_if_frame_has_one_row_per_variant_and_request():
    frame = studio.what_if_frame({"draft": {"prefilled_tokens": [9, 3], "template_version": None},
                                  "current": {"prefilled_tokens": [9, 1], "template_version": 4}})
    assert set(frame["variant"]) == {"draft", "current (v4)"} and len(frame) == 4
