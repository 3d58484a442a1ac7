"""Pausing the cyclic garbage collector around a burst of short-lived objects."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside the block (restored after, as it was). For work that allocates many short-lived
    objects in a process holding many long-lived ones: the collections those allocations set off walk the long-lived
    ones too, at a cost out of all proportion to the work (a telemetry poll, a broadcast of the live views). Reference
    counting still frees what the block drops."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
