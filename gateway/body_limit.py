"""BodyLimit: an ASGI middleware that answers 413 for a request body over `max_body_bytes`.

It runs before routing, parsing and authentication, so an unauthenticated client
cannot make the gateway read (or hold) more than the limit. A Content-Length over
the limit is refused without reading a byte; a body without one (chunked) is read
up to the limit and refused as soon as it passes it; a body within the limit is
replayed to the app unchanged.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

METHODS_WITH_BODY = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class BodyLimit:
    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in METHODS_WITH_BODY:
            await self.app(scope, receive, send)
            return
        declared = content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await self.refuse(send)
            return
        messages, num_bytes = [], 0
        while True:
            message = await receive()
            messages.append(message)
            num_bytes += len(message.get("body", b""))
            if num_bytes > self.max_body_bytes:
                await self.refuse(send)
                return
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        await self.app(scope, replay(messages, receive), send)

    async def refuse(self, send: Send) -> None:
        body = json.dumps({"error": {
            "message": f"The request body is larger than {self.max_body_bytes} bytes.",
            "type": "invalid_request_error", "param": None, "code": "request_too_large",
        }}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   (b"connection", b"close")]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def replay(messages: list[Message], receive: Receive) -> Receive:
    """A receive that hands out the buffered messages, then defers to the real one (disconnects)."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
