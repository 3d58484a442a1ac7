"""The queue's lines packed into bytes (scheduler.queue_lines) and read back by the selectors."""

from __future__ import annotations

import logging
import zlib

import pytest

from scheduler import queue_lines
from scheduler.models import ClusterScheduler
from scheduler.rounds import run_round
from scheduler.selectors import queue_entries
from tests.scheduler.api.helpers import start


def test_lines_come_back_as_they_went_in():
    order, reasons = [7, 3, 2**40 + 5, 11], [0, 1, 0, 2]
    assert queue_lines.unpack(queue_lines.pack(order, reasons)) == (order, reasons)


def test_an_empty_queue_packs_and_reads_as_empty():
    assert queue_lines.unpack(queue_lines.pack([], [])) == ([], [])
    assert queue_lines.unpack(b"") == ([], [])


def test_reason_numbers_past_65535_take_four_bytes():
    raw = queue_lines.pack([1, 2], [70_000, 3])
    # "QL2", "i", "I", count 2, two 4-byte ids, two 4-byte reasons.
    assert raw[:5] == b"QL2iI" and len(raw) == 3 + 1 + 1 + 4 + 2 * 4 + 2 * 4
    assert queue_lines.unpack(raw) == ([1, 2], [70_000, 3])


def test_small_reason_numbers_take_two_bytes():
    raw = queue_lines.pack([1, 2, 3], [0, 65_535, 4])
    assert raw[:5] == b"QL2iH" and len(raw) == 9 + 3 * 4 + 3 * 2


def test_ids_past_four_bytes_take_eight():
    raw = queue_lines.pack([1, 2**31], [0, 0])
    assert raw[:5] == b"QL2qH" and len(raw) == 9 + 2 * 8 + 2 * 2
    assert queue_lines.unpack(raw) == ([1, 2**31], [0, 0])


def test_lines_written_before_in_the_first_layout_still_read():
    # QL1: zlib of "QL1", the reasons' type, the count, 8-byte ids, then the reasons (little-endian).
    body = (7).to_bytes(8, "little") + (2**40).to_bytes(8, "little") + (1).to_bytes(2, "little") + bytes(2)
    blob = zlib.compress(b"QL1H" + (2).to_bytes(4, "little") + body, 1)
    assert queue_lines.unpack(blob) == ([7, 2**40], [1, 0])


def test_a_job_without_a_reason_is_refused():
    with pytest.raises(ValueError, match="3 jobs but 2 reasons"):
        queue_lines.pack([1, 2, 3], [0, 0])


@pytest.mark.parametrize(
    ("blob", "says"),
    [
        (b"not zlib", "neither b'QL2' nor zlib data"),
        (b"QL2xH\x00\x00\x00\x00", "unknown header"),
        (b"QL2iH\x02\x00\x00\x00" + b"\x00" * 4, "do not hold the 2 jobs"),
        (zlib.compress(b"XYZH\x00\x00\x00\x00"), "unknown header"),
        (zlib.compress(b"QL1H\x02\x00\x00\x00" + b"\x00" * 8), "do not hold the 2 jobs"),
    ],
)
def test_bytes_that_are_not_queue_lines_say_what_is_wrong(blob, says):
    with pytest.raises(queue_lines.QueueLinesError, match=says):
        queue_lines.unpack(blob)


@pytest.mark.django_db
def test_a_round_writes_the_lines_the_selectors_read(site, submit):
    start(submit(site.tenant_b, site.default, "long", gpus=16, est_runtime_s=3600))
    first = submit(site.tenant_a, site.default, "first", gpus=8)
    second = submit(site.tenant_a, site.default, "second", gpus=8)
    run_round(site.cluster.pk, "test")
    row = ClusterScheduler.objects.get(cluster=site.cluster)
    assert queue_lines.unpack(bytes(row.queue_lines))[0] == [first.pk, second.pk]
    assert "order" not in row.queue and "reason" not in row.queue
    entries = queue_entries([site.cluster.pk])
    assert (entries[first.pk].position, entries[second.pk].position) == (1, 2)


@pytest.mark.django_db
def test_unreadable_lines_show_no_queue_and_are_logged(site, submit, caplog):
    start(submit(site.tenant_b, site.default, "long", gpus=16, est_runtime_s=3600))
    submit(site.tenant_a, site.default, "first", gpus=8)
    run_round(site.cluster.pk, "test")
    ClusterScheduler.objects.filter(cluster=site.cluster).update(queue_lines=b"garbage")
    with caplog.at_level(logging.WARNING, logger="scheduler.selectors"):
        assert queue_entries([site.cluster.pk]) == {}
    assert f"cluster {site.cluster.pk}: queue lines: neither b'QL2' nor zlib data" in caplog.text
