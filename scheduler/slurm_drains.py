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
    DrainResult,
    SlurmNode,
    check_mode,
    drain_argv,
    parse_sinfo,
    plan_drains,
    resume_argv,
    sinfo_argv,
)

log = logging.getLogger(__name__)


def wanted_drains(cluster_id: int) -> dict[str, str]:
    """host -> why it is out of service: an open alert that removed capacity on the node, one of its GPUs or HCA
    ports (the first seen names the reason), or the liveness check took the node down."""
    return _health(cluster_id)[0]


def _health(cluster_id: int) -> tuple[dict[str, str], set[str]]:
    """(wanted_drains, every host of the cluster), in two queries."""
    nodes = Node.objects.filter(cluster_id=cluster_id).values_list("hostname", "state", "state_reason")
    hosts, wanted = set(), {}
    for host, state, reason in nodes:
        hosts.add(host)
        if state == NodeState.DOWN and reason.startswith(TELEMETRY_REASON):
            wanted[host] = reason
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
    return wanted, hosts


def launcher() -> SlurmLauncher:
    """The Slurm client of this host as the settings name it (every Slurm integration's: drains, launches, mirror)."""
    return SlurmLauncher(settings.SLURM_TAG, slurm_conf=settings.SLURM_CONF, bindir=settings.SLURM_BINDIR)


def _failure(done) -> str:
    return (done.stderr or done.stdout).strip() or f"exit {done.returncode}"


def slurm_nodes(slurm: SlurmLauncher) -> dict[str, SlurmNode]:
    """Slurm's nodes with their state and reason (one sinfo); SlurmError when sinfo fails."""
    out = slurm.run(sinfo_argv(slurm.binary("sinfo")))
    if out.returncode != 0:
        raise SlurmError(f"sinfo: {_failure(out)}")
    return parse_sinfo(out.stdout)


def sync_drains(
    cluster_id: int,
    *,
    mode: str | None = None,
    slurm: SlurmLauncher | None = None,
    nodes: dict[str, SlurmNode] | None = None,
) -> DrainResult:
    """Bring Slurm's drains in line with the cluster's health. `mode` (default SLURM_DRAIN): off does nothing,
    dry-run plans and logs, on runs scontrol. `nodes`: Slurm's nodes when the caller already read them (one sinfo
    for every cluster of a beat pass). SlurmError when sinfo fails; a failed scontrol is in `errors`."""
    mode = check_mode(mode or settings.SLURM_DRAIN)
    if mode == "off":
        return DrainResult(plan=plan_drains({}, {}), mode=mode)
    slurm = slurm or launcher()
    wanted, hosts = _health(cluster_id)
    plan = plan_drains(wanted, slurm_nodes(slurm) if nodes is None else nodes, hosts)
    result = DrainResult(plan=plan, mode=mode)
    scontrol = slurm.binary("scontrol")
    steps = [(f"drain {n}", drain_argv(n, r, scontrol)) for n, r in plan.drain]
    steps += [(f"resume {n}", resume_argv(n, scontrol)) for n in plan.resume]
    for what, cmd in steps:
        if mode == "dry-run":
            log.info("slurm drains (dry run): would %s", what)
            continue
        done = slurm.run(cmd)
        if done.returncode == 0:
            result.done.append(what)
            log.info("slurm drains: %s", what)
        else:
            error = f"{what}: {_failure(done)}"
            result.errors.append(error)
            log.warning("slurm drains: %s", error)
    return result
