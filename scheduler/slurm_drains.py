"""Health flows back to Slurm: the nodes clusterctl's health alerts took out of service, drained there too.

The rule is the pure scheduler.launch.slurm_drain (plan_drains); this module reads what it needs from the database
(open alerts that removed capacity, nodes the liveness check took down) and from Slurm (`sinfo`), then, with
SLURM_DRAIN=on, runs `scontrol update` for each node of the plan. Nothing here writes our database: Slurm's own node
state (the reason with the `clusterctl: ` prefix) is the record of what clusterctl drained, so a restarted worker,
or a second one, reaches the same plan. Run by the beat (scheduler.tasks.slurm_drains) and `manage.py slurm_drains`.
"""

from __future__ import annotations

import logging

from django.conf import settings

from fabric.actions import TELEMETRY_REASON
from fabric.choices import NodeState
from fabric.models import Alert, Node
from scheduler.launch.slurm import SlurmError, SlurmLauncher
from scheduler.launch.slurm_drain import (
    SINFO_ARGV,
    DrainResult,
    check_mode,
    drain_argv,
    parse_sinfo,
    plan_drains,
    resume_argv,
)

log = logging.getLogger(__name__)


def wanted_drains(cluster_id: int) -> dict[str, str]:
    """host -> why it is out of service: an open alert that removed capacity on the node, one of its GPUs or HCA
    ports (the first seen names the reason), or the liveness check took the node down. Two queries."""
    hosts = dict(Node.objects.filter(cluster_id=cluster_id).values_list("hostname", "state_reason"))
    down = Node.objects.filter(cluster_id=cluster_id, state=NodeState.DOWN, state_reason__startswith=TELEMETRY_REASON)
    wanted = {host: reason for host, reason in down.values_list("hostname", "state_reason")}
    alerts = (
        Alert.objects.filter(cluster_id=cluster_id, cleared_at__isnull=True, removes_capacity=True)
        .order_by("first_seen", "id")
        .values_list("rule", "object_key", "message")
    )
    more: dict[str, int] = {}
    for rule, key, message in alerts:
        host = key.split("/", 1)[0]
        if host not in hosts:
            continue  # a switch port: no Slurm node to drain
        if host in wanted:
            more[host] = more.get(host, 0) + 1
        else:
            wanted[host] = f"{rule} {key}: {message}"
    for host, n in more.items():
        wanted[host] += f" (+{n} more)"
    return wanted


def launcher() -> SlurmLauncher:
    return SlurmLauncher(slurm_conf=settings.SLURM_CONF, bindir=settings.SLURM_BINDIR)


def sync_drains(cluster_id: int, *, mode: str | None = None, slurm: SlurmLauncher | None = None) -> DrainResult:
    """Bring Slurm's drains in line with the cluster's health. `mode` (default SLURM_DRAIN): off does nothing,
    dry-run plans and logs, on runs scontrol. SlurmError when sinfo fails; a failed scontrol is in `errors`."""
    mode = check_mode(mode or settings.SLURM_DRAIN)
    if mode == "off":
        return DrainResult(plan=plan_drains({}, {}), mode=mode)
    slurm = slurm or launcher()
    argv = list(SINFO_ARGV)
    argv[0] = slurm.binary("sinfo")
    out = slurm.run(argv)
    if out.returncode != 0:
        raise SlurmError(f"sinfo: {(out.stderr or out.stdout).strip() or f'exit {out.returncode}'}")
    plan = plan_drains(wanted_drains(cluster_id), parse_sinfo(out.stdout))
    result = DrainResult(plan=plan, mode=mode)
    steps = [(f"drain {n}", drain_argv(n, r, slurm.binary("scontrol"))) for n, r in plan.drain]
    steps += [(f"resume {n}", resume_argv(n, slurm.binary("scontrol"))) for n in plan.resume]
    for what, cmd in steps:
        if mode == "dry-run":
            log.info("slurm drains (dry run): would %s", what)
            continue
        done = slurm.run(cmd)
        if done.returncode == 0:
            result.done.append(what)
            log.info("slurm drains: %s", what)
        else:
            error = f"{what}: {(done.stderr or done.stdout).strip() or f'exit {done.returncode}'}"
            result.errors.append(error)
            log.warning("slurm drains: %s", error)
    return result
