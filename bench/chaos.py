"""Chaos run: the production-shaped stack on this machine, under tenant load, while faults are injected.

    .venv/bin/python bench/chaos.py                 # the full run: about 7 minutes on 2 cores
    .venv/bin/python bench/chaos.py --short         # about 3 minutes (16 nodes, 1 s polls, shorter gaps)
    .venv/bin/python bench/chaos.py --nodes 64 --keep --json var/chaos.json

It starts, from scratch and only for itself: a PostgreSQL database `chaos_<pid>` on the local server (dropped at the
end), a private Redis server on a free port (AOF on, as docker-compose.yml runs it; `--redis-url` uses a shared
server's database instead), and the services of docker-compose.yml as separate processes with their commands
taken from it: daphne (web), a Celery worker and a Celery beat. The twin plays the hardware and the jobs
(TELEMETRY_COLLECTOR=twin, LAUNCHER=twin, TELEMETRY_NODE_QUEUES=0) on a generated fat tree of `--nodes` x 8 H100.

Several tenants submit jobs through the REST API with token auth, cancel some of them, and list their jobs; the
twin finishes each job at its est_runtime_s. With recovery time between them it then injects, in order:

  1. kill -9 of the worker's process group while a scheduling round holds the cluster's round lock, restart;
  2. a Redis restart (SHUTDOWN, down a few seconds, start again; shared server: CLIENT KILL of its clients);
  3. pg_terminate_backend on every backend of the chaos database, every 0.1 s for 3 s (PostgreSQL restarting: with
     DB_CONN_MAX_AGE=0, as docker-compose.yml runs it, connections live one request or task, so a single burst
     finds few; the window catches transactions in flight);
  4. an ingest stall: SIGSTOP of the worker for longer than the node-down threshold, then SIGCONT;
  5. a beat stall: SIGSTOP of beat as long, then SIGCONT;
  6. kill -9 of beat, and another beat started.

Meanwhile it samples the invariants of tests/scheduler/test_concurrency.py and the pipeline's progress. At the end
it prints jobs submitted / finished / lost, API server errors (5xx but 503) and "retry later" answers (503, with
Retry-After: allowed only while a fault lasts and RETRY_MARGIN_S after it), GPUs ever held twice, false node alerts
(the twin never silences a node, so every node_unreachable / node_down is false), and per fault the longest time a
job waited for its first round after the fault and the recovery time of polls and rounds. Exit status: 0 when every MUST
figure holds, 1 when one fails, 2 when the run could not be made (setup failed, nothing flowed), 130 on Ctrl-C.
Every process, the database and the Redis data are removed on exit, Ctrl-C included (`--keep` leaves the
database; logs stay in the printed folder when a MUST figure failed). See docs/chaos.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import heapq
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# What "a GPU held twice" and the other breaches are: the scheduler's own definitions (plain SQL, no Django).
from scheduler.invariants import CONSISTENCY as OTHER_VIOLATIONS  # noqa: E402
from scheduler.invariants import DOUBLE_HOLD  # noqa: E402

CLUSTER = "chaos"
JOB_PREFIX = "chaos-"
SUBMIT_TRIES = 4  # a submit answered 503 or not at all is sent again, with its Idempotency-Key
FINISHED = ("completed", "failed", "cancelled")
IN_FLIGHT = ("admitted", "running", "migrating", "preempted")
NODE_RULES = ("node_unreachable", "node_down")
# Only a scheduling round takes FOR UPDATE on this table (scheduler/rounds.py _lock), which holds ROW SHARE on it
# until its transaction ends: a backend holding that lock is a round in progress.
ROUND_LOCK_SQL = """
    SELECT a.pid, a.application_name, EXTRACT(EPOCH FROM now() - a.xact_start) * 1000
    FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'relation' AND l.relation = 'scheduler_clusterscheduler'::regclass
      AND l.mode = 'RowShareLock' AND l.granted AND a.pid <> pg_backend_pid()"""
# Job shapes the tenants submit: (gpus, gang nodes). Mean 46 / 9 = 5.1 GPUs.
SHAPES = [(1, None), (1, None), (2, None), (2, None), (4, None), (4, None), (8, None), (8, None), (16, 2)]
SWEEP_S = 10.0  # clusterctl/settings.py: launch-sweep, which ends the twin's jobs, runs every 10 s
# A 503 is the API's honest "a dependency is out of reach, retry after N s" (clusterctl/errors.py): expected while a
# fault lasts and for this long after it (connections pooled before the fault fail once), a finding anywhere else.
RETRY_MARGIN_S = 10.0


def num(value: Any) -> float | None:
    """EXTRACT(EPOCH ...) comes back as a Decimal (or NULL)."""
    return None if value is None else float(value)


def say(msg: str) -> None:
    print(msg, flush=True)


class Interrupted(Exception):
    """SIGINT or SIGTERM: stop, clean up, exit 130."""


class SetupError(Exception):
    """The run could not be made (exit 2)."""


#
# The plan: intervals, thresholds and how long each part lasts
#


@dataclass
class Plan:
    nodes: int = 32
    tenants: int = 4
    poll_s: float = 2.0
    round_s: float = 3.0
    unreachable_polls: int = 3
    down_polls: int = 10
    warmup_s: float = 30.0
    recovery_s: float = 40.0
    restart_delay_s: float = 2.0  # a supervisor's restart delay (systemd RestartSec, compose's restart policy)
    redis_down_s: float = 3.0
    pg_window_s: float = 3.0  # how long every backend is terminated as soon as it appears
    runtime_s: tuple[int, int] = (10, 40)
    target_use: float = 0.35  # share of the GPUs the steady stream keeps busy (a stall piles more on top)
    cancel_share: float = 0.15
    twin_fault_rate: float = 0.0
    seed: int = 1
    http_timeout_s: float = 10.0

    @property
    def unreachable_after_s(self) -> float:
        return self.poll_s * self.unreachable_polls

    @property
    def down_after_s(self) -> float:
        return self.poll_s * self.down_polls

    @property
    def stall_s(self) -> float:
        """Longer than the node-down threshold (3x unreachable and more): what used to take every node down."""
        return round(max(3 * self.unreachable_after_s, 1.2 * self.down_after_s), 1)

    @property
    def rate_per_s(self) -> float:
        mean_gpus = sum(g for g, _ in SHAPES) / len(SHAPES)
        hold_s = sum(self.runtime_s) / 2 + SWEEP_S / 2
        return self.target_use * self.nodes * 8 / (mean_gpus * hold_s)


def make_plan(args: argparse.Namespace) -> Plan:
    plan = Plan(seed=args.seed, twin_fault_rate=args.twin_fault_rate)
    if args.short:
        plan = dataclasses.replace(
            plan, nodes=16, poll_s=1.0, round_s=2.0, warmup_s=10.0, recovery_s=15.0, runtime_s=(5, 20)
        )
    if args.nodes:
        plan.nodes = args.nodes
    if args.duration:
        # The fault part: six recoveries, two stalls and a few seconds per fault; recovery gets what is left.
        fixed = plan.warmup_s + 2 * plan.stall_s + plan.redis_down_s + plan.pg_window_s + 4 * plan.restart_delay_s + 10
        plan.recovery_s = max(10.0, (args.duration - fixed) / 6)
    return plan


#
# Services: the database, Redis, and the processes of docker-compose.yml
#


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_app_name(url: str, name: str) -> str:
    """The database URL with libpq's application_name, so pg_stat_activity tells which process a backend serves."""
    return f"{url}{'&' if '?' in url else '?'}application_name={name}"


class Postgres:
    """A database of its own on a shared server: created here, dropped here, its backends terminated on cue."""

    def __init__(self, server_url: str, name: str) -> None:
        import psycopg

        self.psycopg = psycopg
        self.server_url = server_url.rstrip("/")
        self.name = name
        self.url = f"{self.server_url}/{name}"
        self.created = False

    def _admin(self):
        return self.psycopg.connect(f"{self.server_url}/postgres", autocommit=True, connect_timeout=5)

    def create(self) -> None:
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        self.created = True

    def drop(self) -> None:
        if not self.created:
            return
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        self.created = False

    def terminate_backends(self) -> Counter[str]:
        """pg_terminate_backend on every backend of this database; what each one served (application_name)."""
        with self._admin() as conn:
            rows = conn.execute(
                "SELECT application_name, pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (self.name,),
            ).fetchall()
        return Counter(name or "?" for name, ok in rows if ok)


class PrivateRedis:
    """A redis-server of this run only, configured as docker-compose.yml runs it (AOF, never evict): it can be
    restarted for real without touching the Redis other people's tests use."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None
        self.log = open(folder / "redis.log", "ab")  # closed in stop()

    def start(self) -> None:
        argv = [
            shutil.which("redis-server") or "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.folder), "--appendonly", "yes", "--save", "", "--maxmemory-policy", "noeviction",
        ]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        if not wait_until(self.ping, 15):
            raise SetupError(f"redis-server did not answer on port {self.port} (see {self.folder / 'redis.log'})")

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_connect_timeout=1, socket_timeout=1).ping())
        except redis.RedisError:
            return False

    def restart(self, down_s: float) -> str:
        """SHUTDOWN (AOF flushed), stay down `down_s`, start again on the same port; returns what happened."""
        import redis

        keys_before = redis.Redis(port=self.port).dbsize()
        with contextlib.suppress(redis.RedisError):
            redis.Redis(port=self.port).shutdown()
        assert self.proc is not None
        self.proc.wait(timeout=15)
        time.sleep(down_s)
        self.start()
        return f"keys {keys_before} before, {redis.Redis(port=self.port).dbsize()} after the restart (AOF)"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


class SharedRedis:
    """One database number of a shared Redis server, claimed by this run; only its clients are killed, only it
    is flushed."""

    CLAIM = "clusterctl-chaos:owner"

    def __init__(self, url: str) -> None:
        import redis

        self.redis = redis
        base = url.rsplit("/", 1)[0] if re.search(r"/\d+$", url) else url.rstrip("/")
        for db in range(1, 15):  # 0: a developer's; 15: the test suite's (scripts/with_services.py)
            client = redis.Redis.from_url(f"{base}/{db}")
            if client.dbsize() == 0 and client.set(self.CLAIM, os.getpid(), nx=True):
                self.db, self.client, self.url = db, client, f"{base}/{db}"
                return
        raise SetupError(f"no empty database 1-14 on {base} to claim")

    def start(self) -> None:
        pass

    def restart(self, down_s: float) -> str:
        """CLIENT KILL of every client connected to this database (the server itself is shared)."""
        me = self.client.client_id()
        ids = [c["id"] for c in self.client.client_list() if int(c.get("db", -1)) == self.db and c["id"] != str(me)]
        for client_id in ids:
            with contextlib.suppress(self.redis.RedisError):
                self.client.execute_command("CLIENT", "KILL", "ID", client_id)
        return f"killed {len(ids)} client connections of db {self.db} (shared server: not restarted)"

    def stop(self) -> None:
        with contextlib.suppress(self.redis.RedisError):
            self.client.flushdb()


class Proc:
    """One service process in its own process group (so -9, STOP and CONT reach a prefork worker's children)."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], folder: Path) -> None:
        self.name, self.argv, self.env = name, argv, env
        self.log_path = folder / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.exits: list[tuple[float, int]] = []  # exits nobody asked for: (when, exit status)
        self.held = False  # a fault is killing and restarting it: the supervisor keeps off
        self.lock = threading.Lock()

    def start(self) -> None:
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== chaos: start {self.starts} of {self.name}: {' '.join(self.argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def kill9(self) -> None:
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=10)

    @contextlib.contextmanager
    def by_hand(self):
        """Killed and restarted by a fault, not by the supervisor."""
        with self.lock:
            self.held = True
        try:
            yield self
        finally:
            self.held = False

    def stop(self, timeout: float = 15.0) -> None:
        if self.proc is None:
            return
        self.signal(signal.SIGCONT)  # a stopped process cannot act on SIGTERM
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        self.signal(signal.SIGKILL)  # the group: prefork children that outlived their parent too
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


class Supervisor:
    """What compose's `restart: unless-stopped` does: a service process that exits is started again after the
    restart delay. Each such exit is counted: a crash the supervisor hides is still a crash."""

    def __init__(self, procs: dict[str, Proc], delay_s: float) -> None:
        self.procs, self.delay_s = procs, delay_s
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="chaos-supervisor", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=10)

    def _run(self) -> None:
        while not self.stop_event.wait(0.25):
            for proc in self.procs.values():
                with proc.lock:
                    if proc.held or proc.proc is None or proc.proc.poll() is None:
                        continue
                    proc.exits.append((time.time(), proc.proc.returncode))
                    say(f"        supervisor: {proc.name} exited ({proc.proc.returncode}); restarting it")
                    if self.stop_event.wait(self.delay_s):
                        return
                    proc.start()


COMPOSE_VARIABLE = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")
# The web server's listen options, for the ASGI servers the compose file may run.
LISTEN_FLAGS = {"-b": "host", "--bind": "host", "--host": "host", "-p": "port", "--port": "port"}


def compose_commands(port: int, folder: Path, env: dict[str, str]) -> dict[str, list[str]]:
    """web, worker and beat as docker-compose.yml runs them: ${VAR:-default} filled in from `env` as compose does,
    the web server on 127.0.0.1:`port`, files under /tmp in this run's folder, the executables of this venv."""
    defaults = {
        "web": ["daphne", "-b", "0.0.0.0", "-p", "8000", "clusterctl.asgi:application"],
        "worker": ["celery", "-A", "clusterctl", "worker", "-l", "INFO"],
        "beat": ["celery", "-A", "clusterctl", "beat", "-l", "INFO", "--schedule", "/tmp/celerybeat-schedule"],
    }
    try:
        import yaml

        services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
        commands = {name: [str(a) for a in services[name]["command"]] for name in defaults}
    except (OSError, KeyError, TypeError, ImportError) as exc:
        say(f"  docker-compose.yml unreadable ({type(exc).__name__}: {exc}); using the documented commands")
        commands = defaults
    bindir = Path(sys.executable).parent
    listen = {"host": "127.0.0.1", "port": str(port)}
    out = {}
    for name, argv in commands.items():
        argv = [COMPOSE_VARIABLE.sub(lambda m: env.get(m.group(1)) or m.group(2) or "", a) for a in argv]
        exe = bindir / argv[0]
        argv[:1] = [str(exe)] if exe.exists() else [sys.executable, "-m", argv[0]]
        if name == "web":
            for i, flag in enumerate(argv[:-1]):
                if flag in LISTEN_FLAGS:
                    argv[i + 1] = listen[LISTEN_FLAGS[flag]]
        out[name] = [str(folder / Path(a).name) if a.startswith("/tmp/") else a for a in argv]
    return out


def service_env(plan: Plan, db_url: str, redis_url: str, secret: str) -> dict[str, str]:
    """Production settings from the environment (clusterctl/settings.py), with the twin and short intervals."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV")}
    return {
        **keep,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "PYTHONUNBUFFERED": "1",
        "DJANGO_SETTINGS_MODULE": "clusterctl.settings",
        "DATABASE_URL": db_url,
        "REDIS_URL": redis_url,
        "SECRET_KEY": secret,
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "TELEMETRY_COLLECTOR": "twin",
        "TELEMETRY_SWITCH_COLLECTOR": "twin",
        "TELEMETRY_FABRIC_AGENTS": "auto",
        "TELEMETRY_NODE_QUEUES": "0",
        "LAUNCHER": "twin",
        "TELEMETRY_INTERVAL_S": str(plan.poll_s),
        "ROUND_INTERVAL_S": str(plan.round_s),
        "TELEMETRY_UNREACHABLE_POLLS": str(plan.unreachable_polls),
        "TELEMETRY_DOWN_POLLS": str(plan.down_polls),
        "TELEMETRY_HOLD_DOWN_S": "30",
        "TWIN_FAULT_RATE": str(plan.twin_fault_rate),
        "TWIN_SEED": str(plan.seed),
    }


def wait_until(predicate: Callable[[], bool], timeout: float, every: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return False


#
# Setup in this process: schema, cluster, tenants and their API tokens
#


def api_token(user) -> tuple[str, str]:
    """(Authorization header prefix, key) of a new API token for `user`, with whichever token app is installed:
    django-rest-knox (hashed, expiring) or DRF's authtoken."""
    from django.conf import settings

    if "knox" in settings.INSTALLED_APPS:
        from knox.models import AuthToken
        from knox.settings import knox_settings

        try:  # the project's own issuer (its lifetime rules), where it has one
            from clusterctl.tokens import issue_token
        except ImportError:
            issue_token = AuthToken.objects.create
        _, key = issue_token(user)
        return knox_settings.AUTH_HEADER_PREFIX, key
    if "rest_framework.authtoken" in settings.INSTALLED_APPS:
        from rest_framework.authtoken.models import Token

        return "Token", Token.objects.get_or_create(user=user)[0].key
    raise SetupError("neither knox nor rest_framework.authtoken is installed: no way to make an API token")


def setup_database(plan: Plan, env: dict[str, str]) -> dict[str, Any]:
    """Migrate, generate the cluster, make the tenants; returns the cluster id, GPU count and the tenants' tokens."""
    os.environ.update(env)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connections

    from fabric import actions as fabric_actions
    from fabric.models import Cluster
    from scheduler import actions

    call_command("migrate", interactive=False, verbosity=0)
    fabric_actions.generate_fabric(
        CLUSTER, nodes=plan.nodes, gpus_per_node=8, gpu_model="H100", leaf_ports=64, oversubscription=2.0,
        storage_nodes=2, rate="NDR",
    )  # fmt: skip
    cluster = Cluster.objects.get(name=CLUSTER)
    pool = actions.ensure_scheduler(cluster)
    gpus = plan.nodes * 8
    tokens = {}
    for i in range(plan.tenants):
        tenant = actions.create_tenant(f"chaos-t{i}")
        user, _ = get_user_model().objects.get_or_create(username=f"chaos-u{i}")
        user.set_unusable_password()
        user.save()
        actions.add_member(tenant, user)
        # Guaranteed a fair share, and allowed to borrow half the cluster: quotas never hold a job back here.
        actions.set_quota(tenant, pool, guaranteed_gpus=gpus // plan.tenants, borrow_limit=gpus // 2)
        tokens[tenant.name] = "{} {}".format(*api_token(user))
    connections.close_all()
    return {"cluster_id": cluster.pk, "gpus": gpus, "tokens": tokens}


#
# The tenants: submissions, cancels and reads through the API
#


@dataclass
class Call:
    at: float  # wall clock when sent
    took: float
    kind: str  # submit / cancel / list
    status: int | None  # None: no answer (timeout, refused)
    error: str = ""


class Load:
    """A Poisson stream of submissions from several tenants (a few in flight at once, so one slow answer does not
    stop the stream), a share of them cancelled a few seconds later, and a list request every couple of seconds."""

    def __init__(self, base_url: str, tokens: dict[str, str], plan: Plan) -> None:
        self.base_url, self.tokens, self.plan = base_url, tokens, plan
        self.rng = random.Random(plan.seed)
        self.calls: list[Call] = []
        self.submitted: dict[int, tuple[str, float]] = {}  # job id -> (tenant, when the 201 came)
        self.sent_names: dict[str, float] = {}
        self.stop_event = threading.Event()
        self.local = threading.local()
        self.pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="chaos-api")
        self.thread = threading.Thread(target=self._run, name="chaos-load", daemon=True)
        self.seq = 0

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=30)
        self.pool.shutdown(wait=True, cancel_futures=False)

    def _session(self):
        import requests

        if not hasattr(self.local, "session"):
            self.local.session = requests.Session()
        return self.local.session

    def _call(self, kind: str, method: str, path: str, tenant: str, body: dict | None = None, key: str = ""):
        import requests

        started, t0 = time.time(), time.monotonic()
        headers = {"Authorization": self.tokens[tenant], "Accept": "application/json"}
        if key:
            headers["Idempotency-Key"] = key
        try:
            resp = self._session().request(
                method, self.base_url + path, json=body, headers=headers, timeout=self.plan.http_timeout_s
            )
        except requests.RequestException as exc:
            self.calls.append(Call(started, time.monotonic() - t0, kind, None, type(exc).__name__))
            return None
        error = resp.text[:300] if resp.status_code >= 400 else ""
        self.calls.append(Call(started, time.monotonic() - t0, kind, resp.status_code, error))
        return resp

    def _submit(self, tenant: str, body: dict, cancel_after: float | None, cancels: list) -> None:
        # As a careful client does (docs/api.md): one Idempotency-Key per job, the same request again after a 503 or
        # no answer, so a job stored whose answer was lost is neither lost nor queued twice.
        self.sent_names[body["name"]] = time.time()
        key = uuid.uuid4().hex
        for attempt in range(SUBMIT_TRIES):
            resp = self._call("submit", "POST", "/api/v1/jobs/", tenant, body, key=key)
            if resp is not None and resp.status_code != 503:
                break
            if attempt + 1 < SUBMIT_TRIES and not self.stop_event.is_set():
                wait = resp.headers.get("Retry-After", "1") if resp is not None else "1"
                time.sleep(min(float(wait) if wait.isdigit() else 1.0, 5.0))
        if resp is not None and resp.status_code == 201:
            job_id = int(resp.json()["id"])
            self.submitted[job_id] = (tenant, time.time())
            if cancel_after is not None:
                cancels.append((time.monotonic() + cancel_after, job_id, tenant))

    def _body(self) -> dict[str, Any]:
        self.seq += 1
        gpus, nodes = self.rng.choice(SHAPES)
        body: dict[str, Any] = {
            "name": f"{JOB_PREFIX}{self.seq}",
            "gpus": gpus,
            "est_runtime_s": self.rng.randint(*self.plan.runtime_s),
        }
        if nodes:
            body.update(nodes=nodes, gpus_per_node=gpus // nodes)
        return body

    def _run(self) -> None:
        tenants = sorted(self.tokens)
        cancels: list[tuple[float, int, str]] = []
        due: list[tuple[float, int, str]] = []
        next_submit = time.monotonic()
        next_list = time.monotonic() + 2.0
        while not self.stop_event.is_set():
            now = time.monotonic()
            while cancels:  # filled by the submit threads; moved into the heap here
                heapq.heappush(due, cancels.pop())
            while due and due[0][0] <= now:
                _, job_id, tenant = heapq.heappop(due)
                self.pool.submit(self._call, "cancel", "POST", f"/api/v1/jobs/{job_id}/cancel/", tenant, {})
            if now >= next_submit:
                body = self._body()
                tenant = tenants[self.seq % len(tenants)]
                cancel_after = self.rng.uniform(1, 15) if self.rng.random() < self.plan.cancel_share else None
                self.pool.submit(self._submit, tenant, body, cancel_after, cancels)
                next_submit = now + self.rng.expovariate(self.plan.rate_per_s)
            if now >= next_list:
                tenant = self.rng.choice(tenants)
                self.pool.submit(self._call, "list", "GET", "/api/v1/jobs/?status=pending&limit=50", tenant)
                next_list = now + 2.0
            self.stop_event.wait(0.05)


#
# Watching: invariants and progress, sampled from the database while everything runs
#


class Db:
    """A psycopg connection that comes back after pg_terminate_backend (autocommit: each query its own snapshot)."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.psycopg, self.url, self.conn = psycopg, url, None
        self.reconnects = 0

    def query(self, sql: str, params: Iterable = ()) -> list[tuple]:
        for attempt in range(3):
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = self.psycopg.connect(self.url, autocommit=True, connect_timeout=5)
                    self.reconnects += attempt > 0
                return self.conn.execute(sql, tuple(params)).fetchall()
            except (self.psycopg.OperationalError, self.psycopg.InterfaceError):
                with contextlib.suppress(Exception):
                    self.conn.close()
                self.conn = None
                time.sleep(0.2)
        raise SetupError(f"the chaos database stopped answering ({self.url})")

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()


class Monitor:
    """Every `every` seconds: the newest GPU sample stored and the job counts; every second tick the invariants."""

    def __init__(self, url: str, every: float = 0.5) -> None:
        self.db = Db(url)
        self.every = every
        self.sample_seen: list[tuple[float, float]] = []  # (observed at, newest sample's time), when it moved
        self.newest_sample = 0.0
        self.status: dict[str, int] = {}
        self.rounds = (0, 0.0)  # (count, end of the newest)
        self.double_held: dict[int, float] = {}  # gpu id -> first seen
        self.violations: dict[str, dict[int, float]] = {name: {} for name in OTHER_VIOLATIONS}
        self.node_alerts = 0
        self.checks = 0
        self.errors = 0
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="chaos-monitor", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=10)
        self.db.close()

    def _run(self) -> None:
        tick = 0
        while not self.stop_event.wait(self.every):
            tick += 1
            try:
                self._progress()
                if tick % 2 == 0:
                    self._invariants()
            except Exception:  # a missed sample is not worth stopping the run; counted
                self.errors += 1

    def _progress(self) -> None:
        newest = self.db.query("SELECT EXTRACT(EPOCH FROM MAX(at)) FROM fabric_gpumetric")[0][0]
        if newest is not None and float(newest) > self.newest_sample:
            self.newest_sample = float(newest)
            self.sample_seen.append((time.time(), self.newest_sample))
        self.status = dict(
            self.db.query("SELECT status, COUNT(*) FROM scheduler_job WHERE name LIKE %s GROUP BY status", ["chaos-%"])
        )
        count, end = self.db.query(
            "SELECT COUNT(*), EXTRACT(EPOCH FROM MAX(started + duration_ms * interval '1 millisecond')) "
            "FROM scheduler_schedulinground"
        )[0]
        self.rounds = (count, float(end or 0.0))
        rows = self.db.query("SELECT COUNT(*) FROM fabric_alert WHERE rule = ANY(%s)", [list(NODE_RULES)])
        self.node_alerts = rows[0][0]

    def _invariants(self) -> None:
        now = time.time()
        for sql in DOUBLE_HOLD.values():
            for (gpu_id,) in self.db.query(sql):
                self.double_held.setdefault(gpu_id, now)
        for name, sql in OTHER_VIOLATIONS.items():
            for (key,) in self.db.query(sql):
                self.violations[name].setdefault(key, now)
        self.checks += 1

    def sample_after(self, t: float) -> float | None:
        """When a sample taken after `t` was first seen stored."""
        return next((seen for seen, at in self.sample_seen if at > t), None)


#
# Faults
#


@dataclass
class Phase:
    name: str
    title: str
    start: float  # wall clock
    end: float = 0.0  # when the fault was over (the service back, the process continued)
    until: float = 0.0  # when the next phase began
    notes: list[str] = field(default_factory=list)


class Run:
    def __init__(self, args: argparse.Namespace, plan: Plan) -> None:
        self.args, self.plan = args, plan
        self.folder = Path(tempfile.mkdtemp(prefix=f"clusterctl-chaos-{os.getpid()}-"))
        self.pg = Postgres(args.pg_url, f"chaos_{os.getpid()}")
        self.redis: PrivateRedis | SharedRedis | None = None
        self.procs: dict[str, Proc] = {}
        self.supervisor: Supervisor | None = None
        self.load: Load | None = None
        self.monitor: Monitor | None = None
        self.phases: list[Phase] = []
        self.started = time.time()
        self.flowing_at = 0.0
        self.setup: dict[str, Any] = {}

    # -- bring up -------------------------------------------------------------------------------------------------

    def up(self) -> None:
        plan = self.plan
        say(
            f"chaos: {plan.nodes} nodes x 8 GPUs, polls every {plan.poll_s:g} s (unreachable after "
            f"{plan.unreachable_after_s:g} s, down after {plan.down_after_s:g} s), rounds every {plan.round_s:g} s, "
            f"{plan.rate_per_s:.2f} submissions/s from {plan.tenants} tenants; logs in {self.folder}"
        )
        self.redis = SharedRedis(self.args.redis_url) if self.args.redis_url else PrivateRedis(self.folder)
        self.redis.start()
        self.pg.create()
        say(f"  database {self.pg.name}, Redis {self.redis.url}")
        secret = secrets.token_urlsafe(50)
        env = service_env(plan, with_app_name(self.pg.url, "chaos-setup"), self.redis.url, secret)
        t0 = time.monotonic()
        self.setup = setup_database(plan, env)
        say(f"  migrated, cluster and {plan.tenants} tenants made in {time.monotonic() - t0:.1f} s")
        port = free_port()
        self.base_url = f"http://127.0.0.1:{port}"
        for name, argv in compose_commands(port, self.folder, env).items():
            self.procs[name] = Proc(name, argv, {**env, "DATABASE_URL": with_app_name(self.pg.url, f"chaos-{name}")},
                                    self.folder)  # fmt: skip
            self.procs[name].start()
        self.supervisor = Supervisor(self.procs, plan.restart_delay_s)
        self.supervisor.start()
        self.monitor = Monitor(with_app_name(self.pg.url, "chaos-monitor"))
        self.monitor.start()
        if not wait_until(self._healthy, 60, every=0.5):
            raise SetupError(f"the web server did not answer /healthz within 60 s (see {self.folder / 'web.log'})")
        t_up = time.time()
        flowing = wait_until(lambda: self.monitor.sample_after(t_up) and self.monitor.rounds[0] > 0, 90, every=0.5)
        if not flowing:
            raise SetupError(f"no sample stored or no round run within 90 s (see {self.folder / 'worker.log'})")
        self.flowing_at = time.time()
        say(f"  web, worker and beat up; samples and rounds flowing after {self.flowing_at - t_up:.1f} s")

    def _healthy(self) -> bool:
        import requests

        try:
            return requests.get(f"{self.base_url}/healthz", timeout=3).status_code == 200
        except requests.RequestException:
            return False

    # -- the run --------------------------------------------------------------------------------------------------

    def wait(self, seconds: float, every: float = 10.0) -> None:
        """Sleep, with a progress line at every `every` seconds of the run."""
        deadline = time.time() + seconds
        while (now := time.time()) < deadline:
            next_line = now + every - (now - self.started) % every
            time.sleep(max(0.0, min(deadline, next_line) - now))
            if next_line <= deadline:
                self.progress()

    def progress(self) -> None:
        m, load = self.monitor, self.load
        assert m is not None
        st = m.status
        now = time.time()
        calls = load.calls if load else []
        errors = sum(1 for c in calls if is_server_error(c))
        retry_later = sum(1 for c in calls if c.status == 503)
        unanswered = sum(1 for c in calls if c.status is None)
        say(
            f"[+{now - self.started:4.0f}s] jobs {len(load.submitted) if load else 0} submitted, "
            f"{sum(st.get(s, 0) for s in FINISHED)} ended, {sum(st.get(s, 0) for s in IN_FLIGHT)} running, "
            f"{st.get('pending', 0)} pending | rounds {m.rounds[0]} (newest ended {now - m.rounds[1]:.1f} s ago) | "
            f"newest sample {now - m.newest_sample:.1f} s old | API 5xx {errors}, 503 {retry_later}, unanswered "
            f"{unanswered} | "
            f"held twice {len(m.double_held)} | node alerts {m.node_alerts}"
        )

    def phase(self, name: str, title: str) -> Phase:
        now = time.time()
        if self.phases:
            self.phases[-1].until = now
        p = Phase(name, title, start=now, end=now)
        self.phases.append(p)
        say(f"[+{now - self.started:4.0f}s] fault {name}: {title}")
        return p

    def execute(self) -> None:
        plan = self.plan
        self.load = Load(self.base_url, self.setup["tokens"], plan)
        self.load.start()
        baseline = self.phase("0", "none (baseline)")
        self.wait(plan.warmup_s)
        baseline.end = baseline.start
        for name, title, action in (
            ("1", "kill -9 the worker mid-round, restart it", self.kill_worker),
            ("2", "restart Redis", self.restart_redis),
            ("3", f"terminate every PostgreSQL backend for {plan.pg_window_s:g} s", self.terminate_pg),
            ("4", f"stall ingest: SIGSTOP the worker {plan.stall_s:g} s", self.stall("worker")),
            ("5", f"stall beat: SIGSTOP beat {plan.stall_s:g} s", self.stall("beat")),
            ("6", "kill -9 beat, start another", self.kill_beat),
        ):
            p = self.phase(name, title)
            action(p)
            p.end = time.time()
            say(f"        {'; '.join(p.notes)}")
            self.wait(plan.recovery_s)
        drain = max(15.0, 3 * plan.round_s + SWEEP_S)
        say(f"[+{time.time() - self.started:4.0f}s] submissions stop; up to {drain:g} s for the queue to settle")
        self.load.stop()
        self.phases[-1].until = time.time()
        wait_until(self._settled, drain, every=1.0)
        self.progress()

    def _settled(self) -> bool:
        jobs, queue = self._final_state()
        return classify(jobs, queue, set(self.load.submitted))["lost"] == 0 if self.load else True

    def kill_worker(self, p: Phase) -> None:
        worker = self.procs["worker"]
        db = Db(with_app_name(self.pg.url, "chaos-injector"))
        holder = None
        deadline = time.monotonic() + max(30.0, 4 * self.plan.round_s)
        try:
            while time.monotonic() < deadline and holder is None:
                rows = db.query(ROUND_LOCK_SQL)
                holder = rows[0] if rows else None
                if holder is None:
                    time.sleep(0.01)
            with worker.by_hand():
                worker.kill9()
                time.sleep(self.plan.restart_delay_s)
                worker.start()
            if holder is None:
                p.notes.append("no round caught holding the lock in time: killed anyway")
            else:
                pid, app, held_ms = holder
                gone = wait_until(
                    lambda: not db.query("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]), 10, 0.05
                )
                p.notes.append(
                    f"killed while backend {pid} ({app}) held the round lock for {float(held_ms):.0f} ms; "
                    f"{'its transaction rolled back' if gone else 'its backend still there after 10 s'}"
                )
        finally:
            db.close()
        p.notes.append(f"worker restarted after {self.plan.restart_delay_s:g} s")

    def restart_redis(self, p: Phase) -> None:
        assert self.redis is not None
        t0 = time.monotonic()
        p.notes.append(self.redis.restart(self.plan.redis_down_s))
        p.notes.append(f"unavailable {time.monotonic() - t0:.1f} s")

    def terminate_pg(self, p: Phase) -> None:
        killed: Counter[str] = Counter()
        deadline = time.monotonic() + self.plan.pg_window_s
        while time.monotonic() < deadline:
            killed.update(self.pg.terminate_backends())
            time.sleep(0.1)
        p.notes.append(
            f"{sum(killed.values())} backends terminated ({', '.join(f'{k} {v}' for k, v in sorted(killed.items()))})"
        )

    def stall(self, name: str) -> Callable[[Phase], None]:
        def action(p: Phase) -> None:
            proc = self.procs[name]
            proc.signal(signal.SIGSTOP)
            try:
                self.wait(self.plan.stall_s)
            finally:
                proc.signal(signal.SIGCONT)
            p.notes.append(f"{name} stopped {self.plan.stall_s:g} s (node-down threshold {self.plan.down_after_s:g} s)")

        return action

    def kill_beat(self, p: Phase) -> None:
        with self.procs["beat"].by_hand() as beat:
            beat.kill9()
            time.sleep(self.plan.restart_delay_s)
            beat.start()
        p.notes.append(f"beat killed, a new one started {self.plan.restart_delay_s:g} s later")

    # -- figures --------------------------------------------------------------------------------------------------

    def _final_state(self) -> tuple[list[dict], dict]:
        db = Db(with_app_name(self.pg.url, "chaos-report"))
        try:
            rows = db.query(
                """
                SELECT j.id, j.name, j.status, j.pending_reason, EXTRACT(EPOCH FROM j.submitted_at),
                  EXTRACT(EPOCH FROM j.finished_at),
                  (SELECT EXTRACT(EPOCH FROM MIN(e.at)) FROM scheduler_jobevent e
                    WHERE e.job_id = j.id AND e.to_status IN ('admitted', 'running')),
                  (SELECT EXTRACT(EPOCH FROM MIN(r.started + r.duration_ms * interval '1 millisecond'))
                    FROM scheduler_schedulinground r WHERE r.started >= j.submitted_at)
                FROM scheduler_job j WHERE j.name LIKE %s""",
                ["chaos-%"],
            )
            queue = db.query("SELECT queue FROM scheduler_clusterscheduler WHERE cluster_id = %s",
                             [self.setup["cluster_id"]])  # fmt: skip
        finally:
            db.close()
        keys = ("id", "name", "status", "held_reason", "submitted", "finished", "placed", "first_round")
        jobs = [dict(zip(keys, [*row[:4], *(num(v) for v in row[4:])], strict=True)) for row in rows]
        return jobs, (queue[0][0] if queue else {}) or {}

    def figures(self) -> dict[str, Any]:
        assert self.load is not None and self.monitor is not None
        jobs, queue = self._final_state()
        submitted = set(self.load.submitted)
        db = Db(with_app_name(self.pg.url, "chaos-report"))
        try:
            alerts = db.query(
                "SELECT rule, object_key, EXTRACT(EPOCH FROM first_seen) FROM fabric_alert WHERE first_seen >= "
                "to_timestamp(%s) ORDER BY first_seen",
                [self.started],
            )
            rounds = db.query(
                "SELECT EXTRACT(EPOCH FROM started), "
                "EXTRACT(EPOCH FROM started + duration_ms * interval '1 millisecond') "
                "FROM scheduler_schedulinground ORDER BY started"
            )
        finally:
            db.close()
        alerts = [(rule, key, num(at)) for rule, key, at in alerts]
        rounds = [(num(s), num(e)) for s, e in rounds]
        return summarise(
            plan=self.plan,
            jobs=jobs,
            queue=queue,
            submitted=submitted,
            names_sent=set(self.load.sent_names),
            calls=self.load.calls,
            alerts=alerts,
            rounds=rounds,
            phases=self.phases,
            sample_after=self.monitor.sample_after,
            double_held=self.monitor.double_held,
            violations=self.monitor.violations,
            checks=self.monitor.checks,
            logs=scan_logs([proc.log_path for proc in self.procs.values()]),
            crashes=[(name, at, rc) for name, proc in self.procs.items() for at, rc in proc.exits],
            watched_until=time.time(),
        )

    # -- tear down ------------------------------------------------------------------------------------------------

    def down(self, keep: bool, keep_logs: bool) -> None:
        for part in (self.supervisor, self.load, self.monitor):
            if part is not None:
                with contextlib.suppress(Exception):
                    part.stop()
        for name in ("web", "beat", "worker"):
            if name in self.procs:
                with contextlib.suppress(Exception):
                    self.procs[name].stop()
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        if self.redis is not None:
            with contextlib.suppress(Exception):
                self.redis.stop()
        if keep:
            say(f"kept: DATABASE_URL={self.pg.url}  (drop it with: psql {self.pg.server_url}/postgres -c "
                f"'DROP DATABASE \"{self.pg.name}\" WITH (FORCE)')")  # fmt: skip
        else:
            try:
                self.pg.drop()
            except Exception as exc:
                say(f"could not drop {self.pg.name}: {exc}")
        if keep or keep_logs:
            for leftover in ("appendonlydir", "dump.rdb"):
                shutil.rmtree(self.folder / leftover, ignore_errors=True)
            say(f"logs: {self.folder}")
        else:
            shutil.rmtree(self.folder, ignore_errors=True)


#
# Figures (pure: rows in, numbers out)
#


def classify(jobs: list[dict], queue: dict, submitted: set[int]) -> dict[str, Any]:
    """What became of every job the API accepted (201): finished, running, pending with a reason, or lost.

    Pending with a reason: the last round left it in the queue with a reason, or an operator holds it. Anything
    else (never stored, pending with no round's word on it, a state no round leaves) is lost."""
    texts = queue.get("texts", [])
    reasons = {job_id: texts[i] for job_id, i in zip(queue.get("order", []), queue.get("reason", []), strict=False)}
    by_id = {j["id"]: j for j in jobs}
    out: dict[str, Any] = {"completed": 0, "failed": 0, "cancelled": 0, "running": 0, "pending_with_reason": 0}
    lost = []
    for job_id in sorted(submitted):
        job = by_id.get(job_id)
        status = job["status"] if job else None
        if status in FINISHED:
            out[status] += 1
        elif status in IN_FLIGHT:
            out["running"] += 1
        elif status == "pending" and (reasons.get(job_id) or job["held_reason"]):
            out["pending_with_reason"] += 1
        else:
            lost.append({"id": job_id, "status": status or "missing"})
    out["lost"] = len(lost)
    out["lost_jobs"] = lost[:20]
    return out


def considered_at(job: dict) -> float | None:
    """When a round first took the job into account: the round that placed it, or the first one that ended after
    it was submitted."""
    times = [t for t in (job["placed"], job["first_round"]) if t is not None]
    return min(times) if times else None


def brief(body: str) -> str:
    """An error answer in a few words: JSON as it is, an HTML error page by its title."""
    title = re.search(r"<title>(.*?)</title>", body, re.S | re.I)
    text = title.group(1) if title else body
    return " ".join(text.split())[:120]


def phase_waits(jobs: list[dict], submitted: set[int], phase: Phase, until: float) -> dict[str, Any]:
    """How long jobs waited for their first round after a fault: from the later of their submission and the fault's
    end, to the round that took them into account.

    The jobs: those submitted before the next fault began (`until`) that had not yet been taken into account when
    this one began. A job still waiting at `until` counts until then, as a lower bound (`longest_is_lower_bound`),
    and again under the next fault; a job cancelled before any round counts until its cancel."""
    waits: list[tuple[float, int, bool]] = []
    for j in jobs:
        if j["id"] not in submitted or j["submitted"] >= until:
            continue
        seen = considered_at(j)
        if seen is not None and seen < phase.start:
            continue  # taken into account before this fault began
        stop, bound = until, True
        if seen is not None and seen <= until:
            stop, bound = seen, False
        if j["finished"] is not None and j["finished"] < stop:
            stop, bound = j["finished"], False  # cancelled while it waited
        waits.append((max(0.0, stop - max(j["submitted"], phase.end)), j["id"], bound))
    if not waits:
        return {"waited": 0, "longest_wait_s": None, "longest_wait_job": None, "longest_is_lower_bound": False,
                "median_wait_s": None, "still_waiting_at_next": 0}  # fmt: skip
    longest = max(waits)
    ordered = sorted(w for w, _, _ in waits)
    return {
        "waited": len(waits),
        "longest_wait_s": round(longest[0], 1),
        "longest_wait_job": longest[1],
        "longest_is_lower_bound": longest[2],
        "median_wait_s": round(ordered[len(ordered) // 2], 1),
        "still_waiting_at_next": sum(1 for *_, bound in waits if bound),
    }


def is_server_error(call: Call) -> bool:
    """An answer of 500 or any 5xx but 503: the server failed (503 is a "retry later", counted apart)."""
    return call.status is not None and call.status >= 500 and call.status != 503


def retry_later_outside_faults(calls: list[Call], phases: list[Phase], margin_s: float = RETRY_MARGIN_S) -> list[Call]:
    """The 503s sent neither while a fault lasted (from its start to its end) nor within margin_s after it. The
    baseline (phase "0") is no fault."""
    windows = [(p.start, p.end + margin_s) for p in phases if p.name != "0"]
    # A request in flight when the fault began (sent just before it, answered during it) is the fault's too.
    return [c for c in calls if c.status == 503 and not any(lo <= c.at + c.took and c.at <= hi for lo, hi in windows)]


def stored_twice(jobs: list[dict], names_sent: set[str]) -> list[str]:
    """The names the load sent once (each submit its own name) that are stored as more than one job."""
    stored = Counter(j["name"] for j in jobs if j["name"] in names_sent)
    return sorted(name for name, n in stored.items() if n > 1)


def summarise(
    *,
    plan: Plan,
    jobs: list[dict],
    queue: dict,
    submitted: set[int],
    names_sent: set[str],
    calls: list[Call],
    alerts: list[tuple[str, str, float]],
    rounds: list[tuple[float, float]],
    phases: list[Phase],
    sample_after: Callable[[float], float | None],
    double_held: dict[int, float],
    violations: dict[str, dict[int, float]],
    checks: int,
    logs: dict[str, Any],
    crashes: list[tuple[str, float, int]],
    watched_until: float,
) -> dict[str, Any]:
    outcome = classify(jobs, queue, submitted)
    api = calls
    server_errors = [c for c in api if is_server_error(c)]
    retry_later = [c for c in api if c.status == 503]
    stray_retry_later = retry_later_outside_faults(api, phases)
    unanswered = [c for c in api if c.status is None]
    node_alerts = [a for a in alerts if a[0] in NODE_RULES]
    stored_unanswered = sorted(j["id"] for j in jobs if j["id"] not in submitted and j["name"] in names_sent)
    duplicates = stored_twice(jobs, names_sent)
    faults = []
    for p in phases:
        until = p.until or float("inf")
        inside = [j for j in jobs if j["id"] in submitted and p.start <= j["submitted"] < until]
        waits = phase_waits(jobs, submitted, p, until)
        round_back = next((end for start, end in rounds if start > p.end), None)
        sample_back = sample_after(p.end)
        in_phase = [c for c in api if p.start <= c.at < until]
        faults.append(
            {
                "fault": p.name,
                "title": p.title,
                "at_s": round(p.start - phases[0].start, 1),
                "lasted_s": round(p.end - p.start, 1),
                "notes": p.notes,
                "jobs_submitted": len(inside),
                **waits,
                # None: not back by the end of the run (`watched_until`); the report shows the lower bound.
                "samples_back_s": round(sample_back - p.end, 1) if sample_back else None,
                "rounds_back_s": round(round_back - p.end, 1) if round_back else None,
                "not_back_after_s": round(watched_until - p.end, 1),
                "api_5xx": sum(1 for c in in_phase if is_server_error(c)),
                "api_503": sum(1 for c in in_phase if c.status == 503),
                "api_unanswered": sum(1 for c in in_phase if c.status is None),
                "api_slowest_s": round(max((c.took for c in in_phase), default=0.0), 1),
                "node_alerts": Counter(rule for rule, _, at in node_alerts if p.start <= at < until),
                "crashed": sorted(f"{name} ({rc})" for name, at, rc in crashes if p.start <= at < until),
            }
        )
    held_twice = len(double_held)
    other = sum(len(v) for v in violations.values())
    must = {
        "lost": outcome["lost"],
        "api_5xx": len(server_errors),
        "api_503_outside_faults": len(stray_retry_later),
        "jobs_stored_twice": len(duplicates),
        "gpus_held_twice": held_twice,
        "other_invariant_violations": other,
        "false_node_alerts": len(node_alerts),
    }
    return {
        "plan": {**dataclasses.asdict(plan), "stall_s": plan.stall_s, "rate_per_s": round(plan.rate_per_s, 3)},
        "jobs": {
            "submitted": len(submitted),
            **outcome,
            "stored_without_answer": stored_unanswered[:20],
            "stored_twice": duplicates[:20],
        },
        "api": {
            "requests": len(api),
            "by_kind": dict(Counter(c.kind for c in api)),
            "server_errors": len(server_errors),
            "server_errors_by_status": dict(Counter(c.status for c in server_errors)),
            "server_error_samples": [f"{c.kind} {c.status}: {brief(c.error)}" for c in server_errors[:5]],
            "retry_later": len(retry_later),
            "retry_later_by_kind": dict(Counter(c.kind for c in retry_later)),
            "retry_later_outside_faults": [
                f"{c.kind} at +{c.at - phases[0].start:.1f} s: {brief(c.error)}" for c in stray_retry_later[:5]
            ],
            "refused_4xx": dict(Counter(f"{c.kind} {c.status}" for c in api if c.status and 400 <= c.status < 500)),
            "unanswered": len(unanswered),
        },
        "invariants": {
            "checks": checks,
            "gpus_held_twice": sorted(double_held)[:20],
            "other": {k: sorted(v)[:20] for k, v in violations.items() if v},
        },
        "node_alerts": {
            "by_rule": dict(Counter(rule for rule, _, _ in node_alerts)),
            "nodes": len({key for _, key, _ in node_alerts}),
        },
        "alerts_by_rule": dict(Counter(rule for rule, _, _ in alerts)),
        "crashes": dict(Counter(name for name, _, _ in crashes)),
        "faults": faults,
        "logs": logs,
        "must": must,
        "passed": all(v == 0 for v in must.values()),
    }


TRACEBACK_END = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Warning|Exit|Interrupt|Lost|Timeout)\b.*")


def scan_logs(paths: list[Path]) -> dict[str, Any]:
    """The exceptions each service's log ended a traceback with, and its ERROR/CRITICAL lines, counted by text
    (numbers blanked, so one cause counts once)."""
    out: dict[str, Any] = {}
    for path in paths:
        if not path.exists():
            continue
        exceptions: Counter[str] = Counter()
        errors: Counter[str] = Counter()
        in_tb = False
        with open(path, errors="replace") as f:
            for line in f:
                line = line.rstrip()
                if line.startswith("Traceback (most recent call last)"):
                    in_tb = True
                    continue
                if in_tb and line and not line.startswith((" ", "\t", "During handling", "The above exception")):
                    if TRACEBACK_END.match(line):
                        exceptions[re.sub(r"\d+", "N", line)[:160]] += 1
                    in_tb = False
                if re.search(r"\b(ERROR|CRITICAL)\b", line):
                    errors[re.sub(r"\d+", "N", re.sub(r"^\[[^]]*\]\s*", "", line))[:160]] += 1
        out[path.stem] = {
            "exceptions": dict(exceptions.most_common(6)),
            "error_lines": sum(errors.values()),
            "top_errors": dict(errors.most_common(4)),
        }
    return out


def report(fig: dict[str, Any]) -> str:
    j, api, must = fig["jobs"], fig["api"], fig["must"]

    def row(label: str, value: Any, name: str = "") -> str:
        line = f"  {label:46} {value:>6}"
        return line + (f"   must be 0: {'ok' if must[name] == 0 else 'FAIL'}" if name else "")

    def secs(v: float | None) -> str:
        return "-" if v is None else f"{v:g} s"

    def back(f: dict, key: str) -> str:
        return secs(f[key]) if f[key] is not None else f">{f['not_back_after_s']:g} s"

    alerts = fig["node_alerts"]
    lines = [
        "",
        f"chaos run: figures ({fig.get('commit', '?')}, {fig['plan']['nodes']} nodes x 8 GPUs, "
        f"{fig.get('seconds', 0):.0f} s)",
        row("jobs submitted (201 from the API)", j["submitted"]),
        row("  completed (the twin played them)", j["completed"]),
        row("  cancelled", j["cancelled"]),
        row("  failed", j["failed"]),
        row("  running at the end", j["running"]),
        row("  pending with a reason at the end", j["pending_with_reason"]),
        row("  lost", j["lost"], "lost"),
        row("  stored twice (a retried submit queued again)", must["jobs_stored_twice"], "jobs_stored_twice"),
        row("API requests", api["requests"]),
        row("  server errors (500, any 5xx but 503)", api["server_errors"], "api_5xx"),
        row("  retry later (503 with Retry-After)", api["retry_later"])
        + (f"   {api['retry_later_by_kind']}" if api["retry_later"] else ""),
        row(
            f"    of which outside a fault (+{RETRY_MARGIN_S:g} s)",
            must["api_503_outside_faults"],
            "api_503_outside_faults",
        ),
        row("  unanswered in time (timeout, refused)", api["unanswered"]),
        row("GPUs ever held twice", must["gpus_held_twice"], "gpus_held_twice"),
        row(
            "other invariant breaches (ledger, holds)", must["other_invariant_violations"], "other_invariant_violations"
        ),
        row("false node alerts (unreachable + down)", must["false_node_alerts"], "false_node_alerts")
        + (f"   {alerts['by_rule']} on {alerts['nodes']} nodes" if must["false_node_alerts"] else ""),
        row("invariant checks made", fig["invariants"]["checks"]),
        row("service crashes (restarted by the supervisor)", sum(fig["crashes"].values()))
        + (f"   {fig['crashes']}" if fig["crashes"] else ""),
    ]
    if j["lost_jobs"]:
        lines.append(f"  lost jobs: {j['lost_jobs']}")
    if j["stored_without_answer"]:
        lines.append(f"  stored although the API gave no 201: jobs {j['stored_without_answer']}")
    if api["server_error_samples"]:
        lines.append(f"  5xx by status {api['server_errors_by_status']}; e.g. {api['server_error_samples'][:2]}")
    if api["retry_later_outside_faults"]:
        lines.append(f"  503 outside a fault, e.g. {api['retry_later_outside_faults'][:3]}")
    if api["refused_4xx"]:
        lines.append(f"  refused (4xx): {api['refused_4xx']}")
    if fig["alerts_by_rule"]:
        lines.append(f"  alerts raised during the run, by rule: {fig['alerts_by_rule']}")
    if fig["invariants"]["other"]:
        lines.append(f"  invariant breaches: {fig['invariants']['other']}")
    lines += [
        "",
        f"  {'fault':48} {'jobs':>4} {'wait for a round':>16} {'samples':>8} {'rounds':>7} {'5xx':>4} {'503':>4} "
        f"{'node':>6}",
        f"  {'':48} {'':>4} {'longest':>9} {'median':>6} {'back':>8} {'back':>7} {'':>4} {'':>4} {'alerts':>6}",
    ]
    for f in fig["faults"]:
        longest = (">" if f["longest_is_lower_bound"] else "") + secs(f["longest_wait_s"])
        lines.append(
            f"  {f['fault'] + ' ' + f['title']:48} {f['jobs_submitted']:>4} {longest:>9} {secs(f['median_wait_s']):>6} "
            f"{back(f, 'samples_back_s'):>8} {back(f, 'rounds_back_s'):>7} {f['api_5xx']:>4} {f['api_503']:>4} "
            f"{sum(f['node_alerts'].values()):>6}"
        )
    lines += [
        "",
        "  wait: from the later of a job's submission and the fault's end to the first round that took it into",
        "  account ('>': still waiting when the next fault began); back: from the fault's end to the first sample",
        "  stored and to the end of the first round started after it ('>': not back when the run ended). 5xx: server",
        "  errors (500; 503 apart); 503: retry later, counted from the fault's start to the next one's.",
        "  What each fault did:",
        *(
            f"    {f['fault']}: {'; '.join(f['notes'])}"
            + (f"; crashed, restarted by the supervisor: {', '.join(f['crashed'])}" if f["crashed"] else "")
            for f in fig["faults"]
            if f["notes"] or f["crashed"]
        ),
    ]
    for name, scan in fig["logs"].items():
        if scan["exceptions"]:
            lines.append(f"  {name}.log exceptions: {scan['exceptions']}")
    failed = [k for k, v in must.items() if v]
    lines += ["", "chaos run: PASSED" if not failed else f"chaos run: FAILED ({', '.join(failed)})"]
    return "\n".join(lines)


#
# Main
#


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="16 nodes, 1 s polls, short gaps: about 3 minutes")
    parser.add_argument("--duration", type=float, default=None, help="seconds for the fault part (recoveries fit)")
    parser.add_argument("--nodes", type=int, default=None, help="compute nodes of 8 GPUs (default 32, short 16)")
    parser.add_argument("--keep", action="store_true", help="leave the database (and the logs) for inspection")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    parser.add_argument("--pg-url", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL server")
    parser.add_argument("--redis-url", default="", help="a shared Redis (default: a private redis-server)")
    parser.add_argument("--twin-fault-rate", type=float, default=0.0, help="the twin's link/GPU faults per hour")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    plan = make_plan(args)
    run = Run(args, plan)

    def interrupt(signum, frame) -> None:
        raise Interrupted(signal.Signals(signum).name)

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    code, keep_logs = 2, True
    try:
        run.up()
        run.execute()
        fig = run.figures()
        fig["commit"] = (
            subprocess.run(
                ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True, check=False
            ).stdout.strip()
            or "no git"
        )
        fig["seconds"] = round(time.time() - run.started, 1)
        say(report(fig))
        if args.json:
            args.json.write_text(json.dumps(fig, indent=2, default=str))
            say(f"figures written to {args.json}")
        code = 0 if fig["passed"] else 1
        keep_logs = not fig["passed"]
    except Interrupted as exc:
        say(f"\nchaos: interrupted ({exc}); cleaning up")
        code = 130
    except SetupError as exc:
        say(f"chaos: the run could not be made: {exc}")
    except Exception:
        import traceback

        say(f"chaos: the run broke:\n{traceback.format_exc()}")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
        run.down(keep=args.keep, keep_logs=keep_logs or args.keep)
    return code


if __name__ == "__main__":
    sys.exit(main())
