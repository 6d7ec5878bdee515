"""A tiny real OpenAI-compatible server on loopback, for the edge gateway's tests.

It streams Server-Sent Events the way OpenAI's API does and records every body it received (with its
"_arrival" number across all servers), so a test sees what litellm really sent. `server.mode` picks its behaviour for the next requests:

    "ok"           two words, a finish chunk, a usage chunk with cached_tokens (16 of 20)
    "no_cached"    the same without prompt_tokens_details
    "fail_before"  the connection drops mid-stream before any content
    "fail_after"   one word, then the connection drops
    "error_500"    a 500 whose body names the upstream (text a tenant must never see)
"""

from __future__ import annotations

import itertools
import json
import threading
import time

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from tests.support.ports import free_port

UPSTREAM_SECRET = "upstream-internal-detail-7f3a"
ARRIVALS = itertools.count()  # shared by every server: `received` bodies carry "_arrival", in global order


class TinyOpenAI:
    def __init__(self, name: str) -> None:
        self.name = name
        self.mode = "ok"
        self.received: list[dict] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._server = uvicorn.Server(uvicorn.Config(self.app(), host="127.0.0.1", port=self.port, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/health")
        async def health():
            return {"ok": True}

        @app.post("/v1/chat/completions")
        async def completions(request: Request):
            body = await request.json()
            self.received.append({**body, "_arrival": next(ARRIVALS)})
            mode = self.mode
            if mode == "error_500":
                return JSONResponse({"error": {"message": f"{UPSTREAM_SECRET} at {self.url}"}}, 500)
            return StreamingResponse(self.events(body["model"], mode), media_type="text/event-stream")

        return app

    async def events(self, model: str, mode: str):
        def event(delta: dict | None, finish: str | None = None, usage: dict | None = None) -> str:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
            chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": choices}
            if usage:
                chunk["usage"] = usage
            return f"data: {json.dumps(chunk)}\n\n"

        yield event({"role": "assistant", "content": ""})
        if mode == "fail_before":
            raise RuntimeError(UPSTREAM_SECRET)
        yield event({"content": "hello"})
        if mode == "fail_after":
            raise RuntimeError(UPSTREAM_SECRET)
        yield event({"content": " world"})
        yield event({}, finish="stop")
        usage = {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22}
        if mode != "no_cached":
            usage["prompt_tokens_details"] = {"cached_tokens": 16}
        yield event(None, usage=usage)
        yield "data: [DONE]\n\n"

    def __enter__(self) -> TinyOpenAI:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc_info) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
