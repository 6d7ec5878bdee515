"""An agent row as a plain OpenAI client sends it to an engine without radixgate's extras.

vLLM, llama.cpp and transformers have no context field, tenants or canonical order: a row's retrieved
documents become a system message after the first one, as an application talking to such an engine
would send them, and its tools ride along uncalled (``tool_choice: "none"``). The in-process peers get
the same messages rendered by the model's own chat template, the tokens vLLM's server computes.
"""

from __future__ import annotations

RADIXGATE_EXTRAS = ("context", "canonicalize", "template")


def plain_body(body: dict) -> dict:
    """The row's body as a plain OpenAI request: documents as a system message, tools not called."""
    plain = {k: v for k, v in body.items() if k not in RADIXGATE_EXTRAS}
    docs = body.get("context") or []
    if docs:
        text = "\n\n".join(d["text"] if isinstance(d, dict) else str(d) for d in docs)
        messages = list(plain["messages"])
        at = 1 if messages and messages[0].get("role") == "system" else 0
        documents = {"role": "system", "content": f"Retrieved documents:\n\n{text}"}
        plain["messages"] = messages[:at] + [documents] + messages[at:]
    if plain.get("tools"):
        plain["tool_choice"] = "none"
    return plain


def plain_prompt_ids(body: dict, tokenizer) -> list[int]:
    """The plain body's messages in the tokenizer's chat template, ready for the assistant's answer."""
    messages = plain_body(body)["messages"]
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False))
