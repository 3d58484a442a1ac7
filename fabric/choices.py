"""Every state the fabric app knows, each with its colour, defined once.

Admin, API and the heat-map legends read `colours` / `legend()` from here. The palette
is Okabe-Ito, distinguishable by colour-blind users; every state also has a label.
"""

from __future__ import annotations

from django.db import models

OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "grey": "#999999",
}


def coloured(colours: dict[str, str]):
    """Attach a value -> hex colour map to a Choices class; every value must have one."""

    def attach(cls):
        missing = set(cls.values) - set(colours)
        if missing:
            raise TypeError(f"{cls.__name__}: no colour for {sorted(missing)}")
        cls.colours = {value: OKABE_ITO[name] for value, name in colours.items()}
        return cls

    return attach


class ColouredChoices(models.TextChoices):
    @classmethod
    def colour(cls, value: str) -> str:
        return cls.colours.get(value, OKABE_ITO["grey"])

    @classmethod
    def legend(cls) -> list[dict[str, str]]:
        return [{"value": v, "label": str(label), "colour": cls.colour(v)} for v, label in cls.choices]


@coloured({"leaf": "sky", "spine": "blue", "core": "purple", "": "grey"})
class SwitchRole(ColouredChoices):
    LEAF = "leaf", "Leaf"
    SPINE = "spine", "Spine"
    CORE = "core", "Core"
    UNKNOWN = "", "Unknown"


class RoleSource(models.TextChoices):
    DETECTED = "detected", "Detected from the graph"
    SET = "set", "Set by an operator"


@coloured({"compute": "blue", "storage": "orange", "login": "grey"})
class NodeRole(ColouredChoices):
    COMPUTE = "compute", "Compute"
    STORAGE = "storage", "Storage"
    LOGIN = "login", "Login"


@coloured({"up": "green", "drain": "yellow", "down": "vermillion"})
class NodeState(ColouredChoices):
    UP = "up", "Up"
    DRAIN = "drain", "Draining"
    DOWN = "down", "Down"


@coloured({"host": "blue", "aggregation": "purple", "router": "grey"})
class CaKind(ColouredChoices):
    HOST = "host", "Host channel adapter"
    AGGREGATION = "aggregation", "SHARP aggregation node"
    ROUTER = "router", "Router"


@coloured({"active": "green", "init": "yellow", "armed": "sky", "down": "vermillion"})
class PortState(ColouredChoices):
    ACTIVE = "active", "Active"
    INIT = "init", "Initialising"
    ARMED = "armed", "Armed"
    DOWN = "down", "Down"


@coloured({"up": "green", "degraded": "orange", "down": "vermillion"})
class LinkState(ColouredChoices):
    UP = "up", "Up"
    DEGRADED = "degraded", "Degraded (below supported rate)"
    DOWN = "down", "Down"


@coloured({"healthy": "green", "degraded": "orange", "failed": "vermillion", "unknown": "grey"})
class GpuHealth(ColouredChoices):
    HEALTHY = "healthy", "Healthy"
    DEGRADED = "degraded", "Degraded"
    FAILED = "failed", "Failed"
    UNKNOWN = "unknown", "Unknown"


ALL_CHOICES = {
    "switch_role": SwitchRole,
    "node_role": NodeRole,
    "node_state": NodeState,
    "ca_kind": CaKind,
    "port_state": PortState,
    "link_state": LinkState,
    "gpu_health": GpuHealth,
}


@coloured({"critical": "vermillion", "warning": "orange", "info": "sky"})
class AlertSeverity(ColouredChoices):
    CRITICAL = "critical", "Critical"
    WARNING = "warning", "Warning"
    INFO = "info", "Info"


ALL_CHOICES["alert_severity"] = AlertSeverity
