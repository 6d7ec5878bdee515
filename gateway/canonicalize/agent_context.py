"""Agent context blocks: the project context a coding agent (Claude Code) sends inside its first user turn.

Claude Code's first user message is three text blocks: a `<system-reminder>` (CLAUDE.md, the current
date), the question, and a long "# Environment" block (working directory, platform, OS version,
today's date, the agent's standing instructions, then the git status). Left in place they make the
question the middle of one long user turn: nothing after the tools is cacheable, and the next
session (same project, another date, another git status) shares only the tools. Measured between
two sessions of one project (tests/support/claude_code.py), what moves is:

    the billing header's values   system block 1 (`x-anthropic-billing-header: cc_version=...`):
                                  hoisted by the dynamic rule `billing_header` (dynamic.py)
    today's date                  in the reminder and in the environment: the `today_is` / date rules
    the git status                from the `gitStatus:` line to the end of its block (branch,
                                  changed files, recent commits): hoisted whole, here

so `split_agent_context` moves the first user message's context blocks (all but the question) into
the system section, where the dynamic rules take their dates out like any system sentence, and
returns the git status as dynamic text. Canonical order then reads [system (identity, reminder,
environment), tools, history, dynamic (billing header, dates, git status), question]: a second
session in the same project reuses everything before its dynamic block.

Only the first user message is touched (later turns carry per-turn reminders, which must stay in
place so each turn's prefix extends the previous one), and only when it keeps some other text.
A block is agent context when its text starts with one of AGENT_BLOCK_STARTS; a string content is
searched for whole `<system-reminder>` ... `</system-reminder>` spans and a trailing
"# Environment" section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

AGENT_BLOCK_STARTS = ("<system-reminder>", "# Environment", "<env>")
GIT_STATUS = re.compile(r"^[ \t]*(?:gitStatus|git status)\s*:", re.IGNORECASE | re.MULTILINE)
BLOCK_CLOSE = re.compile(r"^[ \t]*</(?:system-reminder|env)>", re.MULTILINE)
REMINDER_SPAN = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
ENVIRONMENT_TAIL = re.compile(r"^# Environment\n.*\Z", re.DOTALL | re.MULTILINE)


@dataclass
class AgentContext:
    """`messages`: the conversation with the first user message's context blocks taken out; `system`: their
    texts (git status removed), for the system section; `dynamic`: each block's git status."""

    messages: list[dict]
    system: list[str] = field(default_factory=list)
    dynamic: list[str] = field(default_factory=list)


def split_agent_context(messages: list[dict]) -> AgentContext:
    """Take the agent context blocks out of the first user message (see the module docstring)."""
    index = next((i for i, message in enumerate(messages) if message.get("role") == "user"), None)
    if index is None:
        return AgentContext(list(messages))
    kept, blocks = split_content(messages[index].get("content"))
    if not blocks or kept is None:
        return AgentContext(list(messages))
    context = AgentContext([*messages[:index], {**messages[index], "content": kept}, *messages[index + 1:]])
    for block in blocks:
        static, git_status = split_git_status(block)
        context.system.append(static)
        if git_status:
            context.dynamic.append(git_status)
    return context


def split_content(content: object) -> tuple[object, list[str]]:
    """(the content without its context blocks, the blocks' texts); kept is None when nothing else is left."""
    if isinstance(content, list):
        blocks = [part["text"] for part in content if is_text(part) and is_agent_block(part["text"])]
        kept = [part for part in content if not (is_text(part) and is_agent_block(part["text"]))]
        has_text = any(is_text(part) and part["text"].strip() for part in kept)
        return (kept if has_text else None), blocks
    if isinstance(content, str):
        blocks = [match.group() for match in REMINDER_SPAN.finditer(content)]
        rest = REMINDER_SPAN.sub("", content)
        tail = ENVIRONMENT_TAIL.search(rest)
        if tail is not None:
            blocks.append(tail.group())
            rest = rest[:tail.start()]
        return (rest.strip() or None), blocks
    return content, []


def is_text(part: object) -> bool:
    return isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)


def is_agent_block(text: str) -> bool:
    return text.lstrip().startswith(AGENT_BLOCK_STARTS)


def split_git_status(block: str) -> tuple[str, str]:
    """(the block without its git status, the git status): from a `gitStatus:` line to the block's closing
    tag (or its end)."""
    start = GIT_STATUS.search(block)
    if start is None:
        return block, ""
    close = BLOCK_CLOSE.search(block, start.start())
    end = close.start() if close is not None else len(block)
    return block[:start.start()] + block[end:], block[start.start():end].strip()
