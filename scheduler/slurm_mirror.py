"""Observe a Slurm cluster that clusterctl does not schedule (issue 17, part 3): read Slurm's jobs, mirror them.

One `scontrol show job -d -o` per pass (on a host with the Slurm client and munge: the `slurm` queue's worker, or
`manage.py slurm_observe`), parsed by scheduler.launch.slurm_observe and handed to
scheduler.actions.slurm_observed.sync_observed for each cluster named in SLURM_OBSERVE. A job that holds nodes goes to
the cluster those nodes are in; a pending one (no nodes yet) to the first cluster of SLURM_OBSERVE.
"""

from __future__ import annotations

from django.conf import settings

from fabric.models import Cluster, Node
from scheduler.actions.slurm_observed import sync_observed
from scheduler.launch.slurm import SlurmError, SlurmLauncher
from scheduler.launch.slurm_observe import ObservedJob, parse_scontrol_jobs, scontrol_argv
from scheduler.slurm_drains import launcher


def read_jobs(slurm: SlurmLauncher | None = None) -> list[ObservedJob]:
    """Every job Slurm knows; SlurmError with scontrol's message when it cannot be read."""
    slurm = slurm or launcher()
    done = slurm.run(scontrol_argv(slurm.binary("scontrol")))
    if done.returncode != 0:
        raise SlurmError(f"scontrol show job: {(done.stderr or done.stdout).strip() or f'exit {done.returncode}'}")
    return parse_scontrol_jobs(done.stdout)


def split_by_cluster(jobs: list[ObservedJob], clusters: list[Cluster]) -> dict[int, list[ObservedJob]]:
    """Each job to the cluster its GPUs' hosts are in (the most of them); pending ones to the first cluster."""
    ids = [c.pk for c in clusters]
    host_cluster = dict(Node.objects.filter(cluster_id__in=ids).values_list("hostname", "cluster_id"))
    out: dict[int, list[ObservedJob]] = {pk: [] for pk in ids}
    for job in jobs:
        counts: dict[int, int] = {}
        for host, _ in job.gpus:
            if host in host_cluster:
                counts[host_cluster[host]] = counts.get(host_cluster[host], 0) + 1
        if counts:
            out[max(counts, key=lambda pk: (counts[pk], -ids.index(pk)))].append(job)
        elif ids and not job.gpus:
            out[ids[0]].append(job)
    return out


def observe(names: list[str] | None = None, *, jobs: list[ObservedJob] | None = None,
            slurm: SlurmLauncher | None = None) -> dict[str, dict[str, int]]:  # fmt: skip
    """One pass: read Slurm (unless `jobs` is given, e.g. from a saved output) and mirror it into each cluster."""
    names = list(settings.SLURM_OBSERVE if names is None else names)
    clusters = {c.name: c for c in Cluster.objects.filter(name__in=names)}
    missing = [n for n in names if n not in clusters]
    if missing:
        raise SlurmError(f"SLURM_OBSERVE names clusters that do not exist: {', '.join(missing)}")
    ordered = [clusters[n] for n in names]
    jobs = read_jobs(slurm) if jobs is None else jobs
    split = split_by_cluster(jobs, ordered)
    return {c.name: sync_observed(c.pk, split[c.pk]) for c in ordered}
