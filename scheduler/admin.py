"""Operator admin for tenants, pools, quotas and jobs. Job state changes go through scheduler.actions."""

from __future__ import annotations

from django.contrib import admin, messages

from fabric.admin import ApproximatePaginator, badge
from scheduler import actions
from scheduler.choices import JobStatus
from scheduler.models import (
    Allocation,
    Job,
    JobEvent,
    Launch,
    Pool,
    PoolNode,
    PriorityClass,
    Quota,
    SchedulingRound,
    Tenant,
    TenantMember,
)


@admin.register(PriorityClass)
class PriorityClassAdmin(admin.ModelAdmin):
    list_display = ["name", "value", "preemptible_default", "description"]


class QuotaInline(admin.TabularInline):
    model = Quota
    extra = 0


class MemberInline(admin.TabularInline):
    model = TenantMember
    extra = 0
    raw_id_fields = ["user"]


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["name", "description", "max_priority", "created"]
    search_fields = ["name"]
    inlines = [QuotaInline, MemberInline]


class PoolNodeInline(admin.TabularInline):
    model = PoolNode
    extra = 0
    raw_id_fields = ["node"]


@admin.register(Pool)
class PoolAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "sharing", "timeslice_replicas", "is_default"]
    list_filter = ["cluster", "sharing"]
    inlines = [PoolNodeInline]


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = ["tenant", "pool", "guaranteed_gpus", "borrow_limit"]
    list_filter = ["pool"]
    list_select_related = ["tenant", "pool__cluster"]


class AllocationInline(admin.TabularInline):
    model = Allocation
    fields = ["gpu", "kind", "compute_pct", "memory_mib", "mig_profile", "mig_start", "replica", "active"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


class EventInline(admin.TabularInline):
    model = JobEvent
    fields = ["at", "from_status", "to_status", "reason", "actor"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


class LaunchInline(admin.TabularInline):
    """Each node's part of each (re)launch: what the node agents answered (scheduler.actions.lifecycle)."""

    model = Launch
    fields = ["generation", "hostname", "state", "pid", "returncode", "exited_within_grace", "stop_why", "reason",
              "changed_at"]  # fmt: skip
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "tenant", "pool", "gpus", "sharing", "priority_class", "status_badge", "held",
                    "pending_reason"]  # fmt: skip
    list_filter = ["status", "held", "pool", "priority_class", "sharing", "workload"]
    search_fields = ["name", "tenant__name", "=id"]
    list_select_related = ["tenant", "pool__cluster", "priority_class"]
    readonly_fields = ["status", "status_reason", "pending_reason", "queue_seq", "borrowed",
                       "held", "version", "generation", "submitted_at", "started_at", "finished_at",
                       "last_migrated_at", "attained_gpu_s"]  # fmt: skip
    inlines = [AllocationInline, LaunchInline, EventInline]
    actions = ["hold", "release", "requeue", "cancel"]
    paginator = ApproximatePaginator
    show_full_result_count = False

    def has_add_permission(self, request):
        return False  # jobs come from tenants through the API

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj):
        return badge(JobStatus, obj.status, obj.get_status_display())

    def _each(self, request, queryset, fn, **kwargs) -> None:
        done, refused = 0, []
        for job in queryset:
            try:
                fn(job, actor=str(request.user), **kwargs)
                done += 1
            except actions.ActionError as exc:
                refused.append(str(exc))
        self.message_user(request, f"{done} job(s) done.", messages.SUCCESS)
        for text in refused[:10]:
            self.message_user(request, text, messages.WARNING)

    @admin.action(description="Hold selected pending jobs")
    def hold(self, request, queryset):
        self._each(request, queryset, actions.hold_job)

    @admin.action(description="Release selected held jobs")
    def release(self, request, queryset):
        self._each(request, queryset, actions.release_job)

    @admin.action(description="Requeue selected running jobs")
    def requeue(self, request, queryset):
        self._each(request, queryset, actions.requeue_job)

    @admin.action(description="Cancel selected jobs")
    def cancel(self, request, queryset):
        self._each(request, queryset, actions.cancel_job)


@admin.register(SchedulingRound)
class SchedulingRoundAdmin(admin.ModelAdmin):
    list_display = ["started", "cluster", "trigger", "duration_ms", "engine_ms", "pending", "placed", "preempted",
                    "migrated", "requeued", "rejected_stale"]  # fmt: skip
    list_filter = ["cluster"]
    readonly_fields = [f.name for f in SchedulingRound._meta.fields]

    def has_add_permission(self, request):
        return False
