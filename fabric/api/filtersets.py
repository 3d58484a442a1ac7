import django_filters as filters
from django.db.models import Q

from clusterctl.filters import ChoiceFilter, NumberFilter, StrictFilterSet
from fabric.choices import GpuHealth, LinkState, NodeRole, NodeState, SwitchRole
from fabric.models import GPU, Cluster, Link, Node, Switch


class ClusterFilterSet(StrictFilterSet):
    class Meta:
        model = Cluster
        fields = ["name"]


class SwitchFilterSet(StrictFilterSet):
    cluster = filters.CharFilter(field_name="cluster__name")
    role = ChoiceFilter(choices=SwitchRole.choices)
    q = filters.CharFilter(method="search", label="name, GUID or description contains")

    class Meta:
        model = Switch
        fields = ["cluster", "role", "model", "rack", "guid"]

    def search(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(guid__icontains=value) | Q(description__icontains=value))


class NodeFilterSet(StrictFilterSet):
    cluster = filters.CharFilter(field_name="cluster__name")
    role = filters.ChoiceFilter(choices=NodeRole.choices)
    state = filters.ChoiceFilter(choices=NodeState.choices)
    hostname__startswith = filters.CharFilter(field_name="hostname", lookup_expr="startswith")

    class Meta:
        model = Node
        fields = ["cluster", "role", "state", "rack", "gpu_model", "hostname"]


class LinkFilterSet(StrictFilterSet):
    cluster = filters.CharFilter(field_name="cluster__name")
    state = filters.ChoiceFilter(choices=LinkState.choices)
    switch = filters.CharFilter(field_name="ports__switch__name", distinct=True, label="switch name at either end")
    node = filters.CharFilter(field_name="ports__hca__node__hostname", distinct=True, label="node at either end")
    capacity_gbps__lt = NumberFilter(field_name="capacity_gbps", lookup_expr="lt")

    class Meta:
        model = Link
        fields = ["cluster", "state", "speed", "width"]


class GpuFilterSet(StrictFilterSet):
    cluster = filters.CharFilter(field_name="node__cluster__name")
    node = filters.CharFilter(field_name="node__hostname")
    health = filters.ChoiceFilter(choices=GpuHealth.choices)

    class Meta:
        model = GPU
        fields = ["cluster", "node", "model", "health", "mig_capable", "mig_enabled", "uuid"]
