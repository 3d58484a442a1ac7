"""Request body limits, enforced in front of Django (clusterctl/asgi.py wraps the HTTP app in BodyLimitMiddleware).

A body over its path's limit is answered 413 before Django, authentication or a parser sees a byte of it: a declared
Content-Length over the limit is refused without reading the body at all, and a body without one (chunked) is
counted as it arrives and refused the moment it passes the limit. The server must call the app when the headers
are in and hand the body over as it streams (uvicorn does: the production command); daphne reads the whole body
before it calls the app, so under daphne this bounds what Django buffers but not what daphne itself reads.

Limits (settings): REQUEST_BODY_MAX_BYTES for every path, except the paths of REQUEST_BODY_LIMITS, a list of
(regular expression matched against the path, bytes), first match wins: the fabric import and the what-if upload.
The answer is DRF's error shape, {"detail": "..."}, with Connection: close (the rest of the body is never read).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def body_limit(path: str) -> int:
    """The most bytes a request body to `path` may have."""
    for pattern, limit in settings.REQUEST_BODY_LIMITS:
        if re.match(pattern, path):
            return int(limit)
    return int(settings.REQUEST_BODY_MAX_BYTES)


def declared_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    """The Content-Length the client declared, or None (chunked, absent, or not a number: then bytes are counted)."""
    for name, value in headers:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def refuse(send: Send, message: str) -> None:
    """413 in DRF's error shape; Connection: close, because the rest of the body is never read."""
    body = json.dumps({"detail": message}, separators=(",", ":")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


class BodyLimitMiddleware:
    """ASGI middleware: answer 413 to an HTTP request whose body is over its path's limit (see the module)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        limit = body_limit(path)
        declared = declared_length(scope.get("headers", []))
        if declared is not None and declared > limit:
            await refuse(send, f"Request body of {declared} bytes is over the limit of {limit} bytes for {path}.")
            return

        received = 0
        refused = False
        response_started = False

        async def counting_receive() -> Message:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # The app sees the client go away (Django drops the request quietly); the 413 is the answer,
                    # unless the app had already begun one (then the connection just ends).
                    refused = True
                    if not response_started:
                        await refuse(send, f"Request body is over the limit of {limit} bytes for {path}.")
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal response_started
            if refused:
                return
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        await self.app(scope, counting_receive, guarded_send)
