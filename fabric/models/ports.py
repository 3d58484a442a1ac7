from django.db import models

from fabric.choices import PortState
from fabric.topology.link_speeds import LinkRate


class Port(models.Model):
    """A physical port of a switch or of an HCA (exactly one of the two).

    A port belongs to at most one link: `link` is a single foreign key, and
    (link, link_end) is unique so a link has one "a" and one "b" end.
    """

    class End(models.TextChoices):
        A = "a", "A"
        B = "b", "B"

    cluster = models.ForeignKey("fabric.Cluster", on_delete=models.CASCADE, related_name="ports")
    switch = models.ForeignKey("fabric.Switch", on_delete=models.CASCADE, related_name="ports", null=True, blank=True)
    hca = models.ForeignKey("fabric.HCA", on_delete=models.CASCADE, related_name="ports", null=True, blank=True)
    number = models.PositiveSmallIntegerField()
    guid = models.CharField(
        max_length=16, blank=True, help_text="Port GUID (HCA ports); switch ports share the node's."
    )
    lid = models.PositiveIntegerField(null=True, blank=True)
    width = models.PositiveSmallIntegerField(default=4, help_text="Active width in lanes (1, 2, 4, 8, 12).")
    speed = models.CharField(max_length=8, blank=True, help_text="Active speed (QDR, HDR, ...); blank when unknown.")
    supported_width = models.PositiveSmallIntegerField(null=True, blank=True)
    supported_speed = models.CharField(max_length=8, blank=True, help_text="Best speed the port supports, if known.")
    state = models.CharField(max_length=8, choices=PortState.choices, default=PortState.ACTIVE)
    link = models.ForeignKey("fabric.Link", on_delete=models.SET_NULL, related_name="ports", null=True, blank=True)
    link_end = models.CharField(max_length=1, choices=End.choices, blank=True)

    class Meta:
        ordering = ["cluster", "switch", "hca", "number"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(switch__isnull=False, hca__isnull=True)
                | models.Q(switch__isnull=True, hca__isnull=False),
                name="port_on_switch_xor_hca",
            ),
            models.UniqueConstraint(fields=["switch", "number"], name="switch_port_number_unique"),
            models.UniqueConstraint(fields=["hca", "number"], name="hca_port_number_unique"),
            models.UniqueConstraint(
                fields=["cluster", "guid"],
                condition=models.Q(hca__isnull=False) & ~models.Q(guid=""),
                name="hca_port_guid_unique_per_cluster",
            ),
            models.UniqueConstraint(fields=["link", "link_end"], name="one_port_per_link_end"),
            models.CheckConstraint(
                condition=models.Q(link__isnull=True, link_end="") | models.Q(link__isnull=False, link_end__in="ab"),
                name="port_link_end_set_with_link",
            ),
        ]

    def __str__(self) -> str:
        owner = self.switch if self.switch_id else self.hca
        return f"{owner}[{self.number}]"

    @property
    def rate(self) -> LinkRate:
        return LinkRate(self.width, self.speed)
