"""TemplateRegistry: built-in templates from templates/*.j2 and tenant sources, rendered in the sandbox.

The registry owns one sandboxed environment, the compiled templates (by source)
and the chat format derived per tokenizer; it holds no tenant data — tenant
sources come from the database on each call.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from gateway.canonicalize.canonicalizer import canonicalize
from gateway.canonicalize.dynamic import DynamicRules
from gateway.canonicalize.sections import STATIC_SECTIONS, Sections
from gateway.prompt_templates.chat_format import ChatFormat, derive_chat_format
from gateway.prompt_templates.render import RenderedPrompt, render_sections
from gateway.prompt_templates.bounds import TemplateLimits
from gateway.prompt_templates.errors import TemplateError
from gateway.prompt_templates.sandbox import compile_template, make_environment

DEFAULT_BUILTIN_DIR = Path(__file__).resolve().parents[2] / "templates"
MAX_COMPILED = 256


class TemplateNotFound(KeyError):
    """No built-in template by that name (and no tenant source given)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "template not found"


class TemplateRegistry:
    """Built-in templates by name, tenant templates by source; see module docstring."""

    def __init__(self, builtin_dir: Path | str | None = None, limits: TemplateLimits | None = None):
        self.builtin_dir = Path(builtin_dir) if builtin_dir is not None else DEFAULT_BUILTIN_DIR
        if not self.builtin_dir.is_dir():
            raise FileNotFoundError(f"built-in templates folder not found: {self.builtin_dir}")
        self._builtins = {path.stem: path.read_text() for path in sorted(self.builtin_dir.glob("*.j2"))}
        self.limits = limits or TemplateLimits()
        self._env = make_environment(self.limits)
        self._compiled: dict[str, object] = {}
        self._formats: dict[int, tuple[object, ChatFormat]] = {}

    def names(self) -> list[str]:
        return sorted(self._builtins)

    def get_builtin(self, name: str) -> str:
        """Source of a built-in template; unknown names raise TemplateNotFound."""
        if name not in self._builtins:
            raise TemplateNotFound(f"unknown template {name!r}; built-in templates: {', '.join(self.names())}")
        return self._builtins[name]

    def choose_builtin(self, sections: Sections) -> str:
        """'agent' when tools are present, else 'rag' when documents are, else 'chat'."""
        if sections.tools:
            return "agent"
        return "rag" if sections.context else "chat"

    def render(self, name_or_source: str, sections: Sections, *, tokenizer, tenant_source: str | None = None,
               version: int | None = None) -> RenderedPrompt:
        """Render `sections` into segments in the model's chat format.

        With tenant_source, that source renders under the name `name_or_source`;
        otherwise a built-in name, or an inline template source (anything with a
        Jinja tag), renders. Raises TemplateNotFound or TemplateError.
        """
        name, source = self.resolve(name_or_source, tenant_source)
        template = self.compile(source, name)
        return render_sections(template, sections, self.chat_format(tokenizer), name, version)

    def render_static_prefix(self, name: str | None, system: str, tools: list | None, context: list | None, tokenizer,
                             *, rules: DynamicRules | None = None, tenant_source: str | None = None) -> RenderedPrompt:
        """Only the static segments (system, tools, context) that a request with this
        system prompt, tools and documents starts with — what a pin prefills.
        The system text goes through the same normalization and dynamic hoisting."""
        body = {"messages": [{"role": "system", "content": system}], "tools": tools, "context": context}
        sections = canonicalize(body, rules)
        sections.dynamic = []
        rendered = self.render(name or self.choose_builtin(sections), sections, tokenizer=tokenizer,
                               tenant_source=tenant_source)
        rendered.segments = leading_static(rendered.segments)
        return rendered

    def resolve(self, name_or_source: str, tenant_source: str | None) -> tuple[str, str]:
        if tenant_source is not None:
            return name_or_source, tenant_source
        if name_or_source in self._builtins:
            return name_or_source, self._builtins[name_or_source]
        if "{%" in name_or_source or "{{" in name_or_source:
            return "inline", name_or_source
        return name_or_source, self.get_builtin(name_or_source)

    def compile(self, source: str, name: str):
        """Compiled template for `source` (cached by content; TemplateError on bad source)."""
        key = hashlib.sha256(source.encode("utf-8")).hexdigest()
        if key not in self._compiled:
            if len(self._compiled) >= MAX_COMPILED:
                self._compiled.clear()
            self._compiled[key] = compile_template(self._env, source, name)
        return self._compiled[key]

    def chat_format(self, tokenizer) -> ChatFormat:
        """The tokenizer's chat markers, derived once per tokenizer object."""
        entry = self._formats.get(id(tokenizer))
        if entry is None or entry[0] is not tokenizer:
            entry = (tokenizer, derive_chat_format(tokenizer))
            self._formats[id(tokenizer)] = entry
        return entry[1]


def leading_static(segments: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The leading run of segments whose names are static sections."""
    static = []
    for name, text in segments:
        if name not in STATIC_SECTIONS:
            break
        static.append((name, text))
    return static


__all__ = ["TemplateError", "TemplateNotFound", "TemplateRegistry", "leading_static"]
