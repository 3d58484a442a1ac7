"""GPU samples through NVML (`nvidia-ml-py`, imported as `pynvml`).

Every read is on its own: an NVML error (any `NVMLError_*`) or an N/A value leaves that field None and
records why in `GpuSample.errors`, the other fields are still read. A GPU that is lost is reported with what
was read before, and the other GPUs carry on. XID events come from one event set, registered once per GPU
and drained without blocking on each poll. NVLink throughput is read through field values
(`NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX`, cumulative KiB per link). The sample also carries the host's CPUs
and MemTotal (NodeSample.host, fabric.collectors.host), read even when NVML is not there.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from fabric.collectors.host import MEMINFO, read_host
from fabric.collectors.samples import GpuProcess, GpuSample, MigInstance, NodeSample, NvLinkSample

MIB = 1024 * 1024
NA_UINT = 0xFFFFFFFF  # NVML_VALUE_NOT_AVAILABLE_uint
NA_ULONGLONG = 0xFFFFFFFFFFFFFFFF  # NVML_VALUE_NOT_AVAILABLE_ulonglong
MAX_EVENTS_PER_POLL = 10_000  # bound on one drain of the event set
_MIG_PROFILE = re.compile(r"\b(\d+g\.\d+gb(?:\+\w+)*)\b", re.IGNORECASE)


class _NotAvailable(Exception):
    """A read returned NVML's N/A value."""


class _GpuLost(Exception):
    pass


def _is_na(value: Any) -> bool:
    return value is None or (
        isinstance(value, int) and not isinstance(value, bool) and value in (NA_UINT, NA_ULONGLONG)
    )


class NvmlCollector:
    name = "nvml"

    def __init__(self, nvml: Any = None, meminfo: str = MEMINFO):
        self._nvml = nvml
        self.meminfo = meminfo  # the host's memory (fabric.collectors.host): a host path where the agent is contained
        self._initialised = False
        self._event_set: Any = None
        self._event_set_error: str | None = None
        self._xid_registered: dict[int, str | None] = {}  # GPU index -> None (ok) or error name

    # -- plumbing ------------------------------------------------------------------------------------------
    def _module(self) -> Any:
        if self._nvml is None:
            import pynvml  # on first use: an agent without nvidia-ml-py still starts and reports no GPUs

            self._nvml = pynvml
        return self._nvml

    def _error_name(self, exc: BaseException) -> str:
        return type(exc).__name__

    def _is_lost(self, exc: BaseException) -> bool:
        lost = getattr(self._nvml, "NVMLError_GpuIsLost", None)
        return lost is not None and isinstance(exc, lost)

    def _ensure_init(self) -> str | None:
        """Initialise NVML once; returns an error text when that is not possible."""
        if self._initialised:
            return None
        try:
            nvml = self._module()
        except ImportError as exc:
            return f"nvml unavailable: {exc}"
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            return f"nvmlInit failed: {self._error_name(exc)}"
        except OSError as exc:  # library missing on some platforms
            return f"nvmlInit failed: {exc}"
        self._initialised = True
        try:
            self._event_set = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as exc:
            self._event_set = None
            self._event_set_error = self._error_name(exc)
        return None

    def shutdown(self) -> None:
        if not self._initialised:
            return
        nvml = self._nvml
        try:
            if self._event_set is not None:
                nvml.nvmlEventSetFree(self._event_set)
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass
        self._initialised = False
        self._event_set = None
        self._xid_registered.clear()

    def _read(self, gpu: GpuSample, field: str, fn: Callable[[], Any]) -> Any:
        """One NVML read: the value, or None with the reason in gpu.errors. A lost GPU aborts the GPU."""
        nvml = self._nvml
        try:
            value = fn()
        except nvml.NVMLError as exc:
            gpu.errors[field] = self._error_name(exc)
            if self._is_lost(exc):
                raise _GpuLost from exc
            return None
        except _NotAvailable:
            gpu.errors[field] = "N/A"
            return None
        if _is_na(value):
            gpu.errors[field] = "N/A"
            return None
        return value

    @staticmethod
    def _na_check(value: Any) -> Any:
        if _is_na(value):
            raise _NotAvailable
        return value

    # -- collect -------------------------------------------------------------------------------------------
    def collect(self, node: str) -> NodeSample:
        sample = NodeSample(node=node, collected_at=time.time(), collector=self.name)
        sample.host, host_errors = read_host(self.meminfo)
        sample.errors += host_errors
        err = self._ensure_init()
        if err:
            sample.errors.append(err)
            return sample
        nvml = self._nvml
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as exc:
            sample.errors.append(f"nvmlDeviceGetCount failed: {self._error_name(exc)}")
            return sample

        handles: dict[int, Any] = {}
        for index in range(count):
            gpu = GpuSample(index=index)
            sample.gpus.append(gpu)
            try:
                handles[index] = nvml.nvmlDeviceGetHandleByIndex(index)
            except nvml.NVMLError as exc:
                gpu.errors["handle"] = self._error_name(exc)
                sample.errors.append(f"gpu {index}: no handle ({self._error_name(exc)})")
                continue
            self._register_xid(index, handles[index], gpu)

        xids = self._drain_xid(sample)
        for gpu in sample.gpus:
            gpu.xid_events = xids.get(gpu.index, [])
            handle = handles.get(gpu.index)
            if handle is None:
                continue
            try:
                self._read_gpu(handle, gpu)
            except _GpuLost:
                sample.errors.append(f"gpu {gpu.index}: NVMLError_GpuIsLost")
            except Exception as exc:  # a binding or driver surprise: lose this GPU's rest, not the node
                sample.errors.append(f"gpu {gpu.index}: {type(exc).__name__}: {exc}")
        return sample

    def _register_xid(self, index: int, handle: Any, gpu: GpuSample) -> None:
        nvml = self._nvml
        if self._event_set is None:
            gpu.errors["xid_events"] = self._event_set_error or "no event set"
            return
        if index not in self._xid_registered:
            try:
                nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, self._event_set)
                self._xid_registered[index] = None
            except nvml.NVMLError as exc:
                self._xid_registered[index] = self._error_name(exc)
                if self._is_lost(exc):  # try again once the GPU is back
                    del self._xid_registered[index]
                    gpu.errors["xid_events"] = self._error_name(exc)
                    return
        reason = self._xid_registered.get(index)
        if reason:
            gpu.errors["xid_events"] = reason

    def _drain_xid(self, sample: NodeSample) -> dict[int, list[int]]:
        """Every XID queued since the last poll, by GPU index; never blocks."""
        nvml = self._nvml
        found: dict[int, list[int]] = {}
        if self._event_set is None:
            return found
        for _ in range(MAX_EVENTS_PER_POLL):
            try:
                data = nvml.nvmlEventSetWait_v2(self._event_set, 0)
            except nvml.NVMLError_Timeout:
                break
            except nvml.NVMLError as exc:
                sample.errors.append(f"xid events: {self._error_name(exc)}")
                break
            if not data.eventType & nvml.nvmlEventTypeXidCriticalError:
                continue
            try:
                index = nvml.nvmlDeviceGetIndex(data.device)
            except nvml.NVMLError as exc:
                sample.errors.append(f"xid {data.eventData} on an unknown GPU ({self._error_name(exc)})")
                continue
            found.setdefault(index, []).append(int(data.eventData))
        return found

    def _read_gpu(self, handle: Any, gpu: GpuSample) -> None:
        nvml = self._nvml
        read = self._read

        gpu.uuid = read(gpu, "uuid", lambda: nvml.nvmlDeviceGetUUID(handle)) or ""
        gpu.name = read(gpu, "name", lambda: nvml.nvmlDeviceGetName(handle)) or ""

        util = read(gpu, "utilisation", lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        if util is not None:
            gpu.utilisation_gpu_pct = read(gpu, "utilisation_gpu_pct", lambda: self._na_check(util.gpu))
            gpu.utilisation_memory_pct = read(gpu, "utilisation_memory_pct", lambda: self._na_check(util.memory))
        else:
            gpu.errors["utilisation_gpu_pct"] = gpu.errors["utilisation_memory_pct"] = gpu.errors.pop("utilisation")

        mem = read(gpu, "memory", lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        if mem is not None:
            for attr, fld in (("used", "memory_used_mib"), ("free", "memory_free_mib"), ("total", "memory_total_mib")):
                value = read(gpu, fld, lambda attr=attr: self._na_check(getattr(mem, attr)))
                setattr(gpu, fld, None if value is None else value / MIB)
        else:
            reason = gpu.errors.pop("memory")
            for fld in ("memory_used_mib", "memory_free_mib", "memory_total_mib"):
                gpu.errors[fld] = reason

        gpu.temperature_c = read(
            gpu, "temperature_c", lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
        )
        gpu.temperature_limit_c = read(
            gpu,
            "temperature_limit_c",
            lambda: nvml.nvmlDeviceGetTemperatureThreshold(handle, nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
        )
        power = read(gpu, "power_w", lambda: nvml.nvmlDeviceGetPowerUsage(handle))  # mW
        gpu.power_w = None if power is None else power / 1000.0
        limit = read(gpu, "power_limit_w", lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))  # mW
        gpu.power_limit_w = None if limit is None else limit / 1000.0
        gpu.sm_clock_mhz = read(gpu, "sm_clock_mhz", lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
        gpu.ecc_uncorrected = read(
            gpu,
            "ecc_uncorrected",
            lambda: nvml.nvmlDeviceGetTotalEccErrors(
                handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
            ),
        )
        gpu.ecc_corrected = read(
            gpu,
            "ecc_corrected",
            lambda: nvml.nvmlDeviceGetTotalEccErrors(
                handle, nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, nvml.NVML_VOLATILE_ECC
            ),
        )
        rows = read(gpu, "remapped_rows", lambda: nvml.nvmlDeviceGetRemappedRows(handle))
        if rows is not None:
            _corr, _unc, pending, failure = rows
            gpu.remapped_rows_pending = bool(pending)
            gpu.remapped_rows_failure = bool(failure)
        else:
            reason = gpu.errors.pop("remapped_rows")
            gpu.errors["remapped_rows_pending"] = gpu.errors["remapped_rows_failure"] = reason

        self._read_nvlinks(handle, gpu)
        self._read_mig(handle, gpu)
        procs = read(gpu, "processes", lambda: nvml.nvmlDeviceGetComputeRunningProcesses(handle))
        for proc in procs or []:
            used = getattr(proc, "usedGpuMemory", None)
            gpu.processes.append(GpuProcess(pid=int(proc.pid), used_memory_mib=None if _is_na(used) else used / MIB))

    def _read_nvlinks(self, handle: Any, gpu: GpuSample) -> None:
        nvml = self._nvml
        first_error: str | None = None
        for link in range(nvml.NVML_NVLINK_MAX_LINKS):
            try:
                state = nvml.nvmlDeviceGetNvLinkState(handle, link)
            except nvml.NVMLError as exc:
                if self._is_lost(exc):
                    gpu.errors["nvlinks"] = self._error_name(exc)
                    raise _GpuLost from exc
                first_error = first_error or self._error_name(exc)
                if link == 0 and isinstance(exc, nvml.NVMLError_NotSupported):
                    break  # no NVLink on this GPU (PCIe card)
                continue  # this link is absent
            active = None if _is_na(state) else state == nvml.NVML_NVLINK_STATE_ACTIVE
            gpu.nvlinks.append(NvLinkSample(link=link, active=active))
        if not gpu.nvlinks:
            if first_error:
                gpu.errors["nvlinks"] = first_error
            return
        self._nvlink_throughput(handle, gpu)

    def _nvlink_throughput(self, handle: Any, gpu: GpuSample) -> None:
        """Cumulative data KiB per link and direction, all links in one field-values call."""
        nvml = self._nvml
        wanted = [
            ("tx", nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX),
            ("rx", nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX),
        ]
        ids = [(fid, link.link) for link in gpu.nvlinks for _, fid in wanted]
        try:
            values = nvml.nvmlDeviceGetFieldValues(handle, ids)
        except nvml.NVMLError as exc:
            gpu.errors["nvlink_throughput"] = self._error_name(exc)
            if self._is_lost(exc):
                raise _GpuLost from exc
            return
        for n, value in enumerate(values):
            link = gpu.nvlinks[n // 2]
            direction = wanted[n % 2][0]
            key = f"nvlink{link.link}_{direction}_bytes"
            if value.nvmlReturn != nvml.NVML_SUCCESS:
                gpu.errors[key] = self._error_name(nvml.NVMLError(value.nvmlReturn))
                continue
            kib = value.value.ullVal
            if _is_na(kib):
                gpu.errors[key] = "N/A"
                continue
            setattr(link, f"{direction}_bytes", int(kib) * 1024)

    def _read_mig(self, handle: Any, gpu: GpuSample) -> None:
        nvml = self._nvml
        read = self._read
        mode = read(gpu, "mig_enabled", lambda: nvml.nvmlDeviceGetMigMode(handle))
        if mode is None:
            return
        current = mode[0]
        gpu.mig_enabled = current == nvml.NVML_DEVICE_MIG_ENABLE
        if not gpu.mig_enabled:
            return
        count = read(gpu, "mig_instances", lambda: nvml.nvmlDeviceGetMaxMigDeviceCount(handle))
        for i in range(count or 0):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)
            except nvml.NVMLError_NotFound:
                continue  # empty slot
            except nvml.NVMLError as exc:
                gpu.errors[f"mig{i}"] = self._error_name(exc)
                if self._is_lost(exc):
                    raise _GpuLost from exc
                continue
            gi = read(gpu, f"mig{i}_gpu_instance_id", lambda mig=mig: nvml.nvmlDeviceGetGpuInstanceId(mig))
            if gi is None:
                continue
            inst = MigInstance(gpu_instance_id=int(gi))
            inst.compute_instance_id = read(
                gpu, f"mig{i}_compute_instance_id", lambda mig=mig: nvml.nvmlDeviceGetComputeInstanceId(mig)
            )
            inst.uuid = read(gpu, f"mig{i}_uuid", lambda mig=mig: nvml.nvmlDeviceGetUUID(mig)) or ""
            name = read(gpu, f"mig{i}_name", lambda mig=mig: nvml.nvmlDeviceGetName(mig)) or ""
            match = _MIG_PROFILE.search(name)
            if match:
                inst.profile = match.group(1)
            else:
                attrs = read(gpu, f"mig{i}_attributes", lambda mig=mig: nvml.nvmlDeviceGetAttributes(mig))
                if attrs is not None:
                    inst.profile = f"{attrs.gpuInstanceSliceCount}g.{round(attrs.memorySizeMB / 1024)}gb"
            mem = read(gpu, f"mig{i}_memory", lambda mig=mig: nvml.nvmlDeviceGetMemoryInfo(mig))
            if mem is not None:
                inst.memory_used_mib = None if _is_na(mem.used) else mem.used / MIB
                inst.memory_total_mib = None if _is_na(mem.total) else mem.total / MIB
            gpu.mig_instances.append(inst)
