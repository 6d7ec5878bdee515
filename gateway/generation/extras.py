"""radixgate's own request fields, the same in every wire format: `template` (a tenant template reference
or a built-in name), `context` (retrieved documents: strings or {"id", "text"}) and `canonicalize`
(default true). Chat completions declares them on its body; other wire formats read them from the
body's extra fields through RadixgateExtras.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from gateway.errors import bad_request


class ContextDoc(BaseModel):
    id: str | None = None
    text: str


class RadixgateExtras(BaseModel):
    model_config = ConfigDict(extra="ignore")

    template: str | None = None
    context: list[str | ContextDoc] | None = None
    canonicalize: bool = True

    @classmethod
    def read(cls, extra: dict[str, Any] | None) -> RadixgateExtras:
        """The extras among a body's unknown fields; 400 naming the field when one is malformed."""
        try:
            return cls.model_validate(extra or {})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise bad_request(f"{where}: {first['msg']}", where) from exc

    def context_docs(self) -> tuple:
        """The documents as the canonicalizer reads them (strings, or dicts without unset ids)."""
        return tuple(doc if isinstance(doc, str) else doc.model_dump(exclude_none=True) for doc in self.context or ())
