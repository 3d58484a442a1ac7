"""Everything placement reads of a cluster index (ClusterState), orders included, as plain values to compare: a kept
index brought to a snapshot (ClusterState.advance) against one built from it."""

from __future__ import annotations

from scheduler.core.state import ClusterState, GpuSlot, NodeSlot, Partition


def _slots(obj, skip: tuple[str, ...] = ()) -> dict:
    return {name: getattr(obj, name) for name in type(obj).__slots__ if name not in skip}


def _gpu(g: GpuSlot) -> dict:
    out = _slots(g, skip=("node", "ts_reps", "mig_keys"))
    out["ts_reps"] = sorted(g.ts_reps)
    out["mig_keys"] = sorted(g.mig_keys.items())
    return out


def _names(bucket) -> list:
    return [x.name if isinstance(x, NodeSlot) else x.id for x in bucket]


def _partition(p: Partition) -> dict:
    # `domains` is a memo of the groups (gbuckets' keys, compared) and their pods, made at a placement's first look.
    out = _slots(p, skip=("nodes", "buckets", "gbuckets", "mps_b", "mig_b", "ts_b", "gfree", "gcap", "domains"))
    out["nodes"] = _names(p.nodes)
    out["buckets"] = [_names(b) for b in p.buckets]
    out["gbuckets"] = [(grp, [_names(b) for b in lst]) for grp, lst in p.gbuckets.items()]
    out["gfree"], out["gcap"] = list(p.gfree.items()), list(p.gcap.items())
    out["mps_b"] = [_names(b) for b in p.mps_b]
    out["mig_b"] = [(name, [_names(b) for b in lst]) for name, lst in p.mig_b.items()]
    out["ts_b"] = [_names(b) for b in p.ts_b]
    return out


def fingerprint(st: ClusterState) -> dict:
    """Everything placement reads of the index, orders included."""
    nodes = []
    for node in st.nodes.values():
        n = _slots(node, skip=("gpus", "part", "frag_sig"))
        n["part"] = node.part.key if node.part is not None else None
        n["frag_sig"] = node.frag_sig
        n["gpus"] = [_gpu(g) for g in node.gpus]
        nodes.append(n)
    return {
        "now": st.now,
        "nodes": nodes,
        "gpus": list(st.gpus),
        "partitions": [(k, _partition(p)) for k, p in st.partitions.items()],
        "pool_parts": [(pid, [p.key for p in parts]) for pid, parts in st.pool_parts.items()],
        "running": list(st.running.items()),
        "job_gpus": [(jid, [(g.id, sh) for g, sh in held]) for jid, held in st.job_gpus.items()],
        # By node: placement only looks a node up (the order of its jobs, which it walks, is compared); a kept index
        # counts again the nodes whose jobs changed, where a build adds the nodes in the order of their first job.
        "jobs_on_node": sorted((name, list(jobs)) for name, jobs in st.jobs_on_node.items()),
        "job_equiv": list(st.job_equiv.items()),
        "stopping": sorted(st.stopping),
        "network": [
            list(st.group_oeff.items()),
            list(st.group_hot.items()),
            list(st.pod_oeff.items()),
            list(st.pod_hot.items()),
            list(st._node_net.items()),
            list(st._node_nominal.items()),
            sorted(st._node_hot),
            sorted(st._node_err),
        ],
        "warnings": st.warnings,
        "journal": (st.journal_log, st.sig_dirty, st.touched),
    }
