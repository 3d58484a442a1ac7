"""The compact wire form of the fabric and GPU topics (dashboard.broadcast.wire / decode; issue 16), worked by hand."""

from __future__ import annotations

import json
import struct

from dashboard import broadcast, parts

SWITCHES = [
    {"id": 10, "name": "leaf-1", "tier": 0, "hottest": 0.5},
    {"id": 11, "name": "spine-1", "tier": 1, "hottest": 0.25},
]
LINKS = [
    {"id": 100, "a": ["switch", 10], "b": ["switch", 11], "util": 0.5, "errors": False},
    {"id": 101, "a": ["switch", 10], "b": ["node", 7], "util": 0.25, "errors": True},
    {"id": 103, "a": ["switch", 11], "b": ["node", 7], "util": None, "errors": False},
]
FRAME = {
    "type": "snapshot",
    "topic": "fabric",
    "seq": 4,
    "data": {"switches": SWITCHES, "links": LINKS, "aggregated": False},
}


def split(message: bytes) -> tuple[dict, bytes]:
    (size,) = struct.unpack_from("<I", message, 0)
    return json.loads(message[4 : 4 + size]), message[4 + size :]


def test_two_switches_three_links_as_columns() -> None:
    message = broadcast.wire(FRAME)
    assert isinstance(message, bytes)
    header, body = split(message)
    assert (4 + len(json.dumps(header).encode()) > 0) and (len(message) - len(body)) % 4 == 0
    assert header["data"] == {"switches": {"$rows": 0}, "links": {"$rows": 1}, "aggregated": False}
    assert header["tables"] == [
        {"n": 2, "cols": [
            {"k": "id", "t": "u8", "e": "int", "base": 10, "o": 0},  # 10, 11: a byte each from 10
            {"k": "name", "t": "u8", "e": "table", "v": ["leaf-1", "spine-1"], "o": 4},
            {"k": "tier", "t": "u8", "e": "int", "base": 0, "o": 8},
            {"k": "hottest", "t": "u8", "e": "int", "base": 25, "s": 100, "o": 12},  # 50, 25 hundredths
        ]},
        {"n": 3, "cols": [
            {"k": "id", "t": "u8", "e": "int", "base": 100, "o": 16},
            {"k": "a", "t": "u8", "e": "table", "v": [["switch", 10], ["switch", 11]], "o": 20},
            {"k": "b", "t": "u8", "e": "table", "v": [["switch", 11], ["node", 7]], "o": 24},
            {"k": "util", "t": "u8", "e": "int", "base": 25, "null": 26, "s": 100, "o": 28},
            {"k": "errors", "t": "u8", "e": "table", "v": [False, True], "o": 32},
        ]},
    ]  # fmt: skip
    assert body == bytes([
        0, 1, 0, 0,  0, 1, 0, 0,  0, 1, 0, 0,  25, 0, 0, 0,  # switches: id, name, tier, hottest (each padded to 4)
        0, 1, 3, 0,  0, 0, 1, 0,  0, 1, 1, 0,  25, 0, 26, 0,  0, 1, 0, 0,  # links: id, a, b, util (null 26), errors
    ])  # fmt: skip
    assert broadcast.decode(message) == FRAME


def test_ascending_ids_go_as_steps_and_a_delta_names_only_what_changed() -> None:
    gpus = [{"id": 1000 + 3 * i, "util": 12.5 if i % 2 else None} for i in range(300)]
    frame = {"type": "snapshot", "topic": "gpus", "seq": 1, "data": {"gpus": gpus, "metrics": {"util": "%"}}}
    header, _ = split(broadcast.wire(frame))
    ids = header["tables"][0]["cols"][0]
    assert ids == {"k": "id", "t": "u8", "e": "delta", "first": 1000, "base": 3, "o": 0}  # steps of 3: raw 0 each
    assert header["tables"][0]["cols"][1]["s"] == 10 and header["data"]["metrics"] == {"util": "%"}
    assert broadcast.decode(broadcast.wire(frame)) == frame
    links = {"100": {"util": 0.5}, "7": {"state": "down", "util": 0.0}}
    delta = {"type": "delta", "topic": "fabric", "seq": 2, "data": {"links": links}}
    header, _ = split(broadcast.wire(delta))
    assert header["data"] == {"links": {"$byid": 0}}
    assert header["tables"][0]["cols"][1] == {"k": "util", "t": "u8", "e": "int", "base": 0, "s": 10, "o": 4}  # 5, 0
    state = {"k": "state", "t": "u8", "e": "table", "v": [None, "down"], "absent": 0, "o": 8}  # 100 has no state
    assert header["tables"][0]["cols"][2] == state
    assert broadcast.decode(broadcast.wire(delta)) == delta


def test_other_topics_and_floats_stay_exact() -> None:
    assert broadcast.wire({"type": "snapshot", "topic": "queue", "seq": 0, "data": {"pending": []}}) == (
        '{"type":"snapshot","topic":"queue","seq":0,"data":{"pending":[]}}'
    )
    nodes = [{"id": 1, "x": 0.123456, "hosts": ["a", "b"]}, {"id": 2, "x": 7.5, "hosts": []}]
    frame = {"type": "snapshot", "topic": "fabric", "seq": 0, "data": {"nodes": nodes}}
    assert broadcast.decode(broadcast.wire(frame)) == frame


def test_a_table_column_keeps_one_one_point_oh_true_and_the_string_apart_and_merges_equal_objects() -> None:
    values = [1, 1.0, True, "1", None, 1, {"a": 1, "b": 2}, {"b": 2, "a": 1}, [1], True]
    spec, body = broadcast._table_column(values)
    assert spec == {"t": "u8", "e": "table", "v": [1, 1.0, True, "1", None, {"a": 1, "b": 2}, [1]]}
    assert list(body) == [0, 1, 2, 3, 4, 0, 5, 5, 6, 2]


def test_a_message_within_the_part_size_goes_as_it_is() -> None:
    message = b"\x08\x00\x00\x00" + b"x" * 100

    assert parts.parts(message) == [message]
    assert parts.parts("short text") == ["short text"]


def test_a_long_binary_message_goes_in_parts_that_join_back(monkeypatch) -> None:
    monkeypatch.setattr(parts, "PART_BYTES", 64)
    message = bytes(range(256)) * 2  # 512 bytes; 64 - 16 header = 48 bytes a part -> 11 parts

    pieces = parts.parts(message)

    assert len(pieces) == 11 and all(len(p) <= 64 for p in pieces)
    mark, _, index, count, kind = struct.unpack_from("<IIHHI", pieces[3])
    assert (mark, index, count, kind) == (0xFFFFFFFF, 3, 11, 0)
    assert pieces[3][16:] == message[3 * 48 : 4 * 48]
    joiner = parts.Joiner()
    assert [joiner.feed(p) for p in pieces] == [None] * 10 + [message]


def test_a_long_text_message_joins_back_as_text(monkeypatch) -> None:
    monkeypatch.setattr(parts, "PART_BYTES", 40)
    message = json.dumps({"topic": "queue", "data": "é" * 50})  # 2 bytes a character: cut inside one is fine

    pieces = parts.parts(message)

    joiner = parts.Joiner()
    assert len(pieces) > 1 and all(isinstance(p, bytes) for p in pieces)
    assert [joiner.feed(p) for p in pieces][-1] == message


def test_a_part_out_of_order_drops_its_message_and_the_next_joins(monkeypatch) -> None:
    monkeypatch.setattr(parts, "PART_BYTES", 32)
    first, second = bytes(range(100)), bytes(range(100, 200))
    a, b = parts.parts(first), parts.parts(second)
    joiner = parts.Joiner()

    got = [joiner.feed(p) for p in [a[0], b[1], *a[1:]]]  # b's second part where a's should be

    assert got == [None] * (len(a) + 1)
    assert [joiner.feed(p) for p in b][-1] == second


def test_a_frame_of_the_fabric_in_parts_decodes_as_the_frame(monkeypatch) -> None:
    monkeypatch.setattr(parts, "PART_BYTES", 128)
    joiner = parts.Joiner()

    whole = [m for p in parts.parts(broadcast.wire(FRAME)) if (m := joiner.feed(p)) is not None]

    assert [broadcast.decode(m) for m in whole] == [FRAME]


def test_a_column_of_strings_is_a_table_in_first_seen_order() -> None:
    spec, body = broadcast._table_column(["gpu0002", "gpu0001", "gpu0002", "gpu0003"])
    assert spec == {"t": "u8", "e": "table", "v": ["gpu0002", "gpu0001", "gpu0003"]}
    assert list(body) == [0, 1, 0, 2]


def test_integers_keep_their_nones_and_decimals_their_scale() -> None:
    assert broadcast._ints([3, None, 5]) == ([3, None, 5], 1)
    assert broadcast._ints([1.5, None, 2.25]) == ([150, None, 225], 100)
    assert broadcast._ints([0.001, 1.0]) is None  # three decimals: not an integer column
    assert broadcast._ints([True, False]) is None
