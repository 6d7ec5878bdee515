"""Errors raised by the engine; the gateway maps them onto HTTP statuses.

Every engine error derives from EngineError, so a caller can catch the family.
"""


class EngineError(Exception):
    """Base class of every error the engine raises on purpose."""


class OutOfPagesError(EngineError):
    """The KV pool cannot hand out the pages asked for; nothing was allocated."""


class QuotaExceededError(EngineError):
    """A pin would take a namespace past its pin quota (HTTP 409)."""


class PinCapacityError(QuotaExceededError):
    """A pin would take the whole cache past its cap on pinned pages (EngineConfig.max_pinned_fraction)."""


class UnbalancedUnlockError(EngineError):
    """unlock() on a node that holds no lock: a lock/unlock pairing bug."""


class PrefixNotCachedError(EngineError):
    """pin() was asked for a path that is not (fully) in the cache."""


class UnknownPinError(EngineError, KeyError):
    """unpin() / pin_info() with a pin id that does not exist (or was unpinned)."""


class EngineOverloadedError(EngineError):
    """The waiting queue is full; try again later (HTTP 503)."""


class QueueTimeoutError(EngineOverloadedError):
    """A request waited past its queue deadline before it was first scheduled (HTTP 503); it held nothing."""


class PromptTooLongError(EngineError):
    """The prompt (plus max_tokens) does not fit the model's context (HTTP 400)."""
