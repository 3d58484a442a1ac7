"""The queue's lines as one round leaves them: every waiting job's id in order and the number of its reason,
packed into bytes (`ClusterScheduler.queue_lines`).

At 50,000 waiting jobs the same lists as JSON were 540 KB that PostgreSQL parsed into jsonb every round
(30-40 ms of the round); packed they are about 190 KB that it stores as they are (about 6 ms in all).

Layout, before zlib (level 1): b"QL1", the reasons' array type ("H" or "I"), the count n as 4 bytes, then n job
ids as 8-byte signed integers and n reason numbers as 2- or 4-byte unsigned ones, all little-endian.
"""

from __future__ import annotations

import sys
import zlib
from array import array

MAGIC = b"QL1"
_BIG_ENDIAN = sys.byteorder == "big"


class QueueLinesError(ValueError):
    """Bytes that are not packed queue lines."""


def pack(order: list[int], reasons: list[int]) -> bytes:
    """Job ids in queue order and, for each, the number of its reason."""
    if len(order) != len(reasons):
        raise ValueError(f"queue lines: {len(order)} jobs but {len(reasons)} reasons")
    ids = array("q", order)
    kind = "H" if not reasons or max(reasons) < 1 << 16 else "I"
    nums = array(kind, reasons)
    if _BIG_ENDIAN:
        ids.byteswap()
        nums.byteswap()
    head = MAGIC + kind.encode() + len(order).to_bytes(4, "little")
    return zlib.compress(head + ids.tobytes() + nums.tobytes(), 1)


def unpack(blob: bytes) -> tuple[list[int], list[int]]:
    """(job ids in queue order, their reason numbers); b"" is an empty queue. Raises QueueLinesError."""
    if not blob:
        return [], []
    try:
        raw = zlib.decompress(blob)
    except zlib.error as exc:
        raise QueueLinesError(f"queue lines: not zlib data ({exc})") from None
    if raw[:3] != MAGIC or raw[3:4] not in (b"H", b"I"):
        raise QueueLinesError(f"queue lines: unknown header {raw[:4]!r} (expected {MAGIC!r} and H or I)")
    kind = raw[3:4].decode()
    n = int.from_bytes(raw[4:8], "little")
    ids, nums = array("q"), array(kind)
    end_ids = 8 + n * ids.itemsize
    if len(raw) != end_ids + n * nums.itemsize:
        raise QueueLinesError(f"queue lines: {len(raw)} bytes do not hold the {n} jobs the header counts")
    ids.frombytes(raw[8:end_ids])
    nums.frombytes(raw[end_ids:])
    if _BIG_ENDIAN:
        ids.byteswap()
        nums.byteswap()
    return ids.tolist(), nums.tolist()
