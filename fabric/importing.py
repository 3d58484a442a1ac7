"""Read a file in one of the supported formats and apply it: shared by the command and the API."""

from __future__ import annotations

from typing import Any

from fabric import actions
from fabric.importers import FORMATS, parse_nvidia_topo
from fabric.importers.types import ParseError

TOPOLOGY_FORMAT = "nvidia-topo"
ALL_FORMATS = (*FORMATS, TOPOLOGY_FORMAT)


def import_text(
    cluster: str,
    fmt: str,
    text: str,
    *,
    source: str = "",
    node: str = "",
    progress: actions.Progress = actions.no_progress,
) -> dict[str, Any]:
    """Parse `text` as `fmt` and store it in `cluster`. Raises ParseError / ActionError; stores nothing then."""
    if fmt == TOPOLOGY_FORMAT:
        if not node:
            raise actions.ActionError("format nvidia-topo describes one server: name it (--node HOST)")
        topo = parse_nvidia_topo(text, source=source)
        return actions.import_node_topology(cluster, node, topo, source=source)
    if fmt not in FORMATS:
        raise actions.ActionError(f"unknown format {fmt!r}; use one of {', '.join(ALL_FORMATS)}")
    parsed = FORMATS[fmt](text, source=source)
    progress(
        f"parsed {len(parsed.switches)} switches, {len(parsed.cas)} channel adapters, {len(parsed.links)} links"
        + (f", {len(parsed.warnings)} warnings" if parsed.warnings else "")
    )
    return actions.import_fabric(cluster, parsed, fmt=fmt, source=source, progress=progress).to_dict()


__all__ = ["ALL_FORMATS", "ParseError", "import_text"]
