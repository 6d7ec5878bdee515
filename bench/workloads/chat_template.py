"""Chat messages as prompt token ids, through the model's own chat template (the form every bench replays)."""

from __future__ import annotations


def render_chat(tokenizer, messages: list[dict]) -> list[int]:
    """The token ids of `messages` under the tokenizer's chat template, ending with the assistant's turn opener."""
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if not isinstance(ids, list):
        ids = ids["input_ids"]
    return [int(t) for t in ids]
