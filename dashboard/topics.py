"""The live views' topics: what a page can subscribe to, each built by dashboard.selectors and pushed by
dashboard.broadcast (both read the names from here, so neither imports the other for them)."""

from __future__ import annotations

FABRIC_TOPICS: tuple[str, ...] = ("overview", "fabric", "gpus", "alerts")
QUEUE_TOPICS: tuple[str, ...] = ("queue",)
TOPICS: tuple[str, ...] = FABRIC_TOPICS + QUEUE_TOPICS
