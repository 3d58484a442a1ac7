"""Job, quota and pool serializers: fields listed, protected fields read-only."""

from __future__ import annotations

from decimal import Decimal

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from clusterctl.serializers import StrictBooleanField, StrictCharField, StrictModelSerializer, StrictSlugRelatedField
from scheduler.api.access import tenant_of
from scheduler.choices import SharingMode, StartEstimate, TopologyRequirement, Workload
from scheduler.launch.checks import IMAGE_PATTERN, command_problem, image_problem, workdir_problem
from scheduler.launch.env import ENV_VALUE_MAX, LaunchEnvError, check_job_env
from scheduler.models import Allocation, Job, JobEvent, Launch, Pool, PriorityClass, Quota
from scheduler.selectors import QueueEntry, priority_class_names, priority_limit

JOB_FIELDS = [
    "id", "url", "name", "tenant", "cluster", "pool", "gpus", "nodes", "gpus_per_node", "gpu_model",
    "gpu_memory_mib", "sharing", "fraction", "mps_memory_mib", "mig_profile", "priority_class", "preemptible",
    "workload", "require", "allreduce_mb", "step_compute_ms", "cpus", "host_memory_mib", "dataset_node",
    "est_runtime_s", "checkpoint_cost_s",
    "grace_period_s", "requeue_opt_out",
    "command", "image", "env", "workdir", "generation", "status", "status_reason", "pending_reason", "held",
    "queue_position", "estimated_start", "start_estimate", "borrowed", "submitted_at", "started_at", "finished_at",
]  # fmt: skip
JOB_READ_ONLY = [
    "tenant", "cluster", "generation", "status", "status_reason", "pending_reason", "held", "queue_position",
    "estimated_start", "start_estimate", "borrowed", "submitted_at", "started_at", "finished_at",
]  # fmt: skip

HOST_MAX = 2**31 - 1  # the Job's and Node's PositiveIntegerField: MiB, milli-CPUs
CPUS_MAX = Decimal(HOST_MAX) / 1000

# What a submit may send: every 400 of POST /jobs/ names one of these (the schema lists them, views.JobViewSet.create).
JOB_WRITABLE = [f for f in JOB_FIELDS if f not in JOB_READ_ONLY and f not in ("id", "url")]


@extend_schema_field({"type": "number", "format": "double", "minimum": 0.001, "maximum": float(CPUS_MAX)})
class CpusField(serializers.DecimalField):
    """CPUs to 0.001, read and written as a JSON number. Its bounds are declared as plain numbers: drf-spectacular
    would put DecimalField's Decimal bounds into the schema as they are, which schema tools cannot compute with."""


@extend_schema_field({"type": "string", "maxLength": 255, "pattern": IMAGE_PATTERN})
class ImageReferenceField(StrictCharField):
    """An image reference; its grammar is declared in the schema and checked by JobSerializer.validate_image."""


class PriorityClassField(StrictSlugRelatedField):
    """A priority class by name; one that does not exist is refused with the names that do (and, for a tenant's
    request, those it may ask for), instead of DRF's "Object with name=... does not exist."."""

    default_error_messages = {
        **StrictSlugRelatedField.default_error_messages,
        "does_not_exist": 'no priority class "{value}": the classes are {classes}{usable}',
    }

    def fail(self, key, **kwargs):
        if key == "does_not_exist":
            classes = list(PriorityClass.objects.all())
            kwargs["classes"] = priority_class_names(classes)
            request = self.context.get("request")
            tenant = tenant_of(request.user) if request is not None else None
            if tenant is not None:
                limit = priority_limit(tenant)
                usable = priority_class_names([c for c in classes if c.value <= limit])
                kwargs["usable"] = f"; tenant {tenant.name} may ask for {usable}"
            else:
                kwargs["usable"] = ""
        super().fail(key, **kwargs)


class JobSerializer(StrictModelSerializer):
    tenant = serializers.CharField(source="tenant.name", read_only=True)
    cluster = serializers.CharField(source="pool.cluster.name", read_only=True)
    # With its cluster: the answer to a submit names it, and reads nothing after the commit.
    pool = serializers.PrimaryKeyRelatedField(queryset=Pool.objects.select_related("cluster"), required=False)
    priority_class = PriorityClassField(
        slug_field="name", queryset=PriorityClass.objects.all(), required=False,
        help_text="A priority class by name (default: normal); /api/v1/choices/ lists them (priority_class), with "
        "those the tenant may ask for.",
    )  # fmt: skip
    # A hostname, resolved in the job's own cluster (hostnames are unique per cluster only).
    dataset_node = StrictCharField(source="dataset_node.hostname", required=False, allow_null=True)
    preemptible = StrictBooleanField(
        required=False, allow_null=True, default=None, help_text="Default: the priority class's setting."
    )
    queue_position = serializers.SerializerMethodField(help_text="1-based place among pending jobs, last round.")
    pending_reason = serializers.SerializerMethodField(help_text="Why it waits, in plain words.")
    estimated_start = serializers.SerializerMethodField(
        help_text="When the last round expects it to start (the GPUs it holds for it free up then); null when it "
        "holds none for it (start_estimate none), and for a job that is not pending."
    )
    start_estimate = serializers.SerializerMethodField(
        help_text="What estimated_start rests on, i.e. how sure it is: preempting (jobs it preempted are stopping; "
        "within their grace period), stopping (jobs already stopping), backfill (GPUs reserved for it as running jobs "
        "end by their estimated run times: later if they overrun, earlier if they end sooner), leaf (the same, "
        "waiting for one leaf), none (no estimate)."
    )
    env = serializers.DictField(
        child=StrictCharField(allow_blank=True, max_length=ENV_VALUE_MAX, trim_whitespace=False), required=False
    )
    command = StrictCharField(
        required=False, allow_blank=True, max_length=65_536, trim_whitespace=False,
        help_text="Run under /bin/sh -c on each node (process launcher), or as the container's command.",
    )  # fmt: skip
    # Not trimmed: what is checked is what was sent (" ubuntu\n" is refused, not quietly mended).
    image = ImageReferenceField(
        required=False, allow_blank=True, max_length=255, trim_whitespace=False,
        help_text="An image reference, [registry[:port]/]path[:tag][@digest], e.g. nvcr.io/nvidia/pytorch:24.05-py3.",
    )  # fmt: skip
    workdir = StrictCharField(
        required=False, allow_blank=True, max_length=1024, trim_whitespace=False,
        help_text="Absolute working directory on the nodes; default: the job's checkpoint directory.",
    )  # fmt: skip
    gpus = serializers.IntegerField(min_value=1, max_value=100_000)
    nodes = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    gpus_per_node = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    gpu_memory_mib = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    fraction = serializers.FloatField(
        min_value=0.01, max_value=1.0, required=False, allow_null=True, write_only=False,
        help_text="MPS: the share of one GPU's compute, 0 < fraction <= 1.",
    )  # fmt: skip
    mps_memory_mib = serializers.IntegerField(
        min_value=1, required=False, allow_null=True,
        help_text="MPS: the memory limit pinned per GPU, MiB. Default: fraction x the memory of the smallest GPU of "
        "the pool (of gpu_model when given), rounded down (0.25 of an 81920 MiB H100: 20480).",
    )  # fmt: skip
    require = serializers.ChoiceField(
        choices=TopologyRequirement.choices, required=False, allow_blank=True,
        help_text="All GPUs in one node, leaf or pod (waits for one); empty: anywhere, the most compact preferred.",
    )  # fmt: skip
    allreduce_mb = serializers.FloatField(
        min_value=0, max_value=1e6, required=False, allow_null=True,
        help_text="Gradient MB all-reduced per step (4 x parameters in millions for fp32); 0: no communication.",
    )  # fmt: skip
    step_compute_ms = serializers.FloatField(
        min_value=0.001, max_value=3.6e6, required=False, allow_null=True,
        help_text="Compute ms per step on one GPU: with allreduce_mb, how much a spread placement slows the job.",
    )  # fmt: skip
    cpus = CpusField(
        max_digits=10, decimal_places=3, min_value=Decimal("0.001"), max_value=CPUS_MAX, coerce_to_string=False,
        required=False, allow_null=True,
        help_text="Host CPUs on each node it runs on, to 0.001 (0.5: half a CPU); placed only where a node has that "
        "many left (nodes that do not track CPUs always have). Default: none asked. The container launcher passes it "
        "as --cpus; the process launcher does not enforce it.",
    )  # fmt: skip
    host_memory_mib = serializers.IntegerField(
        min_value=1, max_value=HOST_MAX, required=False, allow_null=True,
        help_text="Host memory on each node it runs on, MiB; placed only where a node has that much left. Default: "
        "none asked. The container launcher passes it as --memory; the process launcher does not enforce it.",
    )  # fmt: skip
    est_runtime_s = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    checkpoint_cost_s = serializers.IntegerField(min_value=0, required=False)
    grace_period_s = serializers.IntegerField(min_value=0, max_value=3600, required=False)
    sharing = serializers.ChoiceField(choices=SharingMode.choices, required=False)
    workload = serializers.ChoiceField(choices=Workload.choices, required=False)

    class Meta:
        model = Job
        fields = JOB_FIELDS
        read_only_fields = JOB_READ_ONLY

    def validate_env(self, value: dict) -> dict:
        try:
            return check_job_env(value)
        except LaunchEnvError as exc:
            raise serializers.ValidationError(str(exc)) from exc

    # Each reaches a node's command line: checked here and again by the node agent (scheduler/launch/checks.py).
    def validate_image(self, value: str) -> str:
        return _checked(value, image_problem(value) if value else None)

    def validate_workdir(self, value: str) -> str:
        return _checked(value, workdir_problem(value))

    def validate_command(self, value: str) -> str:
        return _checked(value, command_problem(value))

    def _queue(self, job: Job) -> QueueEntry | None:
        queue = self.context.get("queue")
        if queue is None or job.status != "pending" or job.held:
            return None
        return queue.get(job.pool.cluster_id, job.pk)

    def get_queue_position(self, job: Job) -> int | None:
        entry = self._queue(job)
        return entry.position if entry else None

    def get_pending_reason(self, job: Job) -> str:
        if job.held:
            return job.pending_reason
        entry = self._queue(job)
        return entry.reason if entry else ""

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_estimated_start(self, job: Job):
        entry = self._queue(job)
        start = entry.estimated_start if entry else None
        return serializers.DateTimeField().to_representation(start) if start is not None else None

    @extend_schema_field(serializers.ChoiceField(choices=StartEstimate.choices))
    def get_start_estimate(self, job: Job) -> str:
        entry = self._queue(job)
        return entry.start_estimate if entry else StartEstimate.NONE.value

    def to_representation(self, job: Job) -> dict:
        data = super().to_representation(job)
        data["fraction"] = job.mps_compute_pct / 100 if job.mps_compute_pct else None
        milli = job.host_cpu_milli
        data["cpus"] = self.fields["cpus"].to_representation(Decimal(milli) / 1000) if milli else None
        return data


def _checked(value: str, problem: str | None) -> str:
    if problem:
        raise serializers.ValidationError(problem)
    return value


class AllocationSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="gpu.node.hostname")
    gpu_index = serializers.IntegerField(source="gpu.index")
    gpu_uuid = serializers.CharField(source="gpu.uuid")

    class Meta:
        model = Allocation
        fields = ["node", "gpu_index", "gpu_uuid", "kind", "compute_pct", "memory_mib", "mig_profile", "mig_start",
                  "replica"]  # fmt: skip


class JobEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobEvent
        fields = ["at", "from_status", "to_status", "reason", "actor"]


class LaunchSerializer(serializers.ModelSerializer):
    class Meta:
        model = Launch
        fields = ["generation", "hostname", "state", "pid", "slurm_job_id", "returncode", "exited_within_grace",
                  "stop_why", "reason", "created_at", "started_at", "finished_at"]  # fmt: skip


class JobDetailSerializer(JobSerializer):
    placement = serializers.SerializerMethodField()
    events = JobEventSerializer(many=True, read_only=True)
    launches = LaunchSerializer(many=True, read_only=True, help_text="Each node's part of each (re)launch.")

    class Meta(JobSerializer.Meta):
        fields = [*JOB_FIELDS, "placement", "events", "launches"]

    def get_placement(self, job: Job) -> list[dict]:
        active = [a for a in job.allocations.all() if a.active]
        return AllocationSerializer(active, many=True).data


class JobLogNodeSerializer(serializers.Serializer):
    host = serializers.CharField()
    lines = serializers.ListField(child=serializers.CharField())
    error = serializers.CharField(help_text="Why this node's tail is missing (its agent did not answer in time).")


class JobLogSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    generation = serializers.IntegerField()
    lines = serializers.IntegerField(help_text="Lines asked for, per node.")
    nodes = JobLogNodeSerializer(many=True, help_text="The nodes of its latest launch, each with its log's tail.")
    detail = serializers.CharField(help_text="Why there is no log (not launched yet, or the twin plays the job).")


class JobActionSerializer(serializers.Serializer):
    reason = StrictCharField(max_length=255, required=False, allow_blank=True, default="")


class QuotaSerializer(serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.name", read_only=True)
    pool = serializers.CharField(source="pool.name", read_only=True)
    cluster = serializers.CharField(source="pool.cluster.name", read_only=True)
    used_gpus = serializers.SerializerMethodField()
    borrowed_gpus = serializers.SerializerMethodField()

    class Meta:
        model = Quota
        fields = ["id", "tenant", "cluster", "pool", "guaranteed_gpus", "borrow_limit", "used_gpus", "borrowed_gpus"]

    def _used(self, quota: Quota) -> int:
        return self.context["usage"].get((quota.tenant_id, quota.pool_id), 0)

    def get_used_gpus(self, quota: Quota) -> int:
        return self._used(quota)

    def get_borrowed_gpus(self, quota: Quota) -> int:
        return max(0, self._used(quota) - quota.guaranteed_gpus)


class PoolSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    capacity = serializers.SerializerMethodField()
    queue = serializers.SerializerMethodField()

    class Meta:
        model = Pool
        fields = ["id", "cluster", "name", "sharing", "timeslice_replicas", "is_default", "capacity", "queue"]

    def get_capacity(self, pool: Pool) -> dict:
        return self.context["capacity"][pool.pk]

    def get_queue(self, pool: Pool) -> dict:
        counts = self.context.get("queue", {}).get(pool.pk, {})
        return {"pending": counts.get("pending", 0), "running": counts.get("running", 0)}


class HotLinkSerializer(serializers.Serializer):
    link = serializers.IntegerField()
    utilisation = serializers.FloatField(help_text="0..1 of the link's capacity, busiest direction, last poll")
    label = serializers.CharField()


class PoolLoadSerializer(serializers.Serializer):
    """Live load of a pool from telemetry's latest state (read-only, for the dashboard and scripts)."""

    gpus_reporting = serializers.IntegerField()
    mean_utilisation = serializers.FloatField(allow_null=True)
    stddev = serializers.FloatField(allow_null=True)
    cv = serializers.FloatField(allow_null=True, help_text="coefficient of variation: stddev / mean; 0 = even")
    min = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)
    idle_gpus = serializers.IntegerField()
    busy_gpus = serializers.IntegerField()
    hottest_links = HotLinkSerializer(many=True)
