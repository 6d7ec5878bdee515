"""Tenants' cache salts for foreign engines: HMAC(server secret, cache domain).

vLLM and SGLang keep one prefix cache for every caller; a request's `cache_salt` partitions it, so
two requests share cached blocks only when their salts are equal. The gateway derives the salt
itself from the tenant's cache namespace (tenants/isolation.cache_namespace: the tenant, or its cache
group, plus the model): tenants of one cache group share a salt (and so their shared prompts are
prefilled once), other tenants never do. A client's own `cache_salt` is never forwarded
(routing/remote.py builds the upstream request from the prepared prompt, not the body).

Invariants: the salt is a pure function of (secret, namespace); without the secret, the salt
reveals nothing of the namespace (HMAC-SHA256, hex).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets

log = logging.getLogger(__name__)


class CacheSalter:
    """Computes tenants' salts with one server secret."""

    def __init__(self, secret: bytes) -> None:
        if not secret:
            raise ValueError("the cache-salt secret must not be empty")
        self._secret = secret

    @classmethod
    def from_settings(cls, settings) -> CacheSalter:
        """The configured secret, else one derived from the admin key, else a random one for this process."""
        if settings.cache_salt_secret is not None:
            return cls(settings.cache_salt_secret.get_secret_value().encode())
        if settings.admin_key is not None:
            derived = hmac.new(settings.admin_key.get_secret_value().encode(), b"radixgate cache salt", hashlib.sha256)
            return cls(derived.digest())
        log.warning("no cache_salt_secret or admin_key configured: tenants' cache salts change at every restart, "
                    "so remote prefix caches start cold")
        return cls(secrets.token_bytes(32))

    def salt(self, namespace: str) -> str:
        """The cache salt of one cache namespace."""
        return hmac.new(self._secret, namespace.encode(), hashlib.sha256).hexdigest()
