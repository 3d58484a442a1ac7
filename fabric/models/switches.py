from django.db import models

from fabric.choices import RoleSource, SwitchRole


class Switch(models.Model):
    cluster = models.ForeignKey("fabric.Cluster", on_delete=models.CASCADE, related_name="switches")
    guid = models.CharField(max_length=16, help_text="Node GUID, 16 lowercase hex digits.")
    lid = models.PositiveIntegerField(null=True, blank=True)
    name = models.CharField(max_length=128, help_text="Short name, e.g. ib5 from 'MF0;ib5:SX6036/U1'.")
    description = models.CharField(max_length=255, blank=True, help_text="Node description as the fabric reports it.")
    vendor_id = models.CharField(max_length=16, blank=True)
    device_id = models.CharField(max_length=16, blank=True)
    model = models.CharField(max_length=64, blank=True)
    port_count = models.PositiveSmallIntegerField(default=0, help_text="Radix; 0 when the source did not say.")
    role = models.CharField(max_length=8, choices=SwitchRole.choices, blank=True, default=SwitchRole.UNKNOWN)
    role_source = models.CharField(max_length=8, choices=RoleSource.choices, default=RoleSource.DETECTED)
    rack = models.CharField(max_length=64, blank=True)

    # The transaction that last wrote the row (fabric.change_feed): fabric_version recounts only after a write.
    change_xid = models.BigIntegerField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "guid"], name="switch_guid_unique_per_cluster"),
            models.CheckConstraint(condition=models.Q(guid__regex=r"^[0-9a-f]{16}$"), name="switch_guid_hex16"),
        ]
        indexes = [
            models.Index(fields=["cluster", "role"]),
            models.Index(fields=["change_xid"], name="switch_change_xid"),
        ]
        verbose_name_plural = "switches"

    def __str__(self) -> str:
        return self.name or self.guid
