"""`manage.py replay` end to end (call_command). Needs Django: run through scripts/with_services.py."""

import json
import os
import re
from io import StringIO
from pathlib import Path

import pytest

DJANGO = "DJANGO_SETTINGS_MODULE" in os.environ  # set by pytest-django; absent under `-p no:django`
pytestmark = pytest.mark.skipif(not DJANGO, reason="needs pytest-django (scripts/with_services.py -- pytest)")
db = pytest.mark.django_db if DJANGO else (lambda f: f)  # the mark is unknown without the plugin

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TIRESIAS = str(FIXTURES / "tiresias_60_job.csv")


def replay(*args: str) -> str:
    from django.core.management import call_command

    out = StringIO()
    call_command("replay", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_json_reproduces_the_tiresias_figures():
    doc = json.loads(
        replay(
            "--trace",
            "tiresias",
            TIRESIAS,
            "--cluster-spec",
            "2x4",
            "--policy",
            "fifo,srtf,tiresias-l,default",
            "--network-model",
            "off",
            "--json",
            "--no-progress",
        )
    )
    by = {r["policy"]: r for r in doc["results"]}
    assert by["fifo"]["avg_jct_s"] == pytest.approx(93389 / 60, abs=0.01)
    assert by["srtf"]["avg_jct_s"] == pytest.approx(31192 / 60, abs=0.01)
    assert by["tiresias-l"]["avg_jct_s"] == pytest.approx(42916 / 60, abs=0.01)
    assert by["srtf"]["preemptions"] == 7
    assert doc["avg_jct_ratio_to_default"]["fifo"] == pytest.approx(93389 / 33411, abs=1e-3)  # default: 33411
    assert doc["cluster"] == "2x4" and doc["network_model"] == "off" and doc["trace"]["jobs"] == 60
    for key in (
        "median_jct_s",
        "p95_jct_s",
        "makespan_s",
        "avg_queueing_s",
        "gpu_utilisation",
        "multi_gpu_in_one_island",
        "multi_gpu_in_one_leaf",
        "migrations",
    ):
        assert key in by["default"]


def test_table_plots_and_progress(tmp_path, capsys):
    from django.core.management import call_command

    out, err = StringIO(), StringIO()
    call_command(
        "replay",
        "--trace",
        "tiresias",
        TIRESIAS,
        "--cluster-spec",
        str(FIXTURES / "tiresias_n32g4.csv"),
        "--policy",
        "fifo,default-blind,default",
        "--plot",
        str(tmp_path),
        stdout=out,
        stderr=err,
    )
    text = out.getvalue()
    assert "cluster 32x4 (128 GPUs); network model on" in text
    assert "topology-blind placement / our placement" in text
    assert (tmp_path / "jct_cdf.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "utilisation.png").exists()


def test_plot_without_matplotlib_is_refused_before_the_replay(tmp_path, monkeypatch):
    # The demo's install has no matplotlib: say so at once, not with a traceback after the replay.
    import importlib.util

    from django.core.management.base import CommandError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    with pytest.raises(CommandError, match=r"--plot needs matplotlib: pip install '\.\[sim\]'"):
        replay("--trace", "tiresias", TIRESIAS, "--cluster-spec", "2x4", "--plot", str(tmp_path))
    assert not any(tmp_path.iterdir())


def test_pollux_with_network_model_prints_the_blind_ratio():
    text = replay(
        "--trace",
        "pollux",
        str(FIXTURES / "pollux_workload-6.csv"),
        "--cluster-spec",
        "16x4/4:2",
        "--policy",
        "default,default-blind",
        "--network-model",
        "on",
        "--link-rate",
        "SDR",
        "--no-progress",
    )
    # An SDR fabric (1 GB/s a node) makes placement matter: our placement at least 5 % faster than blind.
    ratio = re.search(r"topology-blind placement / our placement, average JCT: ([0-9.]+) \(ours faster\)", text)
    assert "default-blind" in text and ratio and float(ratio.group(1)) > 1.05


def test_slurm_churn_on_its_own_cluster_shape():
    # 32 nodes x 8 GPUs, leaves of 8 nodes, 2:1 uplinks: the cluster the SOURCES row gives for this table.
    doc = json.loads(
        replay(
            "--trace",
            "slurm",
            str(FIXTURES / "slurm_churn_500_seed1.tsv"),
            "--cluster-spec",
            "32x8/8:2",
            "--policy",
            "fifo,default",
            "--json",
            "--no-progress",
        )
    )
    assert doc["cluster"] == "32x8/8:2" and doc["network_model"] == "on" and doc["trace"]["jobs"] == 500
    by = {r["policy"]: r for r in doc["results"]}
    assert by["fifo"]["finished"] == by["default"]["finished"] == 500
    # YARN-CS waits for one leaf for every gang a leaf can hold (2 or 4 nodes of 8): 115 of 115.
    assert (by["fifo"]["multi_node_jobs"], by["fifo"]["multi_node_in_one_leaf"]) == (115, 115)
    assert by["default"]["multi_node_jobs"] == 115  # the gangs of several nodes, nothing else spread


def test_suite_prints_the_table_and_writes_json(tmp_path):
    out = tmp_path / "suite.json"
    text = replay(
        "--suite", "--suite-cases", "tiresias-2x4", "--traces-dir", str(FIXTURES), "--json", str(out), "--no-progress"
    )
    assert "Tiresias 60-job 2x4 off" in text and "x tiresias-l" in text
    doc = json.loads(out.read_text())
    (case,) = doc["cases"]
    assert case["metrics"][0]["values"]["fifo"] == pytest.approx(93389 / 60, abs=0.01)  # the pinned sum of JCTs
    assert doc["trace_dirs"] == [str(FIXTURES)]


def test_suite_json_on_stdout():
    doc = json.loads(replay("--suite", "--suite-cases", "alibaba", "--traces-dir", str(FIXTURES), "--json"))
    assert doc["cases"][0]["skipped"].endswith("not found in the trace folders")  # research-use: never copied here


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--trace", "tiresias", TIRESIAS, "--cluster-spec", "2x"), "neither NODESxGPUS"),
        (("--trace", "tiresias", TIRESIAS, "--cluster-spec", "2x4", "--policy", "lottery"), "unknown policy 'lottery'"),
        (("--trace", "philly", TIRESIAS, "--cluster-spec", "2x4"), "unknown trace kind 'philly'"),
        (("--trace", "tiresias", "/nonexistent.csv", "--cluster-spec", "2x4"), "does not exist"),
        (("--trace", "tiresias", TIRESIAS), "--cluster-spec is required"),
        (("--trace", "tiresias", TIRESIAS, "--cluster-spec", "2x4", "--round-s", "0"), "--round-s must be > 0"),
        ((), "--trace KIND PATH is required"),
        (("--suite", "--trace", "tiresias", TIRESIAS), "takes no --trace"),
        (("--suite", "--suite-cases", "lottery"), "unknown suite case"),
    ],
)
@db
def test_errors(args, words):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match=words):
        replay(*args, "--no-progress")


def test_malformed_trace_names_the_line(tmp_path):
    from django.core.management.base import CommandError

    bad = tmp_path / "bad.csv"
    bad.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,1,vgg16,100,0\n1,two,5,1,vgg16,10,0\n"
    )
    with pytest.raises(CommandError, match=r"bad.csv:3: num_gpu 'two' is not a number"):
        replay("--trace", "tiresias", str(bad), "--cluster-spec", "2x4", "--no-progress")


@db
def test_cluster_from_the_database():
    from tests.factories import fat_tree

    fat_tree("replaylab", nodes=4, gpus_per_node=8, gpu_model="H100", leaf_ports=8, oversubscription=1.0)
    doc = json.loads(
        replay(
            "--trace",
            "tiresias",
            TIRESIAS,
            "--cluster-spec",
            "replaylab",
            "--policy",
            "fjf,default",
            "--json",
            "--no-progress",
        )
    )
    assert doc["cluster"] == "replaylab"
    assert all(r["finished"] == 60 for r in doc["results"])
    assert doc["results"][0]["cluster"] == "replaylab"
