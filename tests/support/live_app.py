"""serve_app: a real uvicorn server for an in-process app, on a free loopback port, in a thread.

    with serve_app(create_app(settings, engine=engine)) as base_url:
        requests.get(f"{base_url}/healthz")

The lifespan runs once (when the server starts), so one app serves a whole module of tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from tests.support.ports import free_port


@contextmanager
def serve_app(app, startup_timeout_s: float = 60.0) -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the in-process server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
