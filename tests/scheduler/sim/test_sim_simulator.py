"""The event loop: progress, checkpoint/restart costs, migrations, utilisation, bookkeeping."""

import pytest

from scheduler.sim import build_cluster, parse_cluster_spec, replay
from scheduler.sim.runtime import RuntimeParams, profile
from scheduler.sim.simulator import PENDING, RUNNING, STOPPING, SimError, Simulator
from scheduler.sim.traces.base import Trace, TraceJob


def trace(*jobs, model: str = "vgg16") -> Trace:
    p = profile(model)
    return Trace(
        "test",
        "hand-made",
        tuple(
            TraceJob(i, f"j{i}", s, g, float(d), p.name, p.compute_s(), p.grad_bytes)
            for i, (g, s, d) in enumerate(jobs)
        ),
    )


class Scripted:
    """A policy that runs the given actions at given times: {time: callable(sim)}; starts arrivals FIFO."""

    name = "scripted"

    def __init__(self, script=None, wake=()):
        self.script = dict(script or {})
        self.wakes = sorted(wake)

    def bind(self, sim):
        self.sim = sim

    def on_event(self, now, arrived, finished):
        if now in self.script:
            self.script.pop(now)(self.sim)
        for j in self.sim.jobs:
            if j.status == PENDING:
                free = [p for p in range(self.sim.cluster.n_gpus) if self.sim.is_free(p)]
                if len(free) >= j.gpus:
                    self.sim.start(j, free[: j.gpus])

    def next_wakeup(self, now):
        later = [t for t in self.wakes if t > now]
        return later[0] if later else None


def test_network_off_preemption_is_free_and_on_it_costs_checkpoint_and_restart():
    t = trace((4, 0, 1000), (4, 5, 10))
    c = build_cluster(parse_cluster_spec("1x4"))
    off = {j.name: j for j in replay(t, c, ["srtf"], network=False)[0].jobs}
    on = {j.name: j for j in replay(t, c, ["srtf"], network=True)[0].jobs}
    assert off["j0"].end == 1010
    cost = RuntimeParams().move_cost_s(profile("vgg16").grad_bytes)
    assert on["j0"].end == pytest.approx(1010 + cost)
    assert on["j1"].end == pytest.approx(15)  # one node, one NVLink island: full speed


def test_checkpoint_in_place_holds_the_gpus_until_the_victim_stopped():
    t = trace((4, 0, 1000))
    c = build_cluster(parse_cluster_spec("1x4"))
    params = RuntimeParams()
    ck = params.checkpoint_s(profile("vgg16").grad_bytes)
    seen = {}

    def preempt(sim):
        sim.preempt(sim.jobs[0], checkpoint_in_place=True)
        seen["status"] = sim.jobs[0].status
        seen["free"] = sim.free_count

    sim = Simulator(t, c, Scripted({100: preempt}, wake=[100]), network=True, params=params)
    r = sim.run()
    assert seen == {"status": STOPPING, "free": 0}
    # 100 s of work, checkpoint ck s on its GPUs, restart at 100 + ck paying restart_s, 900 s more.
    assert r.jobs[0].end == pytest.approx(100 + ck + params.restart_s + 900)
    assert r.jobs[0].preemptions == 1


def test_migration_costs_with_the_network_model_and_is_counted():
    t = trace((2, 0, 1000))
    c = build_cluster(parse_cluster_spec("2x4"))

    def move(sim):
        sim.migrate(sim.jobs[0], c.node_gpus[1][:2])

    for network in (False, True):
        r = Simulator(t, c, Scripted({50: move}, wake=[50]), network=network).run()
        cost = RuntimeParams().move_cost_s(profile("vgg16").grad_bytes) if network else 0.0
        assert r.jobs[0].end == pytest.approx(1000 + cost)
        assert r.migrations == 1


def test_utilisation_and_queueing():
    t = trace((4, 0, 100), (2, 0, 100))
    r = replay(t, build_cluster(parse_cluster_spec("1x4")), ["fifo"])[0]
    assert r.makespan == 200
    assert r.utilisation == pytest.approx((4 * 100 + 2 * 100) / (4 * 200))
    assert r.avg_queueing == pytest.approx(50)
    assert r.busy_timeline[0] == (0.0, 4) and r.busy_timeline[-1] == (200.0, 0)


def test_placement_shares_and_progress_callback():
    t = trace((8, 0, 100), (4, 0, 100), (1, 0, 100))
    calls = []
    r = replay(
        t,
        build_cluster(parse_cluster_spec("4x4/2")),
        ["fifo"],
        progress=lambda policy, done, total: calls.append((policy, done, total)),
    )[0]
    assert calls[-1] == ("fifo", 3, 3)
    assert r.island_share == pytest.approx(0.5)  # the 4-GPU job in one island, the 8-GPU one on two nodes
    assert r.leaf_share == pytest.approx(1.0)


def test_simulator_refuses_impossible_actions():
    t = trace((2, 0, 100), (2, 0, 100))
    c = build_cluster(parse_cluster_spec("1x4"))

    def clash(sim):
        with pytest.raises(SimError, match="held by job 0"):
            sim.start(sim.jobs[1], [0, 1])
        with pytest.raises(SimError, match="needs 2 distinct GPUs"):
            sim.start(sim.jobs[1], [2, 2])
        with pytest.raises(SimError, match="not running"):
            sim.preempt(sim.jobs[1])
        assert sim.jobs[0].status == RUNNING

    class First(Scripted):
        def on_event(self, now, arrived, finished):
            if now == 0:
                self.sim.start(self.sim.jobs[0], [0, 1])
                clash(self.sim)
            super().on_event(now, arrived, finished)

    r = Simulator(t, c, First()).run()
    assert not r.unfinished


def test_network_model_slows_a_spread_job():
    t = trace((8, 0, 1000))
    c = build_cluster(parse_cluster_spec("4x4/2:2"))
    c2 = build_cluster(parse_cluster_spec("4x4/1"))  # one node per leaf: an 8-GPU job crosses the spine
    assert replay(t, c, ["fifo"], network=True)[0].jobs[0].end == pytest.approx(1000)  # YARN: one leaf
    c = c2
    r_off = replay(t, c, ["fifo@count"], network=False)[0]
    r_on = replay(t, c, ["fifo@count"], network=True)[0]
    assert r_off.jobs[0].end == 1000
    assert r_on.jobs[0].end > 1000
    assert not r_on.jobs[0].one_leaf
