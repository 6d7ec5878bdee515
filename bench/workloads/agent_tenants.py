"""The three tenants of the generated agent/RAG workload: system prompts, tools, style mixes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TenantSpec:
    name: str
    system: str
    tools: tuple[dict, ...]
    # weights over agent.STYLES, in order: clean, dynamic-top, context-first, context-in-user,
    # tools-shuffled, personalized, whitespace
    style_weights: tuple[int, ...]


def function_tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
    parameters = {"type": "object", "properties": properties, "required": required}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


SUPPORT = TenantSpec(
    name="acme-support",
    system=(
        "You are the support assistant of Nimbus Storage, a cloud object-storage provider. Answer questions "
        "about buckets, lifecycle rules, billing and network access. Keep answers short and exact. When an "
        "answer depends on a customer's account, call a tool rather than guessing. Never disclose internal "
        "notes or other customers' data. If the retrieved documents do not cover the question, say so and "
        "offer to open a ticket. Put configuration keys and error messages in code formatting. Treat outages, "
        "data loss and suspected breaches as urgent: open a ticket with priority 'urgent' at once. Credits "
        "above 300 EUR need a manager's approval; explain that and open a ticket. Reply in the customer's language."
    ),
    tools=(
        function_tool("get_account", "Look up a customer's account by id.",
                      {"account_id": {"type": "string", "description": "Account id such as NS-0042"}}, ["account_id"]),
        function_tool("list_invoices", "List an account's invoices, newest first.",
                      {"account_id": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 24}},
                      ["account_id"]),
        function_tool("open_ticket", "Open a ticket for the human support team.",
                      {"summary": {"type": "string"}, "priority": {"type": "string", "enum": ["low", "normal", "urgent"]}},
                      ["summary", "priority"]),
        function_tool("region_status", "Current health of a storage region.",
                      {"region": {"type": "string", "enum": ["eu-1", "eu-2", "us-1", "us-2", "ap-1"]}}, ["region"]),
    ),
    style_weights=(52, 9, 7, 6, 9, 8, 10),
)

LEGAL = TenantSpec(
    name="lexbase",
    system=(
        "You are a research assistant for commercial-contract lawyers. Read the retrieved passages and answer "
        "questions about obligations, termination, liability limits, indemnities and governing law. Cite the "
        "identifier of every passage you rely on in square brackets. You do not give legal advice: report what "
        "the text says and point out ambiguities. Where two passages conflict, quote both and say which prevails "
        "under any order-of-precedence clause. Stay under two hundred words unless asked for a memo, and use "
        "defined terms with the capitalization the document uses."
    ),
    tools=(
        function_tool("get_passage", "Fetch the full text of a passage by id.",
                      {"passage_id": {"type": "string"}, "document_id": {"type": "string"}}, ["passage_id", "document_id"]),
        function_tool("search_documents", "Full-text search over the matter's documents.",
                      {"query": {"type": "string"}, "top_k": {"type": "integer", "default": 5}}, ["query"]),
    ),
    style_weights=(6, 8, 8, 49, 10, 7, 7),
)

CODING = TenantSpec(
    name="devpilot",
    system=(
        "You are a coding agent working in a Python repository. You can read files, search code, run the test "
        "suite and propose patches through the tools you are given. Reason carefully but show only the final "
        "answer and your tool calls. Prefer the standard library, follow the style of the surrounding code, and "
        "keep changes minimal. Never edit files outside the repository or run commands that touch the network. "
        "When documentation is retrieved for you, ground your answer in it and name the function you rely on."
    ),
    tools=(
        function_tool("read_file", "Read a file of the repository.", {"path": {"type": "string"}}, ["path"]),
        function_tool("search_code", "Search the repository for a regular expression.",
                      {"pattern": {"type": "string"}, "glob": {"type": "string"}}, ["pattern"]),
        function_tool("run_tests", "Run the test suite or a subset of it.",
                      {"selector": {"type": "string"}, "timeout_s": {"type": "integer"}}, []),
        function_tool("apply_patch", "Apply a unified diff to the repository.", {"diff": {"type": "string"}}, ["diff"]),
        function_tool("list_dir", "List a directory of the repository.", {"path": {"type": "string"}}, ["path"]),
    ),
    style_weights=(10, 16, 5, 8, 8, 3, 54),
)

TENANTS = (SUPPORT, LEGAL, CODING)
