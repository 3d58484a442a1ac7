"""Generated snapshots for benchmarks and tests: a rail-optimised DGX H100 fat tree with a realistic job
mix. PURE and deterministic (same arguments, same snapshot).

    snap = synthetic_snapshot(gpus=10_000, pending=50_000)      # 1,250 nodes, 50k queued jobs

Cluster: `gpus // 8` DGX H100 servers (8 GPUs in one NVLink island, 8 NDR HCAs, one per rail) from
`fabric.importers.fattree.generate_fat_tree`, plus storage servers (one per 64 compute servers, at
least 2). Pools: "train" (exclusive, ~85 % of the servers), "infer" (MPS), "mig" (MIG) and "share"
(time-slicing, 4 replicas), 5 % each. Six tenants with guaranteed quotas in "train" summing to ~90 %
of it, borrowing limits, decayed usage. Live state: `running_fraction` of the GPUs busy with running
jobs placed first-fit (gangs over consecutive servers), host and uplink utilisation drawn per link
(most 0-50 %, ~3 % hot above 85 %), a few erroring links, 0.2 % unhealthy GPUs.
Pending jobs: sizes 1, 2, 4, 8, 16, 32, 64 GPUs (weights 35/15/15/20/7/5/3), ~12 % MPS, ~5 % MIG,
~5 % time-sliced, ~10 % data-intensive reading from a storage node, priorities from the four classes,
70 % with a runtime estimate.
"""

from __future__ import annotations

import random
from dataclasses import replace

from fabric.importers.fattree import generate_fat_tree
from fabric.topology.convert import fabric_from_parsed
from scheduler.core.fragmentation import mix_from_jobs
from scheduler.core.mig import profiles_for
from scheduler.core.topology import build_topology
from scheduler.core.types import (
    Config,
    Decisions,
    GpuState,
    JobRequest,
    NodeState,
    PoolState,
    Quota,
    RunningJob,
    Share,
    Snapshot,
    TenantState,
)

SIZES = (1, 2, 4, 8, 16, 32, 64)
SIZE_WEIGHTS = (35, 15, 15, 20, 7, 5, 3)
PRIORITIES = {"high": 100, "normal": 50, "low": 10, "best-effort": 0}
TENANTS = ("vision", "nlp", "speech", "robotics", "search", "research")
MIG_PROFILES = ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb")
POOL_TRAIN, POOL_INFER, POOL_MIG, POOL_SHARE = 1, 2, 3, 4


def _islands(node) -> list[tuple[int, ...]]:
    """NVLink islands from `nvidia-smi topo -m` codes: GPUs joined by NV# links (union-find)."""
    if node.topology is None:
        return [(g.index,) for g in node.gpus]
    parent = {g: g for g in node.topology.gpus}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for (a, b), code in node.topology.gpu_links.items():
        if code.startswith("NV"):
            parent[find(a)] = find(b)
    groups: dict[int, list[int]] = {}
    for g in node.topology.gpus:
        groups.setdefault(find(g), []).append(g)
    return [tuple(sorted(v)) for v in groups.values()]


def synthetic_snapshot(
    gpus: int,
    pending: int,
    running_fraction: float = 0.7,
    seed: int = 0,
    config: Config | None = None,
    with_topology: bool = True,
) -> Snapshot:
    rng = random.Random(seed)
    n_nodes = max(2, gpus // 8)
    n_storage = max(2, n_nodes // 64)
    parsed = generate_fat_tree(n_nodes, gpus_per_node=8, gpu_model="H100", storage_nodes=n_storage)
    fabric = fabric_from_parsed(parsed)
    compute = [n for n in parsed.nodes if n.role == "compute"]
    storage = [n.hostname for n in parsed.nodes if n.role == "storage"]
    hcas: dict[str, int] = {}
    for ca in parsed.cas:
        if ca.kind == "host":
            hcas[ca.hostname] = hcas.get(ca.hostname, 0) + 1

    # Pools: the last 15 % of the servers are split between the three shared pools.
    n_shared = max(3, int(n_nodes * 0.05))
    names = [n.hostname for n in compute]
    train_hosts = names[: len(names) - 3 * n_shared]
    infer_hosts = names[len(train_hosts) : len(train_hosts) + n_shared]
    mig_hosts = names[len(train_hosts) + n_shared : len(train_hosts) + 2 * n_shared]
    share_hosts = names[len(train_hosts) + 2 * n_shared :]
    pools = [
        PoolState(POOL_TRAIN, "train", "exclusive", 1, frozenset(train_hosts)),
        PoolState(POOL_INFER, "infer", "mps", 1, frozenset(infer_hosts)),
        PoolState(POOL_MIG, "mig", "mig", 1, frozenset(mig_hosts)),
        PoolState(POOL_SHARE, "share", "timeslice", 4, frozenset(share_hosts)),
    ]
    train_gpus = len(train_hosts) * 8
    shares_of_quota = [0.25, 0.2, 0.15, 0.12, 0.1, 0.08]
    tenants = [
        TenantState(
            name,
            {
                POOL_TRAIN: Quota(int(train_gpus * s), int(train_gpus * s * 0.5)),
                POOL_INFER: Quota(int(n_shared * 8 * s), n_shared * 8),
                POOL_MIG: Quota(int(n_shared * 8 * s), n_shared * 8),
                POOL_SHARE: Quota(int(n_shared * 8 * s), n_shared * 8),
            },
            usage_decayed=rng.uniform(0, 5000),
            max_priority=100 if i < 4 else 50,
        )
        for i, (name, s) in enumerate(zip(TENANTS, shares_of_quota, strict=True))
    ]

    # GPU state, mutable while running jobs are laid out.
    gid = 0
    gpu_rows: dict[str, list[dict]] = {}
    for node in compute:
        rows = []
        for g in node.gpus:
            gid += 1
            rows.append(
                {
                    "id": gid,
                    "index": g.index,
                    "model": g.model,
                    "memory_mib": g.memory_mib,
                    "healthy": rng.random() > 0.002,
                    "utilisation": 0.0 if rng.random() > 0.05 else rng.uniform(0.05, 0.2),
                    "nvlink_gbps": g.nvlink_gbps,
                }
            )
        gpu_rows[node.hostname] = rows

    now = 1_700_000_000.0
    job_id = 0
    seq = 0
    running: list[RunningJob] = []

    def new_request(pool: int, size: int, when: float, **kw) -> JobRequest:
        nonlocal job_id, seq
        job_id += 1
        seq += 1
        tenant = TENANTS[min(len(TENANTS) - 1, int(rng.expovariate(0.6)))]
        prio = rng.choice((100, 50, 50, 50, 10, 0))
        workload = kw.pop("workload", rng.choice(("training", "training", "training", "inference")))
        return JobRequest(
            id=job_id,
            tenant=tenant,
            pool=pool,
            gpus=size,
            priority=prio,
            preemptible=prio < 100 or rng.random() < 0.3,
            workload=workload,
            est_runtime_s=rng.choice((1800.0, 3600.0, 4 * 3600.0, 12 * 3600.0)) if rng.random() < 0.7 else None,
            checkpoint_cost_s=rng.uniform(30, 300),
            submitted_at=when,
            attained_gpu_s=rng.uniform(0, 50000),
            queue_seq=seq,
            **kw,
        )

    # Running exclusive jobs: first fit over the train servers until the fraction is busy.
    target = int(train_gpus * running_fraction)
    busy = 0
    cursor = 0
    free_on = {h: [r["index"] for r in gpu_rows[h] if r["healthy"]] for h in train_hosts}
    while busy < target and cursor < len(train_hosts):
        size = rng.choices(SIZES, SIZE_WEIGHTS)[0]
        size = min(size, target - busy) or 1
        req = new_request(POOL_TRAIN, size, now - rng.uniform(600, 40000))
        shares: list[Share] = []
        need = size
        while need and cursor < len(train_hosts):
            h = train_hosts[cursor]
            take = free_on[h][:need]
            free_on[h] = free_on[h][len(take) :]
            for idx in take:
                row = gpu_rows[h][idx]
                row["exclusive_job"] = req.id
                row["utilisation"] = rng.uniform(0.6, 1.0)
                shares.append(Share(row["id"], "whole", 100, row["memory_mib"]))
            need -= len(take)
            if not free_on[h]:
                cursor += 1
        if need:
            for sh in shares:  # ran out of servers: drop the partial gang
                for rows in gpu_rows.values():
                    for row in rows:
                        if row["id"] == sh.gpu_id:
                            row.pop("exclusive_job", None)
            break
        busy += size
        running.append(RunningJob(req, tuple(shares), req.submitted_at + 60, None, rng.random() < 0.1))

    # Running shared jobs: MPS 25 %, MIG 1g/2g, time-slice replicas on part of each shared pool.
    for h in infer_hosts[: int(len(infer_hosts) * running_fraction)]:
        for row in gpu_rows[h]:
            for _ in range(2):
                req = new_request(POOL_INFER, 1, now - 3000, sharing="mps", mps_compute_pct=25, mps_memory_mib=16384)
                row["mps_compute_pct_used"] = row.get("mps_compute_pct_used", 0) + 25
                row["mps_memory_mib_used"] = row.get("mps_memory_mib_used", 0) + 16384
                row["utilisation"] = rng.uniform(0.3, 0.7)
                running.append(RunningJob(req, (Share(row["id"], "mps", 25, 16384),), now - 3000))
    for h in mig_hosts[: int(len(mig_hosts) * running_fraction)]:
        for row in gpu_rows[h]:
            profs = profiles_for(row["model"], row["memory_mib"])
            used = []
            for prof_name, start in (("3g.40gb", 0), ("1g.10gb", 4)):
                prof = profs[prof_name]
                req = new_request(POOL_MIG, 1, now - 3000, sharing="mig", mig_profile=prof_name)
                used.append((prof_name, start))
                running.append(
                    RunningJob(
                        req,
                        (
                            Share(
                                row["id"], "mig", round(100 * prof.compute_fraction), prof.memory_mib, prof_name, start
                            ),
                        ),
                        now - 3000,
                    )
                )
            row["mig_used"] = tuple(used)
    for h in share_hosts[: int(len(share_hosts) * running_fraction)]:
        for row in gpu_rows[h]:
            for rep in range(2):
                req = new_request(POOL_SHARE, 1, now - 3000, sharing="timeslice")
                row["timeslice_used"] = row.get("timeslice_used", 0) + 1
                running.append(RunningJob(req, (Share(row["id"], "timeslice", 25, 0, None, None, rep),), now - 3000))

    nodes = [
        NodeState(
            hostname=n.hostname,
            schedulable=rng.random() > 0.005,
            storage=False,
            gpus=tuple(GpuState(**r) for r in gpu_rows[n.hostname]),
            nvlink_islands=tuple(_islands(n)),
            hca_gbps=hcas.get(n.hostname, 0) * 400.0,
        )
        for n in compute
    ]
    nodes += [NodeState(hostname=h, storage=True, hca_gbps=hcas.get(h, 0) * 400.0) for h in storage]

    # Live link state.
    util: dict[str, float] = {}
    errors: dict[str, bool] = {}
    for link in fabric.links:
        r = rng.random()
        util[link.key] = rng.uniform(0.85, 0.99) if r < 0.03 else rng.uniform(0.0, 0.5)
        if rng.random() < 0.001:
            errors[link.key] = True

    # Pending jobs.
    queue: list[JobRequest] = []
    for _ in range(pending):
        r = rng.random()
        when = now - rng.uniform(0, 86400)
        if r < 0.12:
            queue.append(
                new_request(
                    POOL_INFER,
                    1,
                    when,
                    sharing="mps",
                    mps_compute_pct=rng.choice((10, 25, 50)),
                    mps_memory_mib=rng.choice((8192, 16384, 32768)),
                    workload="inference",
                )
            )
        elif r < 0.17:
            queue.append(new_request(POOL_MIG, 1, when, sharing="mig", mig_profile=rng.choice(MIG_PROFILES)))
        elif r < 0.22:
            queue.append(new_request(POOL_SHARE, 1, when, sharing="timeslice", workload="inference"))
        else:
            size = rng.choices(SIZES, SIZE_WEIGHTS)[0]
            kw: dict = {}
            if rng.random() < 0.1:
                kw["workload"] = "data-intensive"
                kw["dataset_node"] = rng.choice(storage)
            if size >= 16 and rng.random() < 0.5:
                kw["gpus_per_node"] = 8
            if size >= 16 and rng.random() < 0.1:
                kw["require"] = "leaf"
            queue.append(new_request(POOL_TRAIN, size, when, **kw))

    return Snapshot(
        now=now,
        fabric=fabric,
        nodes=nodes,
        pools=pools,
        tenants=tenants,
        pending=queue,
        running=running,
        link_utilisation=util,
        link_errors=errors,
        request_mix=_request_mix(queue, running),
        priority_classes=dict(PRIORITIES),
        config=config or Config(),
        topology=build_topology(fabric) if with_topology else None,
    )


def _hold(gs: GpuState, share: Share, job_id: int, sign: int) -> GpuState:
    """The GPU with the share taken (sign 1) or given back (sign -1)."""
    if share.kind == "whole":
        return replace(gs, exclusive_job=job_id if sign > 0 else None)
    if share.kind == "mps":
        return replace(
            gs,
            mps_compute_pct_used=gs.mps_compute_pct_used + sign * share.compute_pct,
            mps_memory_mib_used=gs.mps_memory_mib_used + sign * share.memory_mib,
        )
    if share.kind == "mig":
        slot = (share.mig_profile or "", share.mig_start or 0)
        used = (*gs.mig_used, slot) if sign > 0 else tuple(u for u in gs.mig_used if u != slot)
        return replace(gs, mig_used=used)
    return replace(gs, timeslice_used=gs.timeslice_used + sign)


def next_round(
    snapshot: Snapshot, decisions: Decisions, finish: float = 0.01, seed: int = 0, dt_s: float = 30.0
) -> Snapshot:
    """The cluster one round later, as production sees it: the round's placements run, its preempted and
    requeued jobs wait again, then `finish` of the running jobs end and as many new jobs arrive (copies of
    queued ones with new ids, so the mix stays the same). Migrations are left where they ran. Deterministic
    for one seed; the snapshot given is not changed."""
    rng = random.Random(seed)
    now = snapshot.now + dt_s
    gpu = {g.id: g for n in snapshot.nodes for g in n.gpus}
    pending = {j.id: j for j in snapshot.pending}
    running = {rj.request.id: rj for rj in snapshot.running}
    for jid in [*(v for v, _ in decisions.requeues), *(p.job_id for p in decisions.preemptions)]:
        rj = running.pop(jid, None)
        if rj is None:
            continue
        for sh in rj.shares:
            gpu[sh.gpu_id] = _hold(gpu[sh.gpu_id], sh, jid, -1)
        pending[jid] = rj.request
    for jid, _ in decisions.failures:
        rj = running.pop(jid, None)
        for sh in rj.shares if rj is not None else ():
            gpu[sh.gpu_id] = _hold(gpu[sh.gpu_id], sh, jid, -1)
    for p in decisions.placements:
        job = pending.pop(p.job_id)
        for sh in p.shares:
            gpu[sh.gpu_id] = _hold(gpu[sh.gpu_id], sh, p.job_id, 1)
        running[p.job_id] = RunningJob(job, p.shares, now, None, p.borrowed)
    ended = sorted(running)
    k = round(finish * len(ended))
    for jid in rng.sample(ended, k):
        rj = running.pop(jid)
        for sh in rj.shares:
            gpu[sh.gpu_id] = _hold(gpu[sh.gpu_id], sh, jid, -1)
    queued = sorted(pending.values(), key=lambda j: j.id)
    top_id = max([*pending, *running, 0])
    top_seq = max([j.queue_seq for j in queued] + [rj.request.queue_seq for rj in running.values()] + [0])
    for i, like in enumerate(rng.sample(queued, min(k, len(queued)))):
        copy = replace(like, id=top_id + 1 + i, queue_seq=top_seq + 1 + i, submitted_at=now, attained_gpu_s=0.0)
        pending[copy.id] = copy
    # A node none of whose GPUs changed is the same object, as the snapshot adapter keeps it (what a kept
    # ClusterState reads again is what changed).
    nodes = [
        replace(n, gpus=tuple(gpu[g.id] for g in n.gpus)) if any(gpu[g.id] is not g for g in n.gpus) else n
        for n in snapshot.nodes
    ]
    queue, holders = list(pending.values()), list(running.values())
    return replace(
        snapshot, now=now, nodes=nodes, pending=queue, running=holders, request_mix=_request_mix(queue, holders)
    )


def _request_mix(pending: list[JobRequest], running: list[RunningJob]) -> list:
    """The shared requests' mix, as the database adapter hands it to a round (scheduler.snapshot_from_db._request_mix,
    one grouped query in the snapshot's load): here every job's, waiting or running, none weighed down by age."""
    return mix_from_jobs([*pending, *(r.request for r in running)])
