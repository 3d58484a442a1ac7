"""synthetic.next_round: the cluster one round later, for churn benchmarks (hand-built snapshots)."""

from scheduler.core.synthetic import next_round
from scheduler.core.types import Decisions, Placement, Preemption, Share
from tests.scheduler.core.builders import two_leaves


def _base():
    b = two_leaves(gpus=4)  # n1, n2 in L1; n3, n4 in L2; pool 1 over all
    b.pool(1, "train")
    for jid, host in ((1, "n1"), (2, "n2"), (3, "n3"), (4, "n4")):
        b.run(jid, {host: [0]})
    b.job(10, gpus=2)
    b.job(11, gpus=1)
    return b


def _held(snap) -> dict[tuple[str, int], int]:
    return {(n.hostname, g.index): g.exclusive_job for n in snap.nodes for g in n.gpus if g.exclusive_job}


def test_a_placement_runs_on_its_gpus_and_leaves_the_queue():
    b = _base()
    snap = b.snapshot()
    shares = (Share(b.gpu_id("n1", 1), "whole", 100, 0), Share(b.gpu_id("n1", 2), "whole", 100, 0))
    dec = Decisions(placements=[Placement(10, shares, ("n1",), 0.0, {}, "")])
    after = next_round(snap, dec, finish=0.0)
    assert _held(after) == {("n1", 0): 1, ("n2", 0): 2, ("n3", 0): 3, ("n4", 0): 4, ("n1", 1): 10, ("n1", 2): 10}
    assert [j.id for j in after.pending] == [11]
    assert sorted(rj.request.id for rj in after.running) == [1, 2, 3, 4, 10]
    assert after.now == snap.now + 30.0


def test_a_preempted_job_waits_again_and_frees_its_gpus():
    snap = _base().snapshot()
    after = next_round(snap, Decisions(preemptions=[Preemption(3, 10, "for 10")]), finish=0.0)
    assert ("n3", 0) not in _held(after)
    assert sorted(j.id for j in after.pending) == [3, 10, 11]


def test_half_the_running_jobs_end_and_as_many_copies_of_queued_jobs_arrive_with_new_ids():
    snap = _base().snapshot()
    after = next_round(snap, Decisions(), finish=0.5, seed=7)
    assert len(after.running) == 2  # 4 running, half end
    assert len(_held(after)) == 2  # their GPUs are free
    new = sorted(j.id for j in after.pending if j.id not in (10, 11))
    assert new == [12, 13]  # after the highest id in use (11)
    assert {j.gpus for j in after.pending if j.id in new} <= {1, 2}
    assert all(j.submitted_at == snap.now + 30.0 for j in after.pending if j.id in new)


def test_the_given_snapshot_is_not_changed_and_a_seed_gives_the_same_round():
    snap = _base().snapshot()
    before = (list(snap.pending), list(snap.running), list(snap.nodes))
    a = next_round(snap, Decisions(), finish=0.5, seed=3)
    b = next_round(snap, Decisions(), finish=0.5, seed=3)
    assert (snap.pending, snap.running, snap.nodes) == before
    assert (a.pending, a.running, a.nodes) == (b.pending, b.running, b.nodes)
