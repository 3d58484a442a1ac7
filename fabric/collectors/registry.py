"""Collectors by name, each a class named by dotted path in settings.COLLECTORS (so a site can plug its own)."""

from __future__ import annotations

import inspect
from typing import Any, Protocol

from django.conf import settings
from django.utils.module_loading import import_string

from fabric.collectors.samples import NodeSample


class Collector(Protocol):
    def collect(self, node: str) -> NodeSample: ...


class UnknownCollector(KeyError):
    pass


def collector_names() -> list[str]:
    return sorted(settings.COLLECTORS)


def get_collector(name: str, **options: Any) -> Collector:
    """An instance of the named collector, given only the options its constructor accepts."""
    try:
        path = settings.COLLECTORS[name]
    except KeyError:
        raise UnknownCollector(f"unknown collector {name!r}; configured: {', '.join(collector_names())}") from None
    cls = import_string(path)
    accepted = inspect.signature(cls).parameters
    unknown = [k for k, v in options.items() if v is not None and k not in accepted]
    if unknown:
        raise TypeError(f"collector {name} takes no {', '.join('--' + k for k in unknown)}")
    return cls(**{k: v for k, v in options.items() if v is not None})
