"""Benchmark: what an oversized request body costs the web server (issue 11, finding 2).

    .venv/bin/python bench/bench_body_limit.py [--server uvicorn|daphne] [--mb 300] [--json-mb 100]

Starts the real ASGI server (the production command's server, uvicorn, or daphne) on a free port with production
settings (DEBUG=0) on a throwaway SQLite database, then sends bodies far over the limits: a multipart fabric import
of --mb MiB to /api/v1/clusters/<id>/import/, with and without an operator's token, with Content-Length and
chunked, and a JSON body of --json-mb MiB to /api/v1/jobs/ without a token. The client streams the body from a
64 KiB block (it holds no copy) and stops sending as soon as the server answers. Each case prints: the status,
seconds to the answer, MiB the client had sent by then, the server's RSS before / at its peak / 2 s after, and the
slowest /healthz answer while the upload ran (a second client asks every 0.2 s).
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
BLOCK = 64 * 1024
BOUNDARY = "----clusterctl-bench-boundary"


@dataclass
class Case:
    name: str
    path: str
    body_bytes: int
    chunked: bool
    token: bool
    multipart: bool


@dataclass
class Outcome:
    status: int | None
    seconds: float
    sent_mib: float
    rss_before_mib: float
    rss_peak_mib: float
    rss_after_mib: float
    healthz_max_s: float | None
    detail: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def _rss_mib(proc: psutil.Process) -> float:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / MIB


def _get(port: int, path: str, timeout: float) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        head = s.recv(64)
    return int(head.split()[1])


class Sampler(threading.Thread):
    """While running: the server's peak RSS (every 20 ms) and the slowest /healthz answer (one every 0.2 s)."""

    def __init__(self, proc: psutil.Process, port: int):
        super().__init__(daemon=True)
        self.proc, self.port = proc, port
        self.stop = threading.Event()
        self.peak = _rss_mib(proc)
        self.healthz: list[float] = []
        self.healthz_failures = 0

    def run(self) -> None:
        prober = threading.Thread(target=self._probe, daemon=True)
        prober.start()
        while not self.stop.is_set():
            self.peak = max(self.peak, _rss_mib(self.proc))
            time.sleep(0.02)
        prober.join()

    def _probe(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                _get(self.port, "/healthz", timeout=60)
                self.healthz.append(time.monotonic() - started)
            except OSError:
                self.healthz_failures += 1
            self.stop.wait(0.2)


def _request_head(case: Case, port: int, token: str | None) -> tuple[bytes, bytes, bytes]:
    """(headers, body prefix, body suffix): the filler of case.body_bytes goes between prefix and suffix."""
    if case.multipart:
        prefix = (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="format"\r\n\r\nibnetdiscover\r\n'
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.topo"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        suffix = f"\r\n--{BOUNDARY}--\r\n".encode()
        content_type = f"multipart/form-data; boundary={BOUNDARY}"
    else:
        prefix, suffix, content_type = b'{"name": "big", "command": "', b'"}', "application/json"
    lines = [f"POST {case.path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Type: {content_type}"]
    if token:
        lines.append(f"Authorization: Token {token}")
    if case.chunked:
        lines.append("Transfer-Encoding: chunked")
    else:
        lines.append(f"Content-Length: {len(prefix) + case.body_bytes + len(suffix)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode(), prefix, suffix


def _body_pieces(prefix: bytes, n: int, suffix: bytes, chunked: bool):
    filler = (b"# padding line of an oversized upload\n" * (BLOCK // 38 + 1))[:BLOCK]
    yield from _framed(prefix, chunked)
    left = n
    while left > 0:
        piece = filler if left >= BLOCK else filler[:left]
        left -= len(piece)
        yield from _framed(piece, chunked)
    yield from _framed(suffix, chunked)
    if chunked:
        yield b"0\r\n\r\n"


def _framed(data: bytes, chunked: bool):
    yield (b"%x\r\n" % len(data) + data + b"\r\n") if chunked else data


def send_oversized(case: Case, port: int, token: str | None) -> tuple[int | None, float, int, str]:
    """Stream the body; stop at the first byte of an answer. (status, seconds, bytes sent, answer's body)."""
    head, prefix, suffix = _request_head(case, port, token)
    sock = socket.create_connection(("127.0.0.1", port))
    started = time.monotonic()
    sent = 0
    answer = b""
    try:
        sock.sendall(head)
        sock.setblocking(False)
        pieces = _body_pieces(prefix, case.body_bytes, suffix, case.chunked)
        pending = b""
        done_sending = False
        while True:
            readable, writable, _ = select.select([sock], [] if done_sending else [sock], [], 300)
            if readable:
                break
            if not writable and done_sending:
                break
            if not pending:
                pending = next(pieces, b"")
                if not pending:
                    done_sending = True
                    continue
            try:
                n = sock.send(pending)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += n
            pending = pending[n:]
        elapsed = time.monotonic() - started
        sock.setblocking(True)
        sock.settimeout(10)
        try:
            while b"\r\n\r\n" not in answer or len(answer) < answer.find(b"\r\n\r\n") + 4 + _length(answer):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    finally:
        sock.close()
    if not answer:
        return None, elapsed, sent, "no answer (connection closed)"
    status = int(answer.split(b" ", 2)[1])
    body = answer.partition(b"\r\n\r\n")[2].decode("utf-8", "replace")
    return status, elapsed, sent, body[:160]


def _length(answer: bytes) -> int:
    for line in answer.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def run_case(case: Case, server: psutil.Process, port: int, token: str) -> Outcome:
    time.sleep(1)
    before = _rss_mib(server)
    sampler = Sampler(server, port)
    sampler.start()
    status, seconds, sent, detail = send_oversized(case, port, token if case.token else None)
    # Keep sampling while the server may still be digesting what it received.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and server.cpu_percent(interval=0.5) > 20:
        pass
    sampler.stop.set()
    sampler.join()
    time.sleep(2)
    return Outcome(
        status=status,
        seconds=seconds,
        sent_mib=sent / MIB,
        rss_before_mib=before,
        rss_peak_mib=sampler.peak,
        rss_after_mib=_rss_mib(server),
        healthz_max_s=max(sampler.healthz) if sampler.healthz else None,
        detail=detail.replace("\n", " "),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", choices=("uvicorn", "daphne"), default="uvicorn", help="uvicorn: what production runs")
    ap.add_argument("--mb", type=int, default=300, help="MiB of the fabric import upload")
    ap.add_argument("--json-mb", type=int, default=100, help="MiB of the JSON body to /api/v1/jobs/")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench-body-"))
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": "bench-only-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",
        "DATABASE_URL": f"sqlite:///{tmp / 'bench.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "clusterctl.settings",
        "LOG_LEVEL": "WARNING",
        "TMPDIR": str(tmp),
        # The oversized requests must meet the body limit, not the request-rate limit.
        "API_THROTTLE_ANON": "100000/min",
        "API_THROTTLE_USER": "100000/min",
    }
    env.pop("REDIS_URL", None)
    print(f"setting up {tmp} ...", flush=True)
    _manage(env, "migrate", "--noinput")
    _manage(env, "generate_fabric", "--cluster", "bench", "--nodes", "2", "--json")
    out = _manage(env, "tenant_user", "--tenant", "bench", "--user", "bench")
    token = next(line.split()[1] for line in out.splitlines() if line.startswith("token "))
    promote = (
        "from django.contrib.auth.models import User; from fabric.models import Cluster; "
        "User.objects.filter(username='bench').update(is_staff=True); print(Cluster.objects.get(name='bench').pk)"
    )
    cluster_id = int(_manage(env, "shell", "-c", promote).split()[-1])

    port = _free_port()
    if args.server == "uvicorn":
        cmd = ["-m", "uvicorn", "clusterctl.asgi:application", "--host", "127.0.0.1", "--port", str(port)]
        cmd += ["--lifespan", "off", "--log-level", "warning"]
    else:
        cmd = ["-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "clusterctl.asgi:application"]
    log = open(tmp / "server.log", "w+")
    popen = subprocess.Popen([sys.executable, *cmd], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(300):
            try:
                if _get(port, "/healthz", timeout=2) == 200:
                    break
            except OSError:
                time.sleep(0.1)
        else:
            raise SystemExit(f"{args.server} did not answer /healthz:\n{(tmp / 'server.log').read_text()[-3000:]}")
        server = psutil.Process(popen.pid)
        imp = f"/api/v1/clusters/{cluster_id}/import/"
        cases = [
            Case(f"import {args.mb} MiB, no token, Content-Length", imp, args.mb * MIB, False, False, True),
            Case(f"import {args.mb} MiB, no token, chunked", imp, args.mb * MIB, True, False, True),
            Case(f"import {args.mb} MiB, operator token, Content-Length", imp, args.mb * MIB, False, True, True),
            Case(f"import {args.mb} MiB, operator token, chunked", imp, args.mb * MIB, True, True, True),
            Case(
                f"jobs {args.json_mb} MiB JSON, no token, Content-Length",
                "/api/v1/jobs/",
                args.json_mb * MIB,
                False,
                False,
                False,
            ),
        ]
        print(f"server: {args.server} (pid {popen.pid}, port {port}); python {sys.version.split()[0]}")
        print(
            f"{'case':52} {'status':>6} {'answer s':>9} {'sent MiB':>9} {'RSS MiB before/peak/after':>26} "
            f"{'healthz max s':>13}"
        )
        for case in cases:
            o = run_case(case, server, port, token)
            healthz = f"{o.healthz_max_s:.3f}" if o.healthz_max_s is not None else "-"
            print(
                f"{case.name:52} {o.status or '-':>6} {o.seconds:9.2f} {o.sent_mib:9.1f} "
                f"{o.rss_before_mib:8.0f} /{o.rss_peak_mib:6.0f} /{o.rss_after_mib:6.0f}   {healthz:>13}",
                flush=True,
            )
            print(f"    {o.detail}")
    finally:
        popen.terminate()
        popen.wait(timeout=30)
        log.close()
    return 0


if __name__ == "__main__":
    from peak_rss import peak_rss_line  # beside this script, which Python puts first on sys.path

    rc = main()
    print(peak_rss_line())
    raise SystemExit(rc)
