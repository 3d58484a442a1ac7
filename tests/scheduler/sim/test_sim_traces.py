"""Trace loaders: the real files (copies in tests/fixtures, see SOURCES.md) and malformed rows."""

from pathlib import Path

import pytest

from scheduler.sim.run import guess_kind
from scheduler.sim.traces import TraceError, load_trace, parse_gavel, parse_pollux, parse_slurm, parse_tiresias
from scheduler.sim.traces.pollux import APPLICATIONS, job_duration
from scheduler.sim.traces.slurm import churn_table

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TIRESIAS_HEADER = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"


def test_tiresias_60_job_trace():
    t = load_trace("tiresias", FIXTURES / "tiresias_60_job.csv")
    assert t.kind == "tiresias"
    assert len(t.jobs) == 60
    assert [j.id for j in t.jobs] == list(range(60))
    assert {j.gpus for j in t.jobs} == {1, 2, 4, 8}
    assert (t.jobs[0].submit_s, t.jobs[-1].submit_s) == (0, 1779)
    assert min(j.duration_s for j in t.jobs) == 121 and max(j.duration_s for j in t.jobs) == 1800
    j1 = t.jobs[1]
    assert (j1.name, j1.gpus, j1.submit_s, j1.duration_s, j1.model) == ("1", 8, 30, 147, "vgg11")
    assert j1.grad_bytes == pytest.approx(132.863336e6 * 4)  # VGG-11: torchvision's num_params, fp32
    assert sum(j.gpus * j.duration_s for j in t.jobs) == pytest.approx(t.gpu_seconds)


def test_tiresias_sorts_by_submit_time_keeping_file_order_on_ties():
    text = TIRESIAS_HEADER + "a,1,50,1,vgg16,100,0\nb,2,10,1,resnet50,100,0\nc,1,10,1,alexnet,100,0\n"
    t = parse_tiresias(text.splitlines(), "x.csv")
    assert [j.name for j in t.jobs] == ["b", "c", "a"]
    assert [j.line for j in t.jobs] == [3, 4, 2]


def test_tiresias_duration_is_truncated_like_the_simulator():
    t = parse_tiresias((TIRESIAS_HEADER + "a,1,0,1,vgg16,99.9,0\n").splitlines(), "x.csv")
    assert t.jobs[0].duration_s == 99


def test_tiresias_unknown_model_gets_the_default_profile_and_a_note():
    t = parse_tiresias((TIRESIAS_HEADER + "a,2,0,1,mystery-net,100,0\n").splitlines(), "x.csv")
    assert t.jobs[0].model == "default"
    assert any("mystery-net" in n for n in t.notes)


@pytest.mark.parametrize(
    ("row", "line", "words"),
    [
        ("1,x,0,1,vgg16,100,0", 3, "num_gpu 'x' is not a number"),
        ("1,0,0,1,vgg16,100,0", 3, "num_gpu 0 is below 1"),
        ("1,2,-5,1,vgg16,100,0", 3, "submit_time"),
        ("1,2,5,1,vgg16,0,0", 3, "duration"),
        ("1,2,5,1,vgg16,abc,0", 3, "duration 'abc' is not a number"),
        ("1,2,5,1,vgg16", 3, "5 fields, the header has 7"),
        (",2,5,1,vgg16,10,0", 3, "job_id is empty"),
    ],
)
def test_tiresias_malformed_row_names_the_line(row, line, words):
    text = TIRESIAS_HEADER + "0,1,0,1,vgg16,100,0\n" + row + "\n"
    with pytest.raises(TraceError) as exc:
        parse_tiresias(text.splitlines(), "bad.csv")
    assert exc.value.line == line
    assert str(exc.value).startswith(f"bad.csv:{line}: ")
    assert words in str(exc.value)


def test_tiresias_missing_column_and_empty_file():
    with pytest.raises(TraceError, match=r"bad.csv:1: header lacks column\(s\) duration"):
        parse_tiresias(["job_id,num_gpu,submit_time", "1,1,0"], "bad.csv")
    with pytest.raises(TraceError, match="empty file"):
        parse_tiresias([], "empty.csv")
    with pytest.raises(TraceError, match="no jobs"):
        parse_tiresias([TIRESIAS_HEADER.strip()], "nojobs.csv")


def test_pollux_workload_6():
    t = load_trace("pollux", FIXTURES / "pollux_workload-6.csv")
    assert len(t.jobs) == 160
    assert sum(1 for j in t.jobs if j.model == "ncf") == 54
    assert max(j.gpus for j in t.jobs) == 48
    assert t.jobs[0].name == "cifar10-0" and t.jobs[0].submit_s == 53
    assert all(j.duration_s > 0 for j in t.jobs)
    assert "derived" in t.notes[0]


def test_pollux_durations_follow_the_documented_throughput_assumption():
    # CIFAR-10 at 6 replicas x 2048: ceil(100 x 50000 / 2048) = 2442 steps of the artifact's measured 1-GPU
    # step at 341.3 images (between 257: 0.1866 s and 363: 0.2590 s) + the ring.
    d, step = job_duration("cifar10", 6, 2048)
    assert step == pytest.approx(0.1866 + (0.2590 - 0.1866) * (2048 / 6 - 257) / (363 - 257))
    assert 2442 * step < d < 2442 * step * 1.05
    # More replicas, same global batch: shorter.
    assert job_duration("bert", 16, 384)[0] < job_duration("bert", 6, 384)[0]
    assert set(APPLICATIONS) == {"cifar10", "imagenet", "bert", "deepspeech2", "yolov3", "ncf"}


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ("x-1,10,resnet,4,128", "application 'resnet' is not one of"),
        ("x-1,10,cifar10,0,128", "num_replicas 0 is below 1"),
        ("x-1,ten,cifar10,4,128", "time 'ten' is not a number"),
        ("x-1,10,cifar10,8,4", "batch_size 4 is smaller than num_replicas 8"),
    ],
)
def test_pollux_malformed_row_names_the_line(row, words):
    text = ["name,time,application,num_replicas,batch_size", "ok-0,0,ncf,1,32768", row]
    with pytest.raises(TraceError) as exc:
        parse_pollux(text, "w.csv")
    assert exc.value.line == 3
    assert words in str(exc.value)


def test_gavel_physical_trace_head():
    t = load_trace("gavel", FIXTURES / "gavel_physical_max_min_fairness_head24.trace")
    assert len(t.jobs) == 24
    first = next(j for j in t.jobs if j.line == 1)
    assert (first.model, first.gpus, first.submit_s) == ("ResNet-18", 4, 0)
    assert first.duration_s > 925982 / 22.371570  # steps at Gavel's 22.37 steps/s (V100, batch 128) + the ring


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("ResNet-18 (batch size 128)\tcmd\tdir\t--num_steps\t1\t100\t1\t1", "8 tab-separated fields, expected 10"),
        ("Foo (batch size 8)\tcmd\tdir\t--n\t1\t100\t1\t1\t-1\t0", "job type 'Foo' has no throughput profile"),
        ("ResNet-18\tcmd\tdir\t--n\t1\t100\t1\t1\t-1\t0", "is not 'MODEL (batch size N)'"),
        ("ResNet-18 (batch size 128)\tcmd\tdir\t--n\t1\tmany\t1\t1\t-1\t0", "total_steps 'many'"),
        ("ResNet-18 (batch size 128)\tcmd\tdir\t--n\t1\t100\t0\t1\t-1\t0", "scale_factor 0 is below 1"),
    ],
)
def test_gavel_malformed_line(line, words):
    good = "LM (batch size 40)\tpython main.py\tlanguage_modeling\t--steps\t1\t1000\t1\t1\t-1.000000\t0"
    with pytest.raises(TraceError) as exc:
        parse_gavel([good, "", line], "g.trace")
    assert exc.value.line == 3
    assert words in str(exc.value)


def test_unknown_kind():
    with pytest.raises(ValueError, match="unknown trace kind 'philly'"):
        load_trace("philly", FIXTURES / "tiresias_60_job.csv")


SLURM_HEADER = "idx\tgpus\tnodes\tgpus_per_node\tduration_s\ttimelimit_min"


def test_slurm_churn_table():
    t = load_trace("slurm", FIXTURES / "slurm_churn_500_seed1.tsv")
    assert t.kind == "slurm" and len(t.jobs) == 500
    assert [j.name for j in t.jobs] == [str(i) for i in range(500)]  # all at time 0: file order
    assert all(j.submit_s == 0 and j.est_runtime_s == 120 for j in t.jobs)  # every time limit is 2 min
    shapes = {}
    for j in t.jobs:
        shapes[j.gang] = shapes.get(j.gang, 0) + 1
    # The shares the SOURCES row gives (1:30 %, 2:20 %, 4:15 %, 8:15 %, 16:12 %, 32:8 %), as drawn.
    assert shapes == {(1, 1): 141, (1, 2): 94, (1, 4): 79, (1, 8): 71, (2, 8): 71, (4, 8): 44}
    assert sum(1 for j in t.jobs if j.nodes > 1) == 115
    j6 = t.jobs[6]
    assert (j6.gpus, j6.nodes, j6.gpus_per_node, j6.duration_s, j6.topology) == (16, 2, 8, 17, "prefer-leaf")
    assert 5 <= min(j.duration_s for j in t.jobs) and max(j.duration_s for j in t.jobs) <= 30
    # GPU-seconds / 256 GPUs = 260.3 s: the makespan lower bound the SOURCES row quotes as 260 s.
    assert t.gpu_seconds == 66641 and t.gpu_seconds / 256 == pytest.approx(260.3, abs=0.05)
    assert any("time 0" in n for n in t.notes) and any("default runtime profile" in n for n in t.notes)


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ("1\t16\t2\t4\t10\t2", "gpus 16 is not nodes 2 x gpus_per_node 4"),
        ("1\t8\t1\t8\t200\t2", "duration_s 200 exceeds the time limit (2 min = 120 s)"),
        ("1\t8\t1\t8\t20\t0", "timelimit_min 0 is below 1"),
        ("1\t8\tx\t8\t20\t2", "nodes 'x' is not a number"),
        ("1\t8\t1\t8\t0\t2", "duration_s '0' must be > 0"),
        ("0\t1\t1\t1\t5\t2", "idx 0 repeats the job of line 2"),
        ("1\t8\t1\t8\t20", "5 fields, the header has 6"),
    ],
)
def test_slurm_malformed_row_names_the_line(row, words):
    text = [SLURM_HEADER, "0\t1\t1\t1\t30\t2", row]
    with pytest.raises(TraceError) as exc:
        parse_slurm(text, "jobs.tsv")
    assert exc.value.line == 3
    assert str(exc.value).startswith("jobs.tsv:3: ") and words in str(exc.value)


def test_slurm_missing_column():
    with pytest.raises(TraceError, match=r"jobs.tsv:1: header lacks column\(s\) timelimit_min"):
        parse_slurm(["idx\tgpus\tnodes\tgpus_per_node\tduration_s", "0\t1\t1\t1\t5"], "jobs.tsv")


def test_kind_from_the_file_name():
    assert guess_kind("slurm_churn_500_seed1.tsv") == "slurm" and guess_kind("jobs.tsv") == "slurm"
    assert guess_kind("tiresias_60_job.csv") == "tiresias" and guess_kind("max_min_fairness.trace") == "gavel"


def test_traces_without_a_shape_say_what_is_assumed():
    for kind, name in (
        ("tiresias", "tiresias_60_job.csv"),
        ("pollux", "pollux_workload-6.csv"),
        ("gavel", "gavel_physical_max_min_fairness_head24.trace"),
    ):
        t = load_trace(kind, FIXTURES / name)
        assert all(j.gang is None and j.est_runtime_s is None and j.topology == "prefer-leaf" for j in t.jobs)
        assert any("no gang shape" in n for n in t.notes), kind


def test_churn_table_draws_the_shipped_file_byte_for_byte():
    text = "\n".join(churn_table(500, gpus_per_node=8, seed=1)) + "\n"
    assert text == (FIXTURES / "slurm_churn_500_seed1.tsv").read_text()
    shipped = parse_slurm(text.splitlines(), "seed1")
    other = parse_slurm(churn_table(500, seed=2), "seed2")
    assert len(other.jobs) == 500 and [j.gpus for j in other.jobs] != [j.gpus for j in shipped.jobs]


def test_churn_table_refuses_a_shape_that_is_not_whole_nodes():
    with pytest.raises(ValueError, match="a 12-GPU job is not a whole number of 8-GPU nodes"):
        churn_table(50, mix=((12, 1.0),))
