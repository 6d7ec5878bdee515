"""CacheDiagnosis: why a request's prompt missed the cache against the caller's previous request.

The one classification every wire format renders (diagnosis_render.py) and the doctor and dashboard
name causes with (REASONS; doctor/fixes.py maps its codes onto it). `classify(previous, current)`
compares two fingerprints (prompt_fingerprint.py) structurally; `CacheDiagnosis.with_cached` adds
the engine's figure once the request ran. Reasons, first match wins:

    cold_start         no previous request of this caller (or the named one is unknown: previous_not_found)
    model_changed      the previous request ran on another model (its cache is another model's)
    cache_domain       same caller, another cache domain (cache salt, prompt_cache_key, cache group)
    template_changed   another canonical template (name@version) rendered the prompt
    system_changed / tools_changed / messages_changed
                       the first canonical section that differs (Anthropic's three: context and
                       earlier messages are "messages"; messages only appended are no change)
    dynamic_content    that section differs only in sentences the dynamic rules recognize (a date,
                       a uuid, ...), or (raw order) only the hoisted dynamic sentences moved
    section_order      same canonical sections, yet the raw order (tools, roles, whitespace) moved
    evicted            the prefix matched as before, but the engine read fewer tokens than the
                       previous request had left in the cache
    hit                nothing the previous request left reusable was lost

With canonicalization on, a raw reorder or a dynamic sentence does not break the served prefix:
the diagnosis still names it (section_order / dynamic_content) with `is_miss` False ("the
canonicalizer fixed it"). Token figures are page-aligned, as the engine's radix cache matches:

    expected_cached_tokens  leading tokens this prompt shares with the previous one (what the
                            engine should read, capped below the prompt's last token)
    reusable_tokens         what it could have read had nothing diverged (the previous prompt's
                            reusable part: everything before its dynamic block and question)
    cached_tokens           what the engine read (None until known)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from gateway.insight.prompt_fingerprint import common_pages

if TYPE_CHECKING:
    from gateway.insight.prompt_fingerprint import PromptFingerprint

REASONS = {
    "hit": "Prefix reused",
    "cold_start": "Cold start (no earlier request to reuse)",
    "previous_not_found": "Previous request unknown",
    "model_changed": "Model changed",
    "cache_domain": "Another cache domain (salt, cache key or cache group)",
    "template_changed": "Template changed",
    "system_changed": "System prompt changed",
    "tools_changed": "Tools changed",
    "messages_changed": "Earlier messages changed",
    "dynamic_content": "Dynamic content in the prefix",
    "section_order": "Inconsistent section order",
    "evicted": "Evicted before reuse",
}
SECTION_REASONS = {"system": "system_changed", "tools": "tools_changed", "context": "messages_changed",
                   "history": "messages_changed"}
NOT_A_MISS = ("hit", "previous_not_found")


@dataclass(frozen=True)
class CacheDiagnosis:
    """One request's diagnosis (see the module docstring). `section`: the canonical section where the
    prompts diverged (None when they did not, or the reason is not about a section)."""

    reason: str
    section: str | None
    expected_cached_tokens: int
    reusable_tokens: int
    is_miss: bool
    previous_id: str | None = None
    cached_tokens: int | None = None
    message: str = ""

    @property
    def missed_tokens(self) -> int:
        """Reusable tokens this request did not read (Anthropic's cache_missed_input_tokens)."""
        read = self.expected_cached_tokens if self.cached_tokens is None else self.cached_tokens
        return max(0, self.reusable_tokens - read)

    @property
    def log_reason(self) -> str | None:
        """The request log's `miss_cause` (at most 16 characters): the reason of a miss, None otherwise."""
        return self.reason if self.is_miss else None

    def with_cached(self, cached_tokens: int | None) -> CacheDiagnosis:
        """The diagnosis once the engine's cached figure is known: a prefix that matched but was read
        short is `evicted`."""
        if cached_tokens is None:
            return self
        diagnosis = replace(self, cached_tokens=cached_tokens)
        if not self.is_miss and self.reason != "previous_not_found" and cached_tokens < self.expected_cached_tokens:
            diagnosis = replace(diagnosis, reason="evicted", is_miss=True)
        return replace(diagnosis, message=describe(diagnosis))

    def to_dict(self) -> dict:
        return {**asdict(self), "missed_tokens": self.missed_tokens}


def classify(previous: PromptFingerprint | None, current: PromptFingerprint, *, page_size: int,
             named_previous: str | None = None) -> CacheDiagnosis:
    """Compare `current` with the caller's `previous` request (None: none known). `named_previous`:
    the id the client named (None: the caller's last request was used)."""
    if previous is None:
        reason = "previous_not_found" if named_previous else "cold_start"
        return finish(CacheDiagnosis(reason, None, 0, 0, reason == "cold_start", named_previous))
    shared = common_pages(previous.served_pages, current.served_pages) * page_size
    last = page_floor(current.num_tokens - 1, page_size)
    expected = min(shared, last)
    boundary = previous.boundary if current.canonicalized or continues(previous, current) else expected
    reusable = max(expected, min(page_floor(boundary, page_size), last))

    def made(reason: str, section: str | None, is_miss: bool = True) -> CacheDiagnosis:
        return finish(CacheDiagnosis(reason, section, expected, reusable, is_miss, previous.response_id))

    if previous.model != current.model:
        return made("model_changed", None)
    if previous.domain != current.domain:
        return made("cache_domain", None)
    if previous.template != current.template:
        return made("template_changed", "system")
    section, only_dynamic = first_divergence(previous, current)
    if section is not None:
        return made("dynamic_content" if only_dynamic else SECTION_REASONS[section], section)
    # The canonical sections match: what remains is the raw order, and the dynamic sentences (hoisted from
    # the system prompt) that the raw order keeps in place. They break a raw prompt; a canonical one they
    # leave whole, unless its served tokens still came apart before the boundary (then it is a miss too).
    is_miss = not current.canonicalized or expected < reusable
    if previous.sections["dynamic"] != current.sections["dynamic"]:
        return made("dynamic_content", "system", is_miss)
    if previous.order != current.order:
        return made("section_order", order_section(previous, current), is_miss)
    return made("section_order" if expected < reusable else "hit", None, expected < reusable)


def continues(previous: PromptFingerprint, current: PromptFingerprint) -> bool:
    """Whether `current` is the next turn of `previous`'s conversation (its question is now history)."""
    index = len(previous.history)
    return len(current.history) > index and current.history[index][0] == previous.question[0]


def first_divergence(previous: PromptFingerprint, current: PromptFingerprint) -> tuple[str | None, bool]:
    """The first canonical section (system, tools, context, history) that differs, and whether it differs
    only in dynamic content. History counts as unchanged when the earlier messages are kept and new ones
    only appended."""
    for name in ("system", "tools", "context"):
        if previous.sections[name] != current.sections[name]:
            static = f"static_{name}"
            return name, static in current.sections and previous.sections[static] == current.sections[static]
    for (full, static), (new_full, new_static) in zip(previous.history, current.history):
        if full != new_full:
            return "history", static == new_static
    if len(current.history) < len(previous.history):
        return "history", False
    return None, False


def order_section(previous: PromptFingerprint, current: PromptFingerprint) -> str:
    """Where the raw order moved: the tool list, else the messages."""
    return "tools" if previous.order[0] != current.order[0] else "history"


def page_floor(num_tokens: int, page_size: int) -> int:
    return max(0, num_tokens) // page_size * page_size


def finish(diagnosis: CacheDiagnosis) -> CacheDiagnosis:
    return replace(diagnosis, message=describe(diagnosis))


def describe(d: CacheDiagnosis) -> str:
    """One line a person can act on."""
    read = "" if d.cached_tokens is None else f"; read {d.cached_tokens} cached tokens"
    where = f" (section: {d.section})" if d.section else ""
    lost = f": {d.missed_tokens} of {d.reusable_tokens} reusable tokens not read{read}"
    text = {
        "hit": f"prefix reused: {d.expected_cached_tokens} tokens shared with the previous request{read}",
        "cold_start": "cold start: no earlier request of this caller to reuse",
        "previous_not_found": f"previous request {d.previous_id!r} is unknown here (expired or another caller's)",
        "model_changed": f"the model changed since the previous request{lost}",
        "cache_domain": f"the previous request ran in another cache domain (cache salt, key or group){lost}",
        "template_changed": f"another template rendered the prompt{lost}",
        "system_changed": f"the system prompt changed{lost}",
        "tools_changed": f"the tool list changed{lost}",
        "messages_changed": f"an earlier message or document changed{where}{lost}",
        "dynamic_content": f"dynamic content (a date, id, ...) differs in the prefix{where}",
        "section_order": f"the raw prompt's sections came in another order{where}",
        "evicted": f"the prefix matched but was evicted before reuse{lost}",
    }[d.reason]
    if d.reason in ("dynamic_content", "section_order"):
        text += lost if d.is_miss else f"; canonicalization kept the prefix ({d.expected_cached_tokens} tokens shared){read}"
    return text
