"""Migration prices a running job's present place with its own load taken off its GPUs (`_OwnTraffic`).

A GPU the job holds whole (or a MIG slice of) counts as idle there: utilisation 0, never below it. The
difference shows where the job's sharing mode gives the GPU's load weight in the step's compute term
(`compute_s`: C / (strength x max(min_available, 1 - utilisation x interference))): an MPS job that holds
a whole GPU (interference 0.25), or a MIG job under a configured non-zero MIG interference. With a
utilisation below 0 the present place would look faster than an idle GPU, and the gain of a move smaller.
"""

from dataclasses import replace

import pytest

from scheduler.core import schedule
from scheduler.core.migration import current_candidate
from scheduler.core.placement import Placer
from scheduler.core.state import ClusterState
from scheduler.core.topology import build_topology
from scheduler.core.types import Config, CostParams, Share
from tests.scheduler.core.builders import SnapBuilder

HOURS = 3600.0


def mps_job_holding_a_whole_a100() -> SnapBuilder:
    """MPS pool over m1 (one A100, strength 0.4) and m2 (one H100, strength 1.0). Job 20, an MPS job,
    holds m1's GPU whole (a snapshot may say so) and is its only user: the GPU's 97 % load is its own."""
    b = SnapBuilder()
    b.spine("S1")
    b.node("m1", gpus=1, model="A100")
    b.node("m2", gpus=1, model="H100")
    b.leaf("L1", ["m1", "m2"], {"S1": 1})
    b.pool(1, "infer", sharing="mps")
    b.run(
        20,
        {},
        shares=[Share(b.gpu_id("m1", 0), "whole", 100, 0)],
        sharing="mps",
        mps_compute_pct=20,
        mps_memory_mib=1000,
        step_compute_s=0.4,
        workload="inference",
        est_runtime_s=2 * HOURS,
        started_at=b.now - HOURS,
    )
    b.set_gpu("m1", 0, utilisation=0.97)
    return b


def test_an_mps_job_holding_a_whole_gpu_is_priced_as_on_an_idle_gpu_when_it_moves():
    (m,) = schedule(mps_job_holding_a_whole_a100().snapshot()).migrations
    # Trigger: an MPS job on a GPU at 97 % >= 95 % (the load before its own is credited back).
    # Now: its own whole GPU counts as idle, utilisation 0: 0.4 / (0.4 x max(0.05, 1 - 0 x 0.25)) = 1.0 s.
    # New: m2's idle H100: 0.4 / 1.0 = 0.4 s. Ideal: 0.4 / 1.0 (the pool's strongest GPU) = 0.4 s.
    # Gain: 2 h estimate - 1 h run = 3600 s left x (1 - 0.4 / 1.0) = 2160 s; cost 60 s checkpoint + 30 s.
    # (A utilisation of -1 would give 0.4 / (0.4 x 1.25) = 0.8 s now, a gain of 3600 x 0.5 = 1800 s, 2.00x.)
    assert (m.job_id, m.placement.nodes, m.gain_s, m.cost_s) == (20, ("m2",), 2160.0, 90.0)
    assert m.reason.startswith("GPU 0 on m1 overloaded (97%); step 2.50x -> 1.00x ideal")  # 1.0 / 0.4, 0.4 / 0.4


def mig_interference(interference: float) -> Config:
    return replace(
        Config(), cost=replace(CostParams(), interference={**CostParams().interference, "mig": interference})
    )


def test_a_mig_jobs_gpu_counts_as_idle_under_a_configured_mig_interference():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=2)
    b.pool(1, "mig", sharing="mig")
    b.run(
        20,
        {},
        shares=[Share(b.gpu_id("n1", 0), "mig", 43, 40960, "3g.40gb", 4)],
        sharing="mig",
        mig_profile="3g.40gb",
        step_compute_s=0.1,
    )
    b.set_gpu("n1", 0, utilisation=0.9)
    snap = b.snapshot(mig_interference(0.5))
    st = ClusterState(snap, build_topology(snap.fabric))
    placer = Placer(st)
    ctx, err = placer.context(st.running[20].request)
    assert err is None
    # Its GPU's 90 % load is taken as its own: 0.1 / (H100 strength 1.0 x (1 - 0 x 0.5)) = 0.1 s, as on an
    # idle GPU (a utilisation of -1 would give 0.1 / (1 + 0.5) = 0.0667 s).
    assert current_candidate(placer, ctx, 20).comp == pytest.approx(0.1)
