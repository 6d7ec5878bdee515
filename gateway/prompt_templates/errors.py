"""TemplateError: the one exception a template's compile or render raises (HTTP 400)."""

from __future__ import annotations


class TemplateError(ValueError):
    """A template failed to compile or render; the message names the template and, where known, the line."""
