"""NvmlCollector against FakeNvml (real pynvml error classes and structs, no GPU needed)."""

from __future__ import annotations

import pynvml
import pytest

from fabric.collectors.nvml import NvmlCollector
from fabric.collectors.samples import GpuProcess, MigInstance, NvLinkSample
from tests.fabric.collectors.fake_nvml import NA_UINT, NA_ULL, FakeGpu, FakeLink, FakeNvml, a100_mig, h100


def _collect(*gpus: FakeGpu, **kw):
    fake = FakeNvml(list(gpus), **kw)
    collector = NvmlCollector(nvml=fake)
    return fake, collector, collector.collect("gpu-node-01")


def test_fake_raises_the_real_error_classes():
    fake = FakeNvml([FakeGpu(lost=True)])
    fake.nvmlInit()
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        fake.nvmlDeviceGetName(fake.nvmlDeviceGetHandleByIndex(0))
    with pytest.raises(pynvml.NVMLError):
        fake.nvmlDeviceGetHandleByIndex(5)
    with pytest.raises(AttributeError):
        fake.nvmlDeviceGetBoardId  # noqa: B018 - not implemented: never reaches the real library
    assert fake.NVML_CLOCK_SM == pynvml.NVML_CLOCK_SM


def test_healthy_h100_every_field():
    fake, _, sample = _collect(h100())
    assert sample.collector == "nvml" and sample.node == "gpu-node-01" and sample.errors == []
    (gpu,) = sample.gpus
    assert gpu.errors == {}
    assert gpu.index == 0
    assert gpu.uuid == "GPU-4f9c1f0e-1d2a-4b7e-9c11-000000000000"
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.utilisation_gpu_pct == 97 and gpu.utilisation_memory_pct == 61
    assert (gpu.memory_used_mib, gpu.memory_free_mib, gpu.memory_total_mib) == (70_000, 11_559, 81_559)
    assert gpu.temperature_c == 64 and gpu.temperature_limit_c == 87
    assert gpu.power_w == pytest.approx(612.345) and gpu.power_limit_w == 700.0
    assert gpu.sm_clock_mhz == 1980
    assert gpu.ecc_uncorrected == 0 and gpu.ecc_corrected == 3
    assert gpu.remapped_rows_pending is False and gpu.remapped_rows_failure is False
    assert gpu.xid_events == []
    assert gpu.mig_enabled is False and gpu.mig_instances == []
    assert gpu.processes == [GpuProcess(4242, 69_000.0), GpuProcess(4243, None)]
    assert len(gpu.nvlinks) == 18
    assert gpu.nvlinks[0] == NvLinkSample(link=0, active=True, tx_bytes=1000 * 1024, rx_bytes=2000 * 1024)
    assert gpu.nvlinks[17] == NvLinkSample(link=17, active=True, tx_bytes=18_000 * 1024, rx_bytes=36_000 * 1024)
    assert fake.calls.count("nvmlInit") == 1


def test_na_and_not_supported_fields_become_none_with_the_reason():
    gpu_na = FakeGpu(
        name="NVIDIA L4",
        uuid="GPU-c2f76b33-7953-256e-8f33-1343419b1a1c",
        util=(12, NA_UINT),
        temperature_slowdown=NA_UINT,
        ecc_uncorrected=NA_ULL,
        nvlinks=[],  # PCIe card: NotSupported
        mig_mode=None,
        processes=[(77, None)],
        fail={
            "nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_NOT_SUPPORTED,
            "nvmlDeviceGetRemappedRows": pynvml.NVML_ERROR_NO_PERMISSION,
            "nvmlDeviceGetClockInfo": pynvml.NVML_ERROR_UNKNOWN,
        },
    )
    _, _, sample = _collect(gpu_na)
    (gpu,) = sample.gpus
    assert sample.errors == []
    assert gpu.utilisation_gpu_pct == 12 and gpu.utilisation_memory_pct is None
    assert gpu.temperature_limit_c is None and gpu.ecc_uncorrected is None
    assert gpu.power_w is None and gpu.sm_clock_mhz is None
    assert gpu.remapped_rows_pending is None and gpu.remapped_rows_failure is None
    assert gpu.mig_enabled is None and gpu.nvlinks == []
    assert gpu.errors == {
        "utilisation_memory_pct": "N/A",
        "temperature_limit_c": "N/A",
        "ecc_uncorrected": "N/A",
        "power_w": "NVMLError_NotSupported",
        "sm_clock_mhz": "NVMLError_Unknown",
        "remapped_rows_pending": "NVMLError_NoPermission",
        "remapped_rows_failure": "NVMLError_NoPermission",
        "nvlinks": "NVMLError_NotSupported",
        "mig_enabled": "NVMLError_NotSupported",
    }
    # the rest is still read
    assert gpu.name == "NVIDIA L4" and gpu.temperature_c == 30 and gpu.power_limit_w == 700.0
    assert gpu.ecc_corrected == 0 and gpu.memory_total_mib == 80 * 1024
    assert gpu.processes == [GpuProcess(77, None)]


def test_lost_gpu_does_not_stop_the_others():
    _, _, sample = _collect(h100(0), FakeGpu(lost=True), h100(2))
    assert [g.index for g in sample.gpus] == [0, 1, 2]
    lost = sample.gpus[1]
    assert lost.errors.get("xid_events") == "NVMLError_GpuIsLost"
    assert lost.errors.get("uuid") == "NVMLError_GpuIsLost"
    assert lost.name == "" and lost.temperature_c is None
    assert sample.errors == ["gpu 1: NVMLError_GpuIsLost"]
    for i in (0, 2):
        assert sample.gpus[i].errors == {} and sample.gpus[i].temperature_c == 64 and len(sample.gpus[i].nvlinks) == 18


def test_gpu_lost_in_the_middle_of_a_read_keeps_what_was_read():
    _, _, sample = _collect(h100(fail={"nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_GPU_IS_LOST}), h100(1))
    gpu = sample.gpus[0]
    assert gpu.temperature_c == 64 and gpu.power_w is None and gpu.sm_clock_mhz is None
    assert gpu.errors == {"power_w": "NVMLError_GpuIsLost"}
    assert sample.errors == ["gpu 0: NVMLError_GpuIsLost"]
    assert sample.gpus[1].power_w == pytest.approx(612.345)


def test_no_handle_is_reported_per_gpu():
    _, _, sample = _collect(h100(0, fail={"nvmlDeviceGetHandleByIndex": pynvml.NVML_ERROR_NO_PERMISSION}), h100(1))
    assert sample.gpus[0].errors == {"handle": "NVMLError_NoPermission"}
    assert sample.gpus[1].errors == {}
    assert sample.errors == ["gpu 0: no handle (NVMLError_NoPermission)"]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "nvmlInit failed: NVMLError_DriverNotLoaded"),
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "nvmlInit failed: NVMLError_LibraryNotFound"),
    ],
)
def test_init_failure_is_a_sample_with_an_error(code, expected):
    fake, collector, sample = _collect(h100(), init_error=code)
    assert sample.gpus == [] and sample.errors == [expected]
    # tries again next poll, and works once the driver is there
    fake.init_error = None
    sample = collector.collect("gpu-node-01")
    assert sample.errors == [] and len(sample.gpus) == 1
    assert fake.calls.count("nvmlInit") == 2


def test_init_and_event_set_once():
    fake, collector, _ = _collect(h100())
    for _ in range(3):
        collector.collect("gpu-node-01")
    assert fake.calls.count("nvmlInit") == 1
    assert fake.calls.count("nvmlEventSetCreate") == 1
    assert fake.calls.count("nvmlDeviceRegisterEvents") == 1
    collector.shutdown()
    assert fake.calls[-1] == "nvmlShutdown" and fake.event_sets == []


def test_xid_events_drained_once():
    fake, collector, first = _collect(h100(0), h100(1))
    assert [g.xid_events for g in first.gpus] == [[], []]
    fake.queue_xid(1, 48)
    fake.queue_xid(1, 79)
    fake.queue_xid(0, 13)
    sample = collector.collect("gpu-node-01")
    assert sample.gpus[1].xid_events == [48, 79]
    assert sample.gpus[0].xid_events == [13]
    assert fake.event_queue == []
    again = collector.collect("gpu-node-01")
    assert [g.xid_events for g in again.gpus] == [[], []]
    # drained without blocking: every wait was with timeout 0 and ended on NVMLError_Timeout (one per poll)
    assert fake.calls.count("nvmlEventSetWait_v2") == 1 + 4 + 1


def test_xid_registration_not_supported_is_recorded():
    _, _, sample = _collect(h100(fail={"nvmlDeviceRegisterEvents": pynvml.NVML_ERROR_NOT_SUPPORTED}))
    gpu = sample.gpus[0]
    assert gpu.errors == {"xid_events": "NVMLError_NotSupported"}
    assert gpu.temperature_c == 64


def test_mig_instances_with_profile_and_ids():
    _, _, sample = _collect(a100_mig())
    (gpu,) = sample.gpus
    assert gpu.mig_enabled is True
    # utilisation is NotSupported on a MIG-enabled GPU, as the real driver answers
    assert gpu.utilisation_gpu_pct is None
    assert gpu.errors == {
        "utilisation_gpu_pct": "NVMLError_NotSupported",
        "utilisation_memory_pct": "NVMLError_NotSupported",
    }
    assert gpu.mig_instances == [
        MigInstance(1, 0, "3g.40gb", "MIG-11111111-1111-1111-1111-111111111111", 10_000.0, 40_192.0),
        MigInstance(9, 0, "1g.10gb", "MIG-99999999-9999-9999-9999-999999999999", 0.0, 9_728.0),
        MigInstance(10, 0, "1g.10gb", "MIG-10101010-1010-1010-1010-101010101010", 2_000.0, 9_728.0),
    ]
    assert len(gpu.nvlinks) == 12 and gpu.nvlinks[0].tx_bytes == 0


def test_nvlink_states_and_per_field_errors():
    links = [
        FakeLink(tx_kib=5, rx_kib=7),
        FakeLink(state=pynvml.NVML_NVLINK_STATE_INACTIVE),
        FakeLink(throughput_error=pynvml.NVML_ERROR_NOT_SUPPORTED),
        FakeLink(tx_kib=NA_ULL, rx_kib=1),
    ]
    _, _, sample = _collect(h100(nvlinks=links))
    gpu = sample.gpus[0]
    assert gpu.nvlinks == [
        NvLinkSample(0, True, 5 * 1024, 7 * 1024),
        NvLinkSample(1, False, 0, 0),
        NvLinkSample(2, True, None, None),
        NvLinkSample(3, True, None, 1024),
    ]
    assert gpu.errors == {
        "nvlink2_tx_bytes": "NVMLError_NotSupported",
        "nvlink2_rx_bytes": "NVMLError_NotSupported",
        "nvlink3_tx_bytes": "N/A",
    }


def test_counters_are_cumulative_between_polls():
    fake, collector, first = _collect(h100())
    fake.gpus[0].nvlinks[0].tx_kib += 1_000_000
    second = collector.collect("gpu-node-01")
    assert second.gpus[0].nvlinks[0].tx_bytes - first.gpus[0].nvlinks[0].tx_bytes == 1_000_000 * 1024
    assert second.collected_at >= first.collected_at


def test_missing_pynvml_module_is_an_error_not_an_exception(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pynvml(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError("No module named 'pynvml'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    sample = NvmlCollector().collect("n1")
    assert sample.gpus == [] and sample.errors[0].startswith("nvml unavailable")


def test_unexpected_exception_loses_one_gpu_not_the_node():
    fake = FakeNvml([h100(0), h100(1)])
    real_memory = fake.nvmlDeviceGetMemoryInfo

    def broken(handle, version=None):
        if handle.index == 0:
            raise RuntimeError("driver surprise")
        return real_memory(handle, version)

    fake.nvmlDeviceGetMemoryInfo = broken
    sample = NvmlCollector(nvml=fake).collect("n1")
    assert sample.errors == ["gpu 0: RuntimeError: driver surprise"]
    assert sample.gpus[0].utilisation_gpu_pct == 97 and sample.gpus[0].temperature_c is None
    assert sample.gpus[1].errors == {} and sample.gpus[1].memory_total_mib == 81_559


def test_nvlink_throughput_read_in_one_call_per_gpu():
    fake, _, _ = _collect(h100(), a100_mig())
    assert fake.calls.count("nvmlDeviceGetFieldValues") == 2
