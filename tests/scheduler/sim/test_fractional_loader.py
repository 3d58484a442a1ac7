"""Loader of the Alibaba 2023 OpenB CSVs, on small hand-made files in the real format (the trace itself is
research-use only and never copied into the project)."""

from __future__ import annotations

import pytest

from scheduler.sim.traces.alibaba import (
    find_node_list,
    load_nodes,
    load_openb,
    load_pods,
    parse_nodes,
    parse_pods,
)
from scheduler.sim.traces.base import TraceError

POD_HEADER = ",".join(
    (
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli",
        "gpu_spec,qos,pod_phase",
        "creation_time,deletion_time,scheduled_time",
    )
)
PODS = f"""{POD_HEADER}
pod-a,4000,8192,1,500,,LS,Running,100,900,100
pod-b,8000,16384,1,1000,T4|P100,BE,Succeeded,50,400,60
pod-c,2000,4096,0,0,,BE,Pending,100,,
pod-d,32000,65536,4,1000,,LS,Running,70,800,75
"""
NODES = """sn,cpu_milli,memory_mib,gpu,model
node-0,16000,65536,2,T4
node-1,96000,393216,8,G2
"""


def lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def test_parse_pods_reads_every_column_in_trace_order():
    pods = parse_pods(lines(PODS), "pods.csv")
    assert [p.name for p in pods] == ["pod-b", "pod-d", "pod-a", "pod-c"]  # by creation time, file order on ties
    b = pods[0]
    assert (b.cpu_milli, b.memory_mib, b.num_gpu, b.gpu_milli) == (8000, 16384, 1, 1000)
    assert b.gpu_spec == ("T4", "P100")
    assert (b.qos, b.phase, b.creation_time, b.deletion_time, b.scheduled_time) == ("BE", "Succeeded", 50, 400, 60)
    assert b.line == 3 and not b.sharing and b.gpus == 1.0
    a = pods[2]
    assert a.sharing and a.gpus == 0.5 and a.total_milli == 500 and a.gpu_spec == ()
    c = pods[3]
    assert c.num_gpu == 0 and c.deletion_time is None and c.scheduled_time is None
    assert pods[1].total_milli == 4000


def test_parse_nodes():
    nodes = parse_nodes(lines(NODES), "nodes.csv")
    assert [(n.name, n.cpu_milli, n.memory_mib, n.gpus, n.model) for n in nodes] == [
        ("node-0", 16000, 65536, 2, "T4"),
        ("node-1", 96000, 393216, 8, "G2"),
    ]


def test_only_the_needed_pod_columns_are_required():
    pods = parse_pods(lines("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,10,1,250\n"))
    assert pods[0].gpu_milli == 250 and pods[0].creation_time == 0


@pytest.mark.parametrize(
    ("row", "line", "words"),
    [
        ("pod-x,4000,8192,1,abc,,LS,Running,1,,", 3, "gpu_milli 'abc' is not a number"),
        ("pod-x,4000,8192,1,1200,,LS,Running,1,,", 3, "gpu_milli 1200 is more than one GPU"),
        ("pod-x,4000,8192,0,500,,LS,Running,1,,", 3, "gpu_milli 500 with num_gpu 0"),
        ("pod-x,4000,8192,2,0,,LS,Running,1,,", 3, "num_gpu 2 with gpu_milli 0"),
        ("pod-x,-5,8192,1,500,,LS,Running,1,,", 3, "cpu_milli -5 is below 0"),
        ("pod-x,4000,8192,1,500,,LS,Running", 3, "8 fields, the header has 11"),
        ("pod-x,4000,,1,500,,LS,Running,1,,", 3, "memory_mib is empty"),
        ("pod-x,4000,8192,1,2.5,,LS,Running,1,,", 3, "not a whole number"),
        ("pod-a,4000,8192,1,500,,LS,Running,1,,", 3, "pod pod-a already on line 2"),
        ("pod-x,4000,8192,1,500,,LS,Running,soon,,", 3, "creation_time 'soon' is not a number"),
    ],
)
def test_malformed_pod_rows_name_the_line(row, line, words):
    text = f"{POD_HEADER}\npod-a,4000,8192,1,500,,LS,Running,1,,\n{row}\n"
    with pytest.raises(TraceError) as e:
        parse_pods(lines(text), "pods.csv")
    assert e.value.line == line
    assert words in str(e.value)
    assert str(e.value).startswith(f"pods.csv:{line}:")


def test_pod_list_with_a_wrong_header():
    with pytest.raises(TraceError, match=r"pods.csv:1: not an Alibaba OpenB pod list: missing column\(s\) gpu_milli"):
        parse_pods(lines("name,cpu_milli,memory_mib,num_gpu\np,1,1,1\n"), "pods.csv")
    with pytest.raises(TraceError, match="missing column"):
        parse_pods(lines(NODES), "pods.csv")  # the node list given as the pod list


def test_empty_files():
    with pytest.raises(TraceError, match="empty file"):
        parse_pods([], "pods.csv")
    with pytest.raises(TraceError, match="no pods after the header"):
        parse_pods(lines(POD_HEADER + "\n\n"), "pods.csv")
    with pytest.raises(TraceError, match="no nodes after the header"):
        parse_nodes(lines("sn,cpu_milli,memory_mib,gpu,model\n"), "nodes.csv")


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ("node-9,16000,65536,2,", "node node-9 has 2 GPUs but no model"),
        ("node-9,0,65536,2,T4", "cpu_milli 0 is below 1"),
        ("node-9,16000,65536,x,T4", "gpu 'x' is not a number"),
        ("node-0,16000,65536,2,T4", "node node-0 already on line 2"),
    ],
)
def test_malformed_node_rows_name_the_line(row, words):
    text = f"sn,cpu_milli,memory_mib,gpu,model\nnode-0,16000,65536,2,T4\n{row}\n"
    with pytest.raises(TraceError) as e:
        parse_nodes(lines(text), "nodes.csv")
    assert e.value.line == 3 and words in str(e.value)


def test_load_openb_finds_the_node_list_beside_the_pod_list(tmp_path):
    (tmp_path / "openb_pod_list_default.csv").write_text(PODS)
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODES)
    pods, nodes = load_openb(tmp_path / "openb_pod_list_default.csv")
    assert len(pods) == 4 and len(nodes) == 2
    pods2, nodes2 = load_openb(tmp_path)  # the folder
    assert pods2 == pods and nodes2 == nodes
    assert find_node_list(tmp_path / "openb_pod_list_default.csv").name == "openb_node_list_gpu_node.csv"
    assert load_pods(tmp_path / "openb_pod_list_default.csv") == pods
    assert load_nodes(tmp_path / "openb_node_list_gpu_node.csv") == nodes


def test_missing_node_list_is_a_clear_error(tmp_path):
    (tmp_path / "openb_pod_list_default.csv").write_text(PODS)
    with pytest.raises(TraceError, match="no node list"):
        load_openb(tmp_path / "openb_pod_list_default.csv")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceError, match="no OpenB pod list"):
        load_openb(empty)


def test_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "pods.csv"
    bad.write_text(f"{POD_HEADER}\npod-a,4000,8192,1,500,,LS,Running,1,,\npod-b,4000,8192,1,5000,,LS,Running,1,,\n")
    with pytest.raises(TraceError) as e:
        load_pods(bad)
    assert str(e.value).startswith(f"{bad}:3:")
