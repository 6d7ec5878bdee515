"""The host tier: a shared-memory KV page store below the device radix cache.

store.HostPageStore is the shared store (any process may attach by name);
tier.HostTier copies between it and one engine's KV pool.
"""

from engine.host_tier.holders import LeaseExpiredError
from engine.host_tier.store import HostPageStore, Reservation
from engine.host_tier.tier import HostTier, page_bytes_of

__all__ = ["HostPageStore", "HostTier", "LeaseExpiredError", "Reservation", "page_bytes_of"]
