"""Pure fabric analysis: dataclasses in (`types.Fabric`), results out. No Django, no I/O.

    from fabric.topology import analyse, render_text, HopIndex
    report = analyse(fabric)            # FabricReport; report.to_dict() for JSON
    print(render_text(report))
    HopIndex.build(fabric).distance("gpu0001", "gpu0042")   # Distance(hops, level)

`fabric.topology.convert.fabric_from_parsed` turns an importer's ParsedFabric into a Fabric
(not re-exported here, so importing this package never pulls in the importers).
"""

from fabric.topology.distance import Distance, HopIndex
from fabric.topology.report import FabricReport, analyse, analyse_graph, render_text

__all__ = ["Distance", "FabricReport", "HopIndex", "analyse", "analyse_graph", "render_text"]
