"""Tenant API: jobs, quotas, pools. Every queryset is filtered to the caller's tenant unless staff."""

from __future__ import annotations

import hashlib
import json
import re

from django.conf import settings
from django.db import IntegrityError
from django.db.models import Count, Prefetch, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, PermissionDenied
from rest_framework.response import Response

from clusterctl.openapi import error_response, field_errors_response
from clusterctl.pagination import query_int
from fabric.models import Node
from scheduler import actions
from scheduler.actions.lifecycle import read_log
from scheduler.actions.locking import is_transient
from scheduler.api.access import IsOperator, IsOperatorOrTenant, tenant_of
from scheduler.api.filtersets import JobFilterSet, QuotaFilterSet
from scheduler.api.serializers import (
    JOB_WRITABLE,
    JobActionSerializer,
    JobDetailSerializer,
    JobLogSerializer,
    JobSerializer,
    PoolLoadSerializer,
    PoolSerializer,
    QuotaSerializer,
)
from scheduler.choices import SharingMode, Workload
from scheduler.models import Allocation, Job, Pool, PriorityClass, Quota
from scheduler.selectors import LazyQueue, pool_capacities, pool_load, queue_counts
from scheduler.validation import check_request

MAX_LOG_LINES = 1000
DEFAULT_LOG_LINES = 100
_CONFLICT = "The job is not in a state this action applies to (e.g. cancelling a job that already ended)."
IDEMPOTENCY_HEADER = "Idempotency-Key"
IDEMPOTENCY_PATTERN = r"^[A-Za-z0-9._:-]{1,64}$"
_IDEMPOTENCY_KEY = OpenApiParameter(
    IDEMPOTENCY_HEADER,
    str,
    OpenApiParameter.HEADER,
    description=(
        "Any text of 1-64 letters, digits and . _ : - (a UUID fits) naming this submit: sent again with the same key "
        "(a retry after a timeout or a 503), the answer is the job already stored for it, with the header "
        "Idempotent-Replayed: true, and no second job is queued. The same key with a different body is a 422."
    ),
    pattern=IDEMPOTENCY_PATTERN,
)
_KEY_REUSED = "The Idempotency-Key was used before for a different request (the body differs); nothing was queued."
_SUBMIT_REFUSED = field_errors_response(
    "The request is refused and nothing is queued: each field in error says why, in a list of messages, whether the "
    "value is malformed or the pool cannot run it (more GPUs than it has, a GPU model it lacks, a priority class the "
    "tenant may not use).",
    [*(f for f in JOB_WRITABLE if f != "env"), IDEMPOTENCY_HEADER],
    nested=("env",),
    example={"gpus": ["asks for 17 GPUs; pool default has 16 in all"]},
)


class KeyReused(APIException):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_code = "idempotency_key_reused"


class Busy(APIException):
    """503: the database kept aborting the change for lock conflicts; nothing was changed, the same request may be
    sent again. DRF's exception handler turns `wait` into the Retry-After header."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "busy"

    def __init__(self, detail: str, wait: int) -> None:
        super().__init__(detail)
        self.wait = wait


class JobViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = JobSerializer
    permission_classes = [IsOperatorOrTenant]
    filterset_class = JobFilterSet
    ordering_fields = ["id", "submitted_at", "queue_seq", "status"]

    def get_queryset(self) -> QuerySet[Job]:
        jobs = Job.objects.select_related("tenant", "pool__cluster", "priority_class", "dataset_node")
        if self.action == "retrieve":
            active = Allocation.objects.filter(active=True).select_related("gpu__node")
            jobs = jobs.prefetch_related(Prefetch("allocations", queryset=active), "events", "launches")
        if self.request.user.is_staff:
            return jobs
        return jobs.filter(tenant=tenant_of(self.request.user))

    def get_serializer_class(self):
        return JobDetailSerializer if self.action == "retrieve" else JobSerializer

    def handle_exception(self, exc: Exception) -> Response:
        # The actions rerun what PostgreSQL aborts (scheduler.actions.locking.atomic_retry); what outlasts their
        # retries is a busy moment to report as one, never a server error.
        if isinstance(exc, actions.Contended):
            exc = Busy(f"the scheduler is busy ({exc}); send the request again", exc.retry_after_s)
        elif is_transient(exc):
            exc = Busy("the scheduler is busy (the database aborted the change); send the request again", 1)
        return super().handle_exception(exc)

    @extend_schema(
        parameters=[_IDEMPOTENCY_KEY],
        responses={201: JobSerializer, 400: _SUBMIT_REFUSED, 422: error_response(_KEY_REUSED)},
    )
    def create(self, request, *args, **kwargs) -> Response:
        """Queue a job. With an Idempotency-Key header, sending the same request again queues nothing more."""
        key = request.headers.get(IDEMPOTENCY_HEADER)
        if key is None:
            return super().create(request, *args, **kwargs)
        if not re.fullmatch(IDEMPOTENCY_PATTERN, key):
            raise serializers.ValidationError(
                {IDEMPOTENCY_HEADER: ["must be 1-64 letters, digits and . _ : - (for example a UUID)"]}
            )
        digest = hashlib.sha256(json.dumps(request.data, sort_keys=True, default=str).encode()).hexdigest()
        tenant = tenant_of(request.user)
        if tenant is not None and (stored := self._submitted_as(tenant, key)) is not None:
            return self._replayed(stored, digest)
        self._idempotency = (key, digest)
        try:
            return super().create(request, *args, **kwargs)
        except IntegrityError as exc:
            # The same key sent twice at once: the other request stored it first.
            if "job_idempotency_key_per_tenant" not in str(exc) or (stored := self._submitted_as(tenant, key)) is None:
                raise
            return self._replayed(stored, digest)

    def _submitted_as(self, tenant, key: str) -> Job | None:
        return self.get_queryset().filter(tenant=tenant, idempotency_key=key).first()

    def _replayed(self, job: Job, digest: str) -> Response:
        if job.request_digest != digest:
            raise KeyReused(f"{_KEY_REUSED[:-1]}: it names job {job.pk}")
        body = self.get_serializer(job, context={**self.get_serializer_context(), "queue": LazyQueue()}).data
        return Response(body, status=status.HTTP_201_CREATED, headers={"Idempotent-Replayed": "true"})

    def get_serializer_context(self) -> dict:
        context = super().get_serializer_context()
        # A job just submitted has no place in a round's queue yet; and its answer must not read the database after
        # the commit: an outage there would answer 503 ("send it again") for a job that is stored.
        context["queue"] = None if self.action == "create" else LazyQueue()
        return context

    def perform_create(self, serializer):
        user = self.request.user
        tenant = tenant_of(user)
        if tenant is None:
            raise PermissionDenied("operators submit jobs from a tenant account")
        data = dict(serializer.validated_data)
        pool = data.pop("pool", None) or self._default_pool(tenant)
        if not Quota.objects.filter(tenant=tenant, pool=pool).exists():
            # Same words as for a pool that does not exist: a tenant learns nothing of pools it cannot use.
            raise serializers.ValidationError({"pool": [f'Invalid pk "{pool.pk}" - object does not exist.']})
        priority = data.pop("priority_class", None) or PriorityClass.objects.get(name="normal")
        fraction = data.pop("fraction", None)
        data["mps_compute_pct"] = round(fraction * 100) if fraction is not None else None
        cpus = data.pop("cpus", None)
        data["host_cpu_milli"] = int(cpus * 1000) if cpus is not None else None
        data.setdefault("sharing", pool.sharing)
        data.setdefault("workload", Workload.TRAINING)
        if data.get("preemptible") is None:
            data["preemptible"] = priority.preemptible_default
        data["dataset_node"] = self._dataset_node(pool, (data.pop("dataset_node", None) or {}).get("hostname"))
        if data["sharing"] != SharingMode.EXCLUSIVE and data.get("nodes"):
            raise serializers.ValidationError({"nodes": ["gangs run on whole GPUs (exclusive sharing)"]})
        errors = {**check_request(tenant, pool, priority, data), **_launch_errors(data)}
        if errors:
            raise serializers.ValidationError(errors)
        key, digest = getattr(self, "_idempotency", ("", ""))
        serializer.instance = actions.submit_job(
            tenant, pool, priority, actor=str(user), idempotency_key=key, request_digest=digest, **data
        )

    def _dataset_node(self, pool: Pool, hostname: str | None):
        if not hostname:
            return None
        node = Node.objects.filter(cluster_id=pool.cluster_id, hostname=hostname).first()
        if node is None or node.role != "storage":
            raise serializers.ValidationError(
                {"dataset_node": [f"{hostname} is not a storage node of cluster {pool.cluster.name}"]}
            )
        return node

    def _default_pool(self, tenant) -> Pool:
        pools = list(Pool.objects.filter(quotas__tenant=tenant).select_related("cluster").distinct()[:2])
        if len(pools) == 1:
            return pools[0]
        raise serializers.ValidationError({"pool": ["name the pool (this tenant has quotas in several or none)"]})

    @extend_schema(request=JobActionSerializer, responses={200: JobSerializer, 409: error_response(_CONFLICT)})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Cancel a pending or running job: it leaves the queue or frees its GPUs."""
        return self._act(actions.cancel_job, reason_default="cancelled by {user}")

    @extend_schema(request=JobActionSerializer, responses={200: JobSerializer, 409: error_response(_CONFLICT)})
    @action(detail=True, methods=["post"], permission_classes=[IsOperator])
    def hold(self, request, pk=None):
        return self._act(actions.hold_job, reason_default="held by {user}")

    @extend_schema(request=JobActionSerializer, responses={200: JobSerializer, 409: error_response(_CONFLICT)})
    @action(detail=True, methods=["post"], permission_classes=[IsOperator])
    def release(self, request, pk=None):
        return self._act(actions.release_job, reason_default=None)

    @extend_schema(request=JobActionSerializer, responses={200: JobSerializer, 409: error_response(_CONFLICT)})
    @action(detail=True, methods=["post"], permission_classes=[IsOperator])
    def requeue(self, request, pk=None):
        return self._act(actions.requeue_job, reason_default="requeued by {user}")

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "lines", {"type": "integer", "minimum": 1, "maximum": MAX_LOG_LINES}, default=DEFAULT_LOG_LINES,
                description=f"Lines per node, 1-{MAX_LOG_LINES} (default {DEFAULT_LOG_LINES}).",
            )
        ],
        responses=JobLogSerializer,
    )  # fmt: skip
    @action(detail=True, methods=["get"])
    def log(self, request, pk=None):
        """The tail of the job's log on each node of its latest launch (asked from the node agents, a few
        seconds at most; a node that does not answer in time says so)."""

        job = self.get_object()  # 404 for another tenant's job: it is not in the queryset
        lines = query_int(request, "lines", 1, MAX_LOG_LINES, DEFAULT_LOG_LINES)
        return Response(JobLogSerializer(read_log(job, lines)).data)

    def _act(self, fn, *, reason_default: str | None) -> Response:
        job = self.get_object()  # 404 for another tenant's job: it is not in the queryset
        body = JobActionSerializer(data=self.request.data)
        body.is_valid(raise_exception=True)
        kwargs = {"actor": str(self.request.user)}
        if reason_default is not None:
            kwargs["reason"] = body.validated_data["reason"] or reason_default.format(user=self.request.user)
        try:
            job = fn(job, **kwargs)
        except actions.ActionError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(JobSerializer(job, context={"request": self.request}).data)


def _launch_errors(data: dict) -> dict[str, list[str]]:
    """What the nodes need to run the job: a command for processes and Slurm, an image for containers (not for the
    twin); Slurm runs whole GPUs only."""
    if settings.LAUNCHER == "process" and not data.get("command"):
        extra = " (an image alone runs only where LAUNCHER=container)" if data.get("image") else ""
        return {"command": [f"jobs run as processes on the nodes (LAUNCHER=process): give the command to run{extra}"]}
    if settings.LAUNCHER == "slurm" and not data.get("command"):
        return {"command": ["jobs run in Slurm (LAUNCHER=slurm): give the command its batch script runs on each node"]}
    if settings.LAUNCHER == "slurm" and data.get("sharing") not in (None, "", "exclusive"):
        return {"sharing": [f"jobs run in Slurm (LAUNCHER=slurm), whose --gres gives whole GPUs: {data['sharing']} "
                            "shares need the node agents (LAUNCHER=process or container)"]}  # fmt: skip
    if settings.LAUNCHER == "container" and not data.get("image"):
        return {"image": ["jobs run in containers on the nodes (LAUNCHER=container): give the image to run"]}
    return {}


class QuotaViewSet(viewsets.ReadOnlyModelViewSet):
    """Quotas with what is used now: a tenant sees its own, operators all."""

    serializer_class = QuotaSerializer
    permission_classes = [IsOperatorOrTenant]
    filterset_class = QuotaFilterSet

    def get_queryset(self) -> QuerySet[Quota]:
        quotas = Quota.objects.select_related("tenant", "pool__cluster")
        if self.request.user.is_staff:
            return quotas
        return quotas.filter(tenant=tenant_of(self.request.user))

    def get_serializer_context(self) -> dict:
        context = super().get_serializer_context()
        rows = (
            Allocation.objects.filter(active=True, job__tenant__in=self.get_queryset().values("tenant"))
            .values("job__tenant_id", "job__pool_id")
            .annotate(gpus=Count("gpu", distinct=True))
        )
        context["usage"] = {(r["job__tenant_id"], r["job__pool_id"]): r["gpus"] for r in rows}
        return context


class PoolViewSet(viewsets.ReadOnlyModelViewSet):
    """Pools with capacity and free GPUs by shape; tenants see pools they hold a quota in."""

    serializer_class = PoolSerializer
    permission_classes = [IsOperatorOrTenant]

    def get_queryset(self) -> QuerySet[Pool]:
        pools = Pool.objects.select_related("cluster")
        if self.request.user.is_staff:
            return pools
        return pools.filter(quotas__tenant=tenant_of(self.request.user)).distinct()

    def get_serializer_context(self) -> dict:
        context = super().get_serializer_context()
        pools = list(self.get_queryset())
        context["queue"] = queue_counts([p.pk for p in pools])
        context["capacity"] = pool_capacities(pools)
        return context

    @extend_schema(responses=PoolLoadSerializer)
    @action(detail=True, methods=["get"])
    def load(self, request, pk=None):
        """Live load of the pool: spread of GPU utilisation (imbalance) and its hottest host links."""
        pool = self.get_object()
        return Response(pool_load([pool])[pool.pk])
