"""The production web server (the Dockerfile's CMD) refuses an oversized body before the client has sent it.

An ASGI middleware can only refuse early if the server calls the application when the headers are in and streams
the body; daphne reads every body whole before it calls the application, uvicorn streams. These tests start the
image's own command on a free port and speak raw HTTP to it. Nothing reaches the database: the answers come from the
body limits, in front of Django.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.processes import free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024


def production_command(port: int) -> list[str]:
    """The Dockerfile's CMD, on 127.0.0.1:port, run by this interpreter."""
    line = next(line for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("CMD "))
    argv = json.loads(line[len("CMD ") :])
    for flag, value in (("--host", "127.0.0.1"), ("-b", "127.0.0.1"), ("--port", str(port)), ("-p", str(port))):
        if flag in argv:
            argv[argv.index(flag) + 1] = value
    return [sys.executable, "-m", *argv]


@pytest.fixture(scope="module")
def server_port(tmp_path_factory):
    port = free_port()
    log_path = tmp_path_factory.mktemp("server") / "server.log"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "clusterctl.test_settings"}
    with open(log_path, "w+") as log:
        proc = subprocess.Popen(production_command(port), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:

            def listening() -> bool:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    return True
                except OSError:
                    return False

            if not wait_for(listening, timeout=60, every=0.2):
                pytest.fail(f"the production server did not start:\n{log_path.read_text()[-3000:]}")
            yield port
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def read_answer(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    answer = b""
    try:
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return answer


def test_a_declared_300_mib_body_is_refused_before_any_of_it_is_sent(server_port):
    with socket.create_connection(("127.0.0.1", server_port)) as sock:
        sock.sendall(
            b"POST /api/v1/clusters/2/import/ HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: %d\r\n\r\n" % (300 * MIB)
        )
        started = time.monotonic()
        answer = read_answer(sock, timeout=10)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert time.monotonic() - started < 5


def test_a_chunked_body_is_refused_once_it_passes_the_limit(server_port):
    block = b"x" * (64 * 1024)
    frame = b"%x\r\n" % len(block) + block + b"\r\n"
    sent = 0
    with socket.create_connection(("127.0.0.1", server_port)) as sock:
        sock.sendall(
            b"POST /api/v1/jobs/ HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        sock.settimeout(5)
        try:
            while sent < 256 * MIB:  # the client would send 256 MiB; the server stops it after 1 MiB
                sock.sendall(frame)
                sent += len(block)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass
        answer = read_answer(sock, timeout=10)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    # What was sent past the 1 MiB limit sat in socket buffers when the server closed: far less than the 256 MiB.
    assert sent < 64 * MIB
