"""Bounds on what one template render may cost: time, output size, the size of every value it builds.

Jinja runs a template as Python, so a tenant's template could otherwise ask for
`3 ** (3 ** 15)`, `"x" * 10**9`, nested `range()` loops or a self-calling macro.
The sandbox (sandbox.py) routes every operation that can grow a value or run
long through the checks here *before* it computes:

- `**`, `*`, `+`, `%` (intercepted binary operators, which Jinja also never
  folds at compile time): an int result may have at most `max_int_bits` bits, a
  str/list/tuple result at most `max_value_len` items;
- `~` (concatenation), `join`, `replace`, `indent`, `format` and every other
  filter or call: an int argument is at most `max_value_len`, the known
  amplifiers are sized before they run, and any str/list result is at most
  `max_value_len` long;
- every `for` loop step, call, filter, attribute read and output piece checks
  the render's deadline (`timeout_s`), so a render ends within about the
  timeout whatever it loops over.
- the rendered text of all blocks together is at most `max_output_chars`.

Each violation raises TemplateLimitError (a TemplateError: HTTP 400). The checks
are cooperative: they run on the rendering thread, between Python operations
whose own cost the size bounds keep small.
"""

from __future__ import annotations

import contextvars
import re
import string
import time
from collections.abc import Iterable, Iterator, Sized
from contextlib import contextmanager
from dataclasses import dataclass

from gateway.prompt_templates.errors import TemplateError

FORMAT_WIDTH = re.compile(r"%[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")


class TemplateLimitError(TemplateError):
    """A render (or compile) went past one of its TemplateLimits."""


@dataclass(frozen=True)
class TemplateLimits:
    """Per-render bounds; the defaults are the settings' defaults (gateway.settings.LimitSettings)."""

    timeout_s: float = 0.5
    max_output_chars: int = 1_000_000
    max_value_len: int = 1_000_000
    max_int_bits: int = 4096
    max_source_chars: int = 200_000


@dataclass
class Budget:
    limits: TemplateLimits
    deadline: float

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise TemplateLimitError(f"render took longer than {self.limits.timeout_s:g} s")


_BUDGET: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("template_budget", default=None)


@contextmanager
def budget(limits: TemplateLimits) -> Iterator[Budget]:
    """Run the block under a fresh deadline of `limits.timeout_s` (per thread/context)."""
    current = Budget(limits, time.monotonic() + limits.timeout_s)
    token = _BUDGET.set(current)
    try:
        yield current
    finally:
        _BUDGET.reset(token)


def tick() -> None:
    """Raise TemplateLimitError if the current render is past its deadline (no-op outside a render)."""
    current = _BUDGET.get()
    if current is not None:
        current.tick()


def check_len(size: int, limits: TemplateLimits, what: str) -> None:
    if size > limits.max_value_len:
        raise TemplateLimitError(f"{what} would be {size} long; the limit is {limits.max_value_len}")


def check_result(value, limits: TemplateLimits, what: str):
    """`value` if its size is within bounds (raises TemplateLimitError otherwise)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if value.bit_length() > limits.max_int_bits:
            raise TemplateLimitError(f"{what} gives an integer of {value.bit_length()} bits; the limit is {limits.max_int_bits}")
    elif isinstance(value, (str, list, tuple, dict, set)):
        check_len(len(value), limits, what)
    return value


def int_bits(value) -> int:
    return abs(int(value)).bit_length() if isinstance(value, int) else 0


def check_binop(operator: str, left, right, limits: TemplateLimits) -> None:
    """Refuse `left <operator> right` if its result would pass the bounds (checked before computing)."""
    tick()
    if operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
        bits = right * max(int_bits(left) - 1, 1)
        if bits > limits.max_int_bits:
            raise TemplateLimitError(f"{left} ** {right} would have about {bits} bits; the limit is {limits.max_int_bits}")
    elif operator == "*":
        if isinstance(left, int) and isinstance(right, int):
            if int_bits(left) + int_bits(right) > limits.max_int_bits:
                raise TemplateLimitError(f"a product of {int_bits(left)}- and {int_bits(right)}-bit integers is too large")
        elif isinstance(left, Sized) and isinstance(right, int):
            check_len(len(left) * max(right, 0), limits, "a repeated value")
        elif isinstance(right, Sized) and isinstance(left, int):
            check_len(len(right) * max(left, 0), limits, "a repeated value")
    elif operator == "+" and isinstance(left, Sized) and isinstance(right, Sized):
        check_len(len(left) + len(right), limits, "a sum")
    elif operator == "%" and isinstance(left, str):
        check_percent_format(left, right, limits)


def check_percent_format(fmt: str, args, limits: TemplateLimits) -> None:
    """A `fmt % args` may pad each field to at most max_value_len characters."""
    for width, precision in FORMAT_WIDTH.findall(fmt):
        for number in (width, precision):
            if number == "*":
                raise TemplateLimitError("'*' widths are not allowed in templates")
            if number and int(number) > limits.max_value_len:
                raise TemplateLimitError(f"a format width of {number} passes the limit of {limits.max_value_len}")


def check_brace_format(fmt: str, limits: TemplateLimits) -> None:
    """A `fmt.format(...)` may pad each field to at most max_value_len characters."""
    try:
        fields = list(string.Formatter().parse(fmt))
    except ValueError as exc:
        raise TemplateLimitError(f"bad format string: {exc}") from exc
    for _, _, spec, _ in fields:
        for number in re.findall(r"\d+", spec or ""):
            if int(number) > limits.max_value_len:
                raise TemplateLimitError(f"a format width of {number} passes the limit of {limits.max_value_len}")


def check_arguments(args: Iterable, limits: TemplateLimits, what: str) -> None:
    """Int arguments (widths, counts) may be at most max_value_len."""
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool) and abs(arg) > limits.max_value_len:
            raise TemplateLimitError(f"{what} got the argument {arg}; arguments are limited to {limits.max_value_len}")


def total_len(items) -> int:
    return sum(len(item) if isinstance(item, str) else len(str(item)) for item in items)


def check_amplifier(name: str, value, args: tuple, kwargs: dict, limits: TemplateLimits) -> None:
    """Size the known output amplifiers (`join`, `replace`, `indent`, `format`) before they run."""
    if name == "join" and isinstance(value, (list, tuple)):
        separator = args[0] if args else kwargs.get("d", "")
        check_len(total_len(value) + len(str(separator)) * len(value), limits, "a joined string")
    elif name == "replace" and isinstance(value, str) and len(args) >= 2:
        old, new = str(args[0]), str(args[1])
        count = value.count(old) if old else len(value) + 1
        check_len(len(value) + count * max(len(new) - len(old), 0), limits, "a replaced string")
    elif name == "indent" and isinstance(value, str):
        width = args[0] if args else kwargs.get("width", 4)
        per_line = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        check_len(len(value) + (value.count("\n") + 1) * max(per_line, 0), limits, "an indented string")
    elif name == "format" and isinstance(value, str):
        check_percent_format(value, args, limits)


def bounded_iter(iterable, limits: TemplateLimits) -> Iterator:
    """`iterable` with the render's deadline checked at every step (wraps every `for` loop)."""
    for item in iterable:
        tick()
        yield item


def bounded_concat(parts: list, limits: TemplateLimits) -> str:
    """`a ~ b ~ ...` as one str, refused before joining if it would pass max_value_len."""
    tick()
    texts = [part if isinstance(part, str) else str(part) for part in parts]
    check_len(sum(map(len, texts)), limits, "a concatenation")
    return "".join(texts)
