"""The queue's lines as one round leaves them: every waiting job's id in order and the number of its reason,
packed into bytes (`ClusterScheduler.queue_lines`).

At 50,000 waiting jobs the same lists as JSON were 540 KB that PostgreSQL parsed into jsonb every round
(30-40 ms of the round); packed they are about 280 KB that it stores as they are (about 2 ms).

Layout (QL2, written since the eighth stop of issue 16): b"QL2", the ids' array type ("i" or "q"), the reasons'
("H" or "I"), the count n as 4 bytes, then n job ids as 4-byte (while every id fits) or 8-byte signed integers and
n reason numbers as 2- or 4-byte unsigned ones, all little-endian. Not compressed: ids in queue order look random
to zlib, which took 7-8 ms a round to halve 8-byte ids, about what 4-byte ids save by themselves.

QL1, read still (rows written before): zlib (level 1) of b"QL1", the reasons' type, the count, 8-byte ids, reasons.
"""

from __future__ import annotations

import sys
import zlib
from array import array

MAGIC = b"QL2"
OLD_MAGIC = b"QL1"
_BIG_ENDIAN = sys.byteorder == "big"


class QueueLinesError(ValueError):
    """Bytes that are not packed queue lines."""


def pack(order: list[int], reasons: list[int]) -> bytes:
    """Job ids in queue order and, for each, the number of its reason."""
    if len(order) != len(reasons):
        raise ValueError(f"queue lines: {len(order)} jobs but {len(reasons)} reasons")
    try:
        ids = array("i", order)
    except OverflowError:
        ids = array("q", order)
    kind = "H" if not reasons or max(reasons) < 1 << 16 else "I"
    nums = array(kind, reasons)
    if _BIG_ENDIAN:
        ids.byteswap()
        nums.byteswap()
    head = MAGIC + ids.typecode.encode() + kind.encode() + len(order).to_bytes(4, "little")
    return head + ids.tobytes() + nums.tobytes()


def unpack(blob: bytes) -> tuple[list[int], list[int]]:
    """(job ids in queue order, their reason numbers); b"" is an empty queue. Raises QueueLinesError."""
    if not blob:
        return [], []
    if blob[:3] == MAGIC:
        id_kind, kind, start = blob[3:4].decode("latin-1"), blob[4:5].decode("latin-1"), 9
        if id_kind not in ("i", "q") or kind not in ("H", "I"):
            raise QueueLinesError(f"queue lines: unknown header {blob[:5]!r} (expected {MAGIC!r}, i or q, H or I)")
        n = int.from_bytes(blob[5:9], "little")
        raw = blob
    else:
        try:
            raw = zlib.decompress(blob)
        except zlib.error as exc:
            raise QueueLinesError(f"queue lines: neither {MAGIC!r} nor zlib data ({exc})") from None
        if raw[:3] != OLD_MAGIC or raw[3:4] not in (b"H", b"I"):
            raise QueueLinesError(f"queue lines: unknown header {raw[:4]!r} (expected {OLD_MAGIC!r} and H or I)")
        id_kind, kind, start = "q", raw[3:4].decode(), 8
        n = int.from_bytes(raw[4:8], "little")
    ids, nums = array(id_kind), array(kind)
    end_ids = start + n * ids.itemsize
    if len(raw) != end_ids + n * nums.itemsize:
        raise QueueLinesError(f"queue lines: {len(raw)} bytes do not hold the {n} jobs the header counts")
    ids.frombytes(raw[start:end_ids])
    nums.frombytes(raw[end_ids:])
    if _BIG_ENDIAN:
        ids.byteswap()
        nums.byteswap()
    return ids.tolist(), nums.tolist()
