"""Operator admin for the inventory, tuned for tens of thousands of rows.

Saves go through fabric.actions so derived fields (link capacity and state, detected tiers) follow edits.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.paginator import Paginator
from django.utils.functional import cached_property
from django.utils.html import format_html

from clusterctl.admin_paginators import EstimatedCountPaginator
from fabric import actions
from fabric.choices import AlertSeverity, GpuHealth, LinkState, NodeState, PortState, SwitchRole
from fabric.models import GPU, HCA, Alert, Cluster, ImportRecord, Link, Node, NodeTopology, Port, Switch
from fabric.models.telemetry import GpuMetric, GpuMetricRollup, PortMetric, PortMetricRollup


def badge(choices, value: str, label: str):
    return format_html(
        '<span style="display:inline-block;width:.8em;height:.8em;border-radius:50%;background:{};'
        'margin-right:.4em;vertical-align:middle"></span>{}',
        choices.colour(value),
        label,
    )


class ApproximatePaginator(Paginator):
    """Large tables: skip the exact COUNT(*) of filtered lists after a cap, like healthchecks does."""

    @cached_property
    def count(self) -> int:
        return self.object_list[:100_001].count() if hasattr(self.object_list, "count") else len(self.object_list)


class ActionsSaveMixin:
    def save_model(self, request, obj, form, change):
        actions.save_inventory_object(obj, form.changed_data if change else ())


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "description", "created", "updated"]
    search_fields = ["name", "description"]


@admin.register(ImportRecord)
class ImportRecordAdmin(admin.ModelAdmin):
    list_display = ["created", "cluster", "format", "source"]
    list_filter = ["cluster", "format"]
    list_select_related = ["cluster"]
    readonly_fields = ["cluster", "format", "source", "created", "summary"]

    def has_add_permission(self, request):
        return False


class SwitchPortInline(admin.TabularInline):
    model = Port
    fk_name = "switch"
    fields = ["number", "width", "speed", "supported_speed", "state", "link"]
    readonly_fields = ["link"]
    extra = 0
    show_change_link = True


class HcaPortInline(SwitchPortInline):
    fk_name = "hca"
    fields = ["number", "guid", "lid", "width", "speed", "supported_speed", "state", "link"]


@admin.register(Switch)
class SwitchAdmin(ActionsSaveMixin, admin.ModelAdmin):
    list_display = ["name", "cluster", "role_badge", "role_source", "model", "port_count", "lid", "guid", "rack"]
    list_filter = ["cluster", "role", "role_source", "model"]
    search_fields = ["name", "guid", "description", "rack"]
    list_select_related = ["cluster"]
    readonly_fields = ["role_source"]
    inlines = [SwitchPortInline]
    paginator = ApproximatePaginator
    show_full_result_count = False

    @admin.display(description="role", ordering="role")
    def role_badge(self, obj):
        return badge(SwitchRole, obj.role, obj.get_role_display())


class GpuInline(admin.TabularInline):
    model = GPU
    fields = ["index", "uuid", "model", "memory_mib", "nvlink_gbps", "mig_capable", "mig_enabled", "health"]
    extra = 0
    show_change_link = True


class HcaInline(admin.TabularInline):
    model = HCA
    fields = ["device", "guid", "system_guid", "kind", "description"]
    extra = 0
    show_change_link = True


@admin.register(Node)
class NodeAdmin(ActionsSaveMixin, admin.ModelAdmin):
    # "unnamed": the fabric named no host for its HCAs; rename it (the hostname is a placeholder).
    list_display = [
        "hostname", "cluster", "role", "state_badge", "state_reason", "gpu_model", "rack", "host_cpus", "host_memory",
        "unnamed",
    ]  # fmt: skip
    list_filter = ["cluster", "state", "role", "gpu_model", "unnamed", "cpu_milli_manual", "memory_mib_manual"]
    search_fields = ["hostname", "rack", "nvlink_domain", "hcas__guid", "gpus__uuid", "system_guid"]
    list_select_related = ["cluster"]
    # Host CPU and memory jobs may take: the node agent's report unless an operator typed a value (kept, "set");
    # clearing "manual" follows the agent again (fabric.actions.set_host_resources).
    readonly_fields = ["reported_cpu_milli", "reported_memory_mib"]
    inlines = [GpuInline, HcaInline]
    actions = ["drain", "undrain", "mark_down", "follow_agent"]
    paginator = ApproximatePaginator
    show_full_result_count = False

    @admin.display(description="state", ordering="state")
    def state_badge(self, obj):
        return badge(NodeState, obj.state, obj.get_state_display())

    @staticmethod
    def _host(value: str, tracked: bool, manual: bool) -> str:
        if not tracked:
            return "not tracked (set)" if manual else "-"
        return f"{value} (set)" if manual else value

    @admin.display(description="CPUs for jobs", ordering="cpu_milli")
    def host_cpus(self, obj):
        return self._host(f"{obj.cpu_milli / 1000:g}", obj.cpu_milli > 0, obj.cpu_milli_manual)

    @admin.display(description="memory for jobs", ordering="memory_mib")
    def host_memory(self, obj):
        return self._host(f"{obj.memory_mib} MiB", obj.memory_mib > 0, obj.memory_mib_manual)

    def _set_state(self, request, queryset, state: str, reason: str) -> None:
        n = actions.set_node_state(queryset, state, reason=f"{reason} by {request.user}")
        self.message_user(request, f"{n} node(s) now {NodeState(state).label.lower()}.", messages.SUCCESS)

    @admin.action(description="Drain selected nodes (no new jobs)")
    def drain(self, request, queryset):
        self._set_state(request, queryset, NodeState.DRAIN, "drained")

    @admin.action(description="Undrain selected nodes (back to up)")
    def undrain(self, request, queryset):
        self._set_state(request, queryset, NodeState.UP, "undrained")

    @admin.action(description="Mark selected nodes down")
    def mark_down(self, request, queryset):
        self._set_state(request, queryset, NodeState.DOWN, "marked down")

    @admin.action(description="Give jobs the CPUs and memory the node agent reports (drop values set by hand)")
    def follow_agent(self, request, queryset):
        nodes = list(queryset)
        for node in nodes:
            actions.set_host_resources(node, cpu_milli=None, memory_mib=None)
        self.message_user(request, f"{len(nodes)} node(s) follow their agent's CPU and memory.", messages.SUCCESS)


@admin.register(HCA)
class HcaAdmin(ActionsSaveMixin, admin.ModelAdmin):
    list_display = ["__str__", "cluster", "node", "device", "kind", "guid", "unnamed_host"]
    list_filter = ["cluster", "kind", "node__unnamed"]
    search_fields = ["guid", "device", "description", "node__hostname", "ports__guid", "system_guid"]
    list_select_related = ["cluster", "node"]
    raw_id_fields = ["node"]
    inlines = [HcaPortInline]
    paginator = ApproximatePaginator
    show_full_result_count = False

    @admin.display(description="unnamed HCA", boolean=True)
    def unnamed_host(self, obj):
        return obj.unnamed


@admin.register(Port)
class PortAdmin(ActionsSaveMixin, admin.ModelAdmin):
    list_display = ["__str__", "cluster", "width", "speed", "supported_speed", "state_badge", "lid", "guid", "link_id"]
    list_filter = ["cluster", "state", "speed"]
    search_fields = ["guid", "switch__name", "switch__guid", "hca__guid", "hca__node__hostname"]
    list_select_related = ["cluster", "switch", "hca__node"]
    raw_id_fields = ["switch", "hca"]
    readonly_fields = ["link", "link_end"]
    paginator = ApproximatePaginator
    show_full_result_count = False

    @admin.display(description="state", ordering="state")
    def state_badge(self, obj):
        return badge(PortState, obj.state, obj.get_state_display())


@admin.register(Link)
class LinkAdmin(admin.ModelAdmin):
    list_display = [
        "id", "cluster", "end_a", "end_b", "rate_label", "capacity_gbps", "state_badge", "state_reason", "loopback",
    ]  # fmt: skip
    list_filter = ["cluster", "state", "speed", "loopback"]
    search_fields = ["ports__switch__name", "ports__hca__node__hostname", "ports__guid", "ports__switch__guid"]
    list_select_related = ["cluster"]
    readonly_fields = [
        "width", "speed", "capacity_gbps", "supported_gbps", "state", "state_reason", "last_seen", "loopback",
    ]  # fmt: skip
    actions = ["recompute"]
    paginator = ApproximatePaginator
    show_full_result_count = False

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("ports__switch", "ports__hca__node")

    def has_add_permission(self, request):
        return False  # links come from imports, where both ports are known

    @admin.display(description="end A")
    def end_a(self, obj):
        return obj.end("a")

    @admin.display(description="end B")
    def end_b(self, obj):
        return obj.end("b")

    @admin.display(description="state", ordering="state")
    def state_badge(self, obj):
        return badge(LinkState, obj.state, obj.get_state_display())

    @admin.action(description="Recompute rate and state from the ports")
    def recompute(self, request, queryset):
        for link in queryset.prefetch_related("ports"):
            actions.save_link_ports(link)
        self.message_user(request, "Recomputed.", messages.SUCCESS)


@admin.register(GPU)
class GpuAdmin(ActionsSaveMixin, admin.ModelAdmin):
    list_display = ["__str__", "model", "memory_mib", "nvlink_gbps", "mig_capable", "mig_enabled", "health_badge"]
    list_filter = ["node__cluster", "model", "health", "mig_enabled"]
    search_fields = ["uuid", "node__hostname"]
    list_select_related = ["node"]
    raw_id_fields = ["node"]
    paginator = ApproximatePaginator
    show_full_result_count = False

    @admin.display(description="health", ordering="health")
    def health_badge(self, obj):
        return badge(GpuHealth, obj.health, obj.get_health_display())


@admin.register(NodeTopology)
class NodeTopologyAdmin(admin.ModelAdmin):
    list_display = ["node", "updated"]
    search_fields = ["node__hostname"]
    list_select_related = ["node"]
    raw_id_fields = ["node"]


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ["last_seen", "cluster", "severity_badge", "rule", "object_key", "message", "cleared_at",
                    "acknowledged_by"]  # fmt: skip
    list_filter = ["cluster", "severity", "rule", ("cleared_at", admin.EmptyFieldListFilter)]
    search_fields = ["object_key", "message"]
    list_select_related = ["cluster"]
    readonly_fields = [f.name for f in Alert._meta.fields]
    actions = ["acknowledge"]
    paginator = ApproximatePaginator
    show_full_result_count = False

    def has_add_permission(self, request):
        return False  # alerts come from health rules

    @admin.display(description="severity", ordering="severity")
    def severity_badge(self, obj):
        return badge(AlertSeverity, obj.severity, obj.get_severity_display())

    @admin.action(description="Acknowledge selected alerts")
    def acknowledge(self, request, queryset):
        for alert in queryset:
            actions.acknowledge_alert(alert, actor=str(request.user))
        self.message_user(request, "Acknowledged.", messages.SUCCESS)


#
# Time series: read-only (ingest and the rollup task write them, retention deletes them), millions of rows, so
# no full COUNT(*) (EstimatedCountPaginator), newest first by primary key, no per-row queries.
#


class TimeSeriesAdmin(admin.ModelAdmin):
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    ordering = ["-pk"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(GpuMetric)
class GpuMetricAdmin(TimeSeriesAdmin):
    list_display = ["at", "gpu", "utilisation_pct", "memory_used_mib", "temperature_c", "power_w"]
    list_filter = ["gpu__node__cluster"]
    list_select_related = ["gpu__node"]


@admin.register(PortMetric)
class PortMetricAdmin(TimeSeriesAdmin):
    list_display = ["at", "port", "tx_bytes_per_s", "rx_bytes_per_s", "xmit_wait_per_s", "utilisation", "errors"]
    list_filter = ["port__cluster"]
    list_select_related = ["port__switch", "port__hca__node"]


@admin.register(GpuMetricRollup)
class GpuMetricRollupAdmin(TimeSeriesAdmin):
    list_display = ["at", "resolution_s", "gpu", "samples", "utilisation_pct_avg", "utilisation_pct_max",
                    "memory_used_mib_max", "temperature_c_max", "power_w_avg", "power_w_max"]  # fmt: skip
    list_filter = ["resolution_s", "gpu__node__cluster"]
    list_select_related = ["gpu__node"]


@admin.register(PortMetricRollup)
class PortMetricRollupAdmin(TimeSeriesAdmin):
    list_display = ["at", "resolution_s", "port", "samples", "tx_bytes_per_s_avg", "rx_bytes_per_s_avg",
                    "utilisation_avg", "utilisation_max", "xmit_wait_per_s_avg", "errors_total"]  # fmt: skip
    list_filter = ["resolution_s", "port__cluster"]
    list_select_related = ["port__switch", "port__hca__node"]
