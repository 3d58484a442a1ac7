"""GET /api/v1/clusters/<id>/topology/?format=FORMAT: the fabric in a format a scheduler reads (docs/integrations.md).

The body is the file itself (topology.conf, topology.yaml, a Kueue or Volcano manifest, a label script), with its
media type and a Content-Disposition naming the file; a fabric the format cannot express is a 409 saying why. Read
like the rest of the inventory: any signed-in user (IsStaffOrReadOnly), as /clusters/<id>/report/ is.

`format` names the export here, not one of DRF's renderers (its URL_FORMAT_OVERRIDE): errors are always JSON.
"""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from clusterctl.openapi import error_response
from fabric.api.permissions import IsStaffOrReadOnly
from fabric.exporting import FORMATS, ExportRefused, export_cluster
from fabric.models import Cluster

MEDIA_TYPES = ("text/plain", "application/yaml", "text/x-shellscript")
OK_DESCRIPTION = (
    "The file: text/plain for slurm-tree and slurm-block (topology.conf), application/yaml for slurm-yaml, kueue and "
    "volcano, text/x-shellscript for kueue-labels; Content-Disposition names it."
)


class _JsonErrors(BaseContentNegotiation):
    """A success is the export's own HttpResponse; what goes through DRF (an error) is JSON, whatever `?format=`."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class ClusterTopologyView(GenericAPIView):
    queryset = Cluster.objects.all()
    permission_classes = [IsStaffOrReadOnly]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = _JsonErrors
    pagination_class = None
    filter_backends: list = []

    @extend_schema(
        operation_id="clusters_topology_retrieve",
        parameters=[
            OpenApiParameter(
                "format", {"type": "string", "enum": list(FORMATS)}, required=True,
                description=(
                    "slurm-tree: topology.conf for topology/tree; slurm-block: topology.conf for topology/block (the "
                    "multi-node NVLink domains); slurm-yaml: topology.yaml (Slurm 25.05+); kueue: a Kueue Topology; "
                    "kueue-labels: the kubectl label lines its levels need; volcano: Volcano HyperNodes."
                ),
            )
        ],
        responses={
            (200, media): OpenApiResponse(OpenApiTypes.STR, description=OK_DESCRIPTION) for media in MEDIA_TYPES
        } | {
            409: error_response(
                "The fabric cannot be written in this format (no clear tiers, no multi-node NVLink domain for "
                "slurm-block, a name the format cannot take): `detail` says why and what would make it possible."
            ),
        },
    )  # fmt: skip
    def get(self, request, pk=None):
        """The cluster's fabric (leaf groups, spines, NVLink domains; live links only) in a scheduler's format."""
        cluster = self.get_object()
        fmt = request.query_params.get("format", "")
        if fmt not in FORMATS:
            problem = f"{fmt!r} is not a format" if fmt else "this field is required"
            return Response({"format": [f"{problem}; the formats are {', '.join(FORMATS)}"]}, status=400)
        try:
            export = export_cluster(cluster, fmt)
        except ExportRefused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        response = HttpResponse(export.text, content_type=f"{export.media_type}; charset=utf-8")
        response["Content-Disposition"] = f'inline; filename="{export.filename}"'
        return response
