"""Live push under load (issue 16): WebSocket clients on the production stack, ingest-to-frame latency at 1 Hz.

N real clients on loopback, the whole cluster polled once a second, the latency of each frame and the server's memory.

    .venv/bin/python scripts/with_services.py -- .venv/bin/python bench/bench_push_load.py \\
        [--clients 1000] [--seconds 30] [--servers 128] [--mix overview=0.6,fabric=0.2,gpus=0.2] [--server compose]

Needs DATABASE_URL (PostgreSQL) and REDIS_URL, both EMPTIED first: use databases of your own (scripts/with_services.py
gives a fresh database and an empty Redis database number). Everything runs on 127.0.0.1 only.

Set-up, in this process: migrate, `manage.py demo --no-serve --nodes <servers>` (its fat tree, pools, tenants, jobs),
an operator (staff) user signed in with Django's own login (`Client.force_login`: a session row, as a browser's
sign-in leaves) whose session cookie the sockets send, with the Origin of the server. Then the production stack as
docker-compose.yml runs it, each a subprocess in its own process group, stopped by its PID whatever happens: the web
server (`--server compose`: compose's `web` command, uvicorn on clusterctl.asgi:application, as shipped; `--server
daphne`: daphne, as `manage.py runserver` and the demo serve) on 127.0.0.1 and a free port, and compose's Celery
`worker` (default queue); DEBUG=0, the channel layer, cache and broker on REDIS_URL (clusterctl/settings.py).

Telemetry: every --interval seconds this process builds one full poll of the cluster (every GPU and every cabled HCA
and switch port, generated as bench/bench_ingest.py does) and ingests it with fabric.ingest.ingest_samples, as the
`ingest_batch` task does in the worker. Ingest marks the live topics dirty after its commit, which enqueues
`dashboard.tasks.broadcast` on the broker with the broadcaster's countdown (dashboard/broadcast.py: one message per
group per second at most); the Celery worker runs it (`flush`), exactly as in production (in embedded mode the same
task runs in a thread of the one process, clusterctl/embedded.py). The poll is told apart in the frames by values this
bench gives it, m = poll number mod 64: every GPU's utilisation averages 20 + m % (the overview's
`utilisation.mean`), one marker GPU reads exactly 20 + m % (`gpus`), and one marker host link (its group's, when the
fabric topic is aggregated) runs at (20 + m) % of capacity while every other port stays under 15 % (`fabric`).
Every GPU and every link moves every poll: the deltas are those of a busy cluster, the largest a poll makes.

Clients: --clients sockets on /ws/clusters/<id>/fabric/?topics=<topic>, one topic each as the pages ask (the
overview's cards `overview`, the fabric page `fabric`, the GPU page `gpus`), in the proportions of --mix, opened by
--client-procs processes (asyncio + `websockets`, the version pyproject.toml pins for uvicorn) so that the ingest
in this process never delays a client's clock. They offer permessage-deflate as browsers do (--no-deflate: not).
A frame's arrival is time.time() when the client's recv returns; the frame's poll is the newest poll whose marker it
carries and that was collected before it arrived (binary frames are read with the layout of broadcast.wire).
Latency = arrival - t_ingest, t_ingest = when ingest_samples returned for that poll (its broadcast is enqueued by
then); the same from t_collect (when the poll's samples were read) is printed beside it. Frames of polls in the
first --warmup seconds are left out, and so is a frame showing a poll the client had already seen (a second push of
the same data). "Shown within" is the stricter view of a page: for each poll, the time until the client had a frame
of that poll or a newer one (a poll folded into the next broadcast counts until that broadcast arrives).

Prints: clients connected (connects/s, handshake-to-snapshot times), failed (and why), closed before the end (close
codes); frames per second; latency p50/p95/p99/max overall, per topic and by poll (flagged when p99 >= 250 ms);
payload bytes per client (after permessage-deflate is undone); the countdown each ingest's broadcast was enqueued
with (seen by wrapping broadcast._enqueue in this process) and the broadcast task's run time (the worker's log); the
web server's and the worker's resident memory (/proc/<pid>/status VmRSS before and after the clients connected, VmHWM
at the end) and CPU; the client processes' peak RSS and how late their event loops woke (time a frame waits in the
client before it is timed); the machine's CPU split between the parts; the exceptions in the web server's log (during
the run, and as the clients left) and the web processes still subscribed to the groups once every client has left;
and this process's peak RSS. A hard --timeout bounds the whole run; every subprocess is stopped on exit, Ctrl-C and
the timeout included.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import queue
import re
import resource
import secrets
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dashboard.parts import Joiner  # noqa: E402  (no Django: the clients' processes join big frames with it)

GOAL_P99_MS = 250.0
MARKER_PERIOD = 64  # polls: the marker m = poll % 64 names a poll unambiguously for 64 s at 1 Hz
MARKER_BASE = 20  # percent: markers run 20..83 %, every other port stays under OTHER_PORT_MAX
OTHER_PORT_MAX = 0.15
GPU_SPREAD = 15.0  # percent either side of the mean, in pairs that cancel out
MEASURED_TOPICS = ("overview", "fabric", "gpus")
PAGE_TOPICS = ("overview", "fabric", "gpus", "alerts")  # alerts: no marker; its clients are counted, not timed
DEFAULT_MIX = "overview=0.6,fabric=0.2,gpus=0.2"
CLUSTER = "demo"
LAG_TICK_S = 0.1


#
# Pure helpers (tests/bench/test_push_load.py): no Django, no I/O
#


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between the closest ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def parse_mix(text: str) -> dict[str, float]:
    """`overview=0.6,fabric=0.2,gpus=0.2` -> weights summing to 1, in PAGE_TOPICS order."""
    weights: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        name = name.strip()
        if name not in PAGE_TOPICS:
            raise ValueError(f"unknown topic {name!r} in --mix; known: {', '.join(PAGE_TOPICS)}")
        weight = float(value) if value else 1.0
        if weight < 0:
            raise ValueError(f"negative weight for {name} in --mix")
        weights[name] = weights.get(name, 0.0) + weight
    total = sum(weights.values())
    if total <= 0:
        raise ValueError("--mix names no topic with a weight above 0")
    return {t: weights[t] / total for t in PAGE_TOPICS if weights.get(t)}


def assign_topics(n: int, mix: dict[str, float]) -> list[str]:
    """The topic of each of n clients: counts by largest remainder, interleaved (client i's page does not depend on
    how many there are after it, so connection order does not put one page's sockets all at the end)."""
    exact = {t: n * w for t, w in mix.items()}
    counts = {t: math.floor(v) for t, v in exact.items()}
    for t in sorted(exact, key=lambda t: (counts[t] - exact[t], list(mix).index(t)))[: n - sum(counts.values())]:
        counts[t] += 1
    out: list[str] = []
    given = dict.fromkeys(counts, 0)
    for i in range(n):  # the topic furthest behind its share so far
        t = max(counts, key=lambda t: (counts[t] * (i + 1) / n - given[t], -list(mix).index(t)))
        given[t] += 1
        out.append(t)
    return out


def marker(poll: int) -> int:
    return poll % MARKER_PERIOD


def marker_pct(poll: int) -> int:
    """The percentage that carries the poll's marker (GPU utilisation mean and marker GPU, marker link)."""
    return MARKER_BASE + marker(poll)


def marker_from_pct(value: float | None) -> int | None:
    """Back from a percentage to the marker; None when it cannot be one."""
    if value is None:
        return None
    m = round(value) - MARKER_BASE
    return m if 0 <= m < MARKER_PERIOD and abs(value - round(value)) < 0.01 else None


def gpu_utils(poll: int, count: int, salt: int, quiet_first_pair: bool = False) -> list[float]:
    """A node's GPU utilisations (1 decimal, %): pairs spread either side of the poll's marker percentage, so the
    mean of all GPUs is exactly that percentage; the first pair of the marker node sits on it."""
    base = float(marker_pct(poll))
    out = [base] * count
    for j in range(count // 2):
        d = 0.0 if quiet_first_pair and j == 0 else ((salt * 31 + j * 17 + poll * 13) % int(GPU_SPREAD * 10 + 1)) / 10
        out[2 * j], out[2 * j + 1] = round(base + d, 1), round(base - d, 1)
    return out


def port_util(index: int, poll: int) -> float:
    """The load of any port but the marker's: under OTHER_PORT_MAX, different each poll."""
    return ((index * 7919 + poll * 104729) % 1000) / 1000 * OTHER_PORT_MAX


def poll_of(mark: int, arrival: float, collected: Sequence[float]) -> int | None:
    """The poll a frame shows: the newest poll with this marker collected before the frame arrived (collected[k] is
    poll k's collection time), or None."""
    k = len(collected) - 1
    k -= (k - mark) % MARKER_PERIOD
    while k >= 0:
        if collected[k] <= arrival:
            return k
        k -= MARKER_PERIOD
    return None


def _column(col: dict, n: int, body: bytes, rows: Iterable[int] | None = None) -> list:
    """Values of one column of broadcast.wire's binary form (the layout its comment and docs/dashboard.md give)."""
    code = {"u8": "B", "u16": "H", "u32": "I", "f64": "d"}[col["t"]]
    raw = struct.unpack_from(f"<{n}{code}", body, col["o"])
    if col["e"] == "f64":
        values = list(raw)
    elif col["e"] == "table":
        absent = col.get("absent")
        values = [None if r == absent else col["v"][r] for r in raw]
    elif col["e"] == "delta":
        values, v = [], col["first"]
        for i, r in enumerate(raw):
            if i:
                v += r + col["base"]
            values.append(v)
    else:
        null = col.get("null")
        values = [None if r == null else r + col["base"] for r in raw]
    scale = col.get("s", 1)
    if scale != 1:
        values = [None if v is None else v / scale for v in values]
    return values if rows is None else [values[i] for i in rows]


def binary_value(message: bytes, part: str, item_id: str, key: str) -> tuple[dict, float | None]:
    """(the frame's header, the `key` of the item `item_id` in list or map `part`) of a binary frame; the value is
    None when the frame does not carry it. Only the id column and that one column are read."""
    (size,) = struct.unpack_from("<I", message, 0)
    header = json.loads(message[4 : 4 + size])
    body = memoryview(message)[4 + size :]
    ref = (header.get("data") or {}).get(part)
    if not isinstance(ref, dict) or not ({"$rows", "$byid"} & ref.keys()):
        return header, None
    table = header["tables"][ref.get("$rows", ref.get("$byid"))]
    cols = {c["k"]: c for c in table["cols"]}
    if "id" not in cols or key not in cols:
        return header, None
    ids = _column(cols["id"], table["n"], body)
    try:
        row = [str(i) for i in ids].index(item_id)
    except ValueError:
        return header, None
    (value,) = _column(cols[key], table["n"], body, [row])
    return header, value


def frame_marker(message: str | bytes, marks: dict[str, str]) -> tuple[str, str, int, int | None]:
    """(type, topic, seq, marker or None) of a frame as a socket receives it. `marks` names the marker GPU's id
    ("gpu") and the marker link's id ("link") as the frames spell them."""
    if isinstance(message, bytes):
        topic_key = {"gpus": ("gpus", marks.get("gpu", ""), "util"), "fabric": ("links", marks.get("link", ""), "util")}
        (size,) = struct.unpack_from("<I", message, 0)
        topic = json.loads(message[4 : 4 + size]).get("topic")
        if topic not in topic_key:
            header = json.loads(message[4 : 4 + size])
            return header.get("type", ""), str(topic), int(header.get("seq", 0)), None
        header, value = binary_value(message, *topic_key[topic])
        if value is not None and topic == "fabric":
            value *= 100
        return header["type"], topic, int(header["seq"]), marker_from_pct(value)
    frame = json.loads(message)
    topic, mark = frame.get("topic", ""), None
    if topic == "overview":
        mean = ((frame.get("data") or {}).get("utilisation") or {}).get("mean")
        mark = None if mean is None else marker_from_pct(mean * 100)
    return frame.get("type", ""), topic, int(frame.get("seq", 0)), mark


def first_shown(frames: Sequence[tuple[int, float]], polls: Iterable[int]) -> dict[int, float | None]:
    """For each poll, when a client first had it or a newer one: `frames` = (poll, arrival) in arrival order."""
    out: dict[int, float | None] = {}
    best, i, at = -1, 0, None
    for p in sorted(polls):
        while best < p and i < len(frames):
            best = max(best, frames[i][0])
            at = frames[i][1]
            i += 1
        out[p] = at if best >= p else None
    return out


#
# The clients (a subprocess: --client-role): asyncio + websockets
#


async def _client(i: int, cfg: dict, topic: str, gate: asyncio.Semaphore, stop: asyncio.Event, out: dict) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidStatus

    memo: dict = cfg["memo"]
    rec = out.setdefault(i, {"topic": topic, "state": "connecting", "bytes": 0, "snapshot_bytes": 0, "frames": []})
    url = f"{cfg['url']}?topics={topic}"
    try:
        async with gate:
            t0 = time.time()
            ws = await connect(
                url, origin=cfg["origin"], additional_headers={"Cookie": cfg["cookie"]}, proxy=None,
                compression="deflate" if cfg["deflate"] else None, max_size=None, ping_interval=None,
                open_timeout=cfg["open_timeout"], close_timeout=2,
            )  # fmt: skip
            joiner = Joiner()  # a big snapshot comes in parts (dashboard.parts)
            first = None
            while first is None:
                first = joiner.feed(await asyncio.wait_for(ws.recv(), cfg["open_timeout"]))
        rec["connect_s"] = time.time() - t0
    except InvalidStatus as exc:
        rec.update(state="failed", why=f"HTTP {exc.response.status_code}")
        return
    except ConnectionClosed as exc:
        rec.update(state="failed", why=f"closed {exc.rcvd.code if exc.rcvd else 1006}")
        return
    except (TimeoutError, OSError) as exc:
        rec.update(state="failed", why=type(exc).__name__)
        return
    kind, _, snap_seq, _ = frame_marker(first, cfg["marks"])
    rec.update(state="open", snapshot_bytes=len(first), snapshot_seq=snap_seq, first_type=kind)
    last_seq = snap_seq
    frames = rec["frames"]
    receiving = asyncio.ensure_future(_receive(ws, joiner, memo, cfg["marks"], rec, frames, last_seq))
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({receiving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not receiving.done():
        receiving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await receiving
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ws.close(), 3)
    stopping.cancel()


async def _receive(ws, joiner: Joiner, memo: dict, marks: dict, rec: dict, frames: list, last_seq: int) -> None:
    from websockets.exceptions import ConnectionClosed

    try:
        async for received in ws:
            at = time.time()
            rec["bytes"] += len(received)
            message = joiner.feed(received)
            if message is None:
                continue
            key = message[: 4 + struct.unpack_from("<I", message, 0)[0]] if isinstance(message, bytes) else message
            seen = memo.get(key)
            if seen is None:
                seen = memo[key] = frame_marker(message, marks)
            _, _, seq, mark = seen
            if seq <= last_seq:
                rec["stale"] = rec.get("stale", 0) + 1  # already in the snapshot
                continue
            if seq != last_seq + 1:
                rec["gaps"] = rec.get("gaps", 0) + seq - last_seq - 1
            last_seq = seq
            frames.append((mark, at, len(message)))
    except ConnectionClosed as exc:
        rec.update(state="closed", code=exc.rcvd.code if exc.rcvd else 1006)


async def _clients_main(cfg: dict) -> dict:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def read_stdin() -> None:  # "stop" from the parent; EOF (parent gone) also stops
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=read_stdin, daemon=True).start()
    cfg["memo"] = {}
    out: dict[int, dict] = {}
    gate = asyncio.Semaphore(cfg["concurrency"])
    tasks = [asyncio.ensure_future(_client(i, cfg, t, gate, stop, out)) for i, t in cfg["clients"]]

    async def report_connected() -> None:
        deadline = loop.time() + cfg["connect_timeout"]
        while any(r.get("state") == "connecting" for r in out.values()) or len(out) < len(tasks):
            if stop.is_set() or loop.time() > deadline:  # the run goes on with those connected by then
                break
            await asyncio.sleep(0.05)
        states = Counter(r["state"] for r in out.values())
        print("connected " + json.dumps(dict(states)), flush=True)

    await report_connected()
    lags: list[tuple[float, float]] = []  # (when, how late a 100 ms sleep woke): this process's own delay
    while not stop.is_set():
        t = loop.time()
        await asyncio.sleep(LAG_TICK_S)
        lags.append((time.time(), loop.time() - t - LAG_TICK_S))
    await asyncio.wait(tasks, timeout=15)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"clients": out, "peak_rss_mib": usage.ru_maxrss / 1024, "lags": lags}


def client_role() -> None:
    cfg = json.loads(sys.stdin.readline())
    result = asyncio.run(_clients_main(cfg))
    print("result " + json.dumps(result), flush=True)


#
# Processes: the server stack and the clients, each in its own process group, stopped by PID
#


class Service:
    def __init__(self, name: str, argv: list[str], env: dict[str, str], folder: Path, **popen) -> None:
        self.name, self.argv = name, argv
        self.log_path = folder / f"{name}.log"
        self.log = open(self.log_path, "wb")  # closed in stop()
        popen.setdefault("stdout", self.log)
        popen.setdefault("stderr", self.log)
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, start_new_session=True, **popen)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 15) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self, grace: float = 10.0) -> None:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            if self.proc.poll() is None or sig == signal.SIGKILL:  # the group: prefork children that outlived it too
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=wait)
        with contextlib.suppress(OSError):
            self.log.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def compose_command(service: str, port: int, env: dict[str, str]) -> list[str]:
    """A service's command from docker-compose.yml, ${VAR:-default} filled in as compose does, this venv's
    executables, and the web server bound to 127.0.0.1:port."""
    import yaml

    argv = [str(a) for a in yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"][service]["command"]]
    argv = [re.sub(r"\$\{(\w+)(?::?-([^}]*))?\}", lambda m: env.get(m.group(1)) or m.group(2) or "", a) for a in argv]
    exe = Path(sys.executable).parent / argv[0]
    argv[0] = str(exe) if exe.exists() else argv[0]
    for i, flag in enumerate(argv[:-1]):
        if flag in ("--host", "-b", "--bind"):
            argv[i + 1] = "127.0.0.1"
        elif flag in ("--port", "-p"):
            argv[i + 1] = str(port)
    return argv


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def machine_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot (/proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return sum(values[:8]) - idle, sum(values[:8])


def proc_tree(pid: int) -> list[int]:
    """pid and its descendants (a prefork worker's children)."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                children[int(stat.rsplit(")", 1)[1].split()[1])].append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def mem_kib(pids: Iterable[int], field: str) -> int:
    """Sum of /proc/<pid>/status `field` (VmRSS, VmHWM) in KiB."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(field + ":"):
                    total += int(line.split()[1])
    return total


def cpu_s(pids: Iterable[int]) -> float:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


class Watched:
    """A service's process tree: RSS sampled, VmHWM and CPU read at the end."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.peak_rss = 0
        self.pids: set[int] = set()

    def sample(self) -> int:
        pids = proc_tree(self.service.pid)
        self.pids.update(pids)
        rss = mem_kib(pids, "VmRSS")
        self.peak_rss = max(self.peak_rss, rss)
        return rss

    def hwm(self) -> int:
        return mem_kib(proc_tree(self.service.pid), "VmHWM")

    def cpu(self) -> float:
        return cpu_s(proc_tree(self.service.pid))


class TimedOut(Exception):
    pass


#
# Telemetry: one full poll of the cluster, its marker values
#


class Poller:
    def __init__(self, cluster_id: int) -> None:
        from fabric.collectors.samples import FABRIC_SOURCE
        from fabric.models import GPU, Node, Port
        from fabric.topology.graph import natural_key

        self.cluster_id = cluster_id
        self.source = FABRIC_SOURCE
        gpus: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for host, index, pk in GPU.objects.filter(node__cluster_id=cluster_id).values_list(
            "node__hostname", "index", "pk"
        ):
            gpus[host].append((index, pk))
        self.gpus = {h: sorted(v) for h, v in gpus.items()}
        host_ports: dict[str, list[tuple[str, int, float, int]]] = defaultdict(list)
        for host, device, number, cap, link in Port.objects.filter(
            cluster_id=cluster_id, hca__node__isnull=False, link__isnull=False
        ).values_list("hca__node__hostname", "hca__device", "number", "link__capacity_gbps", "link_id"):
            host_ports[host].append((device, number, cap or 400.0, link))
        self.host_ports = {h: sorted(v) for h, v in host_ports.items()}
        self.switch_ports = list(
            Port.objects.filter(cluster_id=cluster_id, switch__isnull=False, link__isnull=False)
            .order_by("pk")
            .values_list("switch__guid", "number", "link__capacity_gbps")
        )
        self.hosts = sorted(set(self.gpus) | set(self.host_ports), key=natural_key)
        compute = set(Node.objects.filter(cluster_id=cluster_id, role="compute").values_list("hostname", flat=True))
        self.marker_host = next(h for h in self.hosts if h in compute and self.gpus.get(h) and self.host_ports.get(h))
        self.marker_gpu = self.gpus[self.marker_host][0][1]
        self.marker_port = self.host_ports[self.marker_host][0][:2]
        self.marker_link = self.host_ports[self.marker_host][0][3]
        self.counters: dict[tuple, tuple[int, int]] = {}
        self.last_t: float | None = None

    def sizes(self) -> str:
        return (
            f"{len(self.hosts)} hosts, {sum(map(len, self.gpus.values())):,} GPUs, "
            f"{sum(map(len, self.host_ports.values())):,} host ports, {len(self.switch_ports):,} switch ports"
        )

    def _counters(self, key: tuple, util: float, cap: float, dt: float) -> dict[str, int]:
        tx, rx = self.counters.get(key, (10**9, 10**9))
        units = cap * 1e9 / 32 * dt  # port_xmit_data counts 4-octet units: a fully loaded link's units in dt
        tx, rx = tx + round(units * util), rx + round(units * util * 0.9)
        self.counters[key] = (tx, rx)
        return {"port_xmit_data": tx, "port_rcv_data": rx, "port_xmit_packets": tx // 1024,
                "port_rcv_packets": rx // 1024, "port_xmit_wait": 0, "symbol_error": 0, "link_downed": 0,
                "port_rcv_errors": 0, "link_error_recovery": 0, "port_xmit_discards": 0}  # fmt: skip

    def samples(self, poll: int, t: float) -> list:
        from fabric.collectors.samples import GpuSample, NodeSample, PortSample

        dt = 1.0 if self.last_t is None else t - self.last_t
        self.last_t = t
        out = []
        port_i = 0
        for salt, host in enumerate(self.hosts):
            gpu_list = self.gpus.get(host, [])
            utils = gpu_utils(poll, len(gpu_list), salt, quiet_first_pair=host == self.marker_host)
            gpus = [GpuSample(index=index, utilisation_gpu_pct=u, utilisation_memory_pct=30.0,
                              memory_used_mib=40_000.0, memory_free_mib=41_559.0, memory_total_mib=81_559.0,
                              temperature_c=55.0, temperature_limit_c=87.0, power_w=500.0, power_limit_w=700.0,
                              sm_clock_mhz=1980.0, ecc_uncorrected=0, ecc_corrected=0, remapped_rows_pending=False,
                              remapped_rows_failure=False, mig_enabled=False)
                    for (index, _), u in zip(gpu_list, utils, strict=True)]  # fmt: skip
            ports = []
            for device, number, cap, _ in self.host_ports.get(host, []):
                marked = host == self.marker_host and (device, number) == self.marker_port
                util = marker_pct(poll) / 100 if marked else port_util(port_i, poll)
                port_i += 1
                counters = self._counters((host, device, number), util, cap, dt)
                ports.append(PortSample(device=device, port=number, state="ACTIVE", phys_state="LinkUp",
                                        rate_gbps=cap, counters=counters))  # fmt: skip
            out.append(NodeSample(node=host, collected_at=t, collector="bench", gpus=gpus, ports=ports))
        fabric = []
        for guid, number, cap in self.switch_ports:
            util = port_util(port_i, poll)
            port_i += 1
            fabric.append(PortSample(device="0x" + guid, port=number, guid="0x" + guid, state="ACTIVE",
                                     counters=self._counters((guid, number), util, cap or 400.0, dt)))  # fmt: skip
        out.append(NodeSample(node=self.source, collected_at=t, collector="bench", ports=fabric))
        return out


def marker_link_id(cluster_id: int, poll: int) -> str:
    """The id the fabric topic gives the marker link (its group's folded link above 256 nodes): the one link whose
    util is the poll's marker, every other being under OTHER_PORT_MAX."""
    from dashboard import selectors

    links = selectors.build(cluster_id, ("fabric",))["fabric"]["links"]
    want = marker_pct(poll) / 100
    found = [str(link["id"]) for link in links if abs(link["util"] - want) < 0.001]
    if len(found) != 1:
        raise RuntimeError(f"marker link: {len(found)} links at {want:.2f} after poll {poll}, expected 1")
    return found[0]


#
# The run
#


def say(msg: str) -> None:
    print(msg, flush=True)


def ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:,.0f}"


def spread(values: Sequence[float]) -> str:
    return (
        f"p50 {ms(percentile(values, 50))} ms, p95 {ms(percentile(values, 95))} ms, "
        f"p99 {ms(percentile(values, 99))} ms, max {ms(max(values) if values else None)} ms"
    )


def service_env(secret: str) -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "DATABASE_URL", "REDIS_URL")
    return {
        **{k: v for k, v in os.environ.items() if k in keep},
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "DJANGO_SETTINGS_MODULE": "clusterctl.settings",
        "SECRET_KEY": secret,
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",  # plain HTTP on loopback; the sockets are not affected either way
        "DB_CONN_MAX_AGE": "0",  # as docker-compose.yml runs web
        "LOG_LEVEL": "INFO",
    }


def wait_http(port: int, service: Service, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not service.alive():
            raise RuntimeError(f"{service.name} exited ({service.proc.returncode}):\n{service.tail()}")
        try:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/healthz", headers={"Host": "127.0.0.1"})
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
            with contextlib.suppress(urllib.error.HTTPError):
                opener.open(req, timeout=5)
            return
        except (OSError, urllib.error.URLError):
            time.sleep(0.2)
    raise RuntimeError(f"{service.name} did not answer on 127.0.0.1:{port} in {timeout:.0f} s:\n{service.tail()}")


def wait_log(service: Service, pattern: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not service.alive():
            raise RuntimeError(f"{service.name} exited ({service.proc.returncode}):\n{service.tail()}")
        with contextlib.suppress(OSError):
            if re.search(pattern, service.log_path.read_text(errors="replace")):
                return
        time.sleep(0.2)
    raise RuntimeError(f"{service.name}: no {pattern!r} in its log in {timeout:.0f} s:\n{service.tail()}")


EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Consumer)(: .*)?$")
CHAINED = ("The above exception", "During handling of the above exception")


def server_errors(text: str) -> str:
    """The exceptions in a web server's log (uvicorn's or daphne's), counted by the last line of each traceback:
    what ended a consumer or a request."""
    found: Counter = Counter()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not EXCEPTION_LINE.match(line):
            continue
        after = next((x for x in lines[i + 1 : i + 4] if x.strip()), "")
        if not after.startswith(CHAINED):  # the cause of a later exception: counted as that one
            found[line[:120]] += 1
    return "; ".join(f"{n} x {what}" for what, n in found.most_common(5)) or "no exceptions"


def group_members(cluster_id: int) -> dict[str, int]:
    """Subscribers of the fabric socket's groups in the Redis pub/sub channel layer (a web process subscribes to a
    group's channel `<prefix>__group__<name>` while one of its sockets is in the group): PUBSUB NUMSUB."""
    import redis
    from django.conf import settings

    from dashboard import broadcast
    from dashboard.topics import FABRIC_TOPICS

    prefix = settings.CHANNEL_LAYERS["default"].get("CONFIG", {}).get("prefix", "asgi")
    client = redis.Redis.from_url(settings.REDIS_URL)
    groups = [broadcast.fabric_group(cluster_id, t) for t in FABRIC_TOPICS]
    counts = dict(client.pubsub_numsub(*(f"{prefix}__group__{g}" for g in groups)))
    return {g: int(counts.get(f"{prefix}__group__{g}".encode(), 0)) for g in groups}


def task_runtimes(log_path: Path, offset: int) -> list[float]:
    """Run times of dashboard.tasks.broadcast in the worker's log after `offset` (Celery's 'succeeded in' lines)."""
    with open(log_path, "rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    return [float(s) for s in re.findall(r"dashboard\.tasks\.broadcast\[[^\]]+\] succeeded in ([0-9.]+)s", text)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=30.0, help="telemetry polls for this long once all connected")
    ap.add_argument("--servers", type=int, default=128, help="compute servers of the demo cluster (x 8 H100)")
    ap.add_argument("--mix", default=DEFAULT_MIX, help=f"topics of the clients' pages (default {DEFAULT_MIX})")
    ap.add_argument(
        "--server",
        choices=("compose", "daphne"),
        default="compose",
        help="web server: docker-compose.yml's (uvicorn, as shipped) or daphne",
    )
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between polls")
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds of polls left out of the figures")
    ap.add_argument("--drain", type=float, default=5.0, help="seconds to wait for frames after the last poll")
    ap.add_argument("--client-procs", type=int, default=0, help="client processes (default: 1 per 500 clients)")
    ap.add_argument("--connect-concurrency", type=int, default=50, help="handshakes in flight per client process")
    ap.add_argument("--connect-timeout", type=float, default=300.0,
                    help="seconds for all to connect; the run goes on with those connected by then")  # fmt: skip
    ap.add_argument("--no-deflate", action="store_true", help="clients do not offer permessage-deflate")
    ap.add_argument("--timeout", type=float, default=1200.0, help="hard limit on the whole run, seconds")
    ap.add_argument("--client-role", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client_role:
        client_role()
        return 0
    mix = parse_mix(args.mix)
    if not os.environ.get("DATABASE_URL") or not os.environ.get("REDIS_URL"):
        sys.exit("set DATABASE_URL and REDIS_URL to databases of your own (they are emptied): scripts/with_services.py")

    load = os.getloadavg()
    say(f"host: {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} before the run")

    return supervised(lambda folder, services: run(args, mix, folder, services), timeout=args.timeout,
                      prefix="bench-push-load-")  # fmt: skip


def supervised(body, *, timeout: float, prefix: str, keep: bool = True, say=say) -> int:
    """`body(folder, services)` in a new temporary folder, bounded by `timeout` seconds, stopped by Ctrl-C or SIGTERM
    too: every service it put in `services` is stopped whatever happens, the last lines of their logs shown when it
    fails. The folder (the services' logs) stays when `keep`. Returns body's code, 2 when it failed, 130 when
    stopped."""

    def on_alarm(signum, frame):
        raise TimedOut(f"the run went over --timeout {timeout:.0f} s")

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, on_term)
    signal.alarm(max(1, math.ceil(timeout)))
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    services: list[Service] = []
    try:
        return body(folder, services)
    except (TimedOut, RuntimeError) as exc:
        say(f"FAILED: {exc}")
        for s in services:
            say(f"--- {s.name} log ({s.log_path}), last lines:\n{s.tail()}")
        return 2
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    finally:
        signal.alarm(0)
        for s in reversed(services):
            s.stop()
        if services:
            say(f"stopped {', '.join(f'{s.name} (pid {s.pid})' for s in services)}")
        say(f"logs in {folder}" if keep else f"removed {folder}")
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def run(args, mix: dict[str, float], folder: Path, services: list[Service]) -> int:
    secret = secrets.token_urlsafe(40)
    env = service_env(secret)
    os.environ.update({k: v for k, v in env.items() if k not in ("PATH", "HOME")})
    import io

    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.core.management import call_command
    from django.test import Client

    from dashboard import broadcast
    from fabric.ingest import ingest_samples
    from fabric.models import Cluster

    t0 = time.perf_counter()
    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    cache.clear()  # the broadcaster's baselines, sequence numbers and the broker's queues of an earlier run
    call_command("demo", "--no-serve", "--nodes", str(args.servers), stdout=io.StringIO())
    cluster_id = Cluster.objects.get(name=CLUSTER).pk
    user, _ = get_user_model().objects.get_or_create(username="bench-operator", defaults={"is_staff": True})
    user.is_staff = True
    user.save()
    client = Client()
    logging.getLogger("axes").setLevel(logging.WARNING)  # not a line per sign-in
    client.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    poller = Poller(cluster_id)
    say(f"set-up: demo cluster at {args.servers} servers ({poller.sizes()}) in {time.perf_counter() - t0:.1f} s")

    port = _free_port()
    web_argv = (
        compose_command("web", port, env)
        if args.server == "compose"
        else [
            str(Path(sys.executable).parent / "daphne"),
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "clusterctl.asgi:application",
        ]
    )
    worker_argv = compose_command("worker", port, env)
    services.append(Service("worker", worker_argv, env, folder))
    services.append(Service("web", web_argv, env, folder))
    worker, web = services
    wait_http(port, web, 60)
    wait_log(worker, r"celery@\S+ ready", 90)
    say(f"web:    {' '.join(web_argv)}  (pid {web.pid})")
    say(f"worker: {' '.join(worker_argv)}  (pid {worker.pid})")
    watched = {"web": Watched(web), "worker": Watched(worker)}

    collected: list[float] = []  # per poll: when its samples were read
    started: list[float] = []  # ingest_samples called
    returned: list[float] = []  # ingest_samples returned (its broadcast enqueued)
    # The countdown each ingest's broadcast was enqueued with (broadcast.schedule: it waits for the group's
    # one-per-second window), seen by wrapping the enqueue in this process only; None: the ingest enqueued nothing,
    # a broadcast was already waiting and takes its topics along.
    countdowns: list[float | None] = []
    enqueue = broadcast._enqueue

    def observed_enqueue(cid: int, countdown: float) -> None:
        enqueue(cid, countdown)
        if cid == cluster_id and countdowns and countdowns[-1] is None:
            countdowns[-1] = countdown

    broadcast._enqueue = observed_enqueue

    def poll() -> None:
        k = len(collected)
        t = time.time()
        batch = poller.samples(k, t)
        t1 = time.time()
        countdowns.append(None)
        ingest_samples(cluster_id, batch)
        t2 = time.time()
        collected.append(t)
        started.append(t1)
        returned.append(t2)

    poll()  # seeds the counters: no rates yet
    poll()
    marks = {"gpu": str(poller.marker_gpu), "link": marker_link_id(cluster_id, len(collected) - 1)}
    say(
        f"markers: GPU {marks['gpu']} of {poller.marker_host}, link {marks['link']} (its port "
        f"{poller.marker_host}/{poller.marker_port[0]}/{poller.marker_port[1]})"
    )
    time.sleep(2.0)  # the seed polls' broadcasts go out before anyone listens
    rss_before = {name: w.sample() for name, w in watched.items()}

    # Clients
    topics = assign_topics(args.clients, mix)
    n_procs = args.client_procs or max(1, math.ceil(args.clients / 500))
    cfg = {
        "url": f"ws://127.0.0.1:{port}/ws/clusters/{cluster_id}/fabric/",
        "origin": f"http://127.0.0.1:{port}",
        "cookie": cookie,
        "marks": marks,
        "deflate": not args.no_deflate,
        "concurrency": args.connect_concurrency,
        "open_timeout": 30,
        "connect_timeout": args.connect_timeout,
    }
    lines: dict[int, queue.Queue] = {}
    procs: list[Service] = []
    t_connect = time.time()
    web_w = watched["web"]
    cpu_connect0 = web_w.cpu()
    for p in range(n_procs):
        mine = [(i, t) for i, t in enumerate(topics) if i % n_procs == p]
        proc = Service(
            f"clients{p}",
            [sys.executable, str(Path(__file__).resolve()), "--client-role"],
            env,
            folder,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        services.append(proc)
        procs.append(proc)
        proc.proc.stdin.write(json.dumps({**cfg, "clients": mine}) + "\n")
        proc.proc.stdin.flush()
        q: queue.Queue = queue.Queue()
        lines[p] = q
        threading.Thread(target=lambda f=proc.proc.stdout, q=q: [q.put(x) for x in f], daemon=True).start()

    def line_from(p: int, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = lines[p].get(timeout=0.5)
            except queue.Empty:
                if not procs[p].alive():
                    raise RuntimeError(f"client process {p} exited:\n{procs[p].tail()}") from None
                continue
            if line.startswith(prefix):
                return line[len(prefix) :]
        raise RuntimeError(f"client process {p}: no '{prefix.strip()}' line in {timeout:.0f} s")

    states: Counter = Counter()
    for p in range(n_procs):
        states.update(json.loads(line_from(p, "connected ", args.connect_timeout + 30)))
    connect_s = time.time() - t_connect
    say(
        f"clients: {args.clients:,} asked in {n_procs} process(es) "
        f"({', '.join(f'{t} {n}' for t, n in Counter(topics).items())}); after {connect_s:.1f} s "
        f"({args.clients / connect_s:,.1f} connects/s; web CPU {(web_w.cpu() - cpu_connect0) / connect_s * 100:.0f} % "
        f"of one core meanwhile): {', '.join(f'{n} {s}' for s, n in states.items())}"
    )
    time.sleep(1.0)
    rss_connected = {name: w.sample() for name, w in watched.items()}
    try:
        joined = group_members(cluster_id)
    except Exception as exc:  # a figure, not worth the rest of the report
        joined = {f"unreadable ({type(exc).__name__}: {exc})": 0}

    # Telemetry at 1 Hz
    first_measured = len(collected) + math.ceil(args.warmup / args.interval)
    n_polls = math.ceil(args.seconds / args.interval)
    log_offset = worker.log_path.stat().st_size
    cpu0 = {name: w.cpu() for name, w in watched.items()}
    cpu0["clients"] = sum(cpu_s(proc_tree(p.pid)) for p in procs)
    cpu0["bench"] = own_cpu_s()
    machine0 = machine_cpu()
    t_run = time.time()
    late = 0
    tick = time.monotonic()
    for _ in range(n_polls):
        wait = tick - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        elif wait < -0.05:
            late += 1
        poll()
        for w in watched.values():
            w.sample()
        tick += args.interval
        if not web.alive() or not worker.alive():
            raise RuntimeError(f"{'web' if not web.alive() else 'worker'} exited during the run")
    time.sleep(args.drain)  # the last polls' frames
    t_end = time.time()
    run_s = t_end - t_run
    cpu1 = {name: w.cpu() for name, w in watched.items()}
    cpu1["clients"] = sum(cpu_s(proc_tree(p.pid)) for p in procs)
    cpu1["bench"] = own_cpu_s()
    machine1 = machine_cpu()
    hwm = {name: w.hwm() for name, w in watched.items()}
    rss_end = {name: w.sample() for name, w in watched.items()}
    runtimes = task_runtimes(worker.log_path, log_offset)
    web_log_at_stop = web.log_path.stat().st_size
    for proc in procs:
        with contextlib.suppress(OSError):
            proc.proc.stdin.write("stop\n")
            proc.proc.stdin.flush()
    results: dict[str, dict] = {}
    client_rss = []
    lags: list[float] = []
    for p in range(n_procs):
        got = json.loads(line_from(p, "result ", 60))
        results.update(got["clients"])
        client_rss.append(got["peak_rss_mib"])
        lags += [lag for at, lag in got["lags"] if t_run <= at <= t_end]

    time.sleep(3.0)  # the server handles the clients' departures before it is stopped
    try:
        left = group_members(cluster_id)
    except Exception as exc:  # a figure, not worth the rest of the report
        left = {f"unreadable ({type(exc).__name__}: {exc})": 0}
    report(args, results, collected, returned, first_measured, run_s, t_run)
    ingest_s = [r - s for r, s in zip(returned[2:], started[2:], strict=True)]
    collect_s = [s - c for c, s in zip(collected[2:], started[2:], strict=True)]
    say(
        f"telemetry: {n_polls} polls every {args.interval:g} s; per poll: samples built in "
        f"{statistics.median(collect_s) * 1000:,.0f} ms, ingest_samples {statistics.median(ingest_s) * 1000:,.0f} ms "
        f"median, {max(ingest_s) * 1000:,.0f} ms max; polls started late: {late}"
    )
    waits = [c for c in countdowns[first_measured:] if c is not None]
    say(
        f"broadcast countdown the ingest enqueued with (dashboard.broadcast.schedule's one-per-second window): "
        f"{spread(waits)}; polls that joined a broadcast already waiting: "
        f"{sum(c is None for c in countdowns[first_measured:])}; poll by poll (ms, - joined): "
        f"{' '.join('-' if c is None else f'{c * 1000:.0f}' for c in countdowns[2:])}"
    )
    if runtimes:
        say(f"broadcast task (worker log, {len(runtimes)} runs): {spread(runtimes)}")
    cpus: dict[str, float] = {}
    for name, w in watched.items():
        n = len(proc_tree(w.service.pid))
        per_client = (rss_connected[name] - rss_before[name]) / max(1, args.clients)
        cpu = (cpu1[name] - cpu0[name]) / run_s * 100
        cpus[name] = cpu
        say(
            f"{name} ({n} process{'es' if n > 1 else ''}): RSS {rss_before[name] / 1024:,.0f} MiB before the "
            f"clients, {rss_connected[name] / 1024:,.0f} MiB connected ({per_client:+,.1f} KiB per client), "
            f"{rss_end[name] / 1024:,.0f} MiB at the end; peak VmHWM {hwm[name] / 1024:,.0f} MiB "
            f"(sampled peak RSS {w.peak_rss / 1024:,.0f} MiB); CPU {cpu:.0f} % of one core during the polls"
        )
    say(
        f"client processes: peak RSS {', '.join(f'{r:,.0f}' for r in client_rss)} MiB; their event loops woke late by "
        f"{spread(lags)} (a frame waits that long in the client before its arrival is timed)"
    )
    for name in ("clients", "bench"):
        cpus[name] = (cpu1[name] - cpu0[name]) / run_s * 100
    busy, total = machine1[0] - machine0[0], machine1[1] - machine0[1]
    cores = os.cpu_count() or 1
    rest = busy / max(1, total) * cores * 100 - sum(cpus.values())
    say(
        f"machine: {busy / max(1, total) * 100:.0f} % of its {cores} CPUs busy during the polls; in % of one core: "
        f"web {cpus['web']:.0f}, worker {cpus['worker']:.0f}, clients {cpus['clients']:.0f}, this process (building "
        f"and ingesting the polls) {cpus['bench']:.0f}, the rest (PostgreSQL, Redis, other work) {rest:.0f}"
    )
    log = web.log_path.read_bytes()
    say(
        f"web log, exceptions up to the end of the run: {server_errors(log[:web_log_at_stop].decode(errors='replace'))}"
        f"; as the clients left: {server_errors(log[web_log_at_stop:].decode(errors='replace'))}"
    )
    say(
        f"channel layer groups, web processes subscribed: with the clients connected "
        f"{', '.join(f'{g} {n}' for g, n in joined.items())}; 3 s after every client left (0 expected) "
        f"{', '.join(f'{g} {n}' for g, n in left.items())}"
    )
    load = os.getloadavg()
    say(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


def report(args, results, collected, returned, first_measured, run_s, t_run) -> None:
    closed = Counter()
    failed = Counter()
    frames_total = 0
    per_topic: dict[str, list[float]] = defaultdict(list)
    per_topic_c: dict[str, list[float]] = defaultdict(list)
    shown: dict[str, list[float]] = defaultdict(list)
    unshown: Counter = Counter()
    repeats = unattributed = gaps = stale = early = 0
    bytes_by_topic: dict[str, list[tuple[int, int]]] = defaultdict(list)
    by_poll: dict[int, list[float]] = defaultdict(list)
    last_poll = len(collected) - 1
    for rec in results.values():
        topic = rec["topic"]
        if rec["state"] in ("failed", "connecting"):  # connecting: still not open when the run ended
            failed[rec.get("why", "still connecting at the end")] += 1
            continue
        if rec["state"] == "closed":
            closed[rec.get("code")] += 1
        bytes_by_topic[topic].append((rec["snapshot_bytes"], sum(size for _, at, size in rec["frames"] if at >= t_run)))
        gaps += rec.get("gaps", 0)
        stale += rec.get("stale", 0)
        seen: list[tuple[int, float]] = []
        for mark, at, _size in rec["frames"]:
            if at >= t_run:
                frames_total += 1
            if topic not in MEASURED_TOPICS:
                continue
            if mark is None:
                unattributed += 1
                continue
            k = poll_of(mark, at, collected)
            if k is None:
                unattributed += 1
                continue
            if seen and k <= seen[-1][0]:
                repeats += 1
                continue
            seen.append((k, at))
            if k >= first_measured:
                by_poll[k].append(at - returned[k])
                per_topic[topic].append(at - returned[k])
                per_topic_c[topic].append(at - collected[k])
                if at < returned[k]:
                    early += 1
        if topic in MEASURED_TOPICS:
            for k, at in first_shown(seen, range(first_measured, last_poll + 1)).items():
                if at is None:
                    unshown[topic] += 1
                else:
                    shown[topic].append(at - returned[k])
    opened = sum(1 for r in results.values() if r["state"] not in ("failed", "connecting"))
    connects = [r["connect_s"] for r in results.values() if "connect_s" in r]
    say(
        f"connected: {opened:,} of {len(results):,} (handshake to snapshot, {args.connect_concurrency} at a time per "
        f"client process: {spread(connects)}); failed: {dict(failed) or 'none'}; "
        f"closed before the end (close code: clients): {dict(closed) or 'none'}"
    )
    say(
        f"frames: {frames_total:,} pushed in {run_s:.1f} s = {frames_total / run_s:,.0f}/s "
        f"({frames_total / max(1, opened) / run_s:.2f}/s per client); seq gaps (missed frames) {gaps}, "
        f"already in the snapshot {stale}, a poll already shown {repeats}, without a poll's marker {unattributed}"
    )
    every = [v for vs in per_topic.values() for v in vs]
    flag = ""
    p99 = percentile(every, 99)
    if p99 is None:
        flag = "  NO FRAMES MEASURED"
    elif p99 * 1000 >= GOAL_P99_MS:
        flag = f"  ABOVE the {GOAL_P99_MS:.0f} ms goal"
    say(
        f"latency ingest returned -> frame, polls after a {args.warmup:g} s warm-up ({len(every):,} frames): "
        f"{spread(every)}{flag}"
    )
    for topic in MEASURED_TOPICS:
        if per_topic.get(topic):
            say(f"  {topic:8s} {len(per_topic[topic]):>6,} frames: {spread(per_topic[topic])}")
    say(
        "  median by poll (ms): "
        + " ".join(
            f"{statistics.median(by_poll[k]) * 1000:.0f}" if by_poll.get(k) else "-"
            for k in range(first_measured, last_poll + 1)
        )
    )
    every_c = [v for vs in per_topic_c.values() for v in vs]
    say(
        f"latency samples collected -> frame: {spread(every_c)}; frames that arrived before their poll's ingest "
        f"returned (the broadcaster read its latest state mid-ingest): {early}"
    )
    for topic in MEASURED_TOPICS:
        if topic in shown or unshown.get(topic):
            say(
                f"  shown within ({topic}): {spread(shown[topic])}; polls a client never had by the end "
                f"{unshown.get(topic, 0):,}"
            )
    for topic, pairs in bytes_by_topic.items():
        snap = statistics.mean(s for s, _ in pairs)
        pushed = statistics.mean(b for _, b in pairs)
        say(
            f"bytes per {topic} client: snapshot {snap:,.0f}, pushed {pushed:,.0f} in the run "
            f"({pushed / run_s:,.0f}/s; payload after permessage-deflate is undone)"
        )


if __name__ == "__main__":
    from peak_rss import peak_rss_line  # beside this script, which Python puts first on sys.path

    status = main()
    if "--client-role" not in sys.argv:
        print(peak_rss_line())
    sys.exit(status)
