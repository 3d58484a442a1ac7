"""bench/bench_push_load.py: its pure helpers (percentiles, the page mix, the poll markers and how a frame is matched
to the poll it shows, read from broadcast.wire's binary form). No server, no database."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

import pytest

from dashboard import broadcast

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("bench_push_load", ROOT / "bench" / "bench_push_load.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


load = _load()


def test_percentile_interpolates_between_the_closest_ranks():
    assert load.percentile([], 99) is None
    assert load.percentile([7.0], 99) == 7.0
    assert load.percentile([5, 1, 4, 2, 3], 50) == 3
    assert load.percentile([1, 2, 3, 4], 25) == pytest.approx(1.75)
    assert load.percentile([1, 2, 3, 4], 0) == 1 and load.percentile([1, 2, 3, 4], 100) == 4
    values = [i / 10 for i in range(101)]
    assert load.percentile(values, 99) == pytest.approx(9.9)


def test_the_mix_gives_each_page_its_share_interleaved():
    mix = load.parse_mix(load.DEFAULT_MIX)
    assert mix == pytest.approx({"overview": 0.6, "fabric": 0.2, "gpus": 0.2})
    topics = load.assign_topics(1000, mix)
    assert {t: topics.count(t) for t in mix} == {"overview": 600, "fabric": 200, "gpus": 200}
    assert set(topics[:5]) == {"overview", "fabric", "gpus"}
    seven = load.assign_topics(7, mix)
    assert len(seven) == 7 and seven.count("overview") == 4
    assert load.assign_topics(3, load.parse_mix("gpus")) == ["gpus"] * 3
    with pytest.raises(ValueError, match="unknown topic"):
        load.parse_mix("overview=1,queue=1")


def test_the_gpus_of_a_poll_average_its_marker_and_the_marker_gpu_reads_it():
    for poll in (0, 5, 63, 64, 130):
        utils = load.gpu_utils(poll, 8, salt=11)
        assert statistics.mean(utils) == pytest.approx(load.marker_pct(poll))
        assert all(5.0 <= u <= 98.0 and round(u, 1) == u for u in utils)
        marked = load.gpu_utils(poll, 8, salt=11, quiet_first_pair=True)
        assert marked[0] == load.marker_pct(poll)
        assert load.marker_from_pct(marked[0]) == poll % load.MARKER_PERIOD
    assert max(load.port_util(i, p) for i in range(500) for p in range(70)) < load.OTHER_PORT_MAX
    assert load.marker_from_pct(load.OTHER_PORT_MAX * 100) is None  # no other port reads as a marker


def test_a_frame_is_the_newest_poll_with_its_marker_collected_before_it_arrived():
    collected = [100.0 + k for k in range(140)]
    m = 70 % load.MARKER_PERIOD
    assert load.poll_of(m, 170.3, collected) == 70
    assert load.poll_of(m, 169.9, collected) == 6  # poll 70 was not read yet: the frame shows poll 6
    assert load.poll_of(m, 99.0, collected) is None
    assert load.poll_of(139 % load.MARKER_PERIOD, 1e9, collected) == 139


def test_a_poll_is_shown_by_its_own_frame_or_a_newer_one():
    frames = [(5, 10.0), (8, 13.5)]
    assert load.first_shown(frames, range(4, 10)) == {4: 10.0, 5: 10.0, 6: 13.5, 7: 13.5, 8: 13.5, 9: None}
    assert load.first_shown([], [1]) == {1: None}


def test_markers_are_read_from_frames_as_the_sockets_send_them():
    marks = {"gpu": "41", "link": "leaf:3"}
    pct = load.marker_pct(70)
    changed = {"40": {"util": 33.3, "temp": 61}, "41": {"util": float(pct)}, "42": {"temp": 60}}
    gpus = {"type": "delta", "topic": "gpus", "seq": 9, "data": {"gpus": changed}}
    assert load.frame_marker(broadcast.wire(gpus), marks) == ("delta", "gpus", 9, 70 % load.MARKER_PERIOD)
    fabric = {"type": "delta", "topic": "fabric", "seq": 4, "data": {
        "links": {"12": {"util": 0.07, "state": "up", "errors": False},
                  "leaf:3": {"util": pct / 100, "state": "up", "errors": False}},
        "switches": {"3": {"hottest": pct / 100}}}}  # fmt: skip
    assert load.frame_marker(broadcast.wire(fabric), marks) == ("delta", "fabric", 4, 70 % load.MARKER_PERIOD)
    snapshot = {"type": "snapshot", "topic": "fabric", "seq": 2, "data": {
        "switches": [{"id": 3, "name": "leaf01", "hottest": 0.3}],
        "links": [{"id": "leaf:3", "a": ["switch", 3], "b": ["node", "leaf:3"], "util": 0.3, "capacity_gbps": 400.0}],
        "aggregated": True}}  # fmt: skip
    assert load.frame_marker(broadcast.wire(snapshot), marks) == ("snapshot", "fabric", 2, 10)
    overview = {"type": "delta", "topic": "overview", "seq": 3, "data": {"utilisation": {"mean": pct / 100}}}
    assert load.frame_marker(broadcast.wire(overview), marks) == ("delta", "overview", 3, 70 % load.MARKER_PERIOD)
    other = {"type": "delta", "topic": "gpus", "seq": 10, "data": {"gpus": {"40": {"util": 12.0}}}}
    assert load.frame_marker(broadcast.wire(other), marks) == ("delta", "gpus", 10, None)  # the marker GPU is absent
    alerts = {"type": "delta", "topic": "alerts", "seq": 1, "data": {"upsert": [], "remove": [5]}}
    assert load.frame_marker(broadcast.wire(alerts), marks) == ("delta", "alerts", 1, None)


def test_binary_values_agree_with_the_reference_decoder():
    items = {str(1000 + i): {"util": round((i * 37 % 1000) / 10, 1), "temp": 40 + i % 30} for i in range(3000)}
    items["1500"] = {"temp": 70}  # util absent in this item
    message = broadcast.wire({"type": "delta", "topic": "gpus", "seq": 1, "data": {"gpus": items}})
    decoded = broadcast.decode(message)["data"]["gpus"]
    for gpu in ("1000", "1777", "3999", "1500"):
        _, value = load.binary_value(message, "gpus", gpu, "util")
        assert value == decoded[gpu].get("util")
    assert load.binary_value(message, "gpus", "9999", "util")[1] is None
