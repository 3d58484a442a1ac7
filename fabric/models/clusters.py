from django.db import models


class Cluster(models.Model):
    name = models.SlugField(max_length=64, unique=True, help_text="Short name used on the command line and in URLs.")
    description = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    # The transaction that last wrote the row (fabric.change_feed): fabric_version recounts only after a write.
    change_xid = models.BigIntegerField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["name"]
        indexes = [models.Index(fields=["change_xid"], name="cluster_change_xid")]

    def __str__(self) -> str:
        return self.name


class ImportRecord(models.Model):
    """One applied import or generation: what came in and what it changed."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="imports")
    format = models.CharField(max_length=32)
    source = models.CharField(max_length=255, blank=True, help_text="File name or generator parameters.")
    created = models.DateTimeField(auto_now_add=True)
    summary = models.JSONField(default=dict)

    # The transaction that last wrote the row (fabric.change_feed): fabric_version recounts only after a write.
    change_xid = models.BigIntegerField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["change_xid"], name="importrecord_change_xid")]

    def __str__(self) -> str:
        return f"{self.format} import into {self.cluster} at {self.created:%Y-%m-%d %H:%M}"
