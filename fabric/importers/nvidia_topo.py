"""Parse `nvidia-smi topo -m` / `topo -mp` into a ParsedNodeTopology, and pick a GPU's closest NICs.

The input is a square matrix over the devices named in the header line, followed by affinity
columns on GPU rows::

            GPU0    GPU1    mlx5_0  CPU Affinity    NUMA Affinity
    GPU0     X      NV12    PXB     48-63,176-191   3
    GPU1    NV12     X      PXB     48-63,176-191   3
    mlx5_0  PXB     PXB      X

Behaviour, beyond the grammar:

* Columns are split on whitespace (tabs or spaces, so text pasted from a terminal works too);
  the multi-word headers "CPU Affinity", "NUMA Affinity" and "GPU NUMA ID" are recognised.
* Devices named GPU<n> are GPUs; any other device column is a NIC. Newer nvidia-smi names NICs
  NIC0, NIC1... and prints a "NIC Legend:" (`  NIC0: mlx5_0`): those names are replaced by the
  legend's. A NIC the legend does not name keeps its NICn name.
* Codes: X (the diagonal, and only there), SYS, NODE, PHB, PXB, PIX, NV<n>. "SOC", the name
  nvidia-smi used for SYS before 2017, is read as SYS. Anything else is an error.
* The matrix must be square and complete: every header device has exactly one row, every row has
  one code per device, and code(a, b) == code(b, a). NIC rows may omit the affinity columns.
* Affinity: "CPU Affinity" is kept as printed ("48-63,176-191"; "N/A" leaves it out), "NUMA
  Affinity" becomes an int, or None for "N/A". Other extra columns (e.g. "GPU NUMA ID") are checked
  for count only.
* Lines after the matrix are the legend and are ignored, except the NIC legend's mapping lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._common import check_text, iter_lines
from .types import ParsedNodeTopology, ParseError

# Closest first; what NCCL's own topology search prefers for GPUDirect RDMA.
PCIE_ORDER: tuple[str, ...] = ("PIX", "PXB", "PHB", "NODE", "SYS")
_PATH_CODES = frozenset(PCIE_ORDER)
_LEGACY_CODES = {"SOC": "SYS"}
_NVLINK = re.compile(r"^NV\d+$")
_GPU = re.compile(r"^GPU(\d+)$")
_NIC_LEGEND_ENTRY = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_MULTIWORD_HEADERS = {"CPU Affinity": "CPU_Affinity", "NUMA Affinity": "NUMA_Affinity", "GPU NUMA ID": "GPU_NUMA_ID"}
_CPU_LIST = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


_Rows = dict[str, tuple[int, list[str], list[str]]]  # device -> (line, codes, affinity values)


@dataclass(slots=True)
class _Header:
    devices: list[str]
    extras: list[str]  # affinity column names, in order
    line: int


def parse_nvidia_topo(text: str, source: str = "") -> ParsedNodeTopology:
    """Parse `nvidia-smi topo -m` or `-mp` output; raise ParseError (with its line) on malformed input."""
    check_text(text, source)
    lines = list(iter_lines(text))
    header, body_start = _find_header(lines, source)
    rows, legend_start = _read_rows(lines[body_start:], header, source)
    names = _nic_names(lines[legend_start:]) if legend_start is not None else {}
    return _build(header, rows, names, source)


def _find_header(lines: list[tuple[int, str]], source: str) -> tuple[_Header, int]:
    for index, (number, line) in enumerate(lines):
        if not line.strip():
            continue
        for words, joined in _MULTIWORD_HEADERS.items():
            line = line.replace(words, joined)
        tokens = line.split()
        if _GPU.match(tokens[0]) and len(tokens) > 1 and _is_code(tokens[1]):
            raise ParseError("matrix row before the header line (the header names the devices)", number, source)
        extras_at = next((i for i, t in enumerate(tokens) if t in _MULTIWORD_HEADERS.values()), len(tokens))
        devices, extras = tokens[:extras_at], [t.replace("_", " ") for t in tokens[extras_at:]]
        if not any(_GPU.match(d) for d in devices):
            raise ParseError(f"header line names no GPU columns: {line.strip()!r}", number, source)
        if len(set(devices)) != len(devices):
            raise ParseError("header line names a device twice", number, source)
        return _Header(devices, extras, number), index + 1
    raise ParseError("no GPU matrix found (empty input)", 0, source)


def _read_rows(lines: list[tuple[int, str]], header: _Header, source: str) -> tuple[_Rows, int | None]:
    """device -> (line, codes, extras); and where the legend starts (None when absent)."""
    rows: _Rows = {}
    legend_start = None
    for index, (number, line) in enumerate(lines):
        if line.strip().startswith(("Legend", "NIC Legend")):
            legend_start = index
            break
        if line.strip():
            name, row = _read_row(line, number, header, source)
            if name in rows:
                raise ParseError(f"second row for {name} (first at line {rows[name][0]})", number, source)
            rows[name] = row
    missing = [d for d in header.devices if d not in rows]
    if missing:
        raise ParseError(f"matrix is not square: no row for {', '.join(missing)}", header.line, source)
    return rows, legend_start


def _read_row(line: str, number: int, header: _Header, source: str) -> tuple[str, tuple[int, list[str], list[str]]]:
    name, *values = line.split()
    if name not in header.devices:
        raise ParseError(f"row for {name!r}, which is not a device of the header (line {header.line})", number, source)
    width = len(header.devices)
    # GPU rows carry the affinity columns; NIC rows usually stop after the codes.
    expected = {width + len(header.extras)} if _GPU.match(name) else {width, width + len(header.extras)}
    if len(values) not in expected:
        want = " or ".join(str(n) for n in sorted(expected))
        raise ParseError(f"row {name} has {len(values)} columns, expected {want}", number, source)
    codes = [_code(c, number, source) for c in values[:width]]
    return name, (number, codes, values[width:])


def _code(token: str, number: int, source: str) -> str:
    code = _LEGACY_CODES.get(token, token)
    if not _is_code(code):
        allowed = "X, " + ", ".join(PCIE_ORDER) + ", NV<n>"
        raise ParseError(f"unknown topology code {token!r} (expected one of {allowed})", number, source)
    return code


def _is_code(token: str) -> bool:
    return token == "X" or token in _PATH_CODES or token in _LEGACY_CODES or bool(_NVLINK.match(token))


def _nic_names(lines: list[tuple[int, str]]) -> dict[str, str]:
    return {m[1]: m[2] for _, line in lines if (m := _NIC_LEGEND_ENTRY.match(line))}


def _build(header: _Header, rows: _Rows, names: dict[str, str], source: str) -> ParsedNodeTopology:
    devices = header.devices
    _check_matrix(devices, rows, source)
    gpu_index = {d: int(m[1]) for d in devices if (m := _GPU.match(d))}
    nics = [d for d in devices if d not in gpu_index]
    topo = ParsedNodeTopology(
        gpus=list(gpu_index.values()),
        nics=[names.get(n, n) for n in nics],
        gpu_links={},
        nic_affinity={},
    )
    for gpu, index in gpu_index.items():
        number, codes, extras = rows[gpu]
        by_device = dict(zip(devices, codes, strict=True))
        for other, other_index in gpu_index.items():
            if index < other_index:
                topo.gpu_links[(index, other_index)] = by_device[other]
        for nic in nics:
            topo.nic_affinity[(index, names.get(nic, nic))] = by_device[nic]
        _read_affinity(topo, index, dict(zip(header.extras, extras, strict=True)), number, source)
    return topo


def _check_matrix(devices: list[str], rows: _Rows, source: str) -> None:
    """X exactly on the diagonal, and the same code read across a row as down its column."""
    for i, a in enumerate(devices):
        number, codes, _ = rows[a]
        for j, b in enumerate(devices):
            code = codes[j]
            if (code == "X") != (i == j):
                what = "X off the diagonal" if code == "X" else f"{code} on the diagonal (expected X)"
                raise ParseError(f"row {a}, column {b}: {what}", number, source)
            mirror = rows[b][1][i]
            if j < i and code != mirror:
                raise ParseError(
                    f"matrix is not symmetric: {a}->{b} is {code} but {b}->{a} is {mirror} (line {rows[b][0]})",
                    number,
                    source,
                )


def _read_affinity(topo: ParsedNodeTopology, gpu: int, extras: dict[str, str], number: int, source: str) -> None:
    cpus = extras.get("CPU Affinity")
    if cpus is not None and cpus != "N/A":
        if not _CPU_LIST.match(cpus):
            raise ParseError(f"GPU{gpu}: CPU affinity {cpus!r} is not a CPU list like '0-15,32-47'", number, source)
        topo.cpu_affinity[gpu] = cpus
    numa = extras.get("NUMA Affinity")
    if numa is not None:
        if numa != "N/A" and not numa.isdigit():
            raise ParseError(f"GPU{gpu}: NUMA affinity {numa!r} is not a node number or N/A", number, source)
        topo.numa_affinity[gpu] = None if numa == "N/A" else int(numa)


def closest_nics(topo: ParsedNodeTopology, gpu_index: int) -> list[str]:
    """The NICs nearest a GPU over PCIe (best code, PIX < PXB < PHB < NODE < SYS), in topology order.

    This is what a launcher puts in NCCL_IB_HCA for a rank on that GPU. Empty when the server has
    no NICs. Raises KeyError for a GPU the topology does not have.
    """
    if gpu_index not in topo.gpus:
        raise KeyError(f"GPU{gpu_index} is not in this topology (GPUs: {topo.gpus})")
    ranked = {nic: PCIE_ORDER.index(topo.nic_affinity[(gpu_index, nic)]) for nic in topo.nics}
    if not ranked:
        return []
    best = min(ranked.values())
    return [nic for nic, rank in ranked.items() if rank == best]
