"""Gang shapes, topology preferences and user estimates: carried by the trace job, enforced by the simulator
for every policy, passed to the engine."""

import pytest

import scheduler.sim.engine_policy as engine_policy
from scheduler.core import schedule as real_schedule
from scheduler.sim import build_cluster, parse_cluster_spec, replay
from scheduler.sim.report import format_table
from scheduler.sim.simulator import PENDING, SimError, Simulator
from scheduler.sim.traces.base import Trace, TraceJob


def gang(i, nodes, per_node, submit=0.0, duration=100.0, **kw) -> TraceJob:
    return TraceJob(i, f"j{i}", submit, nodes * per_node, duration, nodes=nodes, gpus_per_node=per_node, **kw)


def test_a_gang_must_multiply_out_to_its_gpus():
    with pytest.raises(ValueError, match="2 nodes x 3 GPUs is not 4 GPUs"):
        TraceJob(0, "j0", 0, 4, 10.0, nodes=2, gpus_per_node=3)
    with pytest.raises(ValueError, match="needs both"):
        TraceJob(0, "j0", 0, 4, 10.0, nodes=2)
    with pytest.raises(ValueError, match="topology 'rack'"):
        TraceJob(0, "j0", 0, 4, 10.0, topology="rack")
    assert gang(0, 2, 4).gang == (2, 4) and TraceJob(0, "x", 0, 4, 1.0).gang is None


class StartAt:
    """Starts job 0 on the given GPU positions at time 0 and records what the simulator said."""

    name = "start-at"

    def __init__(self, *attempts):
        self.attempts = attempts
        self.errors = []

    def bind(self, sim):
        self.sim = sim

    def on_event(self, now, arrived, finished):
        job = self.sim.jobs[0]
        for positions in self.attempts:
            if job.status != PENDING:
                break
            try:
                self.sim.start(job, positions)
            except SimError as exc:
                self.errors.append(str(exc))

    def next_wakeup(self, now):
        return None


def test_the_simulator_refuses_a_gang_split_another_way():
    # A 2 x 2 gang on 2x4: four GPUs of one node is the right count but the wrong shape; 3 + 1 too.
    c = build_cluster(parse_cluster_spec("2x4"))
    n0, n1 = c.node_gpus
    pol = StartAt(n0, n0[:3] + n1[:1], n0[:2] + n1[:2])
    r = Simulator(Trace("t", "x", (gang(0, 2, 2),)), c, pol).run()
    assert pol.errors == [
        "job 0 is a gang of 2 x 2 GPUs, got 4 on 1 node(s)",
        "job 0 is a gang of 2 x 2 GPUs, got 3+1 on 2 node(s)",
    ]
    assert not r.unfinished and r.jobs[0].multi_node


def test_the_simulator_refuses_a_required_leaf_spread_over_two():
    # 4 nodes in leaves of 2: nodes 0 and 2 sit under different leaves, 0 and 1 under the same one.
    c = build_cluster(parse_cluster_spec("4x4/2"))
    n = c.node_gpus
    pol = StartAt(n[0] + n[2], n[0] + n[1])
    r = Simulator(Trace("t", "x", (gang(0, 2, 4, topology="require-leaf"),)), c, pol).run()
    assert pol.errors == ["job 0 requires one leaf, got GPUs under several"]
    assert r.multi_node_jobs == 1 and r.multi_node_one_leaf == 1


def test_the_engine_receives_the_shape_the_requirement_and_the_estimate(monkeypatch):
    seen = []
    monkeypatch.setattr(engine_policy, "schedule", lambda s, p=None: (seen.append(s), real_schedule(s, p))[1])
    t = Trace(
        "t",
        "x",
        (
            gang(0, 2, 2, est_runtime_s=120.0),
            gang(1, 2, 4, topology="require-leaf"),
            TraceJob(2, "j2", 0, 3, 10.0, topology="any"),
        ),
    )
    r = replay(t, build_cluster(parse_cluster_spec("4x4/2")), ["default"])[0]
    req = {j.id: j for j in seen[0].pending}
    assert (req[0].nodes, req[0].gpus_per_node, req[0].require, req[0].est_runtime_s) == (2, 2, None, 120.0)
    assert (req[1].nodes, req[1].gpus_per_node, req[1].require, req[1].est_runtime_s) == (2, 4, "leaf", None)
    assert (req[2].nodes, req[2].gpus_per_node, req[2].require) == (None, None, None)
    # A 4-GPU job fits one node of this empty cluster: only the gang shape makes the engine use two.
    assert not r.unfinished and r.jobs[0].multi_node


def test_default_blind_refuses_a_trace_that_requires_leaves():
    t = Trace("t", "x", (gang(0, 2, 4, topology="require-leaf"),))
    with pytest.raises(ValueError, match="default-blind cannot see leaves"):
        replay(t, build_cluster(parse_cluster_spec("4x4/2")), ["default-blind"])


def test_multi_node_jobs_are_counted_with_their_leaf():
    # fifo@count on 4x4/1 (one node per leaf): the 2 x 4 gang crosses the spine, the 1 x 4 one does not;
    # a flexible 8-GPU job on two nodes counts as multi-node too.
    t = Trace("t", "x", (gang(0, 2, 4), gang(1, 1, 4, submit=200), TraceJob(2, "j2", 400, 8, 10.0)))
    r = replay(t, build_cluster(parse_cluster_spec("4x4/1")), ["fifo@count"])[0]
    assert (r.multi_node_jobs, r.multi_node_one_leaf) == (2, 0)
    assert r.summary()["multi_node_jobs"] == 2 and r.summary()["multi_node_in_one_leaf"] == 0


def test_the_table_counts_multi_node_jobs_in_one_leaf():
    t = Trace("t", "x", (gang(0, 2, 4), gang(1, 2, 4)))
    r = replay(t, build_cluster(parse_cluster_spec("4x4/2")), ["fifo"])[0]  # YARN: one leaf each
    header, row = format_table(t, [r]).splitlines()[1:3]
    assert header.endswith("multi-node 1 leaf") and row.endswith(" 2/2")
