from django.contrib.admin.views.decorators import staff_member_required
from django.shortcuts import get_object_or_404, render

from fabric.adapters import fabric_for_cluster
from fabric.models import Cluster
from fabric.topology import analyse, render_text


@staff_member_required
def cluster_report(request, cluster_id: int):
    cluster = get_object_or_404(Cluster, pk=cluster_id)
    text = render_text(analyse(fabric_for_cluster(cluster)))
    return render(request, "fabric/report.html", {"cluster": cluster, "text": text})
