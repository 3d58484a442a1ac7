"""Health rules and hold-down (pure, no Django)."""

import dataclasses

import pytest

from fabric.collectors.samples import GpuSample, PortSample
from fabric.telemetry.health import Finding, HoldDown, Thresholds, evaluate_gpu, evaluate_port
from fabric.telemetry.rates import PortRates


def _gpu(**kw) -> GpuSample:
    return GpuSample(index=0, uuid="GPU-aaa", **kw)


def _port(state: str | None = "ACTIVE", **kw) -> PortSample:
    return PortSample(device="mlx5_0", port=1, state=state, **kw)


def _rates(**errors: int) -> PortRates:
    return PortRates(interval_s=10.0, tx_bytes_per_s=0.0, rx_bytes_per_s=0.0, xmit_wait_per_s=0.0, error_deltas=errors)


def _rules(findings) -> list[str]:
    return [f.rule for f in findings]


# --- GPU ---------------------------------------------------------------------------------------------------------


def test_healthy_gpu_has_no_findings():
    g = _gpu(ecc_uncorrected=0, temperature_c=60, temperature_limit_c=87, remapped_rows_pending=False)
    assert evaluate_gpu(g, g) == []


# Written out from NVIDIA's XID catalogue, not read from the module: the XIDs after which a GPU takes no work.
CRITICAL = [
    (48, "double-bit ECC error"),
    (63, "row remapping (ECC page retirement) recorded"),
    (64, "row remapping (ECC page retirement) failure"),
    (74, "NVLink error"),
    (79, "GPU has fallen off the bus"),
    (92, "high single-bit ECC error rate"),
    (94, "contained ECC error"),
    (95, "uncontained ECC error"),
    (119, "GSP error (RPC timeout)"),
    (120, "GSP error"),
]
# Known XIDs that are worth a warning but leave the GPU in service.
WARNING = [
    (13, "graphics engine exception"),
    (31, "GPU memory page fault"),
    (43, "GPU stopped processing"),
    (45, "preemptive cleanup after a previous error"),
    (61, "internal micro-controller breakpoint/warning"),
    (62, "internal micro-controller halt"),
    (68, "video processor exception"),
    (69, "graphics engine class error"),
]


@pytest.mark.parametrize(("xid", "meaning"), CRITICAL)
def test_critical_xid_is_critical_and_removes_capacity(xid, meaning):
    (f,) = evaluate_gpu(None, _gpu(xid_events=[xid]))
    assert f == Finding("gpu_xid_critical", "critical", "gpu", "GPU-aaa", f"XID {xid}: {meaning}", True)


@pytest.mark.parametrize(("xid", "meaning"), WARNING)
def test_known_non_critical_xid_is_a_warning_with_its_meaning(xid, meaning):
    (f,) = evaluate_gpu(None, _gpu(xid_events=[xid]))
    assert f == Finding("gpu_xid", "warning", "gpu", "GPU-aaa", f"XID {xid}: {meaning}", False)


# Neighbours of the known XIDs, which a one-off slip in either table would turn into one of them.
@pytest.mark.parametrize(
    "xid", [12, 14, 30, 32, 42, 44, 46, 47, 49, 60, 65, 67, 70, 73, 75, 78, 80, 91, 93, 96, 118, 121]
)
def test_unknown_xid_is_a_warning_pointing_at_the_catalogue(xid):
    (f,) = evaluate_gpu(None, _gpu(xid_events=[xid]))
    assert f == Finding("gpu_xid", "warning", "gpu", "GPU-aaa", f"XID {xid}: see the NVIDIA XID catalogue", False)


@pytest.mark.parametrize(
    ("xid", "words"),
    [
        (79, "fallen off the bus"),
        (48, "double-bit ECC"),
        (94, "contained ECC"),
        (95, "uncontained ECC"),
        (63, "row remapping"),
        (74, "NVLink"),
        (92, "single-bit ECC"),
        (119, "GSP"),
    ],
)
def test_critical_xid_message_names_its_meaning(xid, words):
    (f,) = evaluate_gpu(None, _gpu(xid_events=[xid]))
    assert words in f.message


def test_other_xid_is_warning_without_capacity_loss():
    (f,) = evaluate_gpu(None, _gpu(xid_events=[13]))
    assert (f.rule, f.severity, f.removes_capacity) == ("gpu_xid", "warning", False)
    assert "XID 13" in f.message


def test_repeated_xid_reported_once():
    assert len(evaluate_gpu(None, _gpu(xid_events=[79, 79]))) == 1


def test_uncorrected_ecc_growing_is_critical():
    (f,) = evaluate_gpu(_gpu(ecc_uncorrected=1), _gpu(ecc_uncorrected=3))
    assert (f.rule, f.severity, f.removes_capacity) == ("gpu_ecc_uncorrected", "critical", True)
    assert "2 new" in f.message


def test_the_first_uncorrected_ecc_error_is_critical():
    # 0 -> 1: a GPU that never had one has its first.
    (f,) = evaluate_gpu(_gpu(ecc_uncorrected=0), _gpu(ecc_uncorrected=1))
    assert (f.rule, f.severity, f.removes_capacity) == ("gpu_ecc_uncorrected", "critical", True)
    assert f.message == "1 new uncorrectable ECC error(s) since the last poll"


def test_uncorrected_ecc_flat_or_first_sample_does_not_fire():
    assert evaluate_gpu(_gpu(ecc_uncorrected=3), _gpu(ecc_uncorrected=3)) == []
    assert evaluate_gpu(None, _gpu(ecc_uncorrected=3)) == []
    assert evaluate_gpu(_gpu(ecc_uncorrected=None), _gpu(ecc_uncorrected=3)) == []


def test_row_remap_failure_is_critical():
    (f,) = evaluate_gpu(None, _gpu(remapped_rows_failure=True, remapped_rows_pending=True))
    assert (f.rule, f.severity, f.removes_capacity) == ("gpu_row_remap_failure", "critical", True)


def test_row_remap_pending_is_warning_needing_reset():
    (f,) = evaluate_gpu(None, _gpu(remapped_rows_failure=False, remapped_rows_pending=True))
    assert (f.rule, f.severity, f.removes_capacity) == ("gpu_row_remap_pending", "warning", False)
    assert "reset" in f.message


def test_hot_gpu_is_warning():
    (f,) = evaluate_gpu(None, _gpu(temperature_c=87, temperature_limit_c=87))
    assert (f.rule, f.severity) == ("gpu_hot", "warning")


def test_gpu_below_limit_or_without_limit_is_not_hot():
    assert evaluate_gpu(None, _gpu(temperature_c=86, temperature_limit_c=87)) == []
    assert evaluate_gpu(None, _gpu(temperature_c=95)) == []


def test_gpu_key_falls_back_to_index_and_can_be_given():
    (f,) = evaluate_gpu(None, GpuSample(index=3, xid_events=[79]))
    assert f.object_key == "gpu3"
    (f,) = evaluate_gpu(None, _gpu(xid_events=[79]), key="node1/GPU-aaa")
    assert f.object_key == "node1/GPU-aaa"


# --- ports -------------------------------------------------------------------------------------------------------


def test_healthy_port_has_no_findings():
    assert evaluate_port(_port(), _port(), _rates(symbol_error=0, link_downed=0)) == []


def test_port_going_down_is_critical_and_removes_capacity():
    (f,) = evaluate_port(_port("ACTIVE"), _port("DOWN", phys_state="Polling"), None)
    assert (f.rule, f.severity, f.object_kind, f.object_key) == ("port_down", "critical", "port", "mlx5_0/1")
    assert f.removes_capacity is True
    assert "Polling" in f.message


def test_port_down_not_raised_without_active_before_or_unknown_now():
    assert evaluate_port(None, _port("DOWN"), None) == []
    assert evaluate_port(_port("DOWN"), _port("DOWN"), None) == []
    assert evaluate_port(_port("ACTIVE"), _port(None), None) == []


def test_link_errors_climbing_is_warning_that_degrades():
    (f,) = evaluate_port(_port(), _port(), _rates(symbol_error=10, port_rcv_errors=3))
    assert (f.rule, f.severity, f.removes_capacity) == ("port_errors", "warning", True)
    assert "symbol_error +10" in f.message
    assert "port_rcv_errors" not in f.message


def test_single_link_downed_fires():
    (f,) = evaluate_port(_port(), _port(), _rates(link_downed=1))
    assert f.rule == "port_errors"


def test_link_errors_below_threshold_do_not_fire():
    assert evaluate_port(_port(), _port(), _rates(symbol_error=9, port_rcv_errors=9, link_downed=0)) == []


def test_thresholds_are_configurable():
    th = Thresholds(symbol_error=100, link_downed=None)
    assert evaluate_port(_port(), _port(), _rates(symbol_error=50, link_downed=5), th) == []


def test_errors_ignored_without_valid_rates():
    assert evaluate_port(_port(), _port(), None) == []
    assert (
        evaluate_port(_port(), _port(), PortRates(reason="non-positive interval", error_deltas={"link_downed": 3}))
        == []
    )


def test_congestion_is_warning_without_capacity_loss():
    r = _rates()
    r.xmit_wait_per_s = 0.2e9  # 20% of each second waiting at 1 ns ticks
    (f,) = evaluate_port(_port(), _port(), r)
    assert (f.rule, f.severity, f.removes_capacity) == ("port_congestion", "warning", False)
    assert "20%" in f.message


def test_light_xmit_wait_is_not_congestion():
    r = _rates()
    r.xmit_wait_per_s = 0.01e9
    assert evaluate_port(_port(), _port(), r) == []


# --- hold-down ---------------------------------------------------------------------------------------------------


def test_hold_down_sequence():
    h = HoldDown(clear_after=30)
    assert h.update("k", False, 0) == "none"
    assert h.update("k", True, 10) == "raised"
    assert h.update("k", True, 20) == "active"
    assert h.update("k", False, 30) == "active"  # absent since 30
    assert h.update("k", False, 50) == "active"  # only 20 s absent
    assert h.update("k", True, 55) == "active"  # back: the absence clock restarts
    assert h.update("k", False, 60) == "active"
    assert h.update("k", False, 90) == "cleared"  # 30 s absent
    assert h.update("k", False, 100) == "none"
    assert h.update("k", True, 110) == "raised"


def test_hold_down_keys_are_independent():
    h = HoldDown(clear_after=0)
    h.update("a", True, 0)
    assert h.update("b", False, 1) == "none"
    assert h.active_keys() == ["a"]
    assert h.update("a", False, 1) == "cleared"


def test_cabled_port_that_stays_down_keeps_its_finding():
    from fabric.collectors.samples import PortSample
    from fabric.telemetry.health import evaluate_port

    down = PortSample(device="mlx5_0", port=1, state="DOWN")
    assert [f.rule for f in evaluate_port(down, down, None, cabled=True)] == ["port_down"]


def test_uncabled_port_that_never_came_up_is_no_finding():
    from fabric.collectors.samples import PortSample
    from fabric.telemetry.health import evaluate_port

    down = PortSample(device="mlx5_1", port=1, state="DOWN")
    assert evaluate_port(down, down, None) == []


# Each default limit: one below it is quiet, at it the link is sick.
@pytest.mark.parametrize(
    ("counter", "limit"),
    [
        ("symbol_error", 10),
        ("link_downed", 1),
        ("port_rcv_errors", 10),
        ("link_error_recovery", 1),
        ("port_rcv_remote_physical_errors", 10),
        ("port_xmit_discards", 100),
        ("local_link_integrity_errors", 1),
        ("excessive_buffer_overrun_errors", 1),
    ],
)
def test_default_error_limit_fires_at_the_limit_and_not_one_below(counter, limit):
    port = _port()
    assert evaluate_port(port, port, _rates(**{counter: limit - 1})) == []
    (f,) = evaluate_port(port, port, _rates(**{counter: limit}))
    assert (f.rule, f.message) == ("port_errors", f"link errors climbing over 10 s: {counter} +{limit}")


def test_congestion_fires_at_exactly_the_waiting_share():
    # 0.5 ticks/s x 0.5 s per tick = 0.25 of the time, exactly the limit (all three are exact in binary).
    th = Thresholds(xmit_wait_fraction=0.25, xmit_wait_tick_s=0.5)
    r = _rates()
    r.xmit_wait_per_s = 0.5
    (f,) = evaluate_port(_port(), _port(), r, thresholds=th)
    assert (f.rule, f.message) == ("port_congestion", "congestion: waiting to send 25% of the time")


def test_findings_and_thresholds_cannot_be_changed_once_made():
    # Findings are deduplicated and thresholds shared between ports: neither may be edited in place.
    f = Finding("gpu_hot", "warning", "gpu", "GPU-aaa", "hot")
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.severity = "critical"
    th = Thresholds()
    with pytest.raises(dataclasses.FrozenInstanceError):
        th.symbol_error = 1
