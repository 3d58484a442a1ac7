"""The fabric in the formats schedulers read (docs/integrations.md): one entry point for the command and the API.

    export = export_cluster(cluster, "slurm-tree")     # Export(text, media_type, filename); ExportRefused: why not

The formats are written by the pure `fabric.topology.export` from `fabric.graph_from_db.export_input_for_cluster`.
"""

from __future__ import annotations

from fabric.graph_from_db import export_input_for_cluster
from fabric.models import Cluster
from fabric.topology.export import Export, ExportRefused, format_names, render

FORMATS: tuple[str, ...] = tuple(format_names())

__all__ = ["FORMATS", "Export", "ExportRefused", "export_cluster"]


def export_cluster(cluster: Cluster, fmt: str) -> Export:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; the formats are {', '.join(FORMATS)}")
    return render(export_input_for_cluster(cluster), fmt)
