from django.db import models


class Cluster(models.Model):
    name = models.SlugField(max_length=64, unique=True, help_text="Short name used on the command line and in URLs.")
    description = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ImportRecord(models.Model):
    """One applied import or generation: what came in and what it changed."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="imports")
    format = models.CharField(max_length=32)
    source = models.CharField(max_length=255, blank=True, help_text="File name or generator parameters.")
    created = models.DateTimeField(auto_now_add=True)
    summary = models.JSONField(default=dict)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.format} import into {self.cluster} at {self.created:%Y-%m-%d %H:%M}"
