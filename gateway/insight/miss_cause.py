"""MissAttributor: which canonical section broke a request's cache hit.

For each tenant it remembers, as a set of section-hash prefixes, the requests seen before. A new
request's "most similar earlier request" is the one sharing the longest run of equal sections in
canonical order [system, tools, context, history, dynamic, question]; the cause is the first
section after that run. So "system" means no earlier request had this system prompt, "context"
means an earlier request matched system and tools but not the documents, and "question" means
only the question was new (the expected, unavoidable miss). None: the tenant's first request,
or an exact repeat (full hit).

Bounded and cheap: per tenant an LRU of at most `max_prefixes_per_tenant` prefixes, at most
`max_tenants` tenants; each call is six dict lookups. Prefixes are refreshed longest first, so a
shorter prefix is never evicted while a longer one that extends it is kept (the set stays closed
under prefixes, which makes the first-miss scan exact).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping

SECTION_ORDER = ("system", "tools", "context", "history", "dynamic", "question")


class MissAttributor:
    def __init__(self, max_prefixes_per_tenant: int = 8192, max_tenants: int = 10_000) -> None:
        if max_prefixes_per_tenant < len(SECTION_ORDER) or max_tenants < 1:
            raise ValueError(f"need max_prefixes_per_tenant >= {len(SECTION_ORDER)} and max_tenants >= 1")
        self.max_prefixes_per_tenant = max_prefixes_per_tenant
        self.max_tenants = max_tenants
        self._tenants: OrderedDict[Hashable, OrderedDict[tuple, None]] = OrderedDict()
        self._lock = threading.Lock()

    def attribute(self, tenant_id: Hashable, hashes: Mapping[str, str | None]) -> str | None:
        """The first section (canonical order) differing from the tenant's most similar earlier
        request; None for its first request or an exact repeat. Records this request.

        `hashes`: section name -> hash; a missing or empty section counts as the empty string."""
        key = tuple(hashes.get(section) or "" for section in SECTION_ORDER)
        with self._lock:
            seen = self._prefixes_for(tenant_id)
            is_first = not seen
            num_equal = 0
            while num_equal < len(key) and key[: num_equal + 1] in seen:
                num_equal += 1
            self._remember(seen, key)
        if is_first or num_equal == len(key):
            return None
        return SECTION_ORDER[num_equal]

    def forget(self, tenant_id: Hashable) -> None:
        with self._lock:
            self._tenants.pop(tenant_id, None)

    def _prefixes_for(self, tenant_id: Hashable) -> OrderedDict[tuple, None]:
        seen = self._tenants.get(tenant_id)
        if seen is None:
            if len(self._tenants) >= self.max_tenants:
                self._tenants.popitem(last=False)
            seen = self._tenants[tenant_id] = OrderedDict()
        else:
            self._tenants.move_to_end(tenant_id)
        return seen

    def _remember(self, seen: OrderedDict[tuple, None], key: tuple) -> None:
        for length in range(len(key), 0, -1):  # longest first: shorter prefixes end up more recent
            prefix = key[:length]
            seen[prefix] = None
            seen.move_to_end(prefix)
        while len(seen) > self.max_prefixes_per_tenant:
            seen.popitem(last=False)
