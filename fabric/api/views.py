"""Inventory API: tiny viewsets, explicit fields, one filterset each; writes go through fabric.actions."""

from django.conf import settings
from django.db.models import Count, IntegerField, OuterRef, ProtectedError, Subquery
from django.db.models.functions import Coalesce
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from clusterctl.openapi import error_response
from clusterctl.pagination import query_int
from fabric import actions, providers
from fabric.actions.imports import ALL_FORMATS, import_text
from fabric.api import filtersets
from fabric.api.permissions import IsStaffOrReadOnly
from fabric.api.serializers import (
    ClusterSerializer,
    GpuSerializer,
    LinkSerializer,
    NodeSerializer,
    NodeStateSerializer,
    SwitchSerializer,
)
from fabric.choices import NodeState
from fabric.importers.types import ParseError
from fabric.models import GPU, HCA, Cluster, Link, Node, Switch
from fabric.reports import cluster_report
from fabric.selectors import hottest_links


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


# The file of one import (settings.FABRIC_IMPORT_MAX_BYTES): the ASGI layer refuses a larger body with 413 before it is
# read (clusterctl/limits.py); this check names the file's own size for one that got through another way (a test
# client, a larger REQUEST_BODY_LIMITS entry).
MAX_IMPORT_BYTES = settings.FABRIC_IMPORT_MAX_BYTES


class ActionsWriteMixin:
    def perform_update(self, serializer):
        serializer.instance = actions.update_inventory_object(serializer.instance, serializer.validated_data)


class ImportSerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=ALL_FORMATS)
    file = serializers.FileField()
    node = serializers.CharField(required=False, allow_blank=True, default="", help_text="for nvidia-topo")


MAX_TOP_LINKS = 200


@extend_schema_view(
    destroy=extend_schema(
        responses={204: None, 409: error_response("The cluster still has jobs: cancel and remove them first.")}
    )
)
class ClusterViewSet(ActionsWriteMixin, viewsets.ModelViewSet):
    queryset = Cluster.objects.all()
    serializer_class = ClusterSerializer
    permission_classes = [IsStaffOrReadOnly]
    filterset_class = filtersets.ClusterFilterSet

    def perform_create(self, serializer):
        try:
            serializer.instance = actions.create_cluster(**serializer.validated_data)
        except actions.ActionError as exc:
            raise serializers.ValidationError({"name": str(exc)}) from exc

    def perform_destroy(self, instance):
        try:
            actions.delete_cluster(instance)
        except ProtectedError as exc:
            raise Conflict(f"cluster {instance.name} still has jobs; cancel and remove them first") from exc

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"])
    def report(self, request, pk=None):
        """Fabric analysis: tiers, oversubscription, bisection, single points of failure, degraded links."""
        cluster = self.get_object()
        return Response({"cluster": cluster.name, **cluster_report(cluster.pk).report.to_dict()})

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "top", {"type": "integer", "minimum": 1, "maximum": MAX_TOP_LINKS}, default=10,
                description=f"How many of the busiest links, 1-{MAX_TOP_LINKS} (default 10).",
            )
        ],
        responses={200: dict},
    )  # fmt: skip
    @action(detail=True, methods=["get"])
    def load(self, request, pk=None):
        """Live load: the busiest links of the cluster right now (`?top=N`, default 10, at most 200), and each
        pool's spread of GPU utilisation (see /pools/<id>/load/; the scheduler's section, `fabric.providers`)."""
        cluster = self.get_object()
        top = query_int(request, "top", 1, MAX_TOP_LINKS, 10)
        return Response(
            {
                "cluster": cluster.name,
                "hottest_links": hottest_links(cluster.pk, top),
                **providers.load_sections(cluster),
            }
        )

    @extend_schema(request=ImportSerializer, responses={200: dict})
    @action(detail=True, methods=["post"], parser_classes=[MultiPartParser, FormParser], url_path="import")
    def import_file(self, request, pk=None):
        """Import an ibnetdiscover / ibnetdiscover -p / spec file, or one node's nvidia-smi topo -m."""
        cluster = self.get_object()
        form = ImportSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        upload = form.validated_data["file"]
        if upload.size > MAX_IMPORT_BYTES:
            return Response({"file": [f"{upload.size} bytes is over the {MAX_IMPORT_BYTES} byte limit"]}, 400)
        try:
            text = upload.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            return Response({"file": [f"not UTF-8 text: byte {exc.start} is {exc.object[exc.start]:#04x}"]}, 400)
        try:
            summary = import_text(
                cluster.name, form.validated_data["format"], text, source=upload.name, node=form.validated_data["node"]
            )
        except (ParseError, actions.ActionError) as exc:
            return Response({"file": [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        return Response(summary)


def _count_of(model) -> Coalesce:
    """Per-node row count as a subquery: joining both GPUs and HCAs would multiply the rows."""
    counts = model.objects.filter(node=OuterRef("pk")).order_by().values("node").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counts, output_field=IntegerField()), 0)


class SwitchViewSet(ActionsWriteMixin, mixins.UpdateModelMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Switch.objects.select_related("cluster")
    serializer_class = SwitchSerializer
    permission_classes = [IsStaffOrReadOnly]
    filterset_class = filtersets.SwitchFilterSet
    ordering_fields = ["name", "lid", "role"]


class NodeViewSet(ActionsWriteMixin, mixins.UpdateModelMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Node.objects.select_related("cluster").annotate(gpu_count=_count_of(GPU), hca_count=_count_of(HCA))
    serializer_class = NodeSerializer
    permission_classes = [IsStaffOrReadOnly]
    filterset_class = filtersets.NodeFilterSet
    ordering_fields = ["hostname", "state", "rack"]

    def _set_state(self, request, state: str) -> Response:
        node = self.get_object()
        body = NodeStateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        actions.set_node_state([node], state, reason=body.validated_data["reason"])
        return Response(self.get_serializer(self.get_queryset().get(pk=node.pk)).data)

    @extend_schema(request=NodeStateSerializer, responses=NodeSerializer)
    @action(detail=True, methods=["post"])
    def drain(self, request, pk=None):
        """Stop placing new work on the node; running work stays."""
        return self._set_state(request, NodeState.DRAIN)

    @extend_schema(request=NodeStateSerializer, responses=NodeSerializer)
    @action(detail=True, methods=["post"])
    def undrain(self, request, pk=None):
        return self._set_state(request, NodeState.UP)


class LinkViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Link.objects.select_related("cluster").prefetch_related("ports__switch", "ports__hca__node")
    serializer_class = LinkSerializer
    permission_classes = [IsStaffOrReadOnly]
    filterset_class = filtersets.LinkFilterSet
    ordering_fields = ["id", "capacity_gbps", "state"]


class GpuViewSet(ActionsWriteMixin, mixins.UpdateModelMixin, viewsets.ReadOnlyModelViewSet):
    queryset = GPU.objects.select_related("node__cluster")
    serializer_class = GpuSerializer
    permission_classes = [IsStaffOrReadOnly]
    filterset_class = filtersets.GpuFilterSet
    ordering_fields = ["node__hostname", "index", "health"]
