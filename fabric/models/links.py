from django.db import models

from fabric.choices import LinkState


class Link(models.Model):
    """A cable between two ports (its ends are the two Port rows whose `link` is this).

    capacity_gbps and state are derived by fabric.actions from the ports' rates:
    never set them by hand, call the actions.
    """

    cluster = models.ForeignKey("fabric.Cluster", on_delete=models.CASCADE, related_name="links")
    width = models.PositiveSmallIntegerField(default=4)
    speed = models.CharField(max_length=8, blank=True, help_text="Blank when the fabric reported '???'.")
    capacity_gbps = models.FloatField(default=0.0, help_text="Data rate in Gb/s from the IB rate table.")
    supported_gbps = models.FloatField(default=0.0, help_text="Best rate both ends support; 0 when unknown.")
    state = models.CharField(max_length=8, choices=LinkState.choices, default=LinkState.UP)
    state_reason = models.CharField(max_length=255, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True, help_text="When an import last found this link.")
    loopback = models.BooleanField(
        default=False, help_text="Both ends on one switch or HCA (a test plug, a miscabling): never routed over."
    )

    # The transaction that last wrote the row (fabric.change_feed): fabric_version recounts only after a write.
    change_xid = models.BigIntegerField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["cluster", "id"]
        indexes = [
            models.Index(fields=["cluster", "state"]),
            models.Index(fields=["change_xid"], name="link_change_xid"),
        ]

    def __str__(self) -> str:
        ends = {p.link_end: p for p in self.ports.all()}
        return f"{ends.get('a', '?')} <-> {ends.get('b', '?')}"

    @property
    def rate_label(self) -> str:
        return f"{self.width}x{self.speed or '???'}"

    def end(self, which: str):
        """The port at end 'a' or 'b' (uses prefetched ports when present)."""
        return next((p for p in self.ports.all() if p.link_end == which), None)
