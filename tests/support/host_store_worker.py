"""A second process driving a HostPageStore for the property test: commands in, results out, over a Pipe.

The worker attaches by name (untrack=False: it is forked and shares its
parent's resource tracker) and answers each (op, *args) with a result or
("error", repr). Reservations stay in the worker, known to the test by id.
"""

from __future__ import annotations

import multiprocessing


def fill_byte(namespace, chain: tuple) -> int:
    """The byte every page of this chain is filled with (a cheap content check per prefix)."""
    return hash((namespace, chain)) % 251 + 1


def write_reserved(store, reservation, seqs) -> None:
    """Fill each reserved page with its prefix's byte, as an engine copies KV in before commit."""
    for (namespace, tokens), writes in zip(seqs, reservation.writes):
        for page_index, slot in writes:
            chain = tuple(tokens[: (page_index + 1) * store.page_size])
            store.page(slot)[:] = fill_byte(namespace, chain)


def serve(conn, name: str) -> None:
    from engine.host_tier.store import HostPageStore

    store = HostPageStore.attach(name, untrack=False)
    reservations, next_id = {}, 0
    conn.send(("ready", store.holder))
    while True:
        op, *args = conn.recv()
        try:
            if op == "allocate":
                reservation = store.allocate_batch(args[0])
                if reservation is None:
                    conn.send(None)
                    continue
                write_reserved(store, reservation, args[0])
                next_id += 1
                reservations[next_id] = reservation
                conn.send((next_id, reservation.new, reservation.held))
            elif op in ("commit", "abort"):
                getattr(store, op)(reservations.pop(args[0]))
                conn.send("ok")
            elif op == "match":
                conn.send(store.match(*args, hold=True))
            elif op == "release":
                store.release(args[0])
                conn.send("ok")
            elif op == "evict":
                conn.send(store.evict(args[0]))
            elif op == "stop":
                store.close()
                conn.send("ok")
                return
        except Exception as error:  # noqa: BLE001 - reported to the test, which fails on it
            conn.send(("error", repr(error)))


class Worker:
    """The test's handle on the worker process."""

    def __init__(self, name: str) -> None:
        context = multiprocessing.get_context("fork")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=serve, args=(child, name), daemon=True)
        self.process.start()
        status, self.holder = self.conn.recv()
        assert status == "ready"

    def call(self, *message):
        self.conn.send(message)
        result = self.conn.recv()
        if isinstance(result, tuple) and result and result[0] == "error":
            raise AssertionError(f"worker failed on {message[0]}: {result[1]}")
        return result

    def kill(self) -> None:
        self.process.kill()
        self.process.join()  # reaped: its pid is gone, so the sweeper sees it dead

    def stop(self) -> None:
        if self.process.is_alive():
            self.call("stop")
            self.process.join()
