"""OWASP API4 (unrestricted resource consumption), request bodies: a body over its path's limit is answered 413 by the
ASGI application (clusterctl.asgi) before Django reads it, before authentication, with Content-Length and chunked.

The application is driven directly through ASGI, the way a server that streams the body (uvicorn) drives it: each
test counts the body messages the application asked for.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from clusterctl.asgi import application

MIB = 1024 * 1024
CHUNK = 64 * 1024


class Client:
    """One HTTP request through ASGI; the body is handed over one message at a time, when asked for."""

    def __init__(self, chunks: list[bytes]):
        self.chunks = chunks
        self.asked = 0  # body messages handed to the application
        self.sent: list[dict] = []

    async def receive(self) -> dict:
        if self.asked >= len(self.chunks):
            await asyncio.Event().wait()  # the client stays connected until the answer: Django cancels this wait
        self.asked += 1
        more = self.asked < len(self.chunks)
        return {"type": "http.request", "body": self.chunks[self.asked - 1], "more_body": more}

    async def send(self, message: dict) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        return next(m["status"] for m in self.sent if m["type"] == "http.response.start")

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(next(m["headers"] for m in self.sent if m["type"] == "http.response.start"))

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")


async def post(path: str, chunks: list[bytes], *, length: int | None, token: str | None = None) -> Client:
    headers = [(b"host", b"testserver"), (b"content-type", b"application/json")]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    else:
        headers.append((b"transfer-encoding", b"chunked"))
    if token:
        headers.append((b"authorization", f"Token {token}".encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    client = Client(chunks)
    await application(scope, client.receive, client.send)
    return client


@pytest.mark.asyncio
async def test_a_declared_length_over_the_limit_is_refused_without_reading_the_body():
    client = await post("/api/v1/jobs/", [b"x" * CHUNK], length=300 * MIB)
    assert client.status == 413
    assert client.asked == 0


@pytest.mark.asyncio
async def test_refused_before_authentication_no_token_gets_413_not_401():
    client = await post("/api/v1/clusters/2/import/", [b"x" * CHUNK], length=300 * MIB)
    assert client.status == 413


@pytest.mark.asyncio
async def test_the_413_is_drf_error_shape_and_closes_the_connection():
    client = await post("/api/v1/jobs/", [b"x"], length=300 * MIB)
    assert client.headers[b"content-type"] == b"application/json"
    assert client.headers[b"connection"] == b"close"
    assert json.loads(client.body) == {
        "detail": "Request body of 314572800 bytes is over the limit of 1048576 bytes for /api/v1/jobs/."
    }


@pytest.mark.asyncio
async def test_a_chunked_body_is_cut_off_at_the_limit():
    # 1 MiB = 16 chunks of 64 KiB: the 17th passes the limit, and the 18th onwards are never read.
    client = await post("/api/v1/jobs/", [b"x" * CHUNK] * 40, length=None)
    assert client.status == 413
    assert client.asked == 17
    assert json.loads(client.body) == {"detail": "Request body is over the limit of 1048576 bytes for /api/v1/jobs/."}


@pytest.mark.asyncio
async def test_a_body_under_the_limit_reaches_authentication():
    body = json.dumps({"name": "small"}).encode()
    client = await post("/api/v1/jobs/", [body], length=len(body))
    assert client.status == 401


@pytest.mark.asyncio
async def test_the_fabric_import_admits_more_than_the_json_limit():
    # 2 MiB: over REQUEST_BODY_MAX_BYTES (1 MiB), under FABRIC_IMPORT_MAX_BYTES (64 MiB): read, then refused by the
    # authentication (no token), not by size.
    client = await post("/api/v1/clusters/2/import/", [b"x" * MIB] * 2, length=2 * MIB)
    assert client.status == 401
    assert client.asked == 2


@pytest.mark.asyncio
async def test_limits_come_from_settings(settings):
    settings.REQUEST_BODY_MAX_BYTES = 10
    client = await post("/api/v1/jobs/", [b"x" * 11], length=11)
    assert client.status == 413
