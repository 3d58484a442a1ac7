"""Samples from a Prometheus `/metrics` page: dcgm-exporter (GPUs) and node_exporter (InfiniBand ports).

Parsed with prometheus-client's text parser, then mapped onto the same samples the other collectors return:

* `DCGM_FI_*` series, keyed by the `gpu` label (the index), become GpuSample fields (`UUID`, `modelName` labels
  give uuid and name). Series with MIG labels (`GPU_I_ID`, `GPU_I_PROFILE`) become MigInstance entries of their
  parent GPU, never GPUs of their own. DCGM's blank sentinels (INT32 0x7ffffff0.., INT64 0x7ffffffffffffff0..,
  FP64 2**47..: "no value", "not found", "not supported", "no permission") are None, with `errors[field]`.
  `DCGM_FI_DEV_XID_ERRORS` is the last XID seen (0 = none): `parse_metrics` reports it when not 0; the
  PrometheusCollector reports it only when it changed since its previous scrape, matching "XIDs since the
  last poll" (a repeat of the same XID between two scrapes cannot be told apart).
  Memory total is `DCGM_FI_DEV_FB_TOTAL` when exported, else used + free + reserved (as NVML counts it).
* `node_infiniband_*` series (labels `device`, `port`) become PortSample entries with counters under their
  sysfs names; node_exporter multiplies the data counters by 4 (octets), so they are divided back into
  4-octet units (`port_xmit_data` etc.). State and physical state ids become the sysfs words, the rate in
  bytes/s becomes Gb/s. node_exporter counters this module does not know keep their metric name without the
  `node_infiniband_` prefix and `_total` suffix.
"""

from __future__ import annotations

import math
import time
import urllib.error
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from fabric.collectors.samples import GpuSample, MigInstance, NodeSample, PortSample

# DCGM blank values (dcgm_fields.h): BLANK, NOT_FOUND, NOT_SUPPORTED, NOT_PERMISSIONED
DCGM_INT32_BLANK = 0x7FFFFFF0
DCGM_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
DCGM_FP64_BLANK = 140737488355328.0

# DCGM field -> (GpuSample field, kind)
DCGM_GPU_FIELDS: dict[str, tuple[str, type]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("utilisation_gpu_pct", float),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("utilisation_memory_pct", float),
    "DCGM_FI_DEV_FB_USED": ("memory_used_mib", float),
    "DCGM_FI_DEV_FB_FREE": ("memory_free_mib", float),
    "DCGM_FI_DEV_FB_TOTAL": ("memory_total_mib", float),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", float),
    "DCGM_FI_DEV_SLOWDOWN_TEMP": ("temperature_limit_c", float),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", float),
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": ("power_limit_w", float),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_w", float),  # used when the enforced limit is absent
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", float),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("ecc_uncorrected", int),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("ecc_corrected", int),
    "DCGM_FI_DEV_ROW_REMAP_PENDING": ("remapped_rows_pending", bool),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("remapped_rows_failure", bool),
}
DCGM_XID = "DCGM_FI_DEV_XID_ERRORS"
DCGM_FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"
DCGM_MIG_FIELDS = {
    "DCGM_FI_DEV_FB_USED": "memory_used_mib",
    "DCGM_FI_DEV_FB_FREE": "memory_free_mib",
    "DCGM_FI_DEV_FB_TOTAL": "memory_total_mib",
}

# node_exporter infiniband metric (without the node_infiniband_ prefix) -> (sysfs counter name, divisor)
IB_COUNTERS: dict[str, tuple[str, int]] = {
    "port_data_transmitted_bytes_total": ("port_xmit_data", 4),
    "port_data_received_bytes_total": ("port_rcv_data", 4),
    "port_packets_transmitted_total": ("port_xmit_packets", 1),
    "port_packets_received_total": ("port_rcv_packets", 1),
    "unicast_packets_transmitted_total": ("unicast_xmit_packets", 1),
    "unicast_packets_received_total": ("unicast_rcv_packets", 1),
    "multicast_packets_transmitted_total": ("multicast_xmit_packets", 1),
    "multicast_packets_received_total": ("multicast_rcv_packets", 1),
    "port_constraint_errors_transmitted_total": ("port_xmit_constraint_errors", 1),
    "port_constraint_errors_received_total": ("port_rcv_constraint_errors", 1),
    "port_discards_transmitted_total": ("port_xmit_discards", 1),
    "port_discards_received_total": ("port_rcv_discards", 1),
    "port_errors_received_total": ("port_rcv_errors", 1),
    "port_receive_remote_physical_errors_total": ("port_rcv_remote_physical_errors", 1),
    "port_receive_switch_relay_errors_total": ("port_rcv_switch_relay_errors", 1),
    "port_transmit_wait_total": ("port_xmit_wait", 1),
    "link_downed_total": ("link_downed", 1),
    "link_error_recovery_total": ("link_error_recovery", 1),
    "local_link_integrity_errors_total": ("local_link_integrity_errors", 1),
    "excessive_buffer_overrun_errors_total": ("excessive_buffer_overrun_errors", 1),
    "symbol_error_total": ("symbol_error", 1),
    "vl15_dropped_total": ("VL15_dropped", 1),
    # counters_ext (64-bit) as node_exporter's "legacy" series
    "legacy_data_transmitted_bytes_total": ("port_xmit_data_64", 4),
    "legacy_data_received_bytes_total": ("port_rcv_data_64", 4),
    "legacy_packets_transmitted_total": ("port_xmit_packets_64", 1),
    "legacy_packets_received_total": ("port_rcv_packets_64", 1),
    "legacy_unicast_packets_transmitted_total": ("port_unicast_xmit_packets", 1),
    "legacy_unicast_packets_received_total": ("port_unicast_rcv_packets", 1),
    "legacy_multicast_packets_transmitted_total": ("port_multicast_xmit_packets", 1),
    "legacy_multicast_packets_received_total": ("port_multicast_rcv_packets", 1),
}
IB_STATES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
IB_PHYS_STATES = {
    0: "NoChange",
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "Phy Test",
}
IB_NOT_PORTS = {"info"}  # per-device series without a port


def dcgm_blank(value: float) -> bool:
    """True for DCGM's blank sentinels (and NaN): the exporter had no value."""
    if math.isnan(value):
        return True
    if DCGM_INT32_BLANK <= value <= DCGM_INT32_BLANK + 0xF:
        return True
    if value >= float(DCGM_INT64_BLANK):
        return True
    return DCGM_FP64_BLANK <= value <= DCGM_FP64_BLANK + 0xF


def _convert(value: float, kind: type):
    if kind is bool:
        return bool(value)
    if kind is int:
        return int(value)
    return float(value)


def parse_metrics(text: str, node: str, collected_at: float) -> NodeSample:
    """Map a dcgm-exporter / node_exporter page onto a NodeSample (collector "prometheus")."""
    sample = NodeSample(node=node, collected_at=collected_at, collector="prometheus")
    gpus: dict[int, GpuSample] = {}
    migs: dict[tuple[int, int], tuple[MigInstance, dict[str, float]]] = {}
    reserved: dict[int, float] = {}
    power_mgmt: dict[int, float] = {}
    ports: dict[tuple[str, int], PortSample] = {}

    def gpu_for(labels: dict[str, str]) -> GpuSample | None:
        try:
            index = int(labels["gpu"])
        except (KeyError, ValueError):
            return None
        gpu = gpus.get(index)
        if gpu is None:
            gpu = gpus[index] = GpuSample(index=index)
        gpu.uuid = gpu.uuid or labels.get("UUID", "")
        gpu.name = gpu.name or labels.get("modelName", "")
        return gpu

    def port_for(labels: dict[str, str]) -> PortSample | None:
        try:
            key = (labels["device"], int(labels["port"]))
        except (KeyError, ValueError):
            return None
        port = ports.get(key)
        if port is None:
            port = ports[key] = PortSample(device=key[0], port=key[1])
        return port

    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                name, labels, value = s.name, s.labels, s.value
                if name == family.name + "_total" and family.name.startswith("DCGM_FI_"):
                    # the parser appends "_total" to counter samples that lack it (DCGM names never have it)
                    name = family.name
                if name.startswith("DCGM_FI_"):
                    _dcgm_sample(name, labels, value, gpu_for, migs, reserved, power_mgmt, sample)
                elif name.startswith("node_infiniband_"):
                    _ib_sample(name.removeprefix("node_infiniband_"), labels, value, port_for, sample)
    except ValueError as exc:  # a malformed line: keep what was read before it
        sample.errors.append(f"metrics parse error: {exc}")

    for (index, _gi), (inst, raw) in sorted(migs.items()):
        inst.memory_used_mib = raw.get("memory_used_mib")
        inst.memory_total_mib = raw.get("memory_total_mib")
        if inst.memory_total_mib is None and inst.memory_used_mib is not None and "memory_free_mib" in raw:
            inst.memory_total_mib = inst.memory_used_mib + raw["memory_free_mib"]
        gpus[index].mig_instances.append(inst)
        gpus[index].mig_enabled = True
    for index, gpu in gpus.items():
        if gpu.power_limit_w is None and index in power_mgmt:
            gpu.power_limit_w = power_mgmt[index]
        if (
            gpu.memory_total_mib is None
            and "memory_total_mib" not in gpu.errors
            and gpu.memory_used_mib is not None
            and gpu.memory_free_mib is not None
        ):
            gpu.memory_total_mib = gpu.memory_used_mib + gpu.memory_free_mib + reserved.get(index, 0.0)
    sample.gpus = [gpus[i] for i in sorted(gpus)]
    sample.ports = [ports[k] for k in sorted(ports)]
    return sample


def _dcgm_sample(name, labels, value, gpu_for, migs, reserved, power_mgmt, sample) -> None:
    gpu = gpu_for(labels)
    if gpu is None:
        return
    if "GPU_I_ID" in labels:  # a MIG instance's series
        try:
            gi = int(labels["GPU_I_ID"])
        except ValueError:
            return
        entry = migs.get((gpu.index, gi))
        if entry is None:
            entry = migs[(gpu.index, gi)] = (
                MigInstance(gpu_instance_id=gi, profile=labels.get("GPU_I_PROFILE", "")),
                {},
            )
        fld = DCGM_MIG_FIELDS.get(name)
        if fld is not None and not dcgm_blank(value):
            entry[1][fld] = float(value)  # MigInstance keeps used and total; free gives total when not exported
        return
    if name == DCGM_XID:
        if dcgm_blank(value):
            gpu.errors["xid_events"] = "DCGM blank"
        elif int(value):
            gpu.xid_events = [int(value)]
        return
    if name == DCGM_FB_RESERVED:
        if not dcgm_blank(value):
            reserved[gpu.index] = float(value)
        return
    mapped = DCGM_GPU_FIELDS.get(name)
    if mapped is None:
        return
    fld, kind = mapped
    if dcgm_blank(value):
        if name != "DCGM_FI_DEV_POWER_MGMT_LIMIT":
            setattr(gpu, fld, None)
            gpu.errors[fld] = "DCGM blank"
        return
    if name == "DCGM_FI_DEV_POWER_MGMT_LIMIT":
        power_mgmt[gpu.index] = float(value)
        return
    setattr(gpu, fld, _convert(value, kind))
    gpu.errors.pop(fld, None)


def _ib_sample(metric, labels, value, port_for, sample) -> None:
    if metric in IB_NOT_PORTS or not math.isfinite(value):
        return
    port = port_for(labels)
    if port is None:
        return
    if metric == "state_id":
        port.state = IB_STATES.get(int(value), str(int(value)))
    elif metric == "physical_state_id":
        port.phys_state = IB_PHYS_STATES.get(int(value), str(int(value)))
    elif metric == "rate_bytes_per_second":
        port.rate_gbps = value * 8 / 1e9
    elif metric in IB_COUNTERS:
        counter, divisor = IB_COUNTERS[metric]
        port.counters[counter] = int(value) // divisor
    elif metric.endswith("_total"):
        port.counters[metric.removesuffix("_total")] = int(value)


# The most a scrape reads (settings.PROMETHEUS_SCRAPE_MAX_BYTES through COLLECTOR_OPTIONS): a dcgm-exporter page of
# 8 GPUs is about 100 KB, node_exporter's with every collector a few MB; a page past this is refused, not parsed.
DEFAULT_MAX_BYTES = 32 * 1024 * 1024


class ScrapeTooLarge(ValueError):
    """The page is over the scrape limit: nothing of it is parsed."""


def read_capped(response, max_bytes: int) -> bytes:
    """The body of an HTTP response, read as it streams and refused once it passes `max_bytes`."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise ScrapeTooLarge(f"response of {int(declared):,} bytes is over the {max_bytes:,}-byte scrape limit")
    body = response.read(max_bytes + 1)
    if len(body) > max_bytes:
        raise ScrapeTooLarge(f"response is over the {max_bytes:,}-byte scrape limit; stopped reading there")
    return body


class PrometheusCollector:
    """Scrape a /metrics URL (or read a saved page) and map it with parse_metrics."""

    name = "prometheus"

    def __init__(
        self,
        url: str | None = None,
        file: str | None = None,
        timeout: float = 5.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ):
        self.url = url
        self.file = file
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._last_xid: dict[str, int] = {}  # GPU uuid (or index) -> last XID value seen

    def _fetch(self) -> str:
        if self.file:
            return Path(self.file).read_text()
        if not self.url:
            raise ValueError("no url or file given")
        request = urllib.request.Request(self.url, headers={"Accept": "text/plain;version=0.0.4"})
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            return read_capped(response, self.max_bytes).decode(response.headers.get_content_charset() or "utf-8")

    def collect(self, node: str) -> NodeSample:
        collected_at = time.time()
        try:
            text = self._fetch()
        except (OSError, ValueError, UnicodeDecodeError) as exc:  # URLError, HTTPError, timeouts are OSErrors
            sample = NodeSample(node=node, collected_at=collected_at, collector=self.name)
            sample.errors.append(f"scrape {self.url or self.file}: {exc}")
            return sample
        sample = parse_metrics(text, node, collected_at)
        for gpu in sample.gpus:
            key = gpu.uuid or str(gpu.index)
            last = gpu.xid_events[-1] if gpu.xid_events else 0
            if "xid_events" in gpu.errors:
                continue
            if last == self._last_xid.get(key, 0):
                gpu.xid_events = []
            self._last_xid[key] = last
        return sample
