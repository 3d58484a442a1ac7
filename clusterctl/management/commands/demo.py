"""python manage.py demo: the embedded demo in one process.

Migrates, builds two clusters (a generated H100 fat tree, and the real 8-switch SX6036
fabric from tests/fixtures), makes an operator login, and serves UI, admin and API.

While it serves, the cluster is alive: a Celery worker and beat run as threads of this process on the in-memory
broker (clusterctl/embedded.py). Beat polls every node of every cluster through the twin collector (a simulated
cluster driven by the jobs the scheduler placed, fabric/stored_twin.py) every --poll-interval seconds, runs
scheduling rounds, and the twin's faults (a flapping link, a GPU XID, a link whose symbol errors climb) raise
alerts that clear once the fault has been gone for --hold-down seconds.

Before it serves, it polls every node once here and times it: when that poll would take more than half of
--poll-interval (the one process also serves the pages, runs the rounds and the live views), the interval is
stretched to what the process can keep, and the demo says so. A poller that still falls behind raises one
`telemetry_behind` alert for its cluster, never node alerts, and the status line shows its cadence.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connection, connections
from django.utils import timezone

from clusterctl import tokens as api_tokens
from clusterctl.embedded import NODES_READ, EmbeddedCelery, fit_poll_interval, time_one_poll
from fabric import actions, stored_twin
from fabric.actions.imports import import_text
from fabric.collectors.twin_model import FLAP
from fabric.importers import read_text
from fabric.models import Alert, Cluster, Node
from fabric.tasks import poller_status
from fabric.telemetry.liveness import BEHIND
from scheduler import actions as sched
from scheduler.models import Job, Pool, PriorityClass, Tenant
from scheduler.rounds import run_round

REAL_FABRIC = Path(settings.BASE_DIR) / "tests" / "fixtures" / "ibnetdiscover_sx6036_8switch.topo"
REAL_TOPO = Path(settings.BASE_DIR) / "tests" / "fixtures" / "nvidia_smi_topo_m_dgx_a100.txt"


class Command(BaseCommand):
    help = "Set up and serve the embedded demo on 127.0.0.1 (no external services)."

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=128, help="compute nodes of the generated cluster")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-serve", action="store_true", help="set up, then exit")
        parser.add_argument("--poll-interval", type=float, default=5.0, help="seconds between telemetry polls")
        parser.add_argument("--round-interval", type=float, default=10.0, help="seconds between scheduling rounds")
        parser.add_argument(
            "--fault-rate", type=float, default=12.0, help="twin faults per hour (0: none; TWIN_FAULT_RATE wins)"
        )
        parser.add_argument(
            "--hold-down",
            type=float,
            default=60.0,
            help="seconds an alert stays after its fault (TELEMETRY_HOLD_DOWN_S wins)",
        )
        parser.add_argument("--static", action="store_true", help="serve without the worker and beat (nothing moves)")

    def handle(self, **o):
        logging.getLogger("celery").setLevel(logging.WARNING)  # not a line per task
        self.stdout.write("migrating the database ...")
        call_command("migrate", interactive=False, verbosity=0)
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:  # readers never wait for the worker's writes (kept in the file)
                cursor.execute("PRAGMA journal_mode=WAL")
        self._clusters(o["nodes"])
        tokens = self._scheduler()
        password = self._operator()
        url = f"http://127.0.0.1:{o['port']}/"
        self.stdout.write(
            self.style.SUCCESS(
                f"\nclusterctl demo ready\n"
                f"  UI      {url}\n"
                f"  admin   {url}admin/\n"
                f"  API     {url}api/v1/  (docs: {url}api/v1/docs/)\n"
                f"  login   user 'admin', password '{password}'\n"
                + "".join(f"  tenant  {who}: Authorization: Token {key}\n" for who, key in tokens.items())
            )
        )
        if o["no_serve"]:
            return
        if o["static"]:
            call_command("runserver", f"127.0.0.1:{o['port']}", use_reloader=False)
            return
        self._serve_live(o)

    def _serve_live(self, o) -> None:
        if "TWIN_FAULT_RATE" not in os.environ:
            settings.TWIN_FAULT_RATE = o["fault_rate"]
        hold_down = float(os.environ.get("TELEMETRY_HOLD_DOWN_S", o["hold_down"]))
        interval = self._poll_interval(o["poll_interval"])
        runner = EmbeddedCelery(poll_interval_s=interval, round_interval_s=o["round_interval"], hold_down_s=hold_down)
        runner.start()
        self.stdout.write(
            f"live: worker and beat in this process; the twin is polled every {interval:g} s, rounds every "
            f"{o['round_interval']:g} s, about {settings.TWIN_FAULT_RATE:g} faults an hour, alerts clear "
            f"{hold_down:g} s after their fault (http://127.0.0.1:{o['port']}/admin/fabric/alert/); "
            "a status line every 30 s"
        )
        self._first_fault(o["fault_rate"])
        stop = threading.Event()
        threading.Thread(target=self._status, args=(runner, stop), name="demo-status", daemon=True).start()
        try:
            call_command("runserver", f"127.0.0.1:{o['port']}", use_reloader=False)
        finally:
            stop.set()
            runner.stop()

    def _poll_interval(self, asked: float) -> float:
        """Poll once here, timed; the interval asked for, or the one this process can keep (and say so)."""
        took, nodes = time_one_poll()
        interval = fit_poll_interval(asked, took)
        if interval > asked:
            self.stdout.write(
                self.style.WARNING(
                    f"live: one poll of all {nodes} nodes takes {took:.1f} s of this one process, more than half of "
                    f"--poll-interval {asked:g}: it polls every {interval:g} s instead, so that the pages, rounds and "
                    "live views keep the rest (fewer --nodes, or the separate services of docker-compose.yml, poll "
                    "faster)"
                )
            )
        else:
            self.stdout.write(f"live: one poll of all {nodes} nodes takes {took:.1f} s of this process")
        return interval

    def _first_fault(self, rate: float, in_s: float = 20.0, duration: float = 40.0) -> None:
        """Random faults come about every 3600 / rate seconds; the first comes on cue, so the demo shows one."""
        if rate <= 0 or "TWIN_FAULT_RATE" in os.environ:
            return
        try:
            fault = stored_twin.schedule_fault(Cluster.objects.get(name="demo").pk, FLAP, in_s=in_s, duration=duration)
        except (Cluster.DoesNotExist, stored_twin.TwinError) as exc:
            self.stderr.write(f"live: no first fault ({exc})")
            return
        self.stdout.write(
            f"live: in {in_s:g} s a link of {fault.node} goes down for {duration:g} s (the twin's first fault)"
        )

    def _status(self, runner, stop: threading.Event, every: float = 30.0) -> None:
        """One line every `every` seconds: what the worker did, and the alerts the twin's faults raised."""
        since = timezone.now()
        while not stop.wait(every):
            try:
                alerts = Alert.objects.filter(first_seen__gte=since)
                line = (
                    f"live: {runner.counts[NODES_READ] + runner.counts['fabric.tasks.poll_node']} node polls"
                    f"{self._cadence()}, "
                    f"{runner.counts['fabric.tasks.poll_switches']} switch polls, "
                    f"{runner.counts['fabric.tasks.ingest_batch']} ingest batches, "
                    f"{runner.counts['scheduler.tasks.run_round']} rounds; alerts raised {alerts.count()}, "
                    f"cleared {alerts.filter(cleared_at__isnull=False).count()}, "
                    f"open {Alert.objects.filter(cleared_at__isnull=True).count()}"
                )
            except Exception as exc:  # a status line is never worth stopping the demo
                line = f"live: status unavailable ({exc})"
            finally:
                connections.close_all()
            self.stdout.write(line)

    def _cadence(self) -> str:
        """The demo cluster's poll cadence, and BEHIND while the poller cannot keep it (its telemetry_behind alert)."""
        cluster = Cluster.objects.filter(name="demo").values_list("pk", flat=True).first()
        if cluster is None:
            return ""
        status = poller_status(cluster)
        if status["cadence_s"] is None:
            return ""
        behind = Alert.objects.filter(cluster_id=cluster, rule=BEHIND, cleared_at__isnull=True).exists()
        return (
            f" (demo: one round every {status['cadence_s']:.1f} s, set {status['interval_s']:g} s"
            + ("; BEHIND, see its telemetry_behind alert" if behind else "")
            + ")"
        )

    def _clusters(self, nodes: int) -> None:
        if not Cluster.objects.filter(name="demo").exists():
            started = time.monotonic()
            self.stdout.write(f"generating cluster 'demo': {nodes} x 8 H100, NDR fat tree, 2:1 at the leaves ...")
            summary = actions.generate_fabric(
                "demo",
                nodes=nodes,
                gpus_per_node=8,
                gpu_model="H100",
                leaf_ports=64,
                oversubscription=2.0,
                storage_nodes=4,
                rate="NDR",
            )
            self.stdout.write(
                f"  {summary.switches} switches, {summary.hosts} hosts, {summary.links} links, {summary.gpus} GPUs "
                f"in {time.monotonic() - started:.1f} s"
            )
        if not Cluster.objects.filter(name="sx6036").exists() and REAL_FABRIC.is_file():
            self.stdout.write("importing cluster 'sx6036' from a real ibnetdiscover output ...")
            import_text("sx6036", "ibnetdiscover", read_text(REAL_FABRIC), source=REAL_FABRIC.name)
            import_text("sx6036", "nvidia-topo", read_text(REAL_TOPO), source=REAL_TOPO.name, node="stage100")

    def _scheduler(self) -> dict[str, str]:
        """Pools, two tenants with quotas and API tokens, and a first batch of jobs on the demo cluster.

        Each start issues the demo tenants fresh tokens (only digests are stored, so an old one cannot be printed
        again) and revokes the ones of the previous start."""

        cluster = Cluster.objects.get(name="demo")
        default = sched.ensure_scheduler(cluster)
        if not Pool.objects.filter(cluster=cluster, name="inference-mig").exists():
            compute = list(Node.objects.filter(cluster=cluster, role="compute").order_by("-hostname"))
            mig = sched.create_pool(cluster, "inference-mig", sharing="mig")
            sched.assign_nodes(mig, compute[:4])
            mps = sched.create_pool(cluster, "notebooks-mps", sharing="mps")
            sched.assign_nodes(mps, compute[4:8])
        pools = {p.name: p for p in Pool.objects.filter(cluster=cluster)}
        tokens = {}
        for tenant_name, user_name, share in (("acme", "alice", 0.6), ("globex", "bob", 0.4)):
            tenant = sched.create_tenant(tenant_name, max_priority="high")
            user, _ = get_user_model().objects.get_or_create(username=user_name)
            sched.add_member(tenant, user)
            gpus = default.cluster.nodes.filter(role="compute").count() * 8
            sched.set_quota(tenant, default, guaranteed_gpus=int(gpus * share * 0.8), borrow_limit=int(gpus * 0.3))
            for name in ("inference-mig", "notebooks-mps"):
                sched.set_quota(tenant, pools[name], guaranteed_gpus=16, borrow_limit=8)
            api_tokens.revoke_tokens(user)
            tokens[f"{tenant_name}/{user_name}"] = api_tokens.issue_token(user)[1]
        if not Job.objects.filter(pool__cluster=cluster).exists():
            self.stdout.write("queueing demo jobs and running a first scheduling round ...")
            self._demo_jobs(cluster, pools, PriorityClass.objects.get(name="normal"))
            record = run_round(cluster.pk, "demo start")
            self.stdout.write(f"  round: {record.placed} placed, {record.pending - record.placed} waiting")
        return tokens

    def _demo_jobs(self, cluster, pools, normal) -> None:
        acme, globex = Tenant.objects.get(name="acme"), Tenant.objects.get(name="globex")
        default = next(p for p in pools.values() if p.is_default)
        # Data-intensive jobs read their dataset from a storage server: traffic that crosses the spines.
        storage = list(Node.objects.filter(cluster=cluster, role="storage").order_by("hostname"))
        for i, node in enumerate(storage * 2):
            sched.submit_jobs_bulk(
                acme if i % 2 else globex, default, normal,
                [{"name": f"etl-{i}", "gpus": 16, "nodes": 2, "gpus_per_node": 8, "workload": "data-intensive",
                  "dataset_node": node, "est_runtime_s": 7200}],
                request_round=False,
            )  # fmt: skip
        # A production run at high priority, across two nodes: its all-reduce is on the heat map from the first
        # round, however small the demo (the default order puts the many short one-node jobs before the gangs).
        sched.submit_jobs_bulk(
            globex, default, PriorityClass.objects.get(name="high"),
            [{"name": "pretrain-prod", "gpus": 16, "nodes": 2, "gpus_per_node": 8, "est_runtime_s": 4 * 3600,
              "preemptible": False}],
            request_round=False,
        )  # fmt: skip
        shapes = [(64, 8), (32, 4), (16, 2), (8, None), (8, None), (4, None), (2, None), (1, None)] * 9
        for i, (gpus, nodes) in enumerate(shapes):
            tenant = acme if i % 3 else globex
            gang = {"nodes": nodes, "gpus_per_node": 8} if nodes else {}
            sched.submit_jobs_bulk(
                tenant,
                default,
                normal,
                [{"name": f"train-{i}", "gpus": gpus, "est_runtime_s": 3600 * (1 + i % 5), **gang}],
                request_round=False,
            )
        for i in range(20):
            sched.submit_jobs_bulk(
                acme if i % 2 else globex, pools["inference-mig"], normal,
                [{"name": f"serve-{i}", "gpus": 1, "sharing": "mig", "mig_profile": "1g.10gb" if i % 3 else "3g.40gb",
                  "workload": "inference"}],
                request_round=False,
            )  # fmt: skip
            sched.submit_jobs_bulk(
                acme if i % 2 else globex, pools["notebooks-mps"], normal,
                [{"name": f"notebook-{i}", "gpus": 1, "sharing": "mps", "mps_compute_pct": 25,
                  "mps_memory_mib": 16384}],
                request_round=False,
            )  # fmt: skip

    def _operator(self) -> str:
        """The demo's operator login; its password is kept in var/ so it stays the same across restarts."""
        secret = Path(settings.BASE_DIR) / "var" / "demo-admin-password"
        secret.parent.mkdir(exist_ok=True)
        if not secret.exists():
            secret.write_text(secrets.token_urlsafe(12))
            secret.chmod(0o600)
        password = secret.read_text().strip()
        user, _ = get_user_model().objects.get_or_create(username="admin", defaults={"email": "admin@localhost"})
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        return password
