import django_filters as filters

from clusterctl.filters import DateTimeFilter, IdFilter, StrictFilterSet
from scheduler.choices import JobStatus, SharingMode, Workload
from scheduler.models import Job, Quota


class JobFilterSet(StrictFilterSet):
    status = filters.MultipleChoiceFilter(choices=JobStatus.choices)
    sharing = filters.ChoiceFilter(choices=SharingMode.choices)
    workload = filters.ChoiceFilter(choices=Workload.choices)
    cluster = filters.CharFilter(field_name="pool__cluster__name")
    pool = IdFilter(field_name="pool_id")
    priority_class = filters.CharFilter(field_name="priority_class__name")
    name = filters.CharFilter(lookup_expr="icontains")
    submitted_after = DateTimeFilter(field_name="submitted_at", lookup_expr="gte")

    class Meta:
        model = Job
        fields = ["status", "sharing", "workload", "cluster", "pool", "priority_class", "name", "held"]


class QuotaFilterSet(StrictFilterSet):
    pool = IdFilter(field_name="pool_id")

    class Meta:
        model = Quota
        fields = ["pool"]
