"""Collectors by name, each a class named by dotted path in settings.COLLECTORS (so a site can plug its own).

A collector setting names one collector (`nvml`), several joined by "," or "+" (`nvml,sysfs-ib`: one sample per
node out of all of them, fabric.collectors.combined), or `auto` (nvml and sysfs-ib, each where the host has its
hardware). `collector_parts` checks such a name; `get_collector` makes the collector it names; `agent_collector` is
the one a node agent keeps from poll to poll; `check_settings` refuses a setting naming an unknown collector at start.
"""

from __future__ import annotations

import inspect
import re
import threading
from typing import Any, Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from fabric.collectors.combined import AutoCollector, CombinedCollector
from fabric.collectors.samples import NodeSample

AUTO = "auto"
AUTO_PARTS = ("nvml", "sysfs-ib")
_SEPARATOR = re.compile(r"[,+]")


class Collector(Protocol):
    def collect(self, node: str) -> NodeSample: ...


class UnknownCollector(KeyError):
    pass


def collector_names() -> list[str]:
    return sorted(settings.COLLECTORS)


def _known() -> str:
    return (
        f"configured: {', '.join(collector_names())}; also {AUTO} ({','.join(AUTO_PARTS)} where the host has them), "
        "or several joined by ',' (nvml,sysfs-ib)"
    )


def collector_parts(spec: str) -> list[str]:
    """The collectors a setting names, in order: "nvml,sysfs-ib" -> ["nvml", "sysfs-ib"], "auto" -> ["auto"].
    UnknownCollector names the name that is wrong and the setting it is in."""
    names = [name.strip() for name in _SEPARATOR.split(spec)]
    where = "" if len(names) == 1 else f" in {spec!r}"
    if not all(names):
        raise UnknownCollector(f"collector {spec!r} has an empty name (a separator at an end or two in a row)")
    for name in names:
        if name == AUTO and len(names) > 1:
            raise UnknownCollector(f"{AUTO} stands alone{where}: it is {','.join(AUTO_PARTS)} already")
        if name != AUTO and name not in settings.COLLECTORS:
            raise UnknownCollector(f"unknown collector {name!r}{where}; {_known()}")
        if names.count(name) > 1:
            raise UnknownCollector(f"collector {name!r} is named twice{where}")
    return names


def _make(name: str, options: dict[str, Any]) -> Collector:
    cls = import_string(settings.COLLECTORS[name])
    return cls(**options)


def _accepted(name: str) -> set[str]:
    return set(inspect.signature(import_string(settings.COLLECTORS[name])).parameters)


def get_collector(name: str, **options: Any) -> Collector:
    """An instance of the named collector (one name, several joined by ",", or auto), given only the options its
    constructor accepts. For several (and auto), each option goes to every part that takes it (--root to sysfs-ib,
    ...; auto's own: pci_root, nvidia_proc) and each part also gets its own COLLECTOR_OPTIONS entry under them, as
    poll_node gives a single collector its entry; an option none of them takes is refused."""
    given = {k: v for k, v in options.items() if v is not None}
    names = collector_parts(name)
    if names != [AUTO] and len(names) == 1:
        (name,) = names
        unknown = [k for k in given if k not in _accepted(name)]
        if unknown:
            raise TypeError(f"collector {name} takes no {', '.join('--' + k for k in unknown)}")
        return _make(name, given)
    auto = names == [AUTO]
    parts = list(AUTO_PARTS) if auto else names
    accepted = {part: _accepted(part) for part in parts}
    auto_options = set(inspect.signature(AutoCollector).parameters) - {"parts"} if auto else set()
    unknown = [k for k in given if k not in auto_options and not any(k in a for a in accepted.values())]
    if unknown:
        raise TypeError(f"collector {name} takes no {', '.join('--' + k for k in unknown)} (none of its parts does)")

    def factory(part: str):
        configured = settings.COLLECTOR_OPTIONS.get(part, {})
        part_options = {**configured, **{k: v for k, v in given.items() if k in accepted[part]}}
        return lambda: _make(part, part_options)

    factories = [(part, factory(part)) for part in parts]
    if auto:
        return AutoCollector(factories, **{k: v for k, v in given.items() if k in auto_options})
    return CombinedCollector(factories)


def reads_centrally(name: str) -> bool:
    """True when every collector `name` names reads any node from wherever it runs (class attribute `central`: the
    twin, a stand-in for all their hardware that reads the database), so one central task may read many nodes. Not
    auto, nor a name that is not configured."""
    try:
        names = collector_parts(name)
    except UnknownCollector:
        return False
    return names != [AUTO] and all(getattr(import_string(settings.COLLECTORS[n]), "central", False) for n in names)


_kept = threading.local()  # per worker thread: name -> (the settings it was made from, the collector)


def agent_collector(name: str) -> Collector:
    """The collector a node agent polls with for `name`, with its COLLECTOR_OPTIONS entry: made on the first poll and
    kept for the next ones (per worker thread), as long as COLLECTORS and COLLECTOR_OPTIONS stay the same. What a
    collector keeps between polls needs that: NVML initialised once and its XID event set (a new one each poll would
    miss the XIDs raised between polls and leak an event set a poll), the prometheus collector's last XID per GPU
    (else an old XID is reported as new every poll), auto's parts found once."""
    made_from = (
        name,
        dict(settings.COLLECTORS),
        {key: dict(value) for key, value in settings.COLLECTOR_OPTIONS.items()},
    )
    kept = getattr(_kept, "collectors", None)
    if kept is None:
        kept = _kept.collectors = {}
    entry = kept.get(name)
    if entry is None or entry[0] != made_from:
        entry = kept[name] = (made_from, get_collector(name, **settings.COLLECTOR_OPTIONS.get(name, {})))
    return entry[1]


def check_settings() -> None:
    """At start (fabric's AppConfig.ready, in every process): TELEMETRY_COLLECTOR names collectors there are, and
    TELEMETRY_SWITCH_COLLECTOR one of them; else ImproperlyConfigured naming the setting and the wrong name."""
    value = settings.TELEMETRY_COLLECTOR
    if value:
        try:
            collector_parts(value)
        except UnknownCollector as exc:
            raise ImproperlyConfigured(f"TELEMETRY_COLLECTOR={value!r}: {exc.args[0]}") from None
    switch = settings.TELEMETRY_SWITCH_COLLECTOR
    if switch and switch not in settings.COLLECTORS:
        raise ImproperlyConfigured(
            f"TELEMETRY_SWITCH_COLLECTOR={switch!r}: unknown collector (it reads switch ports: one collector, "
            f"perfquery or twin); configured: {', '.join(collector_names())}"
        )
