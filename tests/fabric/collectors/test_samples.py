"""Samples pickle as (class, field values) for the latest-state cache: the round trip keeps every field."""

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
