"""What the scheduler tells the fabric (registered in `SchedulerConfig.ready` with `fabric.providers`): the jobs
the twin runs, and the pools' section of a cluster's live load."""

from __future__ import annotations

import zlib

from django.conf import settings

from fabric.collectors.twin_model import TwinJob
from fabric.models import Cluster
from fabric.stored_twin import ALLREDUCE_GBPS_PER_GPU, MIG_SLICES
from scheduler.choices import ACTIVE_STATUSES, ShareKind
from scheduler.models import Allocation, Pool
from scheduler.selectors import pool_load


def twin_jobs(cluster_id: int) -> list[TwinJob]:
    """The jobs holding GPUs of the cluster now, as the twin runs them (one query): every active allocation of a
    running job, its GPUs, workload, dataset's storage node and share of each GPU (MPS compute %, MIG slices / 7,
    1 / time-slice replicas); a job on several nodes runs a ring all-reduce of ALLREDUCE_GBPS_PER_GPU[workload]
    per GPU of a node, scaled by 0.5-1.5 per job (a fixed hash of its id) so jobs differ as real ones do."""
    rows = (
        Allocation.objects.filter(active=True, gpu__node__cluster_id=cluster_id, job__status__in=ACTIVE_STATUSES)
        .order_by("job_id", "gpu__node__hostname", "gpu__index")
        .values_list(
            "job_id", "gpu__node__hostname", "gpu__index", "kind", "compute_pct", "mig_slices", "job__workload",
            "job__dataset_node__hostname", "job__pool__timeslice_replicas",
        )
    )  # fmt: skip
    jobs: dict[int, TwinJob] = {}
    for job_id, host, index, kind, pct, slices, workload, dataset, replicas in rows:
        job = jobs.get(job_id)
        if job is None:
            if kind == ShareKind.MPS:
                share = (pct or 100) / 100.0
            elif kind == ShareKind.MIG:
                share = max(1, slices or 1) / MIG_SLICES
            elif kind == ShareKind.TIMESLICE:
                share = 1.0 / max(1, replicas or 1)
            else:
                share = 1.0
            job = jobs[job_id] = TwinJob(str(job_id), [], workload=workload, dataset_node=dataset, share=share)
        job.gpus.append((host, index))
    per_gpu = getattr(settings, "TWIN_ALLREDUCE_GBPS_PER_GPU", None) or ALLREDUCE_GBPS_PER_GPU
    for job in jobs.values():
        nodes = job.nodes
        if len(nodes) > 1:
            spread = 0.5 + (zlib.crc32(job.job_id.encode()) % 1000) / 1000.0
            job.allreduce_gbps_per_node = per_gpu.get(job.workload, 0.0) * len(job.gpus) / len(nodes) * spread
    return list(jobs.values())


def pools_load(cluster: Cluster) -> list[dict]:
    """Each pool's spread of GPU utilisation (as /pools/<id>/load/), for the cluster's live load."""
    pools = list(Pool.objects.filter(cluster=cluster).order_by("name"))
    loads = pool_load(pools)
    return [{"pool": p.name, "id": p.pk, **loads[p.pk]} for p in pools]
