"""The engine's contract types: their defaults, immutability and the one helper, Decisions.placement_for.

The defaults are part of the contract: the adapter leaves most fields unset and relies on them, so each is
written out here by hand (never read back from the module).
"""

import dataclasses

import pytest

from fabric.topology.types import Fabric
from scheduler.core.types import (
    ISOLATION,
    SHARE_KIND_OF,
    SHARING_MODES,
    Config,
    CostParams,
    Decisions,
    GpuState,
    JobRequest,
    Migration,
    NodeState,
    Placement,
    PoolState,
    Preemption,
    Quota,
    RequestClass,
    Reservation,
    RunningJob,
    Share,
    Snapshot,
    TenantState,
)


def job(job_id: int = 1) -> JobRequest:
    return JobRequest(id=job_id, tenant="a", pool=1, gpus=1)


def placement(job_id: int) -> Placement:
    return Placement(job_id=job_id, shares=(Share(gpu_id=job_id),), nodes=("n1",), score=0.0, cost={}, explanation="")


# ------------------------------------------------------------------------------------------ defaults


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("healthy", True),
        ("utilisation", 0.0),
        ("nvlink_gbps", 0.0),
        ("exclusive_job", None),
        ("mps_compute_pct_used", 0),
        ("mps_memory_mib_used", 0),
        ("mig_used", ()),
        ("timeslice_used", 0),
    ],
)
def test_a_gpu_left_at_its_defaults_is_a_healthy_idle_gpu_without_nvlink(name, expected):
    assert getattr(GpuState(id=1, index=0, model="H100", memory_mib=81920), name) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("schedulable", True),
        ("storage", False),
        ("hca_gbps", 0.0),
        ("up", True),
        # 0: host resources not tracked, so never a constraint
        ("cpu_milli", 0),
        ("memory_mib", 0),
    ],
)
def test_a_node_left_at_its_defaults_is_up_schedulable_and_tracks_no_host_resources(name, expected):
    assert getattr(NodeState(hostname="n1"), name) == expected


def test_a_pool_left_at_its_defaults_is_exclusive_with_one_timeslice_replica():
    pool = PoolState(id=1, name="train")
    assert (pool.sharing, pool.timeslice_replicas) == ("exclusive", 1)


@pytest.mark.parametrize("name", ["guaranteed_gpus", "borrow_limit"])
def test_a_quota_left_at_its_defaults_guarantees_and_lends_nothing(name):
    assert getattr(Quota(), name) == 0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("quotas", {}),
        ("usage_decayed", 0.0),
        ("max_priority", 1_000_000),
        ("weight", 1.0),
    ],
)
def test_a_tenant_left_at_its_defaults_has_no_usage_unit_weight_and_a_million_priority_cap(name, expected):
    assert getattr(TenantState(name="a"), name) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("priority", 50),
        ("preemptible", True),
        ("movable", True),
        ("sharing", "exclusive"),
        ("workload", "training"),
        ("checkpoint_cost_s", 60.0),
        ("submitted_at", 0.0),
        ("attained_gpu_s", 0.0),
        ("queue_seq", 0),
        ("requeue_opt_out", False),
        ("host_cpu_milli", 0),
        ("host_memory_mib", 0),
        ("preempted_for", None),
        ("preempted_gpus", ()),
    ],
)
def test_a_job_left_at_its_defaults_is_a_normal_priority_movable_training_job(name, expected):
    assert getattr(job(), name) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gpus", 1),
        ("mps_compute_pct", 0),
        ("mps_memory_mib", 0),
        ("weight", 1.0),
        ("host_cpu_milli", 0),
        ("host_memory_mib", 0),
    ],
)
def test_a_request_class_left_at_its_defaults_is_one_gpu_of_unit_weight(name, expected):
    assert getattr(RequestClass(pool=1, sharing="mps"), name) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("kind", "whole"),
        ("compute_pct", 100),
        ("memory_mib", 0),
        ("host_cpu_milli", 0),
        ("host_memory_mib", 0),
    ],
)
def test_a_share_left_at_its_defaults_is_a_whole_gpu_at_full_compute(name, expected):
    assert getattr(Share(gpu_id=1), name) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [("last_migrated_at", None), ("borrowed", False), ("stopping", False), ("serving_since", ())],
)
def test_a_running_job_left_at_its_defaults_is_unborrowed_and_not_stopping(name, expected):
    assert getattr(RunningJob(request=job(), shares=(), started_at=0.0), name) == expected


def test_a_running_jobs_service_is_its_earlier_runs_and_a_second_per_share_held_since_each_began():
    rj = RunningJob(
        request=dataclasses.replace(job(), attained_gpu_s=100.0), shares=(), started_at=0.0, serving_since=(10.0, 20.0)
    )
    assert rj.attained_at(50.0) == 100.0 + 40.0 + 30.0
    assert rj.attained_at(15.0) == 100.0 + 5.0  # the second share has not begun yet: nothing from it


def test_without_serving_times_a_running_jobs_service_is_its_requests():
    rj = RunningJob(request=dataclasses.replace(job(), attained_gpu_s=100.0), shares=(), started_at=0.0)
    assert rj.attained_at(1e9) == 100.0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvlink_efficiency", 0.53),
        ("pcie_gbps", 20.0),
        ("net_efficiency", 0.96),
        ("spine_factor", 0.9),
        ("core_factor", 0.8),
        ("error_factor", 0.25),
        ("min_available", 0.05),
        ("unknown_strength", 0.5),
        ("w_break_island", 0.02),
        ("w_break_node", 0.02),
        ("w_break_leaf", 0.05),
        ("w_leftover", 0.01),
        ("w_spread_nodes", 0.005),
        ("w_fragmentation", 0.1),
        ("w_host_leftover", 0.02),
    ],
)
def test_the_cost_model_constants_default_to_the_documented_values(name, expected):
    assert getattr(CostParams(), name) == expected


def test_the_ring_step_latency_grows_from_2_to_7_microseconds_by_level():
    assert CostParams().latency_s == (2e-6, 3e-6, 5e-6, 6e-6, 7e-6)


def test_training_and_data_intensive_jobs_all_reduce_one_gib_and_inference_64_mib_per_step():
    # 1 GiB = 1024**3 = 1_073_741_824 bytes; 64 MiB = 64 * 1024**2 = 67_108_864 bytes
    assert CostParams().default_allreduce_bytes == {
        "training": 1_073_741_824.0,
        "inference": 67_108_864.0,
        "data-intensive": 1_073_741_824.0,
    }


def test_a_data_intensive_job_reads_one_gib_per_step_by_default():
    assert CostParams().default_io_bytes_per_step == 1_073_741_824  # 1024**3


def test_inference_steps_compute_half_as_long_as_training_steps_by_default():
    assert CostParams().default_step_compute_s == {"training": 0.1, "inference": 0.05, "data-intensive": 0.1}


def test_gpu_strength_is_relative_to_an_h100():
    assert CostParams().gpu_strength == {
        "V100": 0.15,
        "L4": 0.15,
        "A30": 0.3,
        "A100": 0.4,
        "A800": 0.4,
        "H100": 1.0,
        "H200": 1.1,
        "B200": 2.2,
    }


def test_mig_is_immune_to_interference_and_mps_feels_a_quarter_of_it():
    assert CostParams().interference == {"exclusive": 1.0, "mps": 0.25, "mig": 0.0, "timeslice": 1.0}


def test_the_cost_model_tables_are_not_shared_between_instances():
    # a caller tuning one CostParams' table must not change every other one's
    first = CostParams()
    first.gpu_strength["H100"] = 9.0
    assert CostParams().gpu_strength["H100"] == 1.0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("backfill", True),
        ("reservations_per_pool", 1),
        ("max_migrations_per_round", 2),
        ("migration_hold_down_s", 1800.0),
        ("migration_scan_limit", 256),
        ("migration_min_net_gain_s", 60.0),
        ("restart_overhead_s", 30.0),
        ("default_runtime_s", 14_400.0),  # 4 h x 3600 s
        ("hot_link_utilisation", 0.8),
        ("overloaded_gpu_utilisation", 0.95),
        ("max_preemption_attempts", 16),
        ("max_victims_per_round", 256),
        ("preemption_grace_s", 120.0),
        ("preemption_min_run_s", 300.0),
        ("preemption_min_run_priority_exempt", True),
        ("preemption_claim_s", 300.0),
        ("service_order", True),
        ("service_quantum_gpu_s", 600.0),
        ("service_base", 4.0),
        ("service_levels", 3),
        ("service_aging_s", 0.0),
        ("service_preemption", True),
        ("service_preempt_pays", 2.0),
        ("leaf_wait", True),
        ("leaf_wait_plans", 4),
        ("borrow_without_quota", True),
        ("fairshare_horizon_h", 1.0),
        ("max_candidates", 24),
        ("domain_candidates", 4),
        ("backfill_probes", 24),
        ("fragmentation_coverage", 0.95),
        ("fragmentation_max_classes", 32),
        ("fragmentation_prior_whole", 4.0),
    ],
)
def test_the_engine_configuration_defaults_to_the_documented_values(name, expected):
    assert getattr(Config(), name) == expected


def test_a_config_carries_the_default_cost_model():
    assert Config().cost == CostParams()


def test_the_default_priority_classes_run_from_best_effort_0_to_high_100():
    snap = Snapshot(now=0.0, fabric=Fabric(), nodes=[], pools=[])
    assert snap.priority_classes == {"high": 100, "normal": 50, "low": 10, "best-effort": 0}


def test_a_placement_left_at_its_defaults_is_not_borrowed():
    assert placement(1).borrowed is False


def test_a_reservation_left_at_its_defaults_rests_on_backfill():
    assert Reservation(job_id=1, start_at=0.0, gpu_ids=(), nodes=()).basis == "backfill"


# -------------------------------------------------------------------------------------- immutability


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: GpuState(id=1, index=0, model="H100", memory_mib=81920), "healthy"),
        (lambda: NodeState(hostname="n1"), "up"),
        (lambda: PoolState(id=1, name="train"), "sharing"),
        (lambda: Quota(), "borrow_limit"),
        (lambda: TenantState(name="a"), "weight"),
        (lambda: job(), "priority"),
        (lambda: RequestClass(pool=1, sharing="mps"), "weight"),
        (lambda: Share(gpu_id=1), "compute_pct"),
        (lambda: RunningJob(request=job(), shares=(), started_at=0.0), "stopping"),
        (lambda: CostParams(), "pcie_gbps"),
        (lambda: Config(), "backfill"),
        (lambda: Snapshot(now=0.0, fabric=Fabric(), nodes=[], pools=[]), "now"),
        (lambda: placement(1), "score"),
        (lambda: Preemption(job_id=1, for_job=2, reason=""), "for_job"),
        (
            lambda: Migration(job_id=1, placement=placement(1), gain_s=0.0, cost_s=0.0, reason=""),
            "gain_s",
        ),
        (lambda: Reservation(job_id=1, start_at=0.0, gpu_ids=(), nodes=()), "start_at"),
    ],
    ids=[
        "GpuState",
        "NodeState",
        "PoolState",
        "Quota",
        "TenantState",
        "JobRequest",
        "RequestClass",
        "Share",
        "RunningJob",
        "CostParams",
        "Config",
        "Snapshot",
        "Placement",
        "Preemption",
        "Migration",
        "Reservation",
    ],
)
def test_the_snapshot_and_decision_records_cannot_be_changed_in_place(make, name):
    record = make()
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, name, getattr(record, name))


def test_decisions_are_filled_in_place_by_the_engine():
    # Decisions is the one mutable record: the engine appends to it as the round goes
    decisions = Decisions()
    decisions.stats = {"round": 1}
    assert decisions.stats == {"round": 1}


def test_each_decisions_starts_with_its_own_empty_lists():
    first = Decisions()
    first.placements.append(placement(1))
    assert Decisions().placements == []


# ---------------------------------------------------------------------------- Decisions.placement_for


def test_placement_for_finds_the_placement_of_the_asked_job_among_several():
    decisions = Decisions(placements=[placement(1), placement(2), placement(3)])
    assert decisions.placement_for(2) is decisions.placements[1]


def test_placement_for_a_job_that_was_not_placed_is_none():
    assert Decisions(placements=[placement(1)]).placement_for(2) is None


def test_placement_for_with_no_placements_is_none():
    assert Decisions().placement_for(1) is None


# ------------------------------------------------------------------------------------------ constants


@pytest.mark.parametrize(
    ("mode", "kind"),
    [("exclusive", "whole"), ("mps", "mps"), ("mig", "mig"), ("timeslice", "timeslice")],
)
def test_each_sharing_mode_holds_its_own_kind_of_share(mode, kind):
    assert SHARE_KIND_OF[mode] == kind


def test_every_sharing_mode_has_an_isolation_text_for_tenants():
    assert sorted(ISOLATION) == sorted(SHARING_MODES) == ["exclusive", "mig", "mps", "timeslice"]
