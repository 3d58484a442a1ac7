from .alerts import Alert
from .clusters import Cluster, ImportRecord
from .gpus import GPU, NodeTopology
from .links import Link
from .nodes import HCA, Node
from .ports import Port
from .switches import Switch
from .telemetry import GpuMetric, GpuMetricRollup, PortMetric, PortMetricRollup, Resolution

__all__ = [
    "GPU",
    "HCA",
    "Alert",
    "Cluster",
    "GpuMetric",
    "GpuMetricRollup",
    "ImportRecord",
    "Link",
    "Node",
    "NodeTopology",
    "Port",
    "PortMetric",
    "PortMetricRollup",
    "Resolution",
    "Switch",
]
