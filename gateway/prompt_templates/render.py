"""Rendering sections through a template into ordered, separately tokenizable segments.

Variables every template sees:
  system (str), tools (list of tool dicts, sorted), context (list of Doc: .id, .text),
  history (list of message dicts), dynamic (list of str), question (str),
  generation_prompt (str: the model's assistant header),
  now (str: when the request arrived, ISO 8601 UTC; it differs per request, so it belongs
  in the dynamic or question block: the linter flags it anywhere earlier),
  turn_start(role) / turn_end(role) (the model's chat markers),
  default_system (str: the system text the model's own template writes when there is none),
  tools_in_system (bool: the model's template has its own tools block in the system turn),
  end_system(tools) (after the system text: the tools block's lead, or the system turn's end),
  format_tools(tools) (the model's own tools block, closing the system turn; "" if it has none),
  format_message(message) (one history message as a whole turn),
  format_messages(messages) (history turns; consecutive tool results grouped as the model groups them),
  format_document(doc) ('<document id="...">' block);
filters: sort_tools, by_id (documents by id), canonical_json.

Only the template's own text and the marker helpers' output (turn_start,
turn_end, generation_prompt, format_message's markers) may become special
tokens; every other `{{ expression }}` output is client text (see sandbox.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.canonicalize.marked_text import MarkedText
from gateway.canonicalize.sections import Doc, Sections
from gateway.prompt_templates.chat_format import ChatFormat
from gateway.prompt_templates.sandbox import render_blocks


@dataclass
class RenderedPrompt:
    """segments: (section_name, text) in prompt order; tokenize each alone.
    Each text is a MarkedText (a str whose client spans tokenize_segments reads)."""

    segments: list[tuple[str, str]]
    template_name: str
    version: int | None = None

    @property
    def text(self) -> str:
        return "".join(text for _, text in self.segments)


def template_variables(sections: Sections, chat_format: ChatFormat) -> dict:
    """The variables and helpers a template renders with (see module docstring)."""
    return {
        "system": sections.system,
        "tools": sections.tools,
        "context": sections.context,
        "history": sections.history,
        "dynamic": sections.dynamic,
        "question": sections.question,
        "now": sections.received_at,
        "generation_prompt": MarkedText(chat_format.generation_prompt),
        "turn_start": chat_format.turn_start,
        "turn_end": chat_format.turn_end,
        "default_system": chat_format.default_system,
        "tools_in_system": chat_format.tools is not None,
        "end_system": chat_format.end_system,
        "format_tools": chat_format.format_tools,
        "format_message": chat_format.format_message,
        "format_messages": chat_format.format_messages,
        "format_document": format_document,
    }


def format_document(doc: Doc) -> str:
    if doc.id is None:
        return f"<document>\n{doc.text}\n</document>"
    return f'<document id="{doc.id}">\n{doc.text}\n</document>'


def render_sections(template, sections: Sections, chat_format: ChatFormat, name: str, version: int | None = None) -> RenderedPrompt:
    """Render `sections` block by block; empty blocks are dropped from the segments."""
    segments = render_blocks(template, template_variables(sections, chat_format), name)
    return RenderedPrompt([(block, text) for block, text in segments if text], name, version)
