"""Operator pages at scale (issue 16): time from navigation to drawn, in headless Chromium, on the production stack.

Goal: every operator page drawn within 5 s at 10,000 servers / 80,000 GPUs (3 s at 2,000), no WebSocket frame over
512 KB. Run it with a database and a Redis database of its own (both are emptied):

    .venv/bin/python scripts/with_services.py -- .venv/bin/python bench/bench_pages.py \\
        [--nodes 10000] [--pages overview,fabric,gpus,queue,job,alerts,report,plan,whatif] [--repeat 2] \\
        [--server compose|daphne]

Set-up, in this process: migrate, empty the database and the cache, `manage.py demo --no-serve --nodes N` (its
rail-optimised NDR fat tree of N x 8 H100, the 8-switch SX6036 cluster, pools, tenants, ~120 jobs), optionally
--gangs more 8-node gangs and a round, an operator (staff) with a password, and --storm alerts of one fault (the
alerts page lists the newest 500, its groups count them all). Then, as docker-compose.yml runs them, each in its own
process group and stopped by PID whatever happens: compose's Celery `worker` (it runs the broadcaster) and compose's
`web` command (uvicorn on clusterctl.asgi:application, no per-message deflate; `--server daphne`: daphne with its
default 1 MiB message limit, as `manage.py runserver` and the demo serve) on 127.0.0.1 and a free port, with DEBUG=0.
Telemetry: --polls polls of every node and every switch from the twin (the simulated cluster the demo
polls), ingested with fabric.ingest.ingest_samples as the demo's worker does; then the bench waits for the worker to
go idle (its broadcasts have built each topic's baseline in the cache, as in a running site).

What differs from a production host: static files are collected (as the Dockerfile does) into a temporary
STATIC_ROOT, named by a two-line settings module in the temporary folder that imports clusterctl.settings and sets
only that; plain HTTP on loopback, so SECURE_SSL_REDIRECT, SESSION_COOKIE_SECURE and CSRF_COOKIE_SECURE are off;
one machine runs PostgreSQL, Redis, the worker, the web server, this process and Chromium; beat is not running (no
periodic polls or rounds while the pages are timed: each page draws from its sockets' snapshots); LAUNCHER=twin, as
in the demo (the twin plays the placed jobs: there are no node agents to launch them).

Server-side, before the browser: for each topic, the time to build it from the database (dashboard.selectors.build,
what a socket's first snapshot costs when the broadcaster has no baseline in the cache), the time snapshot_frames
takes from the cached baseline (what a connect costs in a running site), the time to encode it for the wire
(broadcast.wire) and its size.

Browser: Debian's Chromium (never a downloaded one), headless, signed in through the login form. Each page is opened
--repeat times, each time in a new tab of the same browser context (its HTTP cache warm after the first). An init
script (injected by the DevTools protocol, so the pages' Content-Security-Policy does not apply to it) wraps the
page's WebSocket to time each frame (MessageEvent.timeStamp, when the renderer got it, and the page's handler) and
watches the DOM for the page's own "drawn" condition:

    overview  every cluster card has data-live="1" (its overview snapshot drawn)
    fabric    #fabric-summary[data-first-draw-at] set (fabric.js: the canvas drew the first snapshot)
    gpus      #gpu-heatmap[data-gpus] set (gpus.js laid the heat map out and drew it)
    queue     the badge says live and the page's [data-loading] notes are gone (the tables are drawn)
    job       the badge says live, the placement view drew (#job-fabric-summary[data-renders] > 0), the job's GPU
              rows and its history chart loaded
    alerts    the badge says live (the snapshot's rows and groups are drawn)
    report, plan, whatif   the load event (server-rendered, no socket)

"drawn" is the first frame painted after that condition held, in ms since the navigation started (the page's
performance.now()). Per page it prints: drawn; the server's HTML (navigation timing: request to last byte, its size);
the
socket wait (the socket created to its last first-snapshot arriving: handshake, snapshot read or built, encoded and
sent); the browser's work (the snapshot handlers, decode and draw, and from the last snapshot to drawn); the longest
main-thread long task (PerformanceObserver 'longtask') up to --settle s after drawn; the largest WebSocket frame and
all bytes received (Playwright's framereceived, exact bytes) and frames over 512 KB; the JS heap used (DevTools
Performance.getMetrics, after --settle s); the web server's peak RSS while the page loaded (sampled every 50 ms) and
its CPU time; sockets closed by the server (code) and page errors. A summary table, a list of what misses the goals,
the web server's exceptions, its VmHWM, and this process's peak RSS end the run.

Every wait is bounded (--page-timeout per page, --timeout for the whole run: SIGALRM); the browser, the worker and
the web server are stopped and the temporary folder (settings module, static files, logs) removed on every exit
(--keep: keep the folder, say where).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import secrets
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # (first when run as a script; not when a test loads this file)

from bench_push_load import TimedOut, supervised  # noqa: E402  (the same stack, started and stopped alike)

FRAME_BUDGET_BYTES = 512 * 1024
CLUSTER = "demo"
OPERATOR = ("bench-ops", "bench-ops-pw-" + secrets.token_hex(6))
ALL_PAGES = ("overview", "fabric", "gpus", "queue", "job", "alerts", "report", "plan", "whatif")
SOCKET_PAGES = {"overview", "fabric", "gpus", "queue", "job", "alerts"}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-component-update", "--disable-sync"]  # fmt: skip
VIEWPORT = {"width": 1366, "height": 768}


def goal_ms(nodes: int) -> float:
    """Issue 16: 3 s up to 2,000 servers, 5 s up to 10,000 (and beyond, the same 5 s)."""
    return 3000.0 if nodes <= 2000 else 5000.0


# Runs in every document before its own scripts (Playwright's add_init_script: DevTools, outside the page's CSP).
INIT_SCRIPT = r"""
(() => {
  if (window.top !== window || window.__bench) return;
  const B = (window.__bench = { sockets: [], frames: [], longtasks: [], cond: null, drawn: null, errors: [] });
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) B.longtasks.push([e.startTime, e.duration]);
    }).observe({ type: "longtask", buffered: true });
  } catch (error) {
    B.errors.push(`longtask observer: ${error}`);
  }
  const head = (data) => {
    if (typeof data === "string") return data.slice(0, 160);
    try {
      const n = new DataView(data).getUint32(0, true);
      return new TextDecoder().decode(new Uint8Array(data, 4, Math.min(n, 300, data.byteLength - 4)));
    } catch (error) {
      return "";
    }
  };
  const Native = window.WebSocket;
  class BenchSocket extends Native {
    constructor(...args) {
      super(...args);
      const s = { url: String(args[0]), created: performance.now(), opened: null, closed: null, code: null };
      this.__benchSocket = s;
      B.sockets.push(s);
      super.addEventListener("open", () => (s.opened = performance.now()));
      super.addEventListener("close", (e) => {
        s.closed = performance.now();
        s.code = e.code;
        s.reason = e.reason;
      });
    }
    addEventListener(type, listener, options) {
      if (type !== "message" || typeof listener !== "function") return super.addEventListener(type, listener, options);
      const s = this.__benchSocket;
      const wrapped = (event) => {
        const start = performance.now();
        try {
          return listener.call(this, event);
        } finally {
          const h = head(event.data);
          B.frames.push({
            url: s.url,
            type: (h.match(/"type":\s*"(\w+)"/) || [])[1] || "",
            topic: (h.match(/"topic":\s*"(\w+)"/) || [])[1] || "",
            at: event.timeStamp,
            start,
            end: performance.now(),
          });
        }
      };
      return super.addEventListener(type, wrapped, options);
    }
  }
  window.WebSocket = BenchSocket;

  const q = (s) => document.querySelector(s);
  const num = (el, name) => {
    const v = el && el.getAttribute(name);
    return v && /^[0-9.]+$/.test(v) ? Number(v) : 0;
  };
  const loadingDone = (root) => Boolean(root) && [...root.querySelectorAll("[data-loading]")].every((n) => n.hidden);
  const live = () => {
    const badge = q("#live-state");
    return Boolean(badge) && badge.dataset.state === "open";
  };
  const path = location.pathname;
  let cond = null;
  if (path === "/") {
    cond = () => {
      const cards = document.querySelectorAll("[data-role=cluster-card]");
      return cards.length > 0 && [...cards].every((c) => c.dataset.live === "1");
    };
  } else if (/\/clusters\/\d+\/fabric\/$/.test(path)) {
    cond = () => num(q("#fabric-summary"), "data-first-draw-at") > 0;
  } else if (/\/clusters\/\d+\/gpus\/$/.test(path)) {
    cond = () => num(q("#gpu-heatmap"), "data-gpus") > 0 || (live() && q("#gpu-empty") && !q("#gpu-empty").hidden);
  } else if (/\/clusters\/\d+\/queue\/$/.test(path)) {
    cond = () => live() && loadingDone(q("#page"));
  } else if (/\/clusters\/\d+\/jobs\/\d+\/$/.test(path)) {
    cond = () =>
      live() &&
      num(q("#job-fabric-summary"), "data-renders") > 0 &&
      (!q("#job-gpus") || loadingDone(q("#job-gpus"))) &&
      (!q("#job-history") || loadingDone(q("#job-history")));
  } else if (/\/clusters\/\d+\/alerts\/$/.test(path)) {
    cond = () => live();
  }
  const painted = () => {
    // The first frame painted after the condition held: a task posted from the next animation frame runs after it.
    window.requestAnimationFrame(() => {
      const channel = new MessageChannel();
      channel.port1.onmessage = () => (B.drawn = performance.now());
      channel.port2.postMessage(0);
    });
  };
  if (cond) {
    const check = () => {
      if (B.cond !== null) return;
      let ok = false;
      try {
        ok = cond();
      } catch (error) {
        B.errors.push(`draw condition: ${error}`);
      }
      if (!ok) return;
      B.cond = performance.now();
      observer.disconnect();
      painted();
    };
    const observer = new MutationObserver(check);
    observer.observe(document, { subtree: true, childList: true, attributes: true });
  } else {
    window.addEventListener("load", () => {
      B.cond = performance.now();
      painted();
    });
  }
})();
"""

# Read back from the page once drawn (page.evaluate runs through DevTools, outside the page's CSP).
COLLECT_SCRIPT = """() => {
  const B = window.__bench || {};
  const nav = performance.getEntriesByType("navigation")[0];
  const summary = document.querySelector("#fabric-summary");
  return {
    cond: B.cond, drawn: B.drawn, sockets: B.sockets || [], frames: B.frames || [], longtasks: B.longtasks || [],
    errors: B.errors || [],
    nav: nav ? {requestStart: nav.requestStart, responseStart: nav.responseStart, responseEnd: nav.responseEnd,
                dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd, status: nav.responseStatus || 0,
                bytes: nav.decodedBodySize || 0, transferred: nav.transferSize || 0} : null,
    fabric: summary ? {firstDrawAt: summary.dataset.firstDrawAt, snapshotMs: summary.dataset.snapshotMs,
                       renderMs: summary.dataset.renderMs, links: summary.dataset.links,
                       bundles: summary.dataset.bundles} : null,
    badge: (document.querySelector("#live-state") || {}).textContent || "",
  };
}"""


#
# Pure helpers (tests/bench/test_bench_pages.py)
#


def parse_pages(text: str) -> list[str]:
    """`overview,fabric` -> ["overview", "fabric"]; "all" or "" -> every page, in ALL_PAGES order."""
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names or names == ["all"]:
        return list(ALL_PAGES)
    unknown = [n for n in names if n not in ALL_PAGES]
    if unknown:
        raise ValueError(f"unknown page(s) {', '.join(unknown)}; known: {', '.join(ALL_PAGES)}")
    return list(dict.fromkeys(names))


def page_urls(cluster_id: int, job_id: int | None) -> dict[str, str]:
    c = cluster_id
    urls = {
        "overview": "/",
        "fabric": f"/clusters/{c}/fabric/",
        "gpus": f"/clusters/{c}/gpus/",
        "queue": f"/clusters/{c}/queue/",
        "alerts": f"/clusters/{c}/alerts/",
        "report": f"/clusters/{c}/report/",
        "plan": "/plan/",
        "whatif": "/whatif/",
    }
    if job_id is not None:
        urls["job"] = f"/clusters/{c}/jobs/{job_id}/"
    return urls


def phases(got: dict) -> dict:
    """Where a page's time went, from what COLLECT_SCRIPT read (all in ms since the navigation started).

    html: the request sent to the HTML's last byte (the server's view and the transfer); dcl: DOMContentLoaded;
    socket_wait: from the earliest socket created to the last first snapshot of a topic arriving (the handshake, the
    snapshot read from the cache or built, encoded and sent); handlers: the page's message handlers (decode, state,
    synchronous draw) of those first snapshots; after: from the last first snapshot's handler to drawn (deferred
    draws, layout, paint, and waiting behind other tasks)."""
    nav = got.get("nav") or {}
    out: dict = {
        "drawn": got.get("drawn"),
        "html": (nav.get("responseEnd") or 0) - (nav.get("requestStart") or 0) if nav else None,
        "ttfb": (nav.get("responseStart") or 0) - (nav.get("requestStart") or 0) if nav else None,
        "dcl": nav.get("dcl") if nav else None,
    }
    # The first snapshot of each (socket, topic) that arrived before the page was drawn (the fabric page draws before
    # its queue snapshot, which only adds the jobs' overlay).
    drawn_at = got.get("drawn")
    firsts: dict[tuple[str, str], dict] = {}
    for f in got.get("frames", []):
        key = (f.get("url", "").split("?")[0], f.get("topic", ""))
        if f.get("type") == "snapshot" and key not in firsts and (drawn_at is None or f["at"] <= drawn_at):
            firsts[key] = f
    sockets = got.get("sockets", [])
    if firsts and sockets:
        created = min(s["created"] for s in sockets)
        last = max(firsts.values(), key=lambda f: f["at"])
        out["socket_wait"] = last["at"] - created
        out["handlers"] = sum(f["end"] - f["start"] for f in firsts.values())
        out["queued"] = max(f["start"] - f["at"] for f in firsts.values())  # a snapshot waiting for the main thread
        handled = max(f["end"] for f in firsts.values())
        out["after"] = (got["drawn"] - handled) if got.get("drawn") is not None else None
        out["snapshots"] = {f"{k[1]} {k[0]}": round(f["end"] - f["start"]) for k, f in firsts.items()}
    drawn = got.get("drawn")
    limit = (drawn if drawn is not None else float("inf")) + got.get("settle_ms", 0)
    tasks = [d for s, d in got.get("longtasks", []) if s <= limit]
    out["longtask_max"] = max(tasks) if tasks else 0.0
    out["longtask_sum"] = sum(tasks)
    out["longtasks"] = len(tasks)
    return out


def fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    if n >= 1024 * 1024:
        return f"{n / 2**20:,.2f} MiB"
    return f"{n / 1024:,.1f} KiB"


TABLE_COLUMNS = (
    ("page", 10),
    ("drawn ms", 9),
    ("html ms", 8),
    ("sock wait", 9),
    ("js ms", 7),
    ("after ms", 8),
    ("longtask", 8),
    ("max frame", 11),
    ("ws total", 11),
    ("frames", 6),
    ("heap MiB", 8),
    ("web RSS", 8),
    ("web CPU", 7),
    ("verdict", 24),
)


def table(rows: list[dict], goal: float) -> str:
    """The summary table, one line per page visit."""
    head = " | ".join(name.rjust(w) if i else name.ljust(w) for i, (name, w) in enumerate(TABLE_COLUMNS))
    lines = [head, "-" * len(head)]
    for r in rows:
        p = r.get("phases", {})
        misses = verdict(r, goal)
        cells = [
            r["label"],
            fmt_ms(p.get("drawn")) if p.get("drawn") is not None else "TIMEOUT",
            fmt_ms(p.get("html")),
            fmt_ms(p.get("socket_wait")),
            fmt_ms(p.get("handlers")),
            fmt_ms(p.get("after")),
            fmt_ms(p.get("longtask_max")),
            fmt_bytes(r.get("max_frame")) if r.get("frames") else "-",
            fmt_bytes(r.get("ws_bytes")) if r.get("frames") else "-",
            str(r.get("frames", 0)),
            f"{r['heap_mib']:,.1f}" if r.get("heap_mib") is not None else "-",
            f"{r['web_rss_mib']:,.0f}" if r.get("web_rss_mib") is not None else "-",
            f"{r['web_cpu_s']:.1f}s" if r.get("web_cpu_s") is not None else "-",
            ", ".join(misses) or "ok",
        ]
        lines.append(
            " | ".join(
                c.rjust(w) if i else c.ljust(w) for i, (c, (_, w)) in enumerate(zip(cells, TABLE_COLUMNS, strict=True))
            )
        )
    return "\n".join(lines)


def verdict(r: dict, goal: float) -> list[str]:
    out = []
    drawn = r.get("phases", {}).get("drawn")
    if drawn is None:
        out.append("NOT DRAWN")
    elif drawn > goal:
        out.append(f"> {goal / 1000:g} s")
    if (r.get("max_frame") or 0) > FRAME_BUDGET_BYTES:
        out.append("frame > 512 KB")
    if r.get("closed"):
        out.append("socket closed")
    if r.get("errors"):
        out.append("JS errors")
    return out


#
# Processes (the same helpers as bench_push_load.py: subprocesses in their own groups, stopped by PID)
#


STARTED = time.monotonic()


def say(msg: str) -> None:
    print(f"[{time.monotonic() - STARTED:7.1f} s] {msg}", flush=True)


def settings_module(folder: Path) -> str:
    """A settings module in `folder`: clusterctl.settings with STATIC_ROOT in the folder (collectstatic goes there,
    as the Dockerfile's goes to the image). Nothing else differs."""
    (folder / "bench_pages_settings.py").write_text(
        f"from clusterctl.settings import *  # noqa: F403\nSTATIC_ROOT = {str(folder / 'static')!r}\n"
    )
    return "bench_pages_settings"


def stack_env(folder: Path) -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "DATABASE_URL", "REDIS_URL")
    return {
        **{k: v for k, v in os.environ.items() if k in keep},
        "PYTHONPATH": f"{ROOT}{os.pathsep}{folder}",
        "PYTHONUNBUFFERED": "1",
        "DJANGO_SETTINGS_MODULE": settings_module(folder),
        "CLUSTERCTL_ENV_FILE": "",  # no .env of the checkout
        "SECRET_KEY": secrets.token_urlsafe(40),
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",  # plain HTTP on loopback
        "CSRF_COOKIE_SECURE": "0",
        "DB_CONN_MAX_AGE": "0",  # as docker-compose.yml runs web
        "LOG_LEVEL": "INFO",
        # The cluster is the twin (the demo's simulated cluster): the twin plays the placed jobs, as in the demo,
        # so they run (no node agents here to launch them).
        "LAUNCHER": "twin",
    }


class RssSampler(threading.Thread):
    """The web server's resident memory every 50 ms; `peak()` since the last `reset()`."""

    def __init__(self, watched) -> None:
        super().__init__(daemon=True, name="rss-sampler")
        self.watched = watched
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self._peak = 0

    def run(self) -> None:
        while not self.stop.wait(0.05):
            with contextlib.suppress(Exception):
                rss = self.watched.sample()
                with self.lock:
                    self._peak = max(self._peak, rss)

    def reset(self) -> None:
        with self.lock:
            self._peak = 0

    def peak(self) -> int:
        with self.lock:
            return self._peak


def wait_idle(watched, timeout: float, below: float = 0.05, window: float = 2.0) -> float:
    """Wait until the process tree used under `below` of a core over `window` s; the seconds waited."""
    t0 = time.monotonic()
    last = watched.cpu()
    while time.monotonic() - t0 < timeout:
        time.sleep(window)
        now = watched.cpu()
        if now - last < below * window:
            return time.monotonic() - t0
        last = now
    raise TimedOut(f"the worker was still busy after {timeout:.0f} s")


#
# Set-up in this process (before the browser: Playwright's sync API keeps an event loop in this thread, where the
# ORM refuses to run)
#


def build(args) -> dict:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.core.management import call_command

    from fabric import stored_twin
    from fabric.models import GPU, Cluster, Link, Node, Switch

    t = time.perf_counter()
    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    cache.clear()
    stored_twin.forget_twins()
    say(f"migrated and emptied in {time.perf_counter() - t:.1f} s; building the demo at {args.nodes:,} servers ...")
    t = time.perf_counter()
    out = io.StringIO()
    call_command("demo", "--no-serve", "--nodes", str(args.nodes), stdout=out)
    cluster_id = Cluster.objects.get(name=CLUSTER).pk
    sizes = (
        f"{Switch.objects.filter(cluster_id=cluster_id).count():,} switches, "
        f"{Node.objects.filter(cluster_id=cluster_id).count():,} nodes, "
        f"{Link.objects.filter(cluster_id=cluster_id).count():,} links, "
        f"{GPU.objects.filter(node__cluster_id=cluster_id).count():,} GPUs"
    )
    round_line = next((ln.strip() for ln in out.getvalue().splitlines() if "round:" in ln), "")
    say(f"demo built in {time.perf_counter() - t:.1f} s: {sizes}; {round_line}")
    if args.gangs:
        t = time.perf_counter()
        add_gangs(cluster_id, args.gangs)
        say(f"{args.gangs} 8-node gangs queued and a round run in {time.perf_counter() - t:.1f} s")
    user = get_user_model().objects.create_user(OPERATOR[0], "bench-ops@example.org", OPERATOR[1], is_staff=True)
    assert user.is_staff
    return {"cluster_id": cluster_id, "sizes": sizes}


def add_gangs(cluster_id: int, n: int) -> None:
    from scheduler import actions
    from scheduler.models import Pool, PriorityClass, Tenant
    from scheduler.rounds import run_round

    pool = Pool.objects.get(cluster_id=cluster_id, is_default=True)
    normal = PriorityClass.objects.get(name="normal")
    for k, tenant in enumerate(["acme", "globex"]):
        gangs = [{"name": f"gang-{k}-{i}", "gpus": 64, "nodes": 8, "gpus_per_node": 8, "workload": "training"}
                 for i in range((n + 1 - k) // 2)]  # fmt: skip
        actions.submit_jobs_bulk(Tenant.objects.get(name=tenant), pool, normal, gangs, request_round=False)
    run_round(cluster_id, "bench")


def poll_twin(cluster_id: int, polls: int, gap_s: float) -> list[str]:
    """What the demo's worker does every poll: every node and the switches sampled from the twin, then ingested."""
    from fabric import stored_twin
    from fabric.collectors.samples import FABRIC_SOURCE
    from fabric.ingest import ingest_samples
    from fabric.models import Node, Switch

    hosts = list(Node.objects.filter(cluster_id=cluster_id).values_list("hostname", flat=True))
    guids = list(Switch.objects.filter(cluster_id=cluster_id).values_list("guid", flat=True))
    lines = []
    for k in range(polls):
        if k:
            time.sleep(gap_s)
        t = time.perf_counter()
        samples = [stored_twin.sample_node(h, cluster=cluster_id, fault_rate=0) for h in hosts]
        samples.append(stored_twin.sample_switches(FABRIC_SOURCE, guids, cluster=cluster_id, fault_rate=0))
        t2 = time.perf_counter()
        ingest_samples(cluster_id, samples)
        lines.append(f"poll {k + 1}: sampled in {t2 - t:.1f} s, ingested in {time.perf_counter() - t2:.1f} s")
        say(lines[-1])
    return lines


def raise_storm(cluster_id: int, n: int) -> None:
    """n alerts of one fault (climbing symbol errors on n host ports, each message with its own numbers): one group."""
    from datetime import timedelta

    from django.db import transaction
    from django.utils import timezone

    from fabric import events
    from fabric.models import Alert, Port

    ports = list(
        Port.objects.filter(cluster_id=cluster_id, hca__node__isnull=False)
        .order_by("pk")
        .values_list("hca__node__hostname", "hca__device", "number")[:n]
    )
    now = timezone.now()
    rows = [Alert(cluster_id=cluster_id, rule="port_errors", severity="warning", object_kind="port",
                  object_key=f"{host}/{device}/{number}",
                  message=f"link errors climbing over {9 + i / 97:.5f} s: symbol_error +{30 + i}",
                  first_seen=now - timedelta(seconds=i), last_seen=now - timedelta(seconds=i))
            for i, (host, device, number) in enumerate(ports)]  # fmt: skip
    Alert.objects.bulk_create(rows, batch_size=2000)
    with transaction.atomic():
        events.live_changed(cluster_id, "alerts")


def biggest_job(cluster_id: int) -> tuple[int | None, str]:
    from django.db.models import Count, Q

    from scheduler.models import Job

    job = (
        Job.objects.filter(pool__cluster_id=cluster_id, status__in=("running", "admitted"))
        .annotate(n_gpus=Count("allocations", filter=Q(allocations__active=True)))
        .order_by("-n_gpus", "pk")
        .first()
    )
    return (job.pk, f"{job.name} ({job.n_gpus} GPUs)") if job else (None, "")


def server_side(cluster_id: int, runs: int) -> list[str]:
    """Per topic: built from the database, read from the cached baseline, encoded for the wire; its size."""
    from django.core.cache import cache

    from dashboard import broadcast, selectors
    from dashboard.topics import FABRIC_TOPICS, TOPICS

    lines = []
    for topic in TOPICS:
        builds = []
        for _ in range(runs):
            t = time.perf_counter()
            built = selectors.build(cluster_id, [topic])
            builds.append((time.perf_counter() - t) * 1000)
        group = (
            broadcast.fabric_group(cluster_id, topic) if topic in FABRIC_TOPICS else broadcast.queue_group(cluster_id)
        )
        cached = cache.get(broadcast.state_key(cluster_id, topic)) is not None
        if not cached:
            cache.add(broadcast.state_key(cluster_id, topic), built[topic], broadcast.STATE_TTL_S)
        t = time.perf_counter()
        frames = broadcast.snapshot_frames(cluster_id, [topic], {topic: group})
        t2 = time.perf_counter()
        sent = [broadcast.wire(f) for f in frames]
        t3 = time.perf_counter()
        size = max(len(m.encode() if isinstance(m, str) else m) for m in sent)
        flag = f"  OVER {FRAME_BUDGET_BYTES // 1024} KB" if size > FRAME_BUDGET_BYTES else ""
        lines.append(
            f"  {topic:8s} build from the database {' / '.join(f'{b:,.0f}' for b in builds)} ms; "
            f"from the cached baseline{'' if cached else ' (none: the worker had not built one)'} "
            f"{(t2 - t) * 1000:,.0f} ms; encode {(t3 - t2) * 1000:,.0f} ms; snapshot frame {size:,} B "
            f"({'binary' if isinstance(sent[0], bytes) else 'JSON text'}){flag}"
        )
    return lines


#
# The browser
#


def chromium_path() -> str | None:
    path = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
    return path if os.path.exists(path) else None


def login(context, base: str, timeout_s: float) -> None:
    page = context.new_page()
    try:
        page.goto(f"{base}/accounts/login/?next=/legend.css", timeout=timeout_s * 1000)
        page.fill("input[name=username]", OPERATOR[0])
        page.fill("input[name=password]", OPERATOR[1])
        page.click("button[type=submit], input[type=submit]")
        page.wait_for_url("**/legend.css", timeout=timeout_s * 1000)
    finally:
        page.close()


def visit(context, url: str, label: str, args, web, sampler) -> dict:
    """Open `url` in a new tab; wait for drawn; read back the figures."""
    from bench_push_load import cpu_s, proc_tree

    page = context.new_page()
    frames: list[tuple[str, int]] = []
    errors: list[str] = []

    def on_socket(ws) -> None:
        ws.on("framereceived", lambda p: frames.append((ws.url, len(p.encode() if isinstance(p, str) else p))))

    page.on("websocket", on_socket)
    page.on("pageerror", lambda exc: errors.append(str(exc)[:200]))
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text[:200]))
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")
    row: dict = {"label": label, "url": url}
    sampler.reset()
    cpu0 = cpu_s(proc_tree(web.pid))
    t0 = time.monotonic()
    got: dict = {}
    try:
        page.goto(url, wait_until="commit", timeout=args.page_timeout * 1000)
        while time.monotonic() - t0 < args.page_timeout:
            drawn = page.evaluate("() => window.__bench ? window.__bench.drawn : null")
            if drawn is not None:
                break
            time.sleep(0.1)
        row["wall_s"] = time.monotonic() - t0
        page.wait_for_timeout(args.settle * 1000)  # trailing tasks and frames
        got = page.evaluate(COLLECT_SCRIPT)
        got["settle_ms"] = args.settle * 1000
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        row["heap_mib"] = metrics.get("JSHeapUsedSize", 0) / 2**20
        row["script_s"] = metrics.get("ScriptDuration")
        row["layout_s"] = (metrics.get("LayoutDuration") or 0) + (metrics.get("RecalcStyleDuration") or 0)
    except Exception as exc:  # a page that breaks is a finding, not the end of the run
        row["failure"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    finally:
        row["web_rss_mib"] = sampler.peak() / 1024
        row["web_cpu_s"] = cpu_s(proc_tree(web.pid)) - cpu0
        with contextlib.suppress(Exception):
            cdp.detach()
        with contextlib.suppress(Exception):
            page.close()
    row["phases"] = phases(got) if got else {"drawn": None}
    row["got"] = got
    row["frames"] = len(frames)
    row["ws_bytes"] = sum(n for _, n in frames)
    row["max_frame"] = max((n for _, n in frames), default=0)
    row["over_budget"] = sum(1 for _, n in frames if n > FRAME_BUDGET_BYTES)
    codes = [f"{s.get('code')}{' ' + s['reason'] if s.get('reason') else ''}" for s in got.get("sockets", [])
             if s.get("closed") is not None]  # fmt: skip
    row["closed"] = codes
    row["errors"] = errors + got.get("errors", [])
    return row


def detail(r: dict) -> str:
    p = r.get("phases", {})
    got = r.get("got") or {}
    bits = [f"{r['label']}: {r['url']}"]
    if r.get("failure"):
        bits.append(f"FAILED {r['failure']}")
    bits.append(f"wall {r.get('wall_s', 0):.1f} s to drawn seen from here")
    bits.append(
        f"TTFB {fmt_ms(p.get('ttfb'))} ms, HTML {fmt_ms(p.get('html'))} ms "
        f"({(got.get('nav') or {}).get('bytes', 0):,} B, {(got.get('nav') or {}).get('transferred', 0):,} B on the "
        f"wire), DOMContentLoaded {fmt_ms(p.get('dcl'))} ms"
    )
    if "socket_wait" in p:
        sockets = got.get("sockets", [])
        opened = {s["url"]: s["opened"] for s in sockets if s.get("opened") is not None}
        waits = []
        seen = set()
        for f in got.get("frames", []):
            key = (f["url"], f["topic"])
            if f["type"] == "snapshot" and key not in seen and f["url"] in opened:
                seen.add(key)
                waits.append(f"{f['topic']} {fmt_ms(f['at'] - opened[f['url']])}")
        bits.append(
            f"{len(sockets)} socket(s) created at {'/'.join(fmt_ms(s['created']) for s in sockets)} ms, handshake "
            f"{'/'.join(fmt_ms(s['opened'] - s['created']) for s in sockets if s.get('opened') is not None)} ms; "
            f"socket open to its first snapshot of a topic (server: read or build, encode, send), ms: "
            f"{', '.join(waits)}; last first snapshot before drawn {fmt_ms(p['socket_wait'])} ms after the first "
            f"socket was created; snapshot handlers (decode + draw, ms) {json.dumps(p.get('snapshots'))}; "
            f"waited for the main thread up to {fmt_ms(p.get('queued'))} ms; last handler end to drawn "
            f"{fmt_ms(p.get('after'))} ms"
        )
    if got.get("fabric"):
        f = got["fabric"]
        bits.append(
            f"fabric.js: first draw at {f.get('firstDrawAt')} ms, snapshot taken in {f.get('snapshotMs')} ms, a render "
            f"{f.get('renderMs')} ms, {f.get('links')} links in {f.get('bundles')} bundles"
        )
    bits.append(
        f"long tasks up to drawn + settle: {p.get('longtasks', 0)} ({fmt_ms(p.get('longtask_sum'))} ms, longest "
        f"{fmt_ms(p.get('longtask_max'))} ms); script {r.get('script_s') or 0:.2f} s, style+layout "
        f"{r.get('layout_s') or 0:.2f} s (DevTools, the tab's whole life)"
    )
    bits.append(
        f"frames {r.get('frames', 0)}, {fmt_bytes(r.get('ws_bytes'))}, largest {fmt_bytes(r.get('max_frame'))}, "
        f"over 512 KB: {r.get('over_budget', 0)}"
    )
    if r.get("closed"):
        bits.append(f"sockets closed: {', '.join(r['closed'])} (badge: {got.get('badge', '')!r})")
    if r.get("errors"):
        bits.append(f"errors: {'; '.join(r['errors'][:3])}")
    return "\n    ".join(bits)


def browse(args, base: str, urls: dict[str, str], pages: list[str], web, sampler) -> list[dict]:
    from playwright.sync_api import sync_playwright

    path = chromium_path()
    if path is None:
        raise RuntimeError("Debian's Chromium is not installed (apt-get install chromium)")
    rows = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport=VIEWPORT, base_url=base)
            context.add_init_script(INIT_SCRIPT)
            t = time.monotonic()
            login(context, base, args.page_timeout)
            say(f"signed in as {OPERATOR[0]} through the login form in {time.monotonic() - t:.1f} s")
            for name in pages:
                if name not in urls:
                    say(f"{name}: skipped (no running job to open)")
                    continue
                for k in range(args.repeat):
                    label = name if args.repeat == 1 else f"{name}#{k + 1}"
                    row = visit(context, urls[name], label, args, web, sampler)
                    rows.append(row)
                    say(detail(row))
            context.close()
        finally:
            browser.close()
    return rows


#
# The run
#


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10000, help="compute servers of the demo cluster (x 8 H100)")
    ap.add_argument("--pages", default="all", help=f"comma-separated, of: {', '.join(ALL_PAGES)} (default all)")
    ap.add_argument("--repeat", type=int, default=1, help="visits of each page (each in a new tab)")
    ap.add_argument("--polls", type=int, default=2, help="twin polls ingested before the pages (default 2)")
    ap.add_argument("--gangs", type=int, default=0, help="8-node gangs added to the demo's jobs (default none)")
    ap.add_argument("--storm", type=int, default=2000, help="alerts of one fault raised (default 2000; 0: none)")
    ap.add_argument("--server-runs", type=int, default=2, help="builds of each topic timed in this process")
    ap.add_argument("--page-timeout", type=float, default=120.0, help="seconds a page may take to draw")
    ap.add_argument("--settle", type=float, default=1.0, help="seconds after drawn before reading heap and tasks")
    ap.add_argument("--idle-timeout", type=float, default=900.0, help="seconds to wait for the worker to go idle")
    ap.add_argument("--timeout", type=float, default=5400.0, help="hard limit on the whole run, seconds")
    ap.add_argument(
        "--server",
        choices=("compose", "daphne"),
        default="compose",
        help="web server: docker-compose.yml's (uvicorn, as shipped) or daphne (as `manage.py runserver` serves)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, settings, static files)")
    args = ap.parse_args()
    pages = parse_pages(args.pages)
    if not os.environ.get("DATABASE_URL") or not os.environ.get("REDIS_URL"):
        sys.exit("set DATABASE_URL and REDIS_URL to databases of your own (they are emptied): scripts/with_services.py")
    if chromium_path() is None:
        sys.exit("Debian's Chromium is not installed (apt-get install chromium); CHROMIUM_PATH names another")

    load = os.getloadavg()
    say(
        f"host: {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"pages: {', '.join(pages)}"
    )
    return supervised(lambda folder, services: run(args, pages, folder, services), timeout=args.timeout,
                      prefix="bench-pages-", keep=args.keep, say=say)  # fmt: skip


def run(args, pages: list[str], folder: Path, services: list) -> int:
    from bench_push_load import Service, Watched, _free_port, compose_command, server_errors, wait_http, wait_log

    env = stack_env(folder)
    os.environ.update({k: v for k, v in env.items() if k not in ("PATH", "HOME")})
    sys.path.insert(0, str(folder))
    setup = build(args)
    cluster_id = setup["cluster_id"]
    from django.core.management import call_command

    t = time.perf_counter()
    call_command("collectstatic", interactive=False, verbosity=0)
    say(f"static files collected in {time.perf_counter() - t:.1f} s (into the temporary STATIC_ROOT)")

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    worker_argv = compose_command("worker", port, env)
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
    services.append(Service("worker", worker_argv, env, folder))
    services.append(Service("web", web_argv, env, folder))
    worker, web = services
    wait_http(port, web, 60)
    wait_log(worker, r"celery@\S+ ready", 90)
    say(f"web: {' '.join(web_argv)} (pid {web.pid}); worker: {' '.join(worker_argv)} (pid {worker.pid})")
    watched_worker, watched_web = Watched(worker), Watched(web)

    polls = poll_twin(cluster_id, args.polls, 1.0)
    if args.storm:
        t = time.perf_counter()
        raise_storm(cluster_id, args.storm)
        say(f"{args.storm:,} alerts of one fault raised in {time.perf_counter() - t:.1f} s")
    waited = wait_idle(watched_worker, args.idle_timeout)
    broadcasts = re.findall(
        r"dashboard\.tasks\.broadcast\[[^\]]+\] succeeded in ([0-9.]+)s", worker.log_path.read_text(errors="replace")
    )
    say(
        f"worker idle after {waited:.0f} s; broadcast task runs (s): "
        f"{', '.join(f'{float(b):.1f}' for b in broadcasts) or 'none'}"
    )
    job_id, job_text = biggest_job(cluster_id)
    say("server side, in this process (the same code the web process runs on connect):")
    side = server_side(cluster_id, args.server_runs)
    for line in side:
        print(line, flush=True)
    from django.db import connections

    connections.close_all()
    urls = page_urls(cluster_id, job_id)
    if "job" in pages and job_id:
        say(f"job page: job {job_id}, {job_text}, the largest running")

    sampler = RssSampler(watched_web)
    sampler.start()
    rss_before = watched_web.sample()
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # nothing below touches the ORM; Playwright keeps a loop here
    try:
        rows = browse(args, base, urls, pages, web, sampler)
    finally:
        sampler.stop.set()
    goal = goal_ms(args.nodes)
    hwm = {"web": watched_web.hwm(), "worker": watched_worker.hwm()}
    print(flush=True)
    print(f"== {args.nodes:,} servers ({setup['sizes']}); goal: drawn within {goal / 1000:g} s, frames <= 512 KB")
    for line in polls:
        print(f"   telemetry {line}")
    print(table(rows, goal))
    print(
        "   drawn: ms from navigation start to the first frame painted after the page's drawn condition; html: request"
        " to the HTML's last byte; sock wait: first socket created to the last topic's first snapshot arriving"
        " (handshake + server snapshot + transfer); js ms: the snapshot handlers (decode + synchronous draw); after ms:"
        " last handler to drawn; longtask: the longest main-thread task; web RSS: uvicorn's peak while the page loaded"
    )
    misses = [(r["label"], verdict(r, goal)) for r in rows if verdict(r, goal)]
    print("misses: " + ("; ".join(f"{label}: {', '.join(v)}" for label, v in misses) if misses else "none"))
    log = web.log_path.read_text(errors="replace")
    print(
        f"web server: RSS {rss_before / 1024:,.0f} MiB before the browser, VmHWM {hwm['web'] / 1024:,.0f} MiB; worker "
        f"VmHWM {hwm['worker'] / 1024:,.0f} MiB; web log: {server_errors(log)}"
    )
    print(f"ws closes seen: {sum(len(r.get('closed') or []) for r in rows)}; page failures: "
          f"{[r['label'] for r in rows if r.get('failure')] or 'none'}")  # fmt: skip
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    drawn = [r["phases"]["drawn"] for r in rows if r["phases"].get("drawn") is not None]
    if drawn:
        print(f"drawn: median {statistics.median(drawn):,.0f} ms, worst {max(drawn):,.0f} ms over {len(drawn)} visits")
    return 0 if all(r["phases"].get("drawn") is not None for r in rows) else 1


if __name__ == "__main__":
    from peak_rss import peak_rss_line  # beside this script, which Python puts first on sys.path

    status = main()
    print(peak_rss_line())
    sys.exit(status)
