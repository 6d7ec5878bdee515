"""A Claude-Code-like request (our own plausible text, in the layout Claude Code sends), for prefix-stability tests.

Layout, as captured from Claude Code 2.1 (issue 44): two system text blocks (the billing header line, then
the identity line), 21 tools, then one user message of three text blocks: a `<system-reminder>` (CLAUDE.md,
today's date), the question, and a "# Environment" block (working directory, git repository, platform,
OS version, today's date, standing instructions, the git status). `messages_body(...)` is the Anthropic
Messages body; `chat_body(...)` the same request in the internal (OpenAI chat) form the canonicalizer reads:
system blocks -> one system message of text parts, tools -> function tools, user blocks -> text parts.

Between two sessions of one project, what differs is `Session`: the billing header's version hash, the
date, the git status (and the question).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

PROJECT = "/home/dev/projects/inventory"
IDENTITY = "You are Claude Code, Anthropic's official CLI for Claude."


@dataclass(frozen=True)
class Session:
    version_hash: str
    date: str  # YYYY-MM-DD
    changed_files: tuple[str, ...]
    last_commit: str
    question: str


FIRST = Session("a3f", "2026-12-07", ("M src/stock.py", "?? notes.md"), "4f2a9c1 Fix rounding in stock totals",
                "What is 2+2?")
SECOND = Session("9c1", "2026-12-08", ("M src/orders.py",), "b71e0d4 Add the reorder threshold",
                 "List the failing tests in tests/test_stock.py.")


def tool(name: str, summary: str, **properties: str) -> dict:
    schema = {"type": "object", "properties": {key: {"type": "string", "description": text}
                                               for key, text in properties.items()},
              "required": list(properties)[:1], "additionalProperties": False}
    return {"name": name, "description": summary, "input_schema": schema}


TOOLS = [
    tool("Task", "Launch a new agent to handle complex, multi-step tasks autonomously. Use it for open-ended "
         "searches across the codebase when you are not confident you will find the right match in the first "
         "few tries. Give the agent a detailed task description and say what it should return.",
         description="A short (3-5 word) description of the task", prompt="The task for the agent to perform",
         subagent_type="The type of specialized agent to use for this task"),
    tool("Bash", "Executes a given bash command in a persistent shell session with an optional timeout. Quote "
         "paths that contain spaces. Avoid find and grep: use the Glob and Grep tools. Prefer absolute paths "
         "and avoid cd. When running several independent commands, send them in one message.",
         command="The command to execute", timeout="Optional timeout in milliseconds (max 600000)",
         description="Clear, concise description of what this command does in 5-10 words"),
    tool("Glob", "Fast file pattern matching that works with any codebase size. Supports glob patterns like "
         "**/*.py or src/**/*.ts and returns matching file paths sorted by modification time.",
         pattern="The glob pattern to match files against", path="The directory to search in"),
    tool("Grep", "A powerful search tool built on ripgrep. Supports full regex syntax, filters files with a "
         "glob or a type, and has output modes for matching lines, file paths or counts.",
         pattern="The regular expression pattern to search for", path="File or directory to search in",
         glob="Glob pattern to filter files", output_mode="content, files_with_matches or count"),
    tool("LS", "Lists files and directories in a given path. The path must be absolute. You can ignore "
         "patterns with the ignore parameter. Prefer Glob and Grep when you know what to look for.",
         path="The absolute path to the directory to list", ignore="List of glob patterns to ignore"),
    tool("ExitPlanMode", "Use this tool when you are in plan mode and have finished presenting your plan and "
         "are ready to code. It prompts the user to exit plan mode.", plan="The plan you came up with"),
    tool("Read", "Reads a file from the local filesystem. The file_path must be absolute. By default it reads "
         "up to 2000 lines from the start; you can give a line offset and a limit for long files. Lines are "
         "returned with their numbers, starting at 1.",
         file_path="The absolute path to the file to read", offset="The line number to start reading from",
         limit="The number of lines to read"),
    tool("Edit", "Performs exact string replacements in files. You must read the file first. The edit fails "
         "when old_string is not unique in the file: give more surrounding context or use replace_all.",
         file_path="The absolute path to the file to modify", old_string="The text to replace",
         new_string="The text to replace it with", replace_all="Replace all occurrences of old_string"),
    tool("MultiEdit", "Makes several edits to a single file in one operation, applied in sequence. All edits "
         "must be valid for the operation to succeed; none is applied otherwise.",
         file_path="The absolute path to the file to modify", edits="Array of edit operations"),
    tool("Write", "Writes a file to the local filesystem, overwriting an existing file. Read an existing file "
         "before overwriting it. Prefer editing existing files; never create documentation unasked.",
         file_path="The absolute path to the file to write", content="The content to write to the file"),
    tool("NotebookEdit", "Completely replaces the contents of a specific cell in a Jupyter notebook. Cell "
         "numbers are 0-indexed. Use edit_mode insert to add a cell and delete to remove one.",
         notebook_path="The absolute path to the notebook", cell_id="The ID of the cell to edit",
         new_source="The new source for the cell", edit_mode="replace, insert or delete"),
    tool("WebFetch", "Fetches content from a URL and processes it with a prompt, returning the model's "
         "answer about the content. HTTP URLs are upgraded to HTTPS. Results are cached for 15 minutes.",
         url="The URL to fetch content from", prompt="The prompt to run on the fetched content"),
    tool("TodoWrite", "Create and manage a structured task list for your current coding session. It helps "
         "you track progress, organize complex tasks and show the user how far along you are. Mark each "
         "task completed as soon as it is done; keep exactly one task in progress at a time.",
         todos="The updated todo list"),
    tool("WebSearch", "Searches the web and uses the results to inform responses. Provides up-to-date "
         "information for current events and recent data. Domain filters narrow the results.",
         query="The search query to use", allowed_domains="Only include results from these domains"),
    tool("BashOutput", "Retrieves output from a running or completed background bash shell. Returns only new "
         "output since the last check, with the shell's status.",
         bash_id="The ID of the background shell", filter="Optional regular expression to filter lines"),
    tool("KillShell", "Kills a running background bash shell by its ID and returns a success or failure "
         "status.", shell_id="The ID of the background shell to kill"),
    tool("SlashCommand", "Execute a slash command within the main conversation. Only custom slash commands "
         "listed as available can be run this way.", command="The slash command to execute with its arguments"),
    tool("Skill", "Execute a skill within the main conversation. Skills provide specialized capabilities and "
         "domain knowledge; invoke one only when it is listed as available.", command="The skill name"),
    tool("AskUserQuestion", "Ask the user questions during execution to gather preferences, clarify "
         "ambiguous instructions or get decisions on implementation choices. Offer two to four options.",
         questions="The questions to ask the user"),
    tool("ListMcpResources", "Lists available resources from configured MCP servers. Each resource carries "
         "the name of the server it comes from.", server="Optional server name to filter resources by"),
    tool("ReadMcpResource", "Reads a specific resource from an MCP server, identified by server name and "
         "resource URI.", server="The MCP server name", uri="The resource URI to read"),
]

CLAUDE_MD = """# Inventory service
- Python 3.11, FastAPI, SQLAlchemy 2; the package lives in src/inventory.
- Run the tests with `make test`; a single test with `pytest tests/test_stock.py -k name`.
- Format with `ruff format` and lint with `ruff check` before committing.
- Stock quantities are integers; money is Decimal with two places, never float.
- Every endpoint has a test in tests/ named after its route."""

INSTRUCTIONS = """You are an interactive CLI tool that helps users with software engineering tasks. Use the instructions below and the tools available to you to assist the user.

# Tone and style
You should be concise, direct, and to the point. Your output is displayed on a command line interface, so keep responses short and use GitHub-flavored markdown. Only use tools to complete tasks, never to communicate with the user. Do not add a preamble or a postamble unless the user asks for one.

# Proactiveness
You are allowed to be proactive, but only when the user asks you to do something. Do the right thing when asked, including follow-up actions, and do not surprise the user with actions you take without asking.

# Following conventions
When making changes to files, first understand the file's code conventions. Mimic code style, use existing libraries and utilities, and follow existing patterns. Never assume that a library is available: check that the codebase already uses it. Always follow security best practices and never expose or log secrets and keys.

# Task management
Use the TodoWrite tool to plan and track tasks. Mark todos as completed as soon as you are done with a task; do not batch up several tasks before marking them as completed.

# Doing tasks
Search the codebase to understand it, implement the solution with the tools available, verify it with the project's tests, and run the lint and typecheck commands if they were provided. Never commit changes unless the user explicitly asks you to.

# Tool usage policy
When doing a file search, prefer the Task tool to reduce context usage. You can call several tools in a single response: when independent pieces of information are requested, batch your tool calls together for optimal performance."""


def reminder(session: Session) -> str:
    return (f"<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
            f"# claudeMd\nCodebase and user instructions are shown below. Be sure to adhere to these instructions.\n\n"
            f"Contents of {PROJECT}/CLAUDE.md (project instructions, checked into the codebase):\n\n{CLAUDE_MD}\n\n"
            f"# currentDate\nToday's date is {session.date}.\n\n"
            "      IMPORTANT: this context may or may not be relevant to your tasks. You should not respond to this "
            "context unless it is highly relevant to your task.\n</system-reminder>")


def environment(session: Session) -> str:
    status = "\n".join(session.changed_files)
    return (f"# Environment\nYou have been invoked in the following environment: \n"
            f" - Primary working directory: {PROJECT}\n - Is a git repository: true\n - Platform: linux\n"
            f" - OS Version: Linux 6.8.0-49-generic\n - Today's date: {session.date}\n"
            f" - You are powered by the model named qwen2.5-coder-1.5b.\n\n{INSTRUCTIONS}\n\n"
            "gitStatus: This is the git status at the start of the conversation. Note that this status is a "
            "snapshot in time, and will not update during the conversation.\nCurrent branch: main\n\n"
            f"Main branch (you will usually use this for PRs): main\n\nStatus:\n{status}\n\n"
            f"Recent commits:\n{session.last_commit}\n2c9d8e7 Split the stock module\n91aa3f0 Initial import")


def billing_header(session: Session) -> str:
    return f"x-anthropic-billing-header: cc_version=2.1.337.{session.version_hash}; cc_entrypoint=sdk-py;"


def messages_body(session: Session, model: str = "claude-sonnet-4-5") -> dict:
    """The Anthropic Messages body of one session's first turn."""
    user = [{"type": "text", "text": reminder(session)}, {"type": "text", "text": session.question},
            {"type": "text", "text": environment(session), "cache_control": {"type": "ephemeral"}}]
    return {
        "model": model, "max_tokens": 32000, "stream": True,
        "system": [{"type": "text", "text": billing_header(session)},
                   {"type": "text", "text": IDENTITY, "cache_control": {"type": "ephemeral"}}],
        "tools": TOOLS, "messages": [{"role": "user", "content": user}],
        "thinking": {"type": "adaptive"}, "metadata": {"user_id": '{"device_id": "d1", "session_id": "s1"}'},
    }


def chat_body(session: Session, model: str = "default") -> dict:
    """The same first turn in the internal chat form (text parts, function tools)."""
    body = messages_body(session)
    text_parts = [[{"type": "text", "text": block["text"]} for block in blocks]
                  for blocks in (body["system"], body["messages"][0]["content"])]
    tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                               "parameters": t["input_schema"]}} for t in body["tools"]]
    return {"model": model, "messages": [{"role": "system", "content": text_parts[0]},
                                         {"role": "user", "content": text_parts[1]}], "tools": tools}


def moved_lines(first: str, second: str) -> tuple[list[str], list[str]]:
    """(lines only in `first`, lines only in `second`) of two renderings of one block, by a line diff."""
    diff = list(difflib.ndiff(first.split("\n"), second.split("\n")))
    return [line[2:] for line in diff if line.startswith("- ")], [line[2:] for line in diff if line.startswith("+ ")]
