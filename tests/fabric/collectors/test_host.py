"""The node agent reads its host's CPUs and MemTotal (fabric.collectors.host) into every nvml / sysfs-ib sample.

tests/fixtures/proc_meminfo_build_host.txt is /proc/meminfo of the machine the project is built on (Linux 6.18), as
read: `MemTotal:       24683584 kB` -> 24683584 // 1024 = 24105 MiB (24105.06, rounded down)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pynvml as real

from fabric.collectors.host import parse_meminfo_total_mib, read_host
from fabric.collectors.nvml import NvmlCollector
from fabric.collectors.samples import HostSample, NodeSample, sample_from_dict
from fabric.collectors.sysfs_ib import SysfsIbCollector
from tests.fabric.collectors.fake_nvml import FakeNvml

FIXTURES = Path(__file__).parents[2] / "fixtures"
MEMINFO = FIXTURES / "proc_meminfo_build_host.txt"
SYSFS = FIXTURES / "sysfs_infiniband_node_exporter" / "class" / "infiniband"


def test_memtotal_of_a_real_meminfo_in_mib():
    assert parse_meminfo_total_mib(MEMINFO.read_text()) == 24105


def test_read_host_counts_cpus_in_milli_cpus():
    host, errors = read_host(str(MEMINFO), cpus=lambda: 16)
    assert host == HostSample(cpu_milli=16000, memory_mib=24105)
    assert errors == []


def test_missing_meminfo_is_none_with_the_reason_never_zero(tmp_path):
    path = tmp_path / "meminfo"
    host, errors = read_host(str(path), cpus=lambda: 2)
    assert host == HostSample(cpu_milli=2000, memory_mib=None)
    assert errors == [f"{path}: cannot read: No such file or directory"]


def test_meminfo_without_memtotal_is_an_error(tmp_path):
    path = tmp_path / "meminfo"
    path.write_text("MemFree:        22388876 kB\n")
    host, errors = read_host(str(path), cpus=lambda: 2)
    assert host.memory_mib is None
    assert errors == [f"{path}: no MemTotal line"]


def test_memtotal_in_another_unit_is_refused(tmp_path):
    path = tmp_path / "meminfo"
    path.write_text("MemTotal:       24105 MB\n")
    assert read_host(str(path), cpus=lambda: 2)[1] == [
        f"{path}: malformed MemTotal line 'MemTotal:       24105 MB' (expected '<number> kB')"
    ]


def test_no_cpu_count_is_none():
    assert read_host(str(MEMINFO), cpus=lambda: 0)[0].cpu_milli is None


def test_sysfs_ib_sample_carries_the_host(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3, 8, 9})
    sample = SysfsIbCollector(root=str(SYSFS), meminfo=str(MEMINFO)).collect("gpu001")
    assert sample.host == HostSample(cpu_milli=6000, memory_mib=24105)
    assert sample.ports  # the ports are read as before


def test_nvml_sample_carries_the_host_even_without_nvml(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(64)))
    nvml = FakeNvml([], init_error=real.NVML_ERROR_LIBRARY_NOT_FOUND)
    sample = NvmlCollector(nvml=nvml, meminfo=str(MEMINFO)).collect("gpu001")
    assert sample.host == HostSample(cpu_milli=64000, memory_mib=24105)
    assert sample.gpus == [] and len(sample.errors) == 1


def test_host_crosses_the_broker_and_an_older_agent_sends_none():
    sample = NodeSample(node="gpu001", collected_at=1.0, collector="nvml", host=HostSample(64000, 24105))
    body = json.loads(json.dumps(dataclasses.asdict(sample)))
    assert sample_from_dict(body).host == HostSample(cpu_milli=64000, memory_mib=24105)
    del body["host"]
    assert sample_from_dict(body).host is None
