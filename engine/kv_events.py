"""KV-cache events: what this engine's radix cache stores and evicts, published as vLLM does.

The wire format is vLLM's (vllm/distributed/kv_events.py), so an edge gateway, an llm-d indexer or
NVIDIA Dynamo's router reads a radixgate node like a vLLM or SGLang one:

    ZMQ PUB multipart: [topic, seq (8 bytes big-endian), payload]
    payload: msgpack KVEventBatch, an array [ts, [event, ...]] (data_parallel_rank omitted)
    event:   a map tagged by "type": BlockStored {block_hashes, parent_block_hash, token_ids,
             block_size, lora_id, medium, lora_name, extra_keys}, BlockRemoved {block_hashes, medium},
             AllBlocksCleared {}

`seq` counts batches from 0 per process, so a subscriber tells a gap (seq jumps) from a restart
(seq goes back). With `replay_endpoint` a ROUTER socket answers a request [b"", start seq (8 bytes)]
from a DEALER with every buffered batch from that seq on, as [b"", seq, payload], then [b"", -1, b""].
The endpoint follows vLLM's rule: an address with `*`, `::`, ipc:// or inproc:// is bound, any
other is connected to (the subscriber then binds it).

Blocks are the pool's pages (block_size = page_size). A block's hash chains its parent's: h(page i)
= blake2b(h(page i-1) + the page's int32 token ids) from a seed of the cache namespace, as 64-bit
ints, so equal token runs in two namespaces never share a hash. `extra_keys` carries, on a chain's
first block, the request's cache salt as vLLM does (`(salt,)`; a namespace ending in
"|salt:<salt>" has one) and None on every other block: an edge that salts its tenants keys the
blocks to its own cache domains without learning this node's tenants.

Contracts: the engine thread only enqueues (`stored`, `removed`: no hashing, no I/O, never blocks;
a full queue drops the event and the next batch starts with AllBlocksCleared, so a subscriber's
index shrinks rather than goes stale). The first batch a publisher sends is AllBlocksCleared (a
fresh engine holds nothing), and `close` sends one more (a stopping engine will hold nothing).
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
import time
import uuid
from array import array
from collections import deque
from itertools import count
from typing import TYPE_CHECKING, Any, Hashable

import msgspec
import zmq

if TYPE_CHECKING:
    from engine.config import EngineConfig

log = logging.getLogger(__name__)

SALT_MARKER = "|salt:"
MEDIUM_GPU = "GPU"  # vLLM's name for the device tier, whatever the device
END_SEQ = (-1).to_bytes(8, "big", signed=True)
MAX_EVENTS_PER_BATCH = 512


class KVEventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class BlockStored(msgspec.Struct, tag=True, omit_defaults=True, gc=False):
    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple | None] | None = None


class BlockRemoved(msgspec.Struct, tag=True, omit_defaults=True, gc=False):
    block_hashes: list[int]
    medium: str | None


class AllBlocksCleared(msgspec.Struct, tag=True, omit_defaults=True, gc=False):
    pass


def is_bind_endpoint(endpoint: str) -> bool:
    """vLLM's rule: the publisher binds these addresses and connects to any other."""
    return "*" in endpoint or "::" in endpoint or endpoint.startswith(("ipc://", "inproc://"))


def bind(socket: zmq.Socket, endpoint: str, wait_s: float = 3.0) -> None:
    """Bind, waiting up to `wait_s` for a predecessor's socket on the address to finish closing."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            socket.bind(endpoint)
            return
        except zmq.ZMQError as exc:
            if exc.errno != zmq.EADDRINUSE or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def salt_of(namespace: Hashable) -> str | None:
    """The cache salt a namespace was split by (tenants/isolation.salted_namespace's suffix), else None."""
    if isinstance(namespace, str) and SALT_MARKER in namespace:
        return namespace.rsplit(SALT_MARKER, 1)[1] or None
    return None


def chain_hashes(namespace: Hashable, tokens: bytes, page_size: int) -> list[int]:
    """The chained hash of every whole page of `tokens` (int32 bytes) in `namespace`."""
    digest = hashlib.blake2b(repr(namespace).encode(), digest_size=8).digest()
    page_bytes = 4 * page_size
    hashes = []
    for start in range(0, len(tokens) - page_bytes + 1, page_bytes):
        digest = hashlib.blake2b(digest + tokens[start:start + page_bytes], digest_size=8).digest()
        hashes.append(int.from_bytes(digest, "big"))
    return hashes


class KVEventPublisher:
    """Publishes one engine's radix-cache events; see the module docstring for the wire contract."""

    def __init__(self, endpoint: str, page_size: int, *, topic: str = "kv", replay_endpoint: str | None = None,
                 buffer_steps: int = 10_000, hwm: int = 100_000, max_queue: int = 100_000) -> None:
        self.endpoint = endpoint
        self.replay_endpoint = replay_endpoint
        self.topic = topic
        self.page_size = page_size
        self.num_dropped = 0
        self.start_id = uuid.uuid4().hex  # new per publisher: a subscriber that sees it change knows the node restarted
        self._queue: queue.Queue = queue.Queue(maxsize=max_queue)
        self._buffer: deque[tuple[int, bytes]] = deque(maxlen=buffer_steps)
        self._seq = count()
        self._is_overflowed = True  # the first batch says the (new) cache holds nothing
        self._ctx = zmq.Context.instance()
        self._pub = self._ctx.socket(zmq.PUB)
        self._pub.set_hwm(hwm)
        bind(self._pub, endpoint) if is_bind_endpoint(endpoint) else self._pub.connect(endpoint)
        self._replay = None
        if replay_endpoint:
            self._replay = self._ctx.socket(zmq.ROUTER)
            bind(self._replay, replay_endpoint)
        self._is_running = True
        self._thread = threading.Thread(target=self._run, name="kv-events", daemon=True)
        self._thread.start()

    # ---- engine thread: enqueue only ------------------------------------
    def stored(self, namespace: Hashable, tokens: bytes, num_new_pages: int) -> None:
        """The last `num_new_pages` pages of the cached path `tokens` (int32 bytes) were stored."""
        self._put(("stored", namespace, tokens, num_new_pages))

    def removed(self, namespace: Hashable, tokens: bytes, num_pages: int) -> None:
        """The last `num_pages` pages of the cached path `tokens` (int32 bytes) were evicted."""
        self._put(("removed", namespace, tokens, num_pages))

    def cleared(self) -> None:
        self._put(("cleared",))

    def _put(self, item: tuple) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.num_dropped += 1
            self._is_overflowed = True

    # ---- publisher thread ------------------------------------------------
    def _run(self) -> None:
        encoder = msgspec.msgpack.Encoder()
        while self._is_running or not self._queue.empty():
            if self._replay is not None and self._replay.poll(0):
                self._serve_replay()
            try:
                items = [self._queue.get(timeout=0.05)]
            except queue.Empty:
                if self._is_overflowed:
                    items = []
                else:
                    continue
            while len(items) < MAX_EVENTS_PER_BATCH:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            events = []
            if self._is_overflowed:  # events were lost: tell subscribers to start over from nothing
                self._is_overflowed = False
                events.append(AllBlocksCleared())
            events.extend(e for item in items if item is not None for e in self._events_of(item))
            if events:
                self._send(encoder.encode(KVEventBatch(ts=time.time(), events=events)))
        self._pub.close(linger=100)
        if self._replay is not None:
            self._replay.close(linger=0)

    def _events_of(self, item: tuple) -> list:
        kind = item[0]
        if kind == "cleared":
            return [AllBlocksCleared()]
        _, namespace, tokens, num_pages = item
        hashes = chain_hashes(namespace, tokens, self.page_size)
        first = len(hashes) - num_pages
        if num_pages <= 0 or first < 0:
            return []
        if kind == "removed":
            return [BlockRemoved(block_hashes=hashes[first:], medium=MEDIUM_GPU)]
        token_ids = array("i")
        token_ids.frombytes(tokens[4 * first * self.page_size: 4 * len(hashes) * self.page_size])
        salt = salt_of(namespace)
        extra = [None] * num_pages
        if first == 0 and salt is not None:
            extra[0] = (salt,)
        return [BlockStored(block_hashes=hashes[first:], parent_block_hash=hashes[first - 1] if first else None,
                            token_ids=token_ids.tolist(), block_size=self.page_size, lora_id=None,
                            medium=MEDIUM_GPU, lora_name=None, extra_keys=extra)]

    def _send(self, payload: bytes) -> None:
        seq = next(self._seq)
        try:
            self._pub.send_multipart((self.topic.encode(), seq.to_bytes(8, "big"), payload))
        except zmq.ZMQError as exc:  # the batch stays in the replay buffer: a subscriber sees the gap
            log.warning("KV event batch %d not sent: %s", seq, exc)
        self._buffer.append((seq, payload))

    def _serve_replay(self) -> None:
        try:
            frames = self._replay.recv_multipart(zmq.NOBLOCK)
        except zmq.ZMQError:
            return
        if len(frames) != 3 or len(frames[2]) != 8:
            log.warning("invalid KV event replay request (%d frames)", len(frames))
            return
        client, _, start = frames
        start_seq = int.from_bytes(start, "big")
        for seq, payload in list(self._buffer):
            if seq >= start_seq:
                self._replay.send_multipart((client, b"", seq.to_bytes(8, "big"), payload))
        self._replay.send_multipart((client, b"", END_SEQ, b""))

    def close(self, timeout_s: float = 1.0) -> None:
        """Publish AllBlocksCleared, flush the queue and close the sockets (idempotent)."""
        if not self._is_running:
            return
        self.cleared()
        self._is_running = False
        self._thread.join(timeout=timeout_s)

    def describe(self) -> dict:
        """What a subscriber needs (GET /kv_event_sources)."""
        return {"endpoint": self.endpoint, "replay_endpoint": self.replay_endpoint, "topic": self.topic,
                "block_size": self.page_size, "format": "vllm", "start_id": self.start_id, "dropped_events": self.num_dropped}


def open_kv_events(config: EngineConfig, page_size: int) -> KVEventPublisher | None:
    """The KV-event publisher when configured and the radix cache is on, else None."""
    if not (config.kv_events_endpoint and config.enable_radix_cache):
        return None
    publisher = KVEventPublisher(config.kv_events_endpoint, page_size, topic=config.kv_events_topic,
                                 replay_endpoint=config.kv_events_replay_endpoint)
    log.info("publishing KV events on %s (replay %s)", config.kv_events_endpoint, config.kv_events_replay_endpoint)
    return publisher
