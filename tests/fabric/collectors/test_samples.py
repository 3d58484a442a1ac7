"""Samples pickle as (class, field values) for the latest-state cache: the round trip keeps every field."""

import dataclasses
import pickle

from fabric.collectors.samples import (
    GpuProcess,
    GpuSample,
    HcaSample,
    HostSample,
    MigInstance,
    NodeSample,
    NvLinkSample,
    PortSample,
    sample_from_dict,
    sample_to_dict,
)


def _sample() -> NodeSample:
    gpu = GpuSample(
        index=3,
        uuid="GPU-1",
        utilisation_gpu_pct=None,
        ecc_uncorrected=2,
        xid_events=[79],
        nvlinks=[NvLinkSample(link=0, active=True, tx_bytes=5)],
        mig_instances=[MigInstance(gpu_instance_id=1, profile="1g.10gb", memory_total_mib=9856.0)],
        processes=[GpuProcess(pid=42, used_memory_mib=100.0)],
        errors={"power_w": "NVML_ERROR_NOT_SUPPORTED"},
    )
    port = PortSample(device="mlx5_0", port=1, state="ACTIVE", counters={"port_xmit_data": 7}, counter_bits={"a": 32})
    return NodeSample(
        node="n1",
        collected_at=1000.5,
        collector="nvml",
        gpus=[gpu],
        ports=[port],
        errors=["ib: no devices"],
        hcas=[HcaSample(device="mlx5_0", node_guid="0002c90300080e84")],
        host=HostSample(cpu_milli=64000, memory_mib=None),
    )


def test_a_sample_with_every_part_survives_pickling():
    original = _sample()
    back = pickle.loads(pickle.dumps({"sample": original}, pickle.HIGHEST_PROTOCOL))["sample"]
    assert back == original
    assert back.gpus[0].mig_instances[0].profile == "1g.10gb"
    assert back.host.memory_mib is None


def test_a_pickled_sample_names_no_field_twice():
    # The field names are not in the pickle: only the class and the values, in field order.
    blob = pickle.dumps(_sample(), pickle.HIGHEST_PROTOCOL)
    assert b"utilisation_gpu_pct" not in blob


def test_sample_to_dict_is_asdict_and_comes_back_whole():
    original = _sample()
    plain = sample_to_dict(original)
    assert plain == dataclasses.asdict(original)
    assert sample_from_dict(plain) == original
    assert sample_to_dict(NodeSample(node="n2", collected_at=1.0, collector="twin")) == dataclasses.asdict(
        NodeSample(node="n2", collected_at=1.0, collector="twin")
    )


def test_sample_to_dict_shares_no_list_or_dict_with_the_sample():
    original = _sample()
    plain = sample_to_dict(original)
    plain["ports"][0]["counters"]["port_xmit_data"] = 0
    plain["gpus"][0]["xid_events"].append(48)
    plain["errors"].clear()
    assert original == _sample()
