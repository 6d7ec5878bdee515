"""render_raw(): the client's own message order, rendered with the model's chat template.

This is the baseline the canonical order is compared with (raw-order hit
rate, shadow index). Choices, made to mirror what a client would have sent to a
plain OpenAI-compatible server:
- the `context` extra field is prepended to the last user message as
  "<context>\n<document id=...>...</document>\n</context>\n\n" (the layout of
  clients that put documents in the user turn); with no user message it
  becomes a leading system message;
- tools are passed to apply_chat_template as given; a chat template that
  ignores tools (SmolLM2's) would drop them, so they are then appended to the
  first system message as one JSON line each, in the client's order and key
  order — the raw prompt carries the same content as the canonical one;
- content parts are flattened to text, None content becomes "", and assistant
  tool_calls are written into the content as JSON lines;
- a tokenizer without a chat template, or whose template rejects the messages
  (e.g. an unknown role), renders as ChatML instead of failing the request;
- special-token text inside client content (messages, tools, documents) stays
  plain text: before the chat template runs, each occurrence is fenced
  (marked_text.Fence) and the rendering unwraps to a MarkedText whose client
  spans cover them, so only the chat template's own markers become special
  tokens. A chat template that mangles a fence renders as ChatML instead.
"""

from __future__ import annotations

import json

from gateway.canonicalize.canonicalizer import message_text, validate_messages
from gateway.canonicalize.context import docs_from_field
from gateway.canonicalize.marked_text import Fence, MarkedText
from gateway.canonicalize.sections import Doc
from gateway.canonicalize.tokenize import SpecialTokens, encode_segment


def render_raw(tokenizer, body: dict) -> list[int]:
    """Token ids of `body` in the client's raw order (see module docstring)."""
    specials = SpecialTokens.of(tokenizer)
    return encode_segment(tokenizer, render_raw_text(tokenizer, body, specials), specials)


def render_raw_text(tokenizer, body: dict, specials: SpecialTokens | None = None) -> MarkedText:
    """The raw-order prompt text; client-typed special-token text lies in client spans."""
    fence, specials = Fence(), specials or SpecialTokens.of(tokenizer)
    messages = [flatten_message(message) for message in validate_messages(body)]
    messages = prepend_context(messages, docs_from_field(body.get("context")))
    messages = [dict(message, content=fence_specials(message["content"], fence, specials)) for message in messages]
    tools = fence_specials(body.get("tools"), fence, specials) or None
    text = apply_template(tokenizer, messages, tools)
    if tools and text == apply_template(tokenizer, messages, None):
        text = apply_template(tokenizer, inline_tools(messages, tools), None)
    try:
        return fence.unwrap(text)
    except ValueError:
        return fence.unwrap(chatml(inline_tools(messages, tools) if tools else messages))


def fence_specials(value, fence: Fence, specials: SpecialTokens):
    """`value` (str, or lists/dicts of them) with every special-token occurrence fenced."""
    if isinstance(value, str):
        if specials.pattern is None:
            return value
        return specials.pattern.sub(lambda match: fence.wrap_client(match.group()), value)
    if isinstance(value, list):
        return [fence_specials(item, fence, specials) for item in value]
    if isinstance(value, dict):
        return {key: fence_specials(item, fence, specials) for key, item in value.items()}
    return value


def apply_template(tokenizer, messages: list[dict], tools: list[dict] | None) -> str:
    """The model's own rendering; ChatML when it has no template or rejects these messages."""
    if getattr(tokenizer, "chat_template", None):
        try:
            return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
        except Exception:  # noqa: BLE001 — e.g. a template that raises on a 'developer' or 'tool' role
            pass
    return chatml(messages)


def chatml(messages: list[dict]) -> str:
    turns = "".join(f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>\n" for message in messages)
    return turns + "<|im_start|>assistant\n"


def flatten_message(message: dict) -> dict:
    flat = {"role": message["role"], "content": message_text(message)}
    calls = message.get("tool_calls")
    if calls:
        lines = [json.dumps(call.get("function", call), ensure_ascii=False) for call in calls]
        flat["content"] = "\n".join(filter(None, [flat["content"], *lines]))
    return flat


def prepend_context(messages: list[dict], docs: list[Doc]) -> list[dict]:
    if not docs:
        return messages
    block = context_block(docs)
    users = [index for index, message in enumerate(messages) if message["role"] == "user"]
    if not users:
        return [{"role": "system", "content": block}, *messages]
    last = users[-1]
    updated = dict(messages[last], content=f"{block}\n\n{messages[last]['content']}")
    return [*messages[:last], updated, *messages[last + 1 :]]


def context_block(docs: list[Doc]) -> str:
    parts = [f'<document id="{doc.id}">\n{doc.text}\n</document>' if doc.id is not None else doc.text for doc in docs]
    return "<context>\n" + "\n".join(parts) + "\n</context>"


def inline_tools(messages: list[dict], tools: list[dict]) -> list[dict]:
    lines = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    block = f"# Tools\n{lines}"
    for index, message in enumerate(messages):
        if message["role"] in ("system", "developer"):
            updated = dict(message, content=f"{message['content']}\n\n{block}")
            return [*messages[:index], updated, *messages[index + 1 :]]
    return [{"role": "system", "content": block}, *messages]

