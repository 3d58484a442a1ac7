"""Several collectors as one sample (fabric.collectors.combined, registry.get_collector("nvml,sysfs-ib")).

GPUs from the fake NVML library (tests/fabric/collectors/fake_nvml.py: the real pynvml error classes and structs),
ports and HCA GUIDs from tests/fixtures/sysfs_infiniband_x5_gluster1 (node_exporter's real mlx4_0 port, with the node
GUID 0002:c903:0008:0e84 and system image GUID 0002:c903:0008:0e87 of the X5 HCA r510gluster1)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pynvml
import pytest

from fabric.collectors.combined import AutoCollector, CombinedCollector, merge_samples
from fabric.collectors.registry import UnknownCollector, collector_parts, get_collector
from fabric.collectors.samples import GpuSample, HcaSample, NodeSample, PortSample, sample_from_dict
from tests.fabric.collectors.fake_nvml import FakeNvml, h100

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GLUSTER1_SYSFS = FIXTURES / "sysfs_infiniband_x5_gluster1" / "class" / "infiniband"
GLUSTER1_HCA = ("mlx4_0", "0002c90300080e84", "0002c90300080e87", "CA")  # the fixture's node_guid, sys_image_guid


def hcas(sample: NodeSample) -> list[tuple[str, str, str, str]]:
    return [(h.device, h.node_guid, h.system_guid, h.node_type) for h in sample.hcas]


def ports(sample: NodeSample) -> list[tuple[str, int, str | None, int | None]]:
    return [(p.device, p.port, p.state, p.counters.get("port_xmit_data")) for p in sample.ports]


# --- the merged sample ----------------------------------------------------------------------------------------------


def test_nvml_and_sysfs_ib_make_one_sample_with_gpus_ports_and_hca_guids():
    fake = FakeNvml([h100(0), h100(1)])
    sample = get_collector("nvml,sysfs-ib", nvml=fake, root=str(GLUSTER1_SYSFS)).collect("r510gluster1")
    assert (sample.node, sample.collector, sample.errors) == ("r510gluster1", "nvml,sysfs-ib", [])
    # h100(i)'s UUID ends in its index; 97 % busy as the fake's H100 is
    assert [(g.index, g.uuid, g.utilisation_gpu_pct) for g in sample.gpus] == [
        (0, "GPU-4f9c1f0e-1d2a-4b7e-9c11-000000000000", 97),
        (1, "GPU-4f9c1f0e-1d2a-4b7e-9c11-000000000001", 97),
    ]
    # the fixture's port: "4: ACTIVE", counters/port_xmit_data 3733440
    assert ports(sample) == [("mlx4_0", 1, "ACTIVE", 3733440)]
    assert hcas(sample) == [GLUSTER1_HCA]


def test_the_merged_sample_crosses_the_broker_as_json_unchanged():
    fake = FakeNvml([h100(0)])
    sample = get_collector("nvml,sysfs-ib", nvml=fake, root=str(GLUSTER1_SYSFS)).collect("r510gluster1")
    assert sample_from_dict(json.loads(json.dumps(dataclasses.asdict(sample)))) == sample


def test_nvml_failing_to_start_keeps_the_ports_and_hcas():
    fake = FakeNvml([h100(0)], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    sample = get_collector("nvml,sysfs-ib", nvml=fake, root=str(GLUSTER1_SYSFS)).collect("r510gluster1")
    assert sample.gpus == [] and sample.errors == ["nvmlInit failed: NVMLError_LibraryNotFound"]
    assert ports(sample) == [("mlx4_0", 1, "ACTIVE", 3733440)] and hcas(sample) == [GLUSTER1_HCA]


def test_sysfs_ib_without_its_directory_keeps_the_gpus(tmp_path):
    absent = tmp_path / "infiniband"
    sample = get_collector("nvml,sysfs-ib", nvml=FakeNvml([h100(0)]), root=str(absent)).collect("gpu017")
    assert [g.index for g in sample.gpus] == [0] and sample.ports == [] and sample.hcas == []
    assert sample.errors == [f"{absent}: no such directory (no InfiniBand devices?)"]


class ExplodingNvml(FakeNvml):
    """A binding surprise NvmlCollector does not catch: an exception that is no NVMLError."""

    def nvmlDeviceGetCount(self) -> int:
        raise RuntimeError("driver exploded")


def test_a_collector_that_raises_loses_only_its_own_part():
    sample = get_collector("nvml,sysfs-ib", nvml=ExplodingNvml([h100(0)]), root=str(GLUSTER1_SYSFS)).collect("n1")
    assert sample.errors == ["nvml: RuntimeError: driver exploded"] and sample.gpus == []
    assert ports(sample) == [("mlx4_0", 1, "ACTIVE", 3733440)] and hcas(sample) == [GLUSTER1_HCA]


def test_a_collector_that_cannot_be_made_is_an_error_of_its_part_each_poll(settings):
    settings.COLLECTOR_OPTIONS = {**settings.COLLECTOR_OPTIONS, "sysfs-ib": {"rooot": "/x"}}  # a typo in the settings
    collector = get_collector("nvml,sysfs-ib", nvml=FakeNvml([h100(0)]))
    for _ in range(2):
        sample = collector.collect("n1")
        assert [g.index for g in sample.gpus] == [0] and sample.ports == []
        (error,) = sample.errors  # Python 3.13 adds "Did you mean 'root'?"
        assert error.startswith("sysfs-ib: TypeError: SysfsIbCollector.__init__() got an unexpected keyword argument")


def test_each_part_is_made_once_so_nvml_starts_once_and_sees_xids_between_polls():
    fake = FakeNvml([h100(0)])
    collector = get_collector("nvml,sysfs-ib", nvml=fake, root=str(GLUSTER1_SYSFS))
    assert collector.collect("n1").gpus[0].xid_events == []
    fake.queue_xid(0, 79)
    assert collector.collect("n1").gpus[0].xid_events == [79]
    assert fake.calls.count("nvmlInit") == 1 and len(fake.event_sets) == 1


def test_parts_get_their_configured_options_under_the_given_ones(settings):
    settings.COLLECTOR_OPTIONS = {**settings.COLLECTOR_OPTIONS, "sysfs-ib": {"root": str(GLUSTER1_SYSFS)}}
    sample = get_collector("nvml,sysfs-ib", nvml=FakeNvml([h100(0)])).collect("r510gluster1")
    assert hcas(sample) == [GLUSTER1_HCA]
    given = get_collector("sysfs-ib,nvml", nvml=FakeNvml([]), root="/nonexistent").collect("n1")
    assert given.errors == ["/nonexistent: no such directory (no InfiniBand devices?)"]


# --- merging rules, on hand-made part samples -----------------------------------------------------------------------


def part(name: str, at: float, **fields) -> tuple[str, NodeSample]:
    return name, NodeSample(node="n1", collected_at=at, collector=name, **fields)


def test_an_entry_a_later_part_reports_again_is_dropped_with_a_warning():
    first = part("nvml", 100.0, gpus=[GpuSample(index=0, utilisation_gpu_pct=10.0)])
    second = part(
        "prometheus",
        100.2,
        gpus=[GpuSample(index=0, utilisation_gpu_pct=99.0), GpuSample(index=1)],
        ports=[PortSample(device="mlx5_0", port=1)],
    )
    third = part(
        "sysfs-ib",
        100.3,
        ports=[PortSample(device="mlx5_0", port=1, state="ACTIVE")],
        hcas=[HcaSample(device="mlx5_0", node_guid="b8cef60300a1b2c4")],
    )
    merged = merge_samples("n1", [first, second, third])
    assert [(g.index, g.utilisation_gpu_pct) for g in merged.gpus] == [(0, 10.0), (1, None)]
    assert [(p.device, p.port, p.state) for p in merged.ports] == [("mlx5_0", 1, None)]
    assert [h.node_guid for h in merged.hcas] == ["b8cef60300a1b2c4"]
    assert merged.errors == [
        "warning: prometheus: GPU 0 also read by nvml, nvml's kept",
        "warning: sysfs-ib: port mlx5_0/1 also read by prometheus, prometheus's kept",
    ]
    assert merged.collector == "nvml,prometheus,sysfs-ib"


def test_the_time_is_the_port_readers_and_without_ports_the_earliest():
    gpus = part("nvml", 100.0, gpus=[GpuSample(index=0)])
    ib = part("sysfs-ib", 100.4, ports=[PortSample(device="mlx5_0", port=1)])
    assert merge_samples("n1", [gpus, ib]).collected_at == 100.4  # port rates are computed from it
    assert merge_samples("n1", [gpus, part("sysfs-ib", 100.4)]).collected_at == 100.0


def test_the_same_error_from_two_parts_is_reported_once():
    same = "/proc/meminfo: cannot read: Permission denied"
    merged = merge_samples(
        "n1", [part("nvml", 1.0, errors=[same, "nvmlInit failed: x"]), part("sysfs-ib", 1.0, errors=[same])]
    )
    assert merged.errors == [same, "nvmlInit failed: x"]


def test_a_combined_collector_needs_a_part():
    with pytest.raises(ValueError, match="at least one"):
        CombinedCollector([])


# --- the setting ----------------------------------------------------------------------------------------------------


def test_collector_parts_reads_comma_or_plus_lists():
    assert collector_parts("nvml,sysfs-ib") == ["nvml", "sysfs-ib"]
    assert collector_parts("nvml+sysfs-ib") == ["nvml", "sysfs-ib"]
    assert collector_parts(" sysfs-ib , nvml ") == ["sysfs-ib", "nvml"]
    assert collector_parts("auto") == ["auto"] and collector_parts("nvml") == ["nvml"]


def test_an_unknown_part_is_named_with_the_setting_it_is_in():
    with pytest.raises(UnknownCollector) as info:
        collector_parts("nvml,sysfs-ibb")
    assert info.value.args[0] == (
        "unknown collector 'sysfs-ibb' in 'nvml,sysfs-ibb'; configured: nvml, perfquery, prometheus, static, sysfs-ib, "
        "twin, xid; also auto (nvml,sysfs-ib where the host has them), or several joined by ',' (nvml,sysfs-ib)"
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nvml,", "collector 'nvml,' has an empty name (a separator at an end or two in a row)"),
        ("nvml,,sysfs-ib", "collector 'nvml,,sysfs-ib' has an empty name (a separator at an end or two in a row)"),
        ("nvml,nvml", "collector 'nvml' is named twice in 'nvml,nvml'"),
        ("auto,prometheus", "auto stands alone in 'auto,prometheus': it is nvml,sysfs-ib already"),
    ],
)
def test_malformed_lists_are_refused(spec, message):
    with pytest.raises(UnknownCollector) as info:
        collector_parts(spec)
    assert info.value.args[0] == message


def test_an_option_no_part_takes_is_refused():
    with pytest.raises(TypeError, match=r"collector nvml,sysfs-ib takes no --url \(none of its parts does\)"):
        get_collector("nvml,sysfs-ib", url="http://x")


# --- auto: each part where the host has its hardware --------------------------------------------------------------


def pci(root: Path, address: str, vendor: str, cls: str) -> None:
    """One PCI function as /sys/bus/pci/devices/<address>/ shows it."""
    (root / address).mkdir(parents=True)
    (root / address / "vendor").write_text(vendor + "\n")
    (root / address / "class").write_text(cls + "\n")


@pytest.fixture
def host(tmp_path):
    bus = tmp_path / "pci"
    bus.mkdir()
    pci(bus, "0000:00:00.0", "0x8086", "0x060000")  # a host bridge: every host has some
    return {"pci_root": str(bus), "nvidia_proc": str(tmp_path / "proc-nvidia-gpus")}


def test_auto_on_a_gpu_server_with_infiniband_reads_both(host):
    pci(Path(host["pci_root"]), "0000:17:00.0", "0x10de", "0x030200")  # an H100 SXM: 3D controller
    fake = FakeNvml([h100(0)])
    sample = get_collector("auto", nvml=fake, root=str(GLUSTER1_SYSFS), **host).collect("r510gluster1")
    assert (sample.collector, sample.errors) == ("nvml,sysfs-ib", [])
    assert [g.index for g in sample.gpus] == [0] and hcas(sample) == [GLUSTER1_HCA]


def test_auto_on_a_storage_server_leaves_nvml_out_without_an_error(host):
    fake = FakeNvml([h100(0)])
    sample = get_collector("auto", nvml=fake, root=str(GLUSTER1_SYSFS), **host).collect("r510gluster1")
    assert (sample.collector, sample.errors, sample.gpus) == ("sysfs-ib", [], [])
    assert fake.calls == []  # NVML never asked
    assert hcas(sample) == [GLUSTER1_HCA]


def test_auto_finds_gpus_through_the_loaded_driver(host, tmp_path):
    (tmp_path / "proc-nvidia-gpus" / "0000:17:00.0").mkdir(parents=True)
    sample = get_collector("auto", nvml=FakeNvml([h100(0)]), root=str(tmp_path / "no-ib"), **host).collect("n1")
    assert (sample.collector, [g.index for g in sample.gpus], sample.errors) == ("nvml", [0], [])


def test_auto_runs_sysfs_ib_for_an_infiniband_card_whose_driver_is_not_loaded(host, tmp_path):
    pci(Path(host["pci_root"]), "0000:3b:00.0", "0x15b3", "0x020700")  # a ConnectX in InfiniBand mode
    absent = tmp_path / "infiniband"
    sample = get_collector("auto", nvml=FakeNvml([]), root=str(absent), **host).collect("n1")
    assert sample.collector == "sysfs-ib"
    assert sample.errors == [f"{absent}: no such directory (no InfiniBand devices?)"]


def test_auto_runs_nvml_for_a_gpu_whose_driver_is_not_loaded(host, tmp_path):
    pci(Path(host["pci_root"]), "0000:17:00.0", "0x10de", "0x030200")
    fake = FakeNvml([h100(0)], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    sample = get_collector("auto", nvml=fake, root=str(tmp_path / "no-ib"), **host).collect("n1")
    assert (sample.collector, sample.errors) == ("nvml", ["nvmlInit failed: NVMLError_DriverNotLoaded"])


def test_auto_on_a_host_with_neither_says_what_it_looked_for(host, tmp_path):
    pci(Path(host["pci_root"]), "0000:01:00.0", "0x10de", "0x068000")  # an NVSwitch: NVIDIA, but no GPU
    absent = tmp_path / "infiniband"
    sample = get_collector("auto", nvml=FakeNvml([]), root=str(absent), **host).collect("n1")
    assert (sample.collector, sample.gpus, sample.ports) == ("auto", [], [])
    assert sample.errors == [
        f"auto: no NVIDIA GPU ({host['nvidia_proc']}, or vendor 0x10de class 03xx under {host['pci_root']}) and no "
        f"RDMA device ({absent}, or class 0207 under {host['pci_root']}) on this host"
    ]


def test_a_part_auto_found_keeps_running_when_its_hardware_goes(host, tmp_path):
    bus = Path(host["pci_root"])
    pci(bus, "0000:17:00.0", "0x10de", "0x030200")
    fake = FakeNvml([h100(0)])
    collector = get_collector("auto", nvml=fake, root=str(tmp_path / "no-ib"), **host)
    assert isinstance(collector, AutoCollector) and collector.collect("n1").collector == "nvml"
    for name in ("vendor", "class"):
        (bus / "0000:17:00.0" / name).unlink()
    (bus / "0000:17:00.0").rmdir()  # fell off the bus (XID 79)
    fake.gpus[0].lost = True
    again = collector.collect("n1")
    assert again.collector == "nvml" and again.errors == ["gpu 0: NVMLError_GpuIsLost"]
