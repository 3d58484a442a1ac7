"""Factories for realistic inventory rows, and whole fabrics built through the real actions."""

from __future__ import annotations

import factory

from fabric import actions
from fabric.models import GPU, Cluster, Node, Switch


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Cluster
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"cluster{n}")


class SwitchFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Switch

    cluster = factory.SubFactory(ClusterFactory)
    guid = factory.Sequence(lambda n: f"{0x7CFE900300000000 + n:016x}")
    name = factory.Sequence(lambda n: f"leaf{n:03d}")
    port_count = 64
    model = "QM9700"


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Node

    cluster = factory.SubFactory(ClusterFactory)
    hostname = factory.Sequence(lambda n: f"gpu{n:04d}")
    gpu_model = "H100"


class GpuFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = GPU

    node = factory.SubFactory(NodeFactory)
    index = factory.Sequence(lambda n: n % 8)
    uuid = factory.Sequence(lambda n: f"GPU-{n:08x}-0000-4000-8000-000000000000")
    model = "H100"
    memory_mib = 81559
    nvlink_generation = 4
    nvlink_gbps = 900.0
    mig_capable = True


def fat_tree(name: str = "ft", **params) -> Cluster:
    """A generated fat tree stored through the same action the command uses."""
    defaults = {"nodes": 8, "gpus_per_node": 8, "gpu_model": "H100", "leaf_ports": 16, "oversubscription": 1.0}
    actions.generate_fabric(name, **{**defaults, **params})
    return Cluster.objects.get(name=name)
