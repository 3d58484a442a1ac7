import django_filters as filters

from fabric.choices import GpuHealth, LinkState, NodeRole, NodeState, SwitchRole
from fabric.models import GPU, Link, Node, Switch


class SwitchFilterSet(filters.FilterSet):
    cluster = filters.CharFilter(field_name="cluster__name")
    role = filters.ChoiceFilter(choices=SwitchRole.choices)
    q = filters.CharFilter(method="search", label="name, GUID or description contains")

    class Meta:
        model = Switch
        fields = ["cluster", "role", "model", "rack", "guid"]

    def search(self, queryset, name, value):
        from django.db.models import Q

        return queryset.filter(Q(name__icontains=value) | Q(guid__icontains=value) | Q(description__icontains=value))


class NodeFilterSet(filters.FilterSet):
    cluster = filters.CharFilter(field_name="cluster__name")
    role = filters.ChoiceFilter(choices=NodeRole.choices)
    state = filters.ChoiceFilter(choices=NodeState.choices)
    hostname__startswith = filters.CharFilter(field_name="hostname", lookup_expr="startswith")

    class Meta:
        model = Node
        fields = ["cluster", "role", "state", "rack", "gpu_model", "hostname"]


class LinkFilterSet(filters.FilterSet):
    cluster = filters.CharFilter(field_name="cluster__name")
    state = filters.ChoiceFilter(choices=LinkState.choices)
    switch = filters.CharFilter(field_name="ports__switch__name", distinct=True, label="switch name at either end")
    node = filters.CharFilter(field_name="ports__hca__node__hostname", distinct=True, label="node at either end")
    capacity_gbps__lt = filters.NumberFilter(field_name="capacity_gbps", lookup_expr="lt")

    class Meta:
        model = Link
        fields = ["cluster", "state", "speed", "width"]


class GpuFilterSet(filters.FilterSet):
    cluster = filters.CharFilter(field_name="node__cluster__name")
    node = filters.CharFilter(field_name="node__hostname")
    health = filters.ChoiceFilter(choices=GpuHealth.choices)

    class Meta:
        model = GPU
        fields = ["cluster", "node", "model", "health", "mig_capable", "mig_enabled", "uuid"]
