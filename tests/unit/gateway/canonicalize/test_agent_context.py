"""Prefix stability for Claude-Code-style prompts: the first user turn's context blocks join the static prefix,
what changes between two sessions of one project (billing header, dates, git status) moves after it."""

from __future__ import annotations

from gateway.canonicalize import canonicalize
from gateway.canonicalize.agent_context import split_agent_context
from gateway.chat.parse import generation_request
from gateway.chat.schemas import ChatCompletionRequest
from gateway.generation.prepare import prepare_request
from tests.support import claude_code
from tests.support.claude_code import FIRST, SECOND, chat_body, environment, moved_lines, reminder


def prepared(session, tokenizer, registry, *, canonicalize: bool = True):
    body = ChatCompletionRequest(**chat_body(session), canonicalize=canonicalize)
    return prepare_request(generation_request(body), templates=registry, tokenizer=tokenizer, model_id="m",
                           max_context=32768, default_max_tokens=16)


def shared_prefix(left, right) -> int:
    return next((i for i, (a, b) in enumerate(zip(left, right)) if a != b), min(len(left), len(right)))


def test_what_moves_between_two_sessions_is_the_billing_header_the_dates_and_the_git_status():
    pairs = [moved_lines(block(FIRST), block(SECOND)) for block in (claude_code.billing_header, reminder, environment)]
    removed, added = [line for old, _ in pairs for line in old], [line for _, new in pairs for line in new]
    assert removed == [
        "x-anthropic-billing-header: cc_version=2.1.337.a3f; cc_entrypoint=sdk-py;",
        "Today's date is 2026-12-07.", " - Today's date: 2026-12-07",
        "M src/stock.py", "?? notes.md", "4f2a9c1 Fix rounding in stock totals",
    ]
    assert len(added) == 5  # the same lines with the second session's values (one changed file fewer)
    first, second = (canonicalize(chat_body(session)) for session in (FIRST, SECOND))
    hoisted = " ".join(second.dynamic)
    assert all(line.strip() in hoisted for line in added)  # every moved line left the static prefix
    assert first.system == second.system and first.tools == second.tools and first.history == second.history == []
    assert "gitStatus:" in hoisted and "git_status" in second.signals.dynamic_patterns


def test_the_context_blocks_join_the_system_prompt_and_the_question_stands_alone():
    sections = canonicalize(chat_body(FIRST))
    assert sections.question == "What is 2+2?"
    assert sections.system.startswith(claude_code.IDENTITY)
    assert "Contents of /home/dev/projects/inventory/CLAUDE.md" in sections.system
    assert "Primary working directory: /home/dev/projects/inventory" in sections.system
    assert "2026-12-07" not in sections.system and "x-anthropic-billing-header" not in sections.system
    assert not sections.signals.was_canonical


def test_two_sessions_share_the_token_prefix_up_to_their_dynamic_block_and_question(smollm2_tokenizer, registry):
    first, second = (prepared(session, smollm2_tokenizer, registry) for session in (FIRST, SECOND))
    tail = {"dynamic", "question", "generation"}
    prefix_tokens = sum(count for name, count in second.section_tokens.items() if name not in tail)
    shared = shared_prefix(first.prompt.token_ids, second.prompt.token_ids)
    assert shared >= prefix_tokens >= 2000  # system (identity, reminder, environment) and the 21 tools
    assert prefix_tokens / second.num_prompt_tokens > 0.9
    raw_first, raw_second = (prepared(s, smollm2_tokenizer, registry, canonicalize=False) for s in (FIRST, SECOND))
    assert shared_prefix(raw_first.prompt.token_ids, raw_second.prompt.token_ids) < 0.1 * raw_second.num_prompt_tokens


def test_only_the_first_user_message_is_split_and_only_when_it_keeps_a_question():
    later = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]},
             {"role": "assistant", "content": "Hello"},
             {"role": "user", "content": [{"type": "text", "text": "<system-reminder>todo list</system-reminder>"},
                                          {"type": "text", "text": "Next?"}]}]
    assert split_agent_context(later).messages == later
    only_context = [{"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"}]}]
    assert split_agent_context(only_context).system == []


def test_a_string_content_gives_up_its_reminders_and_trailing_environment():
    text = "<system-reminder>\nCLAUDE.md here\n</system-reminder>\nWhat is 2+2?\n" + environment(FIRST)
    context = split_agent_context([{"role": "user", "content": text}])
    assert context.messages[0]["content"] == "What is 2+2?"
    assert context.system[0].startswith("<system-reminder>") and context.system[1].startswith("# Environment")
    assert context.dynamic[0].startswith("gitStatus:") and "M src/stock.py" in context.dynamic[0]
    assert "gitStatus" not in context.system[1]
