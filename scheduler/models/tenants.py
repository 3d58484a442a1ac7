from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from scheduler.launch.checks import run_as_problem


def run_as_validator(value: str) -> None:
    problem = run_as_problem(value)
    if problem:
        raise ValidationError(problem)


class PriorityClass(models.Model):
    """Operator-defined priority levels (high, normal, low, best-effort by default)."""

    name = models.SlugField(max_length=32, unique=True)
    value = models.IntegerField(unique=True, help_text="Higher runs first and may preempt lower.")
    preemptible_default = models.BooleanField(default=True)
    always_preemptible = models.BooleanField(
        default=False,
        help_text="Its jobs are always preemptible: a job asking for preemptible=false is refused (low, best-effort).",
    )
    description = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["-value"]
        verbose_name_plural = "priority classes"
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(always_preemptible=True, preemptible_default=False),
                name="always_preemptible_is_preemptible_by_default",
                violation_error_message="a class whose jobs are always preemptible is preemptible by default",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.value})"


class Tenant(models.Model):
    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=255, blank=True)
    max_priority = models.ForeignKey(
        PriorityClass,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        help_text="Highest priority class its jobs may ask for; empty: the default class only.",
    )
    run_as = models.CharField(
        max_length=21,
        blank=True,
        validators=[run_as_validator],
        help_text="uid:gid its jobs run as on the nodes (container --user; the process launcher when the agent is "
        "root); empty: the node agent's own user.",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TenantMember(models.Model):
    """A user acting for a tenant (API tokens are the users' DRF tokens)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tenant_member")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="members")

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant}"


class Quota(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="quotas")
    pool = models.ForeignKey("scheduler.Pool", on_delete=models.CASCADE, related_name="quotas")
    guaranteed_gpus = models.PositiveIntegerField(default=0, help_text="GPUs the tenant is always entitled to.")
    borrow_limit = models.PositiveIntegerField(
        default=0, help_text="Extra idle GPUs it may borrow beyond the guarantee; borrowed GPUs can be reclaimed."
    )

    class Meta:
        ordering = ["tenant", "pool"]
        constraints = [models.UniqueConstraint(fields=["tenant", "pool"], name="one_quota_per_tenant_pool")]

    def __str__(self) -> str:
        return f"{self.tenant} in {self.pool}: {self.guaranteed_gpus} (+{self.borrow_limit})"
