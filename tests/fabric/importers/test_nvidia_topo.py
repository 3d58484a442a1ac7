"""parse_nvidia_topo and closest_nics: DGX A100 (`topo -m`), DGX-1 V100 (`topo -mp`), malformed input."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pytest

from fabric.importers.nvidia_topo import closest_nics, parse_nvidia_topo
from fabric.importers.types import ParsedNodeTopology, ParseError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
A100 = (FIXTURES / "nvidia_smi_topo_m_dgx_a100.txt").read_text()
DGX1 = (FIXTURES / "nvidia_smi_topo_mp_dgx1_v100.txt").read_text()


@pytest.fixture(scope="module")
def a100() -> ParsedNodeTopology:
    return parse_nvidia_topo(A100, "dgx-a100")


@pytest.fixture(scope="module")
def dgx1() -> ParsedNodeTopology:
    return parse_nvidia_topo(DGX1, "dgx1")


def parse_error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_nvidia_topo(text, "topo.txt")
    return info.value


def edit_line(text: str, number: int, old: str, new: str) -> str:
    """Replace the first `old` in line `number` (1-based) only."""
    lines = text.split("\n")
    assert old in lines[number - 1]
    lines[number - 1] = lines[number - 1].replace(old, new, 1)
    return "\n".join(lines)


# --- DGX A100 ------------------------------------------------------------------------------------


def test_a100_has_eight_gpus(a100: ParsedNodeTopology) -> None:
    assert a100.gpus == list(range(8))


def test_a100_has_twelve_nics_in_order(a100: ParsedNodeTopology) -> None:
    assert a100.nics == [f"mlx5_{i}" for i in range(12)]


def test_a100_all_gpu_pairs_are_nv12(a100: ParsedNodeTopology) -> None:
    assert a100.gpu_links == {pair: "NV12" for pair in combinations(range(8), 2)}


def test_a100_gpu0_closest_nics_are_mlx5_0_and_1(a100: ParsedNodeTopology) -> None:
    assert closest_nics(a100, 0) == ["mlx5_0", "mlx5_1"]


def test_a100_every_gpu_has_two_pxb_nics(a100: ParsedNodeTopology) -> None:
    pairs = [closest_nics(a100, gpu) for gpu in a100.gpus]
    assert pairs == [[f"mlx5_{a}", f"mlx5_{a + 1}"] for a in (0, 0, 2, 2, 6, 6, 8, 8)]


def test_a100_storage_nics_are_far_from_every_gpu(a100: ParsedNodeTopology) -> None:
    assert {a100.nic_affinity[(gpu, nic)] for gpu in a100.gpus for nic in ("mlx5_4", "mlx5_5")} == {"SYS"}


def test_a100_cpu_affinity_is_kept_as_printed(a100: ParsedNodeTopology) -> None:
    assert a100.cpu_affinity[0] == "48-63,176-191"
    assert a100.cpu_affinity[6] == "80-95,208-223"


def test_a100_numa_affinity(a100: ParsedNodeTopology) -> None:
    assert a100.numa_affinity == {0: 3, 1: 3, 2: 1, 3: 1, 4: 7, 5: 7, 6: 5, 7: 5}


def test_a100_pasted_with_spaces_instead_of_tabs_parses_the_same(a100: ParsedNodeTopology) -> None:
    assert parse_nvidia_topo(A100.replace("\t", "    ")) == a100


# --- DGX-1 V100, PCIe only -----------------------------------------------------------------------


def test_dgx1_has_eight_gpus_and_four_nics(dgx1: ParsedNodeTopology) -> None:
    assert (dgx1.gpus, dgx1.nics) == (list(range(8)), ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"])


def test_dgx1_mp_has_no_nvlink_codes(dgx1: ParsedNodeTopology) -> None:
    assert set(dgx1.gpu_links.values()) == {"PIX", "PHB", "SYS"}


def test_dgx1_pcie_pairs(dgx1: ParsedNodeTopology) -> None:
    assert (dgx1.gpu_links[(0, 1)], dgx1.gpu_links[(0, 2)], dgx1.gpu_links[(3, 4)]) == ("PIX", "PHB", "SYS")


def test_dgx1_each_gpu_pair_shares_a_nic(dgx1: ParsedNodeTopology) -> None:
    assert [closest_nics(dgx1, gpu) for gpu in dgx1.gpus] == [[f"mlx5_{gpu // 2}"] for gpu in range(8)]


def test_dgx1_numa_split(dgx1: ParsedNodeTopology) -> None:
    assert dgx1.numa_affinity == {gpu: gpu // 4 for gpu in range(8)}
    assert dgx1.cpu_affinity[4] == "20-39,60-79"


# --- newer nvidia-smi output ---------------------------------------------------------------------

NIC_LEGEND = """\
\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV18\tPIX\tNODE\t0-55,112-167\t0\t\tN/A
GPU1\tNV18\t X \tNODE\tPIX\t0-55,112-167\t0\t\tN/A
NIC0\tPIX\tNODE\t X \tNODE
NIC1\tNODE\tPIX\tNODE\t X

Legend:

  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks

NIC Legend:

  NIC0: mlx5_0
  NIC1: mlx5_3
"""


def test_nic_legend_names_the_nics() -> None:
    topo = parse_nvidia_topo(NIC_LEGEND)
    assert topo.nics == ["mlx5_0", "mlx5_3"]
    assert closest_nics(topo, 1) == ["mlx5_3"]


def test_gpu_numa_id_column_is_accepted() -> None:
    topo = parse_nvidia_topo(NIC_LEGEND)
    assert (topo.gpu_links, topo.numa_affinity) == ({(0, 1): "NV18"}, {0: 0, 1: 0})


def test_nic_without_legend_keeps_its_nic_name() -> None:
    topo = parse_nvidia_topo(NIC_LEGEND[: NIC_LEGEND.index("NIC Legend")])
    assert topo.nics == ["NIC0", "NIC1"]


def test_na_affinity() -> None:
    text = "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tN/A\tN/A\n"
    topo = parse_nvidia_topo(text)
    assert (topo.cpu_affinity, topo.numa_affinity) == ({}, {0: None})


def test_legacy_soc_code_reads_as_sys() -> None:
    text = "\tGPU0\tGPU1\nGPU0\t X \tSOC\nGPU1\tSOC\t X \n"
    assert parse_nvidia_topo(text).gpu_links == {(0, 1): "SYS"}


def test_closest_nics_without_nics_is_empty() -> None:
    assert closest_nics(parse_nvidia_topo("\tGPU0\nGPU0\t X\n"), 0) == []


def test_closest_nics_unknown_gpu(a100: ParsedNodeTopology) -> None:
    with pytest.raises(KeyError, match="GPU9 is not in this topology"):
        closest_nics(a100, 9)


# --- malformed input -----------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "\n \n\t\n"])
def test_empty_input(text: str) -> None:
    err = parse_error(text)
    assert (err.line, err.message) == (0, "no GPU matrix found (empty input)")


def test_binary_junk() -> None:
    err = parse_error(A100.replace("GPU3\tNV12", "GPU3\0\0NV12"))
    assert err.line == 5
    assert "binary data: NUL byte" in err.message


def test_unknown_code() -> None:
    err = parse_error(edit_line(A100, 4, "PXB", "PXQ"))
    assert err.line == 4
    assert err.message == "unknown topology code 'PXQ' (expected one of X, PIX, PXB, PHB, NODE, SYS, NV<n>)"


def test_missing_row() -> None:
    lines = A100.split("\n")
    del lines[4]  # GPU3
    err = parse_error("\n".join(lines))
    assert err.message == "matrix is not square: no row for GPU3"
    assert err.line == 1  # the header, which names GPU3


def test_non_symmetric_codes() -> None:
    err = parse_error(edit_line(A100, 3, "NV12", "NV6"))  # GPU1 -> GPU0
    assert err.line == 3
    assert err.message == "matrix is not symmetric: GPU1->GPU0 is NV6 but GPU0->GPU1 is NV12 (line 2)"


def test_nic_row_disagrees_with_gpu_row() -> None:
    err = parse_error(edit_line(A100, 10, "PXB", "PIX"))  # mlx5_0 -> GPU0
    assert err.line == 10
    assert "mlx5_0->GPU0 is PIX but GPU0->mlx5_0 is PXB" in err.message


def test_wrong_number_of_columns() -> None:
    err = parse_error(edit_line(A100, 6, "NV12\t", ""))
    assert err.line == 6
    assert err.message == "row GPU4 has 21 columns, expected 22"


def test_nic_row_with_a_missing_code() -> None:
    err = parse_error(edit_line(DGX1, 10, "\tSYS", ""))
    assert err.line == 10
    assert err.message == "row mlx5_0 has 11 columns, expected 12 or 14"


def test_row_for_a_device_not_in_the_header() -> None:
    err = parse_error(edit_line(DGX1, 9, "GPU7", "GPU8"))
    assert err.line == 9
    assert err.message == "row for 'GPU8', which is not a device of the header (line 1)"


def test_duplicate_row() -> None:
    err = parse_error(edit_line(DGX1, 3, "GPU1", "GPU0"))
    assert (err.line, err.message) == (3, "second row for GPU0 (first at line 2)")


def test_x_off_the_diagonal() -> None:
    err = parse_error("\tGPU0\tGPU1\nGPU0\t X \t X \nGPU1\t X \t X \n")
    assert (err.line, err.message) == (2, "row GPU0, column GPU1: X off the diagonal")


def test_diagonal_must_be_x() -> None:
    err = parse_error("\tGPU0\tGPU1\nGPU0\tPIX\tPIX\nGPU1\tPIX\t X \n")
    assert (err.line, err.message) == (2, "row GPU0, column GPU0: PIX on the diagonal (expected X)")


def test_header_without_gpus() -> None:
    err = parse_error("\tmlx5_0\tmlx5_1\nmlx5_0\t X \tPIX\n")
    assert err.line == 1
    assert err.message.startswith("header line names no GPU columns")


def test_matrix_row_without_header() -> None:
    err = parse_error(A100[A100.index("GPU0\t X") :])
    assert (err.line, err.message) == (1, "matrix row before the header line (the header names the devices)")


def test_bad_cpu_affinity() -> None:
    err = parse_error(edit_line(A100, 2, "48-63,176-191", "48-63;176"))
    assert err.line == 2
    assert err.message == "GPU0: CPU affinity '48-63;176' is not a CPU list like '0-15,32-47'"


def test_bad_numa_affinity() -> None:
    err = parse_error(edit_line(A100, 2, "\t3", "\tthree"))
    assert (err.line, err.message) == (2, "GPU0: NUMA affinity 'three' is not a node number or N/A")


def test_a_two_column_matrix_row_first_is_a_row_before_the_header() -> None:
    # A one-GPU row with no affinity columns ("GPU0  X") where the header should be.
    with pytest.raises(ParseError, match="matrix row before the header line"):
        parse_nvidia_topo("GPU0\tX\n")
