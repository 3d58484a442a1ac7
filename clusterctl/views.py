from django.contrib.admin.views.decorators import staff_member_required
from django.shortcuts import render

from fabric.choices import ALL_CHOICES
from fabric.models import Cluster
from fabric.selectors import cluster_summary


@staff_member_required
def overview(request):
    clusters = [cluster_summary(pk) for pk in Cluster.objects.values_list("pk", flat=True)]
    legends = {name: choices.legend() for name, choices in ALL_CHOICES.items()}
    return render(request, "clusterctl/overview.html", {"clusters": clusters, "legends": legends})
