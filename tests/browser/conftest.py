"""Browser tests: Playwright driving Debian's Chromium (never a downloaded browser) against a live ASGI server.

The server is a real daphne process on the test database with the Redis channel layer, so what the test
process commits (telemetry ingest, a scheduling round) reaches the page through the broadcaster and the socket,
exactly as in production. Skipped, with the reason, where Chromium or Redis is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings

from tests.processes import child_env, free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
# Screenshots go to var/screenshots (ignored by git), so a test run leaves the tree clean; to refresh the README's
# pictures: CLUSTERCTL_SCREENSHOTS=docs/screenshots scripts/test.sh tests/browser
SCREENSHOTS = ROOT / os.environ.get("CLUSTERCTL_SCREENSHOTS", "var/screenshots")
VIEWPORT = {"width": 1366, "height": 768}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-component-update", "--disable-sync"]  # fmt: skip


def chromium_path() -> str | None:
    path = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
    return path if os.path.exists(path) else None


@pytest.fixture(scope="module")
def browser():
    path = chromium_path()
    if path is None:
        pytest.skip("Debian's Chromium is not installed (apt-get install chromium); browser tests skipped")
    if "channels_redis" not in settings.CHANNEL_LAYERS["default"]["BACKEND"]:
        pytest.skip("browser tests need the Redis channel layer (REDIS_URL): the server is another process")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread; the tests' own ORM calls are still plain sync
    # code. Set for these modules only: it must not leak into other tests' child processes.
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


class LiveServer:
    """A daphne process serving the ASGI app (pages, static files, sockets) on this test run's database, with
    daphne's default limits: a WebSocket message of at most 1 MiB, which every frame of the pages stays well under."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"daphne-{self.port}.log", "w+")
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = child_env(CELERY_TASK_ALWAYS_EAGER="1", ALLOWED_HOSTS="127.0.0.1,localhost", DEBUG="0")
        env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port),
             "clusterctl.asgi:application"],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        if not wait_for(self._answers, timeout=30) or self.proc.poll() is not None:
            self.log.seek(0)
            pytest.fail(f"daphne did not start:\n{self.log.read()[-3000:]}")

    def _answers(self) -> bool:
        try:
            return urllib.request.urlopen(f"{self.url}/healthz", timeout=2).status in (200, 503)
        except Exception:
            return self.proc.poll() is not None

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.proc = None


@pytest.fixture
def live_server_asgi(transactional_db):
    server = LiveServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        server.log.close()


@pytest.fixture
def live_url(live_server_asgi) -> str:
    return live_server_asgi.url


@pytest.fixture
def page(browser, live_url):
    context = browser.new_context(viewport=VIEWPORT, base_url=live_url)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.js_errors = errors
    yield page
    context.close()


def login(page, username: str, password: str) -> None:
    page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_load_state("networkidle")


def off_the_loop(fn, *args, **kwargs):
    """Run server-side work (ORM writes, ingest, rounds: they group_send through async_to_sync) in a thread of
    its own: Playwright's sync API keeps an event loop running in the test's thread."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    def call():
        try:
            return fn(*args, **kwargs)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(call).result()


def screenshot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


class Scenario:
    """A small live cluster: an operator, two tenants, a running two-node job, a job that must wait, and two
    telemetry polls so every GPU and host link has a reading."""

    def idle_gpu(self) -> int:
        """A GPU no job holds (an XID there raises an alert without requeueing the running job)."""

        def find():
            from fabric.models import GPU

            busy = GPU.objects.filter(allocations__active=True).values("node_id")
            return GPU.objects.filter(node__in=self.hosts).exclude(node_id__in=busy).order_by("pk").first().pk

        return off_the_loop(find)

    def submit(self, name: str, gpus: int, tenant: str = "acme"):
        def go():
            from scheduler import actions
            from scheduler.models import Pool, PriorityClass, Tenant

            pool = Pool.objects.get(cluster=self.cluster, is_default=True)
            return actions.submit_job(Tenant.objects.get(name=tenant), pool, PriorityClass.objects.get(name="normal"),
                                      name=name, gpus=gpus, sharing="exclusive")  # fmt: skip

        return off_the_loop(go)

    def __init__(self) -> None:
        import time

        from django.contrib.auth import get_user_model

        from fabric.models import Node
        from scheduler import actions
        from scheduler.models import Job, PriorityClass
        from tests.factories import fat_tree

        users = get_user_model()
        self.cluster = fat_tree("web", nodes=8, gpus_per_node=8, gpu_model="H100", leaf_ports=8, storage_nodes=1)
        pool = actions.ensure_scheduler(self.cluster)
        self.operator = users.objects.create_user("ops", "ops@example.org", "pw-ops-123", is_staff=True)
        acme, globex = actions.create_tenant("acme"), actions.create_tenant("globex")
        actions.set_quota(acme, pool, guaranteed_gpus=32, borrow_limit=32)
        actions.set_quota(globex, pool, guaranteed_gpus=16, borrow_limit=0)
        self.alice = users.objects.create_user("alice", "alice@example.org", "pw-alice-123")
        self.bob = users.objects.create_user("bob", "bob@example.org", "pw-bob-123")
        actions.add_member(acme, self.alice)
        actions.add_member(globex, self.bob)
        normal = PriorityClass.objects.get(name="normal")
        self.running = actions.submit_job(acme, pool, normal, name="llm-pretrain", gpus=16, nodes=2, gpus_per_node=8,
                                          sharing="exclusive", workload="training")  # fmt: skip
        self.waiting = actions.submit_job(globex, pool, normal, name="too-big", gpus=48, sharing="exclusive")
        self.hosts = list(Node.objects.filter(cluster=self.cluster, role="compute").order_by("hostname"))
        self._poll(util=40.0)
        time.sleep(0.01)
        self._poll(util=40.0)
        self.running.refresh_from_db()
        self.waiting.refresh_from_db()
        assert Job.objects.filter(pk=self.running.pk, status="running").exists(), "the scenario's job must run"

    def poll(self, util: float, gpu_util: dict[int, float] | None = None, xid_on: int | None = None) -> None:
        off_the_loop(self._poll, util, gpu_util, xid_on)

    def _poll(self, util: float, gpu_util: dict[int, float] | None = None, xid_on: int | None = None) -> None:
        """One telemetry poll of every node: GPU utilisation `util` (or per GPU id), host links at 25 %."""
        import time

        from fabric.collectors.samples import GpuSample, NodeSample, PortSample
        from fabric.ingest import ingest_samples
        from fabric.models import GPU, Port

        now = time.time()
        gpu_util = gpu_util or {}
        samples = []
        for node in self.hosts:
            ports = [PortSample(device=d, port=n, state="ACTIVE",
                                counters={"port_xmit_data": int(now * 12.5e9 / 4), "port_rcv_data": 0})
                     for d, n in Port.objects.filter(hca__node=node).values_list("hca__device", "number")]  # fmt: skip
            gpus = [GpuSample(index=g.index, utilisation_gpu_pct=gpu_util.get(g.pk, util), memory_used_mib=1000.0,
                              memory_total_mib=81559.0, temperature_c=50.0, power_w=300.0,
                              xid_events=[79] if g.pk == xid_on else [])
                    for g in GPU.objects.filter(node=node)]  # fmt: skip
            samples.append(NodeSample(node=node.hostname, collected_at=now, collector="test", gpus=gpus, ports=ports))
        ingest_samples(self.cluster.pk, samples)


@pytest.fixture
def scenario(live_url) -> Scenario:
    return off_the_loop(Scenario)
