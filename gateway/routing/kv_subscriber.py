"""KVEventSubscriber: one node's KV-event stream (vLLM's ZMQ format) into its KVBlockIndex.

Frames are [topic, seq (8 bytes big-endian), msgpack batch] (engine/kv_events.py documents the
format). The subscriber connects to an address the node binds (one with `*`, the node's host put in
its place), or binds an address the node connects to (vLLM's convention for an endpoint without `*`).

Resynchronization: batches apply only in sequence. Any break (the first batch seen is not seq 0,
a gap, seq going back because the node restarted, or `reset` when the node's health check fails or
reports a new start id) clears the node's index first, so no request is routed on a stale one; then
the batches the node still buffers are replayed from seq 0 through its ROUTER socket when it has one
(DEALER [b"", start seq] -> [b"", seq, payload]... [b"", -1, b""]), which rebuilds the index
exactly; a stream quiet for IDLE_POLL_MS while unsynced is replayed the same way; without replay the index rebuilds from the live stream on (it holds a subset of the node's
blocks meanwhile). A batch that does not decode counts as a break.

Event-loop only: the index is read by the router on the same loop.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlsplit

import zmq
import zmq.asyncio

from gateway.routing.kv_index import KVBlockIndex, decode_batch

log = logging.getLogger("gateway.routing")

END_SEQ = -1
REPLAY_TIMEOUT_S = 2.0
IDLE_POLL_MS = 500  # a stream quiet this long while the index is unsynced asks the node's replay for it


def is_bound_by_node(endpoint: str) -> bool:
    """vLLM's rule for the publisher: it binds these addresses (so we connect), and connects to others."""
    return "*" in endpoint or "::" in endpoint or endpoint.startswith(("ipc://", "inproc://"))


def reachable(endpoint: str, node_url: str | None) -> str:
    """A node-bound endpoint as this edge reaches it: `*` (any interface) becomes the node's host."""
    if "*" not in endpoint or not node_url:
        return endpoint
    host = urlsplit(node_url).hostname or "127.0.0.1"
    return endpoint.replace("*", host)


class KVEventSubscriber:
    def __init__(self, name: str, endpoint: str, *, topic: str = "", replay_endpoint: str | None = None,
                 block_size: int | None = None, node_url: str | None = None) -> None:
        self.name = name
        self.source_endpoint = endpoint  # as the node (or the settings) gave it
        self.is_discovered = False  # True: from the node's GET /kv_event_sources (routing/monitor.py)
        self.topic = topic
        self.replay_endpoint = reachable(replay_endpoint, node_url) if replay_endpoint else None
        self.index = KVBlockIndex(name, block_size)
        self.is_binding = not is_bound_by_node(endpoint)
        self.address = endpoint if self.is_binding else reachable(endpoint, node_url)
        self.last_seq: int | None = None
        self.start_id: str | None = None
        self.num_batches = 0
        self.num_resyncs = 0
        self.num_bad_batches = 0
        self._skip: tuple[int, int] | None = None  # live seqs [a, b] the last replay already applied
        self.state = "connecting"  # "live" once a batch applied in sequence; "resyncing" while replaying
        self._task: asyncio.Task | None = None
        self._ctx = zmq.asyncio.Context.instance()

    @property
    def is_live(self) -> bool:
        return self.state == "live"

    def start(self) -> None:
        """Subscribe in a task on the running loop (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.run(), name=f"kv-events-{self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.state = "stopped"

    def reset(self, reason: str) -> None:
        """Doubt the stream (the node went down or restarted): drop the index until the stream resyncs."""
        if self.index.num_blocks or self.last_seq is not None:
            log.info("backend %s: KV-event index dropped (%s); rebuilding from its events", self.name, reason)
        self.index.clear()
        self.last_seq = None
        self._skip = None
        self.state = "connecting"

    async def run(self) -> None:
        sub = self._ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, self.topic.encode())
        sub.setsockopt(zmq.LINGER, 0)
        try:
            sub.bind(self.address) if self.is_binding else sub.connect(self.address)
            log.info("backend %s: routing on its KV events (%s %s)", self.name,
                     "bound" if self.is_binding else "connected to", self.address)
            while True:
                if not await sub.poll(IDLE_POLL_MS):
                    if self.last_seq is None and self.replay_endpoint is not None:
                        await self.bootstrap()
                    continue
                frames = await sub.recv_multipart()
                if len(frames) != 3 or len(frames[1]) != 8:
                    self.num_bad_batches += 1
                    continue
                await self.on_batch(int.from_bytes(frames[1], "big", signed=True), frames[2])
        finally:
            sub.close(linger=0)

    async def on_batch(self, seq: int, payload: bytes) -> None:
        """Apply one live batch, resynchronizing first on any break in the sequence."""
        last = self.last_seq
        if last is not None and (seq == last or self._skip is not None and self._skip[0] <= seq <= self._skip[1]):
            return  # a duplicate, or a live copy of a batch the replay already applied
        self._skip = None
        in_order = seq == last + 1 if last is not None else seq == 0
        if in_order and self.apply(seq, payload):
            return
        await self.resync(seq, payload)

    def apply(self, seq: int, payload: bytes) -> bool:
        try:
            _, events = decode_batch(payload)
        except ValueError as exc:
            self.num_bad_batches += 1
            log.warning("backend %s: KV event batch %d unreadable: %s", self.name, seq, exc)
            return False
        self.index.apply(events)
        self.last_seq = seq
        self.num_batches += 1
        self.state = "live"
        return True

    async def resync(self, seq: int, payload: bytes) -> None:
        """Clear, replay what the node buffers from seq 0, then apply the live batch if it is next."""
        self.num_resyncs += 1
        self.index.clear()
        self.last_seq = None
        self.state = "resyncing"
        if self.replay_endpoint is not None:
            for replayed_seq, replayed in await self.replay(0):
                if self.last_seq is None or replayed_seq == self.last_seq + 1:
                    self.apply(replayed_seq, replayed)
        if self.last_seq is not None and seq <= self.last_seq:
            self._skip = (seq, self.last_seq)
            self.state = "live"
            return
        if self.last_seq is not None and seq != self.last_seq + 1:
            self.index.clear()  # the replay missed batches before this one: start from it
        self.last_seq = None
        if not self.apply(seq, payload):
            self.index.clear()
            self.last_seq = seq  # skip the unreadable batch; its successor applies in sequence
            self.state = "live"

    async def bootstrap(self) -> None:
        """No batch since (re)subscribing, e.g. the node's first ones went out before we were connected:
        take its buffer from the replay socket instead of waiting for its next batch."""
        batches = await self.replay(0)
        if self.last_seq is not None or not batches:
            return
        self.num_resyncs += 1
        self.index.clear()
        for seq, payload in batches:
            if self.last_seq is None or seq == self.last_seq + 1:
                self.apply(seq, payload)
        if self.last_seq is not None:
            self._skip = (batches[0][0], self.last_seq)

    async def replay(self, start_seq: int) -> list[tuple[int, bytes]]:
        """The node's buffered batches from `start_seq` on ([] when it does not answer in time)."""
        dealer = self._ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        batches: list[tuple[int, bytes]] = []
        try:
            dealer.connect(self.replay_endpoint)
            await dealer.send_multipart((b"", start_seq.to_bytes(8, "big")))
            while True:
                frames = await asyncio.wait_for(dealer.recv_multipart(), REPLAY_TIMEOUT_S)
                if len(frames) != 3:
                    continue
                seq = int.from_bytes(frames[1], "big", signed=True)
                if seq == END_SEQ:
                    return batches
                batches.append((seq, frames[2]))
        except (asyncio.TimeoutError, zmq.ZMQError) as exc:
            log.warning("backend %s: KV event replay failed (%r); rebuilding from the live stream", self.name, exc)
            return batches
        finally:
            dealer.close(linger=0)

    def describe(self) -> dict:
        return {"state": self.state, "endpoint": self.address, "bound": self.is_binding, "last_seq": self.last_seq,
                "batches": self.num_batches, "resyncs": self.num_resyncs, "bad_batches": self.num_bad_batches,
                **self.index.describe()}
