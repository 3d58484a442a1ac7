"""A stand-in for the `pynvml` module (nvidia-ml-py) for machines with no GPU.

It behaves like the real bindings where the collector can tell: errors are the REAL `pynvml.NVMLError_*`
classes (raised as `NVMLError(code)`, as `_nvmlCheckReturn` does), structs are the real ctypes structs
(`c_nvmlUtilization_t`, `c_nvmlMemory_t`, `c_nvmlFieldValue_t` arrays), processes are the real friendly
objects with `usedGpuMemory` None when N/A, N/A values are NVML's all-ones sentinels, MIG slots that are
empty raise NotFound, the event set raises Timeout when empty. Constants come from the real module; an NVML
function the fake does not implement raises AttributeError instead of touching the real library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml as real

GIB = 1024**3
MIB = 1024**2
NA_UINT = real.NVML_VALUE_NOT_AVAILABLE_uint.value
NA_ULL = real.NVML_VALUE_NOT_AVAILABLE_ulonglong.value


def err(code: int) -> real.NVMLError:
    return real.NVMLError(code)  # a real NVMLError_* subclass instance


@dataclass
class FakeLink:
    state: int = real.NVML_NVLINK_STATE_ACTIVE
    tx_kib: int = 0
    rx_kib: int = 0
    throughput_error: int | None = None  # per-field nvmlReturn


@dataclass
class FakeMig:
    gpu_instance_id: int
    compute_instance_id: int
    uuid: str
    name: str  # as NVML names a MIG device: "NVIDIA A100-SXM4-80GB MIG 3g.40gb"
    used: int
    total: int
    slices: int = 1


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    util: tuple[int, int] = (0, 0)  # gpu %, memory %
    memory: tuple[int, int, int] = (0, 80 * GIB, 80 * GIB)  # used, free, total (bytes)
    temperature: int = 30
    temperature_slowdown: int = 87
    power_mw: int = 70_000
    power_limit_mw: int = 700_000
    sm_clock: int = 1980
    ecc_uncorrected: int = 0
    ecc_corrected: int = 0
    remapped_rows: tuple[int, int, int, int] = (0, 0, 0, 0)  # corrected, uncorrected, pending, failure
    nvlinks: list[FakeLink] = field(default_factory=list)
    nvlink_error: int = real.NVML_ERROR_NOT_SUPPORTED  # what a PCIe GPU answers for link 0
    mig_mode: tuple[int, int] | None = (real.NVML_DEVICE_MIG_DISABLE, real.NVML_DEVICE_MIG_DISABLE)
    max_mig: int = 7
    migs: dict[int, FakeMig] = field(default_factory=dict)  # slot -> MIG device
    processes: list[tuple[int, int | None]] = field(default_factory=list)  # pid, used bytes (None = N/A)
    fail: dict[str, int] = field(default_factory=dict)  # NVML function name -> error code it raises
    lost: bool = False  # every call raises NVMLError_GpuIsLost


@dataclass(eq=False)
class FakeHandle:
    index: int


@dataclass(eq=False)
class FakeMigHandle:
    parent: FakeHandle
    mig: FakeMig


class FakeNvml:
    """Module-like: pass an instance where the collector expects `pynvml`."""

    def __init__(self, gpus: list[FakeGpu], init_error: int | None = None):
        self.gpus = gpus
        self.init_error = init_error
        self.initialised = False
        self.calls: list[str] = []
        self.event_sets: list[object] = []
        self.registered: dict[int, int] = {}  # gpu index -> event mask
        self.event_queue: list[tuple[int, int]] = []  # (gpu index, xid)

    # constants and error classes: the real ones; NVML functions: only those below
    def __getattr__(self, name: str) -> Any:
        value = getattr(real, name)
        if name.startswith("nvml") and callable(value):
            raise AttributeError(f"FakeNvml does not implement {name}")
        return value

    # -- helpers -------------------------------------------------------------------------------------------
    def queue_xid(self, gpu_index: int, xid: int) -> None:
        self.event_queue.append((gpu_index, xid))

    def _gpu(self, handle: Any, fn: str) -> FakeGpu:
        self.calls.append(fn)
        if not self.initialised:
            raise err(real.NVML_ERROR_UNINITIALIZED)
        if isinstance(handle, FakeMigHandle):
            handle = handle.parent
        if not isinstance(handle, FakeHandle):
            raise err(real.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.gpus[handle.index]
        if gpu.lost:
            raise err(real.NVML_ERROR_GPU_IS_LOST)
        if fn in gpu.fail:
            raise err(gpu.fail[fn])
        return gpu

    # -- init ----------------------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        if self.init_error is not None:
            raise err(self.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.calls.append("nvmlShutdown")
        self.initialised = False

    def nvmlDeviceGetCount(self) -> int:
        self.calls.append("nvmlDeviceGetCount")
        if not self.initialised:
            raise err(real.NVML_ERROR_UNINITIALIZED)
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self.calls.append("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise err(real.NVML_ERROR_INVALID_ARGUMENT)
        if "nvmlDeviceGetHandleByIndex" in self.gpus[index].fail:
            raise err(self.gpus[index].fail["nvmlDeviceGetHandleByIndex"])
        return FakeHandle(index)

    def nvmlDeviceGetIndex(self, handle: Any) -> int:
        self._gpu(handle, "nvmlDeviceGetIndex")
        return handle.index

    # -- identity, utilisation, memory ---------------------------------------------------------------------
    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        gpu = self._gpu(handle, "nvmlDeviceGetUUID")
        return handle.mig.uuid if isinstance(handle, FakeMigHandle) else gpu.uuid

    def nvmlDeviceGetName(self, handle: Any) -> str:
        gpu = self._gpu(handle, "nvmlDeviceGetName")
        return handle.mig.name if isinstance(handle, FakeMigHandle) else gpu.name

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> real.c_nvmlUtilization_t:
        gpu = self._gpu(handle, "nvmlDeviceGetUtilizationRates")
        if gpu.mig_mode and gpu.mig_mode[0] == real.NVML_DEVICE_MIG_ENABLE:
            raise err(real.NVML_ERROR_NOT_SUPPORTED)  # as the real driver does in MIG mode
        return real.c_nvmlUtilization_t(gpu=gpu.util[0], memory=gpu.util[1])

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: Any = None) -> real.c_nvmlMemory_t:
        gpu = self._gpu(handle, "nvmlDeviceGetMemoryInfo")
        if isinstance(handle, FakeMigHandle):
            m = handle.mig
            return real.c_nvmlMemory_t(total=m.total, free=m.total - m.used, used=m.used)
        used, free, total = gpu.memory
        return real.c_nvmlMemory_t(total=total, free=free, used=used)

    def nvmlDeviceGetAttributes(self, handle: Any) -> real.c_nvmlDeviceAttributes:
        self._gpu(handle, "nvmlDeviceGetAttributes")
        if not isinstance(handle, FakeMigHandle):
            raise err(real.NVML_ERROR_NOT_SUPPORTED)
        m = handle.mig
        return real.c_nvmlDeviceAttributes(gpuInstanceSliceCount=m.slices, memorySizeMB=m.total // MIB)

    # -- thermal, power, clocks, ECC -----------------------------------------------------------------------
    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetTemperature")
        if sensor != real.NVML_TEMPERATURE_GPU:
            raise err(real.NVML_ERROR_INVALID_ARGUMENT)
        return gpu.temperature

    def nvmlDeviceGetTemperatureThreshold(self, handle: Any, threshold: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetTemperatureThreshold")
        if threshold != real.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
            raise err(real.NVML_ERROR_NOT_SUPPORTED)
        return gpu.temperature_slowdown

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return self._gpu(handle, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        return self._gpu(handle, "nvmlDeviceGetEnforcedPowerLimit").power_limit_mw

    def nvmlDeviceGetClockInfo(self, handle: Any, clock_type: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetClockInfo")
        if clock_type != real.NVML_CLOCK_SM:
            raise err(real.NVML_ERROR_NOT_SUPPORTED)
        return gpu.sm_clock

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, error_type: int, counter_type: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetTotalEccErrors")
        if counter_type not in (real.NVML_VOLATILE_ECC, real.NVML_AGGREGATE_ECC):
            raise err(real.NVML_ERROR_INVALID_ARGUMENT)
        if error_type == real.NVML_MEMORY_ERROR_TYPE_UNCORRECTED:
            return gpu.ecc_uncorrected
        return gpu.ecc_corrected

    def nvmlDeviceGetRemappedRows(self, handle: Any) -> tuple[int, int, int, int]:
        return self._gpu(handle, "nvmlDeviceGetRemappedRows").remapped_rows

    # -- NVLink --------------------------------------------------------------------------------------------
    def _link(self, gpu: FakeGpu, link: int) -> FakeLink:
        if not gpu.nvlinks:
            raise err(gpu.nvlink_error)
        if not 0 <= link < len(gpu.nvlinks):
            raise err(real.NVML_ERROR_INVALID_ARGUMENT)
        return gpu.nvlinks[link]

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetNvLinkState")
        return self._link(gpu, link).state

    def nvmlDeviceGetFieldValues(self, handle: Any, field_ids: list) -> Any:
        gpu = self._gpu(handle, "nvmlDeviceGetFieldValues")
        values = (real.c_nvmlFieldValue_t * len(field_ids))()
        for i, fid in enumerate(field_ids):
            fid, scope = fid if isinstance(fid, tuple) else (fid, 0)
            values[i].fieldId, values[i].scopeId = fid, scope
            values[i].valueType = real.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            try:
                link = self._link(gpu, scope)
            except real.NVMLError as exc:
                values[i].nvmlReturn = exc.value
                continue
            if link.throughput_error is not None:
                values[i].nvmlReturn = link.throughput_error
            elif fid == real.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
                values[i].value.ullVal = link.tx_kib
            elif fid == real.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
                values[i].value.ullVal = link.rx_kib
            else:
                values[i].nvmlReturn = real.NVML_ERROR_NOT_SUPPORTED
        return values

    # -- MIG -----------------------------------------------------------------------------------------------
    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]:
        gpu = self._gpu(handle, "nvmlDeviceGetMigMode")
        if gpu.mig_mode is None:
            raise err(real.NVML_ERROR_NOT_SUPPORTED)
        return list(gpu.mig_mode)

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetMaxMigDeviceCount")
        if gpu.mig_mode is None:
            raise err(real.NVML_ERROR_NOT_SUPPORTED)
        return gpu.max_mig

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: int) -> FakeMigHandle:
        gpu = self._gpu(handle, "nvmlDeviceGetMigDeviceHandleByIndex")
        if not 0 <= index < gpu.max_mig:
            raise err(real.NVML_ERROR_INVALID_ARGUMENT)
        if index not in gpu.migs:
            raise err(real.NVML_ERROR_NOT_FOUND)
        return FakeMigHandle(handle, gpu.migs[index])

    def nvmlDeviceGetGpuInstanceId(self, handle: Any) -> int:
        self._gpu(handle, "nvmlDeviceGetGpuInstanceId")
        if not isinstance(handle, FakeMigHandle):
            raise err(real.NVML_ERROR_INVALID_ARGUMENT)
        return handle.mig.gpu_instance_id

    def nvmlDeviceGetComputeInstanceId(self, handle: Any) -> int:
        self._gpu(handle, "nvmlDeviceGetComputeInstanceId")
        if not isinstance(handle, FakeMigHandle):
            raise err(real.NVML_ERROR_INVALID_ARGUMENT)
        return handle.mig.compute_instance_id

    # -- processes -----------------------------------------------------------------------------------------
    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list:
        gpu = self._gpu(handle, "nvmlDeviceGetComputeRunningProcesses")
        procs = []
        for pid, used in gpu.processes:
            c = real.c_nvmlProcessInfo_v2_t(pid=pid, usedGpuMemory=NA_ULL if used is None else used)
            obj = real.nvmlStructToFriendlyObject(c)
            if obj.usedGpuMemory == NA_ULL:  # as pynvml does
                obj.usedGpuMemory = None
            procs.append(obj)
        return procs

    # -- events --------------------------------------------------------------------------------------------
    def nvmlEventSetCreate(self) -> object:
        self.calls.append("nvmlEventSetCreate")
        if not self.initialised:
            raise err(real.NVML_ERROR_UNINITIALIZED)
        event_set = object()
        self.event_sets.append(event_set)
        return event_set

    def nvmlEventSetFree(self, event_set: object) -> None:
        self.calls.append("nvmlEventSetFree")
        self.event_sets.remove(event_set)

    def nvmlDeviceRegisterEvents(self, handle: Any, event_types: int, event_set: object) -> None:
        self._gpu(handle, "nvmlDeviceRegisterEvents")
        if event_set not in self.event_sets:
            raise err(real.NVML_ERROR_INVALID_ARGUMENT)
        self.registered[handle.index] = self.registered.get(handle.index, 0) | event_types

    def nvmlEventSetWait_v2(self, event_set: object, timeoutms: int) -> SimpleNamespace:
        self.calls.append("nvmlEventSetWait_v2")
        if event_set not in self.event_sets:
            raise err(real.NVML_ERROR_INVALID_ARGUMENT)
        while self.event_queue:
            index, xid = self.event_queue.pop(0)
            if self.registered.get(index, 0) & real.nvmlEventTypeXidCriticalError:
                # c_nvmlEventData_t's fields; `device` is the handle of the GPU the event came from
                return SimpleNamespace(
                    device=FakeHandle(index),
                    eventType=real.nvmlEventTypeXidCriticalError,
                    eventData=xid,
                    gpuInstanceId=NA_UINT,
                    computeInstanceId=NA_UINT,
                )
        raise err(real.NVML_ERROR_TIMEOUT)

    def nvmlEventSetWait(self, event_set: object, timeoutms: int) -> SimpleNamespace:
        return self.nvmlEventSetWait_v2(event_set, timeoutms)


# -- ready-made GPUs ---------------------------------------------------------------------------------------
def h100(index: int = 0, **overrides: Any) -> FakeGpu:
    """A busy H100 SXM 80GB with 18 NVLinks."""
    values: dict[str, Any] = dict(
        name="NVIDIA H100 80GB HBM3",
        uuid=f"GPU-4f9c1f0e-1d2a-4b7e-9c11-0000000000{index:02d}",
        util=(97, 61),
        memory=(70_000 * MIB, 11_559 * MIB, 81_559 * MIB),
        temperature=64,
        temperature_slowdown=87,
        power_mw=612_345,
        power_limit_mw=700_000,
        sm_clock=1980,
        ecc_uncorrected=0,
        ecc_corrected=3,
        remapped_rows=(2, 0, 0, 0),
        nvlinks=[FakeLink(tx_kib=1000 * (link + 1), rx_kib=2000 * (link + 1)) for link in range(18)],
        processes=[(4242, 69_000 * MIB), (4243, None)],
    )
    values.update(overrides)
    return FakeGpu(**values)


def a100_mig(**overrides: Any) -> FakeGpu:
    """An A100 80GB in MIG mode: a 3g.40gb and two 1g.10gb instances, slots 1, 2 and 5 empty."""
    name = "NVIDIA A100-SXM4-80GB"
    values: dict[str, Any] = dict(
        name=name,
        uuid="GPU-a1000000-0000-0000-0000-000000000001",
        memory=(12_000 * MIB, 69_920 * MIB, 81_920 * MIB),
        mig_mode=(real.NVML_DEVICE_MIG_ENABLE, real.NVML_DEVICE_MIG_ENABLE),
        migs={
            0: FakeMig(
                1, 0, "MIG-11111111-1111-1111-1111-111111111111", f"{name} MIG 3g.40gb", 10_000 * MIB, 40_192 * MIB, 3
            ),
            3: FakeMig(9, 0, "MIG-99999999-9999-9999-9999-999999999999", f"{name} MIG 1g.10gb", 0, 9_728 * MIB, 1),
            4: FakeMig(10, 0, "MIG-10101010-1010-1010-1010-101010101010", "", 2_000 * MIB, 9_728 * MIB, 1),
        },
        nvlinks=[FakeLink() for _ in range(12)],
        processes=[],
    )
    values.update(overrides)
    return FakeGpu(**values)
