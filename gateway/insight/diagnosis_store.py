"""DiagnosisStore: the bounded memory of each caller's previous request, and the diagnosis against it.

    diagnosis = store.diagnose(fingerprint, named_previous)   # at prepare time, before it runs
    store.remember(fingerprint)                               # once the engine has its first output

Which previous request: the one the client names (a response id: `diagnostics.previous_message_id`,
`prompt_cache_options.comparison_response_id`) if the store holds it and it is the same tenant's;
else the tenant's last request of the same session (route key: prompt_cache_key, a Responses chain)
in the same cache domain; else its last in that domain; else its last in any domain (so a model, salt
or cache-group change is named as such). Another tenant's request is never
compared against: a diagnosis must not tell a tenant what another sent (tenants/isolation.py).

Bounded: at most `max_records` fingerprints by response id and as many per-caller pointers, LRU;
fingerprints hold hashes and counts only. Thread-safe (one lock; each call is a few dict lookups,
the comparison runs outside it).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Hashable

from gateway.insight.cache_diagnosis import CacheDiagnosis, classify

if TYPE_CHECKING:
    from gateway.insight.prompt_fingerprint import PromptFingerprint


class DiagnosisStore:
    def __init__(self, page_size: int, max_records: int = 2048) -> None:
        if page_size < 1 or max_records < 1:
            raise ValueError("need page_size >= 1 and max_records >= 1")
        self.page_size = page_size
        self.max_records = max_records
        self._by_id: OrderedDict[str, PromptFingerprint] = OrderedDict()
        self._last: OrderedDict[Hashable, PromptFingerprint] = OrderedDict()  # (tenant, domain) and tenant
        self._lock = threading.Lock()

    def previous(self, current: PromptFingerprint, named_previous: str | None = None) -> PromptFingerprint | None:
        """The request `current` is compared against (see the module docstring)."""
        with self._lock:
            if named_previous:
                found = self._by_id.get(named_previous)
                return found if found is not None and found.tenant_id == current.tenant_id else None
            keys = [(current.tenant_id, current.domain), current.tenant_id]
            if current.route_key:
                keys.insert(0, (current.tenant_id, current.domain, current.route_key))
            return next((self._last[key] for key in keys if key in self._last), None)

    def diagnose(self, current: PromptFingerprint, named_previous: str | None = None) -> CacheDiagnosis:
        """Classify `current` against its previous request (nothing is recorded)."""
        previous = self.previous(current, named_previous)
        return classify(previous, current, page_size=self.page_size, named_previous=named_previous)

    def remember(self, fingerprint: PromptFingerprint) -> None:
        """Make `fingerprint` its caller's previous request and findable by its response id."""
        with self._lock:
            put(self._by_id, fingerprint.response_id, fingerprint, self.max_records)
            put(self._last, (fingerprint.tenant_id, fingerprint.domain), fingerprint, self.max_records)
            if fingerprint.route_key:
                put(self._last, (fingerprint.tenant_id, fingerprint.domain, fingerprint.route_key), fingerprint,
                    self.max_records)
            put(self._last, fingerprint.tenant_id, fingerprint, self.max_records)


def put(table: OrderedDict, key: Hashable, value, limit: int) -> None:
    table[key] = value
    table.move_to_end(key)
    while len(table) > limit:
        table.popitem(last=False)
