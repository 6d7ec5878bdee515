"""The radix tree's parts: nodes, match results, per-namespace state, token bytes.

Token ids are held as native int32 bytes: a node's key is the bytes of its
token ids, its pages the int32 bytes of its page ids. Comparing two runs of
tokens is then one C-level `bytes.startswith`, and a node costs two compact
byte strings instead of lists of Python ints.
"""

from __future__ import annotations

from array import array

import numpy as np

from engine.kv_pool import page_ids_to_bytes

__all__ = ["RadixNode", "MatchResult", "NamespaceState", "PinRecord", "token_bytes", "page_ids_to_bytes"]


class RadixNode:
    """One edge+node of the compressed tree.

    key:   int32 bytes of this node's tokens (a whole number of pages; b"" for a root)
    pages: int32 bytes of the page ids holding those tokens; None once evicted
    children: {first page of the child's key (bytes): child} or None for a leaf
    lock_ref / pin_ref: how many locks / pins cover the path through this node;
      invariant: a node's counts are >= each child's, so checking the node
      a lock or pin ends at is enough to know its whole path is held.
    last_access: logical clock of the last match/insert through this node.
    """

    __slots__ = ("key", "pages", "children", "parent", "lock_ref", "pin_ref", "last_access")

    def __init__(self, key: bytes, pages: bytes, parent: RadixNode | None, last_access: int = 0) -> None:
        self.key = key
        self.pages = pages
        self.children: dict[bytes, RadixNode] | None = None
        self.parent = parent
        self.lock_ref = 0
        self.pin_ref = 0
        self.last_access = last_access

    def __repr__(self) -> str:
        return f"RadixNode(tokens={len(self.key) >> 2}, lock={self.lock_ref}, pin={self.pin_ref})"


class MatchResult:
    """Longest cached page-aligned prefix: its pages, length (tokens) and end node.

    `pages` is built lazily as list[int]; `page_bytes` is the same as int32
    bytes (the fast path). Unpacks as `pages, length, node`.
    """

    __slots__ = ("page_bytes", "length", "node", "_pages")

    def __init__(self, page_bytes: bytes, length: int, node: RadixNode) -> None:
        self.page_bytes = page_bytes
        self.length = length
        self.node = node
        self._pages: list[int] | None = None

    @property
    def pages(self) -> list[int]:
        if self._pages is None:
            self._pages = memoryview(self.page_bytes).cast("i").tolist()
        return self._pages

    def __iter__(self):
        return iter((self.pages, self.length, self.node))

    def __repr__(self) -> str:
        return f"MatchResult(length={self.length}, num_pages={len(self.page_bytes) >> 2})"


class NamespaceState:
    """One namespace's tree root and counters."""

    __slots__ = ("root", "hit_tokens", "miss_tokens", "pinned_tokens", "pin_quota", "last_tokens", "last_match",
                 "quota_owner", "quota_used")

    def __init__(self) -> None:
        self.root = RadixNode(b"", b"", None)
        # The latest match_prefix (its token bytes object and result), so that
        # an insert of the same tokens right after resumes at the matched node.
        self.last_tokens: bytes | None = None
        self.last_match: MatchResult | None = None
        self.hit_tokens = 0
        self.miss_tokens = 0
        self.pinned_tokens = 0
        self.pin_quota: int | None = None  # None = unlimited
        # Whose pin quota this namespace's pins count against (itself, or the namespace it shares one with,
        # RadixPins.share_pin_quota), and, on an owner, the pinned tokens of every namespace counting there.
        self.quota_owner: NamespaceState = self
        self.quota_used = 0

    def as_dict(self) -> dict:
        return {
            "hit_tokens": self.hit_tokens,
            "miss_tokens": self.miss_tokens,
            "pinned_tokens": self.pinned_tokens,
            "pin_quota": self.pin_quota,
        }


class PinRecord:
    """A pin: the node its path ends at, its size and the matches it served. A timed pin (RadixPins.lease)
    also has its time to live and when it runs out (the cache's clock); a plain pin has neither."""

    __slots__ = ("pin_id", "namespace", "node", "num_tokens", "hits", "ttl_s", "expires_at")

    def __init__(self, pin_id: int, namespace, node: RadixNode, num_tokens: int) -> None:
        self.pin_id = pin_id
        self.namespace = namespace
        self.node = node
        self.num_tokens = num_tokens
        self.hits = 0
        self.ttl_s: float | None = None
        self.expires_at: float | None = None

    def as_dict(self) -> dict:
        info = {"pin_id": self.pin_id, "namespace": self.namespace, "tokens": self.num_tokens, "hits": self.hits}
        if self.ttl_s is not None:
            info |= {"ttl_s": self.ttl_s, "expires_at": self.expires_at}
        return info


def token_bytes(tokens) -> bytes:
    """Token ids as native int32 bytes (list, tuple, array, bytes, numpy or torch)."""
    if isinstance(tokens, bytes):
        if len(tokens) & 3:
            raise ValueError("token bytes must hold whole int32 ids (length divisible by 4)")
        return tokens
    if isinstance(tokens, (list, tuple, range)):
        return array("i", tokens).tobytes()
    if isinstance(tokens, np.ndarray) and tokens.dtype == np.int32 and tokens.flags.c_contiguous:
        return tokens.tobytes()
    return page_ids_to_bytes(tokens)


def common_prefix_bytes(data: bytes, pos: int, key: bytes, page_bytes: int) -> int:
    """Bytes (a whole number of pages) that data[pos:] shares with key.

    Precondition: the first page matches (children are keyed by it) and the
    whole key does not. Binary search over page boundaries, each probe one
    C-level comparison.
    """
    lo, hi = 1, len(key) // page_bytes  # lo pages match, hi pages do not
    view = memoryview(key)
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if data.startswith(view[: mid * page_bytes], pos):
            lo = mid
        else:
            hi = mid
    return lo * page_bytes
