"""GPU sharing: MPS never oversubscribes, MIG follows NVIDIA's placements, time-slicing caps replicas,
exclusive means exclusive."""

from scheduler.core import schedule
from scheduler.core.mig import is_valid_layout
from scheduler.core.types import Share
from tests.scheduler.core.builders import SnapBuilder

RESERVED = "; reserved to start in about 4 h as running jobs end"


def one_node(sharing: str, replicas: int = 1, gpus: int = 2, model: str = "H100") -> SnapBuilder:
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=gpus, model=model)
    b.pool(1, "shared", sharing=sharing, replicas=replicas)
    return b


def per_gpu(d, key):
    out: dict[int, list] = {}
    for p in d.placements:
        for sh in p.shares:
            out.setdefault(sh.gpu_id, []).append(key(sh))
    return out


def test_mps_packs_onto_the_fullest_gpu_that_fits():
    b = one_node("mps")
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 1), "mps", 60, 20000)], sharing="mps")
    b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=10000)
    d = schedule(b.snapshot())
    assert d.placements[0].shares == (Share(b.gpu_id("n1", 1), "mps", 30, 10000),)


def test_mps_never_oversubscribes_compute():
    b = one_node("mps", gpus=1)
    for j in range(1, 6):
        b.job(j, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000)
    d = schedule(b.snapshot())
    assert len(d.placements) == 3  # 3 x 30 % = 90 %; a fourth would be 120 %
    assert sum(s.compute_pct for p in d.placements for s in p.shares) <= 100
    assert d.pending_reasons[4] == (
        "needs 30% compute and 1000 MiB on one GPU (MPS); no GPU in pool 'shared' has that much left"
        "; reserved to start in about 4 h as running jobs end"  # when the jobs placed before it end
    )


def test_mps_never_oversubscribes_memory():
    b = one_node("mps", gpus=1)
    for j in range(1, 4):
        b.job(j, sharing="mps", mps_compute_pct=10, mps_memory_mib=40000)
    d = schedule(b.snapshot())
    assert len(d.placements) == 2  # 3 x 40000 MiB > 81920 MiB
    assert sum(s.memory_mib for p in d.placements for s in p.shares) <= 81920


def test_mps_request_must_be_sane():
    b = one_node("mps", gpus=1)
    b.job(1, sharing="mps", mps_compute_pct=150, mps_memory_mib=1000)
    d = schedule(b.snapshot())
    assert d.pending_reasons[1] == (
        "an MPS job needs a compute percentage between 1 and 100 and a memory limit up to 81920 MiB"
    )


def test_mig_fills_a_gpu_with_seven_1g_instances_on_valid_slices():
    b = one_node("mig", gpus=1)
    for j in range(1, 9):
        b.job(j, sharing="mig", mig_profile="1g.10gb")
    d = schedule(b.snapshot())
    assert len(d.placements) == 7
    starts = sorted(s.mig_start for p in d.placements for s in p.shares)
    assert starts == [0, 1, 2, 3, 4, 5, 6]
    assert d.pending_reasons[8] == "needs a free 1g.10gb slot; none free in pool 'shared'" + RESERVED


def test_mig_mixed_profiles_form_a_valid_layout():
    b = one_node("mig", gpus=1)
    b.job(1, sharing="mig", mig_profile="4g.40gb")
    b.job(2, sharing="mig", mig_profile="2g.20gb")
    b.job(3, sharing="mig", mig_profile="1g.10gb")
    b.job(4, sharing="mig", mig_profile="1g.10gb")
    b.job(5, sharing="mig", mig_profile="1g.10gb")
    d = schedule(b.snapshot())
    layout = [(s.mig_profile, s.mig_start) for p in d.placements for s in p.shares]
    assert is_valid_layout("H100", 81920, layout) is None
    assert sum(int(name[0]) for name, _ in layout) <= 7
    assert [p.job_id for p in d.placements] == [1, 2, 3]  # 4g + 2g + 1g = 7 slices: no room for another 1g


def test_mig_packs_onto_a_partly_used_gpu():
    b = one_node("mig", gpus=2)
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 1), "mig", 43, 40960, "3g.40gb", 4)], sharing="mig")
    b.job(1, sharing="mig", mig_profile="2g.20gb")
    d = schedule(b.snapshot())
    sh = d.placements[0].shares[0]
    assert sh.gpu_id == b.gpu_id("n1", 1) and sh.mig_start in (0, 2)


def test_mig_profile_must_exist_on_the_pool_gpus():
    b = one_node("mig", gpus=1, model="A100")
    b.job(1, sharing="mig", mig_profile="3g.20gb")  # an A100-40GB name; these are A100-80GB
    d = schedule(b.snapshot())
    assert d.pending_reasons[1] == (
        "3g.20gb is not a MIG profile of A100-80GB; "
        "valid profiles: 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"
    )


def test_timeslice_replicas_up_to_the_pool_setting():
    b = one_node("timeslice", replicas=3, gpus=1)
    for j in range(1, 6):
        b.job(j, sharing="timeslice")
    d = schedule(b.snapshot())
    assert len(d.placements) == 3
    assert sorted(s.replica for p in d.placements for s in p.shares) == [0, 1, 2]
    assert d.pending_reasons[4] == (
        "needs a time-slice replica; all 3 replicas of every GPU in pool 'shared' are taken" + RESERVED
    )


def test_timeslice_spreads_over_gpus():
    b = one_node("timeslice", replicas=4, gpus=2)
    b.job(1, sharing="timeslice")
    b.job(2, sharing="timeslice")
    d = schedule(b.snapshot())
    assert len({s.gpu_id for p in d.placements for s in p.shares}) == 2


def test_exclusive_job_never_lands_on_a_shared_gpu():
    b = one_node("exclusive", gpus=2)
    b.run(9, {"n1": [0]})
    b.job(2, gpus=1)
    b.job(3, gpus=1)
    d = schedule(b.snapshot())
    assert [p.job_id for p in d.placements] == [2]
    assert d.placements[0].shares[0].gpu_id == b.gpu_id("n1", 1)
    assert d.placements[0].shares[0].kind == "whole"


def test_job_sharing_must_match_the_pool():
    b = one_node("mig", gpus=1)
    b.job(1, sharing="mps", mps_compute_pct=10, mps_memory_mib=100)
    d = schedule(b.snapshot())
    assert d.pending_reasons[1] == "pool 'shared' shares GPUs as mig; the job asks for mps"


def test_multi_gpu_mps_job_stays_on_one_node():
    b = one_node("mps", gpus=4)
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=50, mps_memory_mib=1000)
    d = schedule(b.snapshot())
    p = d.placements[0]
    assert len(p.shares) == 2 and len({s.gpu_id for s in p.shares}) == 2 and p.nodes == ("n1",)


def test_shared_job_cannot_span_nodes():
    b = one_node("mps", gpus=2)
    b.job(1, gpus=4, sharing="mps", mps_compute_pct=50, mps_memory_mib=1000)
    d = schedule(b.snapshot())
    assert d.pending_reasons[1] == "a mps job must fit on one node (at most 2 GPUs)"


def test_running_shares_are_respected():
    b = one_node("mps", gpus=1)
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 0), "mps", 80, 1000)], sharing="mps")
    b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000)
    b.job(2, sharing="mps", mps_compute_pct=20, mps_memory_mib=1000)
    d = schedule(b.snapshot())
    assert [p.job_id for p in d.placements] == [2]
    assert per_gpu(d, lambda s: s.compute_pct) == {b.gpu_id("n1", 0): [20]}
