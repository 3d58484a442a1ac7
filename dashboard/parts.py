"""No WebSocket message over PART_BYTES, whatever the cluster's size (issue 16). No Django here: the load
generator's clients (bench/bench_push_load.py) join parts with it too.

A message (text or binary, as `dashboard.broadcast.wire` makes it) longer than PART_BYTES goes as consecutive binary
messages, each a 16-byte header (little-endian uint32 PART_MARK, uint32 message id, uint16 part index, uint16 part
count, uint32 kind: 0 binary, 1 UTF-8 text) and the next slice of the message. A socket sends a message's parts one
after the other (a consumer handles one event at a time), so the page joins them in order and decodes the whole as
usual (dashboard/static/dashboard/live.js, `Joiner`). PART_MARK cannot start a binary frame: that starts with the
length of its JSON header. At 10,000 servers the fabric snapshot is about 2 MB: whole, daphne (1 MiB limit by
default) refused it and the page never drew.
"""

from __future__ import annotations

import itertools
import struct

PART_BYTES = 256 * 1024
PART_MARK = 0xFFFFFFFF
_PART_HEADER = struct.Struct("<IIHHI")
_part_ids = itertools.count(1)


def parts(message: str | bytes) -> list[str | bytes]:
    """The WebSocket messages that carry `message`: itself when it is at most PART_BYTES, else its parts."""
    raw = message.encode() if isinstance(message, str) else message
    if len(raw) <= PART_BYTES:
        return [message]
    kind = 1 if isinstance(message, str) else 0
    step = PART_BYTES - _PART_HEADER.size
    count = -(-len(raw) // step)
    mid = next(_part_ids) & 0xFFFFFFFF
    view = memoryview(raw)
    return [_PART_HEADER.pack(PART_MARK, mid, i, count, kind) + view[i * step : (i + 1) * step] for i in range(count)]


class Joiner:
    """Whole messages back from the messages of one socket, in order (the reference for live.js; tests, benches)."""

    def __init__(self) -> None:
        self._id: int | None = None
        self._pieces: list[bytes] = []

    def feed(self, message: str | bytes) -> str | bytes | None:
        """The whole message this one completes (a message that is not a part is whole), else None."""
        if isinstance(message, str) or len(message) < _PART_HEADER.size:
            return message
        mark, mid, index, count, kind = _PART_HEADER.unpack_from(message)
        if mark != PART_MARK:
            return message
        if index == 0:
            self._id, self._pieces = mid, []
        elif mid != self._id or index != len(self._pieces):
            self._id, self._pieces = None, []  # a part out of order: drop the message (the seq gap resyncs)
            return None
        self._pieces.append(bytes(message[_PART_HEADER.size :]))
        if len(self._pieces) < count:
            return None
        whole = b"".join(self._pieces)
        self._id, self._pieces = None, []
        return whole.decode() if kind == 1 else whole
