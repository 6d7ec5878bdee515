"""Prompt templates: registry of built-in and tenant templates, sandboxed rendering, linting.

    from gateway.prompt_templates import TemplateRegistry, RenderedPrompt, LintFinding, lint_template
"""

from gateway.prompt_templates.chat_format import ChatFormat, chatml_format, derive_chat_format
from gateway.prompt_templates.lint import LintFinding, lint_template
from gateway.prompt_templates.registry import TemplateNotFound, TemplateRegistry
from gateway.prompt_templates.render import RenderedPrompt
from gateway.prompt_templates.bounds import TemplateLimitError, TemplateLimits
from gateway.prompt_templates.errors import TemplateError

__all__ = [
    "ChatFormat",
    "LintFinding",
    "RenderedPrompt",
    "TemplateError",
    "TemplateLimitError",
    "TemplateLimits",
    "TemplateNotFound",
    "TemplateRegistry",
    "chatml_format",
    "derive_chat_format",
    "lint_template",
]
