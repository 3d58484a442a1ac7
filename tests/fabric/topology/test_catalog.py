"""The GPU catalogue against the vendors' data sheets (written out here, not read from the module)."""

import dataclasses

import pytest

from fabric.topology.catalog import GPU_MODELS, GpuModel, gpu_model

# name: (memory in GiB, NVLink generation, NVLink GB/s per GPU bidirectional, MIG)
DATA_SHEETS = {
    "V100": (32, 2, 300.0, False),  # Tesla V100 SXM2 32 GB, NVLink 2.0
    "A100": (80, 3, 600.0, True),  # A100 80 GB SXM, NVLink 3.0, MIG up to 7 instances
    "A800": (80, 3, 400.0, True),  # A800 80 GB SXM: the A100 with NVLink cut to 400 GB/s
    "H100": (80, 4, 900.0, True),  # H100 SXM5, NVLink 4.0
    "H200": (141, 4, 900.0, True),  # H200 SXM, 141 GB HBM3e
    "B200": (180, 5, 1800.0, True),  # HGX B200, NVLink 5.0
    "L4": (24, 0, 0.0, False),  # L4: PCIe only, no MIG
}


def test_the_catalogue_holds_exactly_the_data_sheets():
    got = {name: (m.memory_mib, m.nvlink_generation, m.nvlink_gbps, m.mig_capable) for name, m in GPU_MODELS.items()}
    assert got == {name: (gib * 1024, *rest) for name, (gib, *rest) in DATA_SHEETS.items()}


def test_every_entry_is_filed_under_its_own_name():
    assert [(key, m.name) for key, m in GPU_MODELS.items()] == [(n, n) for n in DATA_SHEETS]


@pytest.mark.parametrize("asked", ["h100", " H100 ", "H100\n"])
def test_lookup_ignores_case_and_surrounding_space(asked):
    assert gpu_model(asked) == GpuModel("H100", 80 * 1024, 4, 900.0, True)


def test_an_unknown_model_names_itself_and_the_known_ones():
    with pytest.raises(KeyError) as err:
        gpu_model("T4")
    assert err.value.args[0] == "unknown GPU model 'T4'; known: V100, A100, A800, H100, H200, B200, L4"


def test_a_model_cannot_be_changed_in_place():
    with pytest.raises(dataclasses.FrozenInstanceError):
        gpu_model("A100").memory_mib = 40 * 1024
