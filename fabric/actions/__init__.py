"""Every state change of the fabric app, by area. Views, admin, API, tasks and commands call these.

Each action is one transaction: either everything it describes is stored or nothing is. Events go out after commit
(fabric.events). The readers the actions use (link_state, the alert keys' GPU and link) are in fabric.selectors.

- imports: a parsed fabric or one server's topology applied (upsert by GUID, cabling, vanished links, tiers);
- hosts: naming hosts, HCAs onto hosts (by hand, from a node agent), a host's CPU and memory for jobs;
- inventory: clusters, switch tiers, node states, links, the admin's and API's edits;
- alerts: health findings -> alerts and the capacity they take or give back, acknowledgements;
- rollups: the time series' minute and hour rollups and retention;
- common, errors: what the modules share (the cluster lock, batches; ActionError).

Lock order: the cluster row before any node or HCA row (common.lock_cluster), as import_fabric takes them.
"""

from fabric.actions.alerts import (
    TELEMETRY_REASON,
    acknowledge_alert,
    acknowledge_alerts,
    record_cluster_findings,
    record_findings,
    record_node_findings,
)
from fabric.actions.errors import ActionError
from fabric.actions.hosts import (
    HOST_FIELDS,
    HOST_MAX,
    HOST_RESOURCES,
    UNSET,
    ClaimResult,
    attach_hca,
    claim_hcas,
    name_host,
    record_host_resources,
    set_host_resources,
)
from fabric.actions.imports import (
    ALL_FORMATS,
    ImportSummary,
    Progress,
    generate_fabric,
    get_or_create_cluster,
    import_fabric,
    import_node_topology,
    import_text,
    no_progress,
)
from fabric.actions.inventory import (
    create_cluster,
    delete_cluster,
    detect_switch_roles,
    save_inventory_object,
    save_link_ports,
    set_node_state,
    update_inventory_object,
)
from fabric.actions.rollups import (
    ROLLUP_CHUNK_BUCKETS,
    ROLLUP_LATE_BUCKETS,
    ROLLUP_MAX_CHUNKS,
    prune_metrics,
    rollup_metrics,
)

__all__ = [
    "ALL_FORMATS",
    "HOST_FIELDS",
    "HOST_MAX",
    "HOST_RESOURCES",
    "ROLLUP_CHUNK_BUCKETS",
    "ROLLUP_LATE_BUCKETS",
    "ROLLUP_MAX_CHUNKS",
    "TELEMETRY_REASON",
    "UNSET",
    "ActionError",
    "ClaimResult",
    "ImportSummary",
    "Progress",
    "acknowledge_alert",
    "acknowledge_alerts",
    "attach_hca",
    "claim_hcas",
    "create_cluster",
    "delete_cluster",
    "detect_switch_roles",
    "generate_fabric",
    "get_or_create_cluster",
    "import_fabric",
    "import_node_topology",
    "import_text",
    "name_host",
    "no_progress",
    "prune_metrics",
    "record_cluster_findings",
    "record_findings",
    "record_host_resources",
    "record_node_findings",
    "rollup_metrics",
    "save_inventory_object",
    "save_link_ports",
    "set_host_resources",
    "set_node_state",
    "update_inventory_object",
]
