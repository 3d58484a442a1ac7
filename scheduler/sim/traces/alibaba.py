"""Loader of the Alibaba cluster-trace-gpu-v2023 "OpenB" CSVs (Weng et al., ATC '23).

Two files make the trace (github.com/alibaba/clusterdata, `cluster-trace-gpu-v2023/csv/`):

* the pod list, `openb_pod_list_*.csv`, one pod a row:
  `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time`
  where `gpu_milli` is the share of *each* of the pod's `num_gpu` GPUs in thousandths (1000 = a whole
  GPU; GPU-sharing pods ask for one GPU with gpu_milli < 1000), `gpu_spec` the GPU models it accepts
  (`"V100M16|V100M32"`, empty = any) and the times are seconds from the trace start (empty when unknown);
* the node list, `openb_node_list_gpu_node.csv`, one node a row: `sn,cpu_milli,memory_mib,gpu,model`.

The trace is for research use only: read it from `../shared/data/traces/` where it lies, never copy it
into this project (tests use small hand-made files in the same format).

`parse_pods(lines)` / `parse_nodes(lines)` are pure (any iterable of text lines); `load_pods(path)`,
`load_nodes(path)` and `load_openb(path)` read files. A malformed row raises `TraceError` naming the
file, the line and the problem; nothing is returned half-read. Pods come back in trace order (by
creation time, file order for equal times).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from scheduler.sim.traces.base import TraceError

POD_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
REQUIRED_POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
MILLI = 1000  # gpu_milli of a whole GPU


@dataclass(frozen=True, slots=True)
class AlibabaPod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU, 0..1000
    gpu_spec: tuple[str, ...] = ()  # accepted GPU models; () = any
    qos: str = ""
    phase: str = ""
    creation_time: int = 0
    deletion_time: int | None = None
    scheduled_time: int | None = None
    line: int = 0  # line in the source file (1 = header)

    @property
    def gpus(self) -> float:
        """GPUs requested in total (a 0.5-GPU pod asks for 0.5)."""
        return self.num_gpu * self.gpu_milli / MILLI

    @property
    def total_milli(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def sharing(self) -> bool:
        """A GPU-sharing pod: part of one GPU."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI


@dataclass(frozen=True, slots=True)
class AlibabaNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str
    line: int = 0


def _rows(lines: Iterable[str], source: str, kind: str, required: tuple[str, ...]):
    reader = csv.reader(lines)
    try:
        header = next(reader)
    except StopIteration:
        raise TraceError(source, 0, f"empty file, expected a {kind} header line") from None
    except csv.Error as e:
        raise TraceError(source, 1, str(e)) from None
    header = [h.strip().lstrip("\ufeff") for h in header]
    missing = [c for c in required if c not in header]
    if missing:
        raise TraceError(
            source,
            1,
            f"not an Alibaba OpenB {kind}: missing column(s) {', '.join(missing)} "
            f"(header has: {', '.join(header) or 'nothing'})",
        )
    index = {h: i for i, h in enumerate(header)}
    try:
        for row in reader:
            lineno = reader.line_num
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise TraceError(source, lineno, f"{len(row)} fields, the header has {len(header)}")
            yield lineno, {h: row[i].strip() for h, i in index.items()}
    except csv.Error as e:
        raise TraceError(source, reader.line_num, str(e)) from None


def _int(value: str, column: str, source: str, lineno: int, *, optional: bool = False, low: int = 0) -> int | None:
    if value == "":
        if optional:
            return None
        raise TraceError(source, lineno, f"{column} is empty")
    try:
        v = int(value)
    except ValueError:
        try:
            f = float(value)
        except ValueError:
            raise TraceError(source, lineno, f"{column} {value!r} is not a number") from None
        if not f.is_integer():
            raise TraceError(source, lineno, f"{column} {value!r} is not a whole number") from None
        v = int(f)
    if v < low:
        raise TraceError(source, lineno, f"{column} {v} is below {low}")
    return v


def parse_pods(lines: Iterable[str], source: str = "pod list") -> list[AlibabaPod]:
    """Pods of an OpenB pod list, in trace order (creation time, then file order)."""
    pods: list[AlibabaPod] = []
    seen: dict[str, int] = {}
    for lineno, r in _rows(lines, source, "pod list", REQUIRED_POD_COLUMNS):
        name = r["name"]
        if not name:
            raise TraceError(source, lineno, "name is empty")
        if name in seen:
            raise TraceError(source, lineno, f"pod {name} already on line {seen[name]}")
        seen[name] = lineno
        cpu = _int(r["cpu_milli"], "cpu_milli", source, lineno)
        mem = _int(r["memory_mib"], "memory_mib", source, lineno)
        num = _int(r["num_gpu"], "num_gpu", source, lineno)
        milli = _int(r["gpu_milli"], "gpu_milli", source, lineno)
        assert cpu is not None and mem is not None and num is not None and milli is not None
        if milli > MILLI:
            raise TraceError(
                source,
                lineno,
                f"gpu_milli {milli} is more than one GPU ({MILLI}); several GPUs are asked with num_gpu",
            )
        if num == 0 and milli:
            raise TraceError(source, lineno, f"gpu_milli {milli} with num_gpu 0")
        if num and not milli:
            raise TraceError(source, lineno, f"num_gpu {num} with gpu_milli 0")
        spec = tuple(m.strip() for m in r.get("gpu_spec", "").split("|") if m.strip())
        created = _int(r.get("creation_time", ""), "creation_time", source, lineno, optional=True)
        pods.append(
            AlibabaPod(
                name=name,
                cpu_milli=cpu,
                memory_mib=mem,
                num_gpu=num,
                gpu_milli=milli,
                gpu_spec=spec,
                qos=r.get("qos", ""),
                phase=r.get("pod_phase", ""),
                creation_time=created or 0,
                deletion_time=_int(r.get("deletion_time", ""), "deletion_time", source, lineno, optional=True),
                scheduled_time=_int(r.get("scheduled_time", ""), "scheduled_time", source, lineno, optional=True),
                line=lineno,
            )
        )
    if not pods:
        raise TraceError(source, 0, "no pods after the header")
    pods.sort(key=lambda p: p.creation_time)  # stable: file order for equal times
    return pods


def parse_nodes(lines: Iterable[str], source: str = "node list") -> list[AlibabaNode]:
    """Nodes of an OpenB node list, in file order."""
    nodes: list[AlibabaNode] = []
    seen: dict[str, int] = {}
    for lineno, r in _rows(lines, source, "node list", NODE_COLUMNS):
        name = r["sn"]
        if not name:
            raise TraceError(source, lineno, "sn (node name) is empty")
        if name in seen:
            raise TraceError(source, lineno, f"node {name} already on line {seen[name]}")
        seen[name] = lineno
        cpu = _int(r["cpu_milli"], "cpu_milli", source, lineno, low=1)
        mem = _int(r["memory_mib"], "memory_mib", source, lineno, low=1)
        gpus = _int(r["gpu"], "gpu", source, lineno)
        assert cpu is not None and mem is not None and gpus is not None
        if gpus > 64:
            raise TraceError(source, lineno, f"{gpus} GPUs on one node is not plausible")
        model = r["model"]
        if gpus and not model:
            raise TraceError(source, lineno, f"node {name} has {gpus} GPUs but no model")
        nodes.append(AlibabaNode(name, cpu, mem, gpus, model, lineno))
    if not nodes:
        raise TraceError(source, 0, "no nodes after the header")
    return nodes


def load_pods(path: str | Path) -> list[AlibabaPod]:
    p = Path(path)
    with p.open(newline="", encoding="utf-8") as f:
        return parse_pods(f, str(p))


def load_nodes(path: str | Path) -> list[AlibabaNode]:
    p = Path(path)
    with p.open(newline="", encoding="utf-8") as f:
        return parse_nodes(f, str(p))


def find_node_list(pod_list: str | Path) -> Path:
    """The node list that goes with a pod list: `openb_node_list_gpu_node.csv` (or any
    `*node_list*.csv`) in the same folder, or in the folder given."""
    p = Path(pod_list)
    folder = p if p.is_dir() else p.parent
    exact = sorted(folder.glob("*openb_node_list_gpu_node.csv"))
    found = exact or sorted(folder.glob("*node_list*.csv"))
    if not found:
        raise TraceError(str(folder), 0, "no node list (openb_node_list_gpu_node.csv) beside the pod list")
    return found[0]


def load_openb(path: str | Path, node_list: str | Path | None = None) -> tuple[list[AlibabaPod], list[AlibabaNode]]:
    """(pods, nodes) of an OpenB trace: `path` is the pod list CSV, or a folder holding
    `openb_pod_list_default.csv`; the node list is `node_list` or found beside it."""
    p = Path(path)
    if p.is_dir():
        cands = sorted(p.glob("*openb_pod_list_default.csv")) or sorted(p.glob("*pod_list*.csv"))
        if not cands:
            raise TraceError(str(p), 0, "no OpenB pod list (openb_pod_list_default.csv) in this folder")
        p = cands[0]
    nl = Path(node_list) if node_list is not None else find_node_list(p)
    return load_pods(p), load_nodes(nl)
