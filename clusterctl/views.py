from django.contrib.admin.views.decorators import staff_member_required
from django.shortcuts import render

from clusterctl.legend import legends
from fabric.models import Cluster
from fabric.selectors import cluster_summary


@staff_member_required
def overview(request):
    clusters = [cluster_summary(pk) for pk in Cluster.objects.values_list("pk", flat=True)]
    return render(request, "clusterctl/overview.html", {"clusters": clusters, "legends": legends()})
