"""Inventory serializers: every field listed; derived fields read-only."""

from rest_framework import serializers

from clusterctl.serializers import StrictCharField, StrictModelSerializer
from fabric.models import GPU, Cluster, Link, Node, Port, Switch


class ClusterSerializer(StrictModelSerializer):
    class Meta:
        model = Cluster
        fields = ["id", "url", "name", "description", "created", "updated"]
        read_only_fields = ["created", "updated"]


class SwitchSerializer(StrictModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Switch
        fields = [
            "id", "url", "cluster", "guid", "lid", "name", "description", "vendor_id", "device_id", "model",
            "port_count", "role", "role_source", "rack",
        ]  # fmt: skip
        read_only_fields = [
            "guid", "lid", "description", "vendor_id", "device_id", "port_count", "role_source",
        ]  # fmt: skip


class NodeSerializer(StrictModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    gpu_count = serializers.IntegerField(read_only=True)
    hca_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Node
        fields = [
            "id", "url", "cluster", "hostname", "role", "rack", "nvlink_domain", "state", "state_reason", "gpu_model",
            "gpu_count", "hca_count", "unnamed", "system_guid",
            "cpu_milli", "memory_mib", "cpu_milli_manual", "memory_mib_manual", "reported_cpu_milli",
            "reported_memory_mib",
        ]  # fmt: skip
        # unnamed: the fabric named no host for its HCAs and `hostname` is a placeholder ("unnamed-<GUID>").
        # cpu_milli / memory_mib: what jobs may take of the host; a value sent is the operator's (kept whatever the
        # node agent reports, *_manual true), *_manual false follows the agent's report (reported_*) again.
        read_only_fields = [
            "hostname", "state", "state_reason", "unnamed", "system_guid", "reported_cpu_milli", "reported_memory_mib",
        ]  # fmt: skip

    def validate(self, attrs: dict) -> dict:
        errors = {
            name: [f"{name}_manual false follows the node agent's report: leave {name} out, or send it alone to set it"]
            for name in ("cpu_milli", "memory_mib")
            if name in attrs and attrs.get(f"{name}_manual") is False
        }
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class NodeStateSerializer(serializers.Serializer):
    reason = StrictCharField(max_length=255, required=False, allow_blank=True, default="")


class LinkEndSerializer(serializers.ModelSerializer):
    device = serializers.SerializerMethodField()
    kind = serializers.SerializerMethodField()

    class Meta:
        model = Port
        fields = ["id", "kind", "device", "number", "guid", "lid", "width", "speed", "supported_speed", "state"]

    def get_kind(self, port: Port) -> str:
        return "switch" if port.switch_id else "hca"

    def get_device(self, port: Port) -> str:
        if port.switch_id:
            return port.switch.name
        hca = port.hca
        return f"{hca.node.hostname} {hca.device}".strip() if hca.node_id else hca.description


class LinkSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    a = serializers.SerializerMethodField()
    b = serializers.SerializerMethodField()

    class Meta:
        model = Link
        fields = [
            "id", "url", "cluster", "a", "b", "width", "speed", "capacity_gbps", "supported_gbps", "state",
            "state_reason", "last_seen", "loopback",
        ]  # fmt: skip
        read_only_fields = fields

    def _end(self, link: Link, which: str) -> dict | None:
        port = link.end(which)
        return LinkEndSerializer(port).data if port else None

    def get_a(self, link: Link) -> dict | None:
        return self._end(link, "a")

    def get_b(self, link: Link) -> dict | None:
        return self._end(link, "b")


class GpuSerializer(StrictModelSerializer):
    node = serializers.SlugRelatedField(slug_field="hostname", read_only=True)
    node_id = serializers.IntegerField(read_only=True)
    cluster = serializers.CharField(source="node.cluster.name", read_only=True)

    class Meta:
        model = GPU
        fields = [
            "id", "url", "cluster", "node", "node_id", "index", "uuid", "model", "memory_mib", "nvlink_generation",
            "nvlink_gbps", "mig_capable", "mig_enabled", "health", "numa_node", "cpu_affinity",
        ]  # fmt: skip
        read_only_fields = [
            "index", "uuid", "model", "memory_mib", "nvlink_generation", "nvlink_gbps", "mig_capable", "numa_node",
            "cpu_affinity",
        ]  # fmt: skip

    def validate(self, attrs):
        mig_capable = self.instance.mig_capable if self.instance else False
        if attrs.get("mig_enabled") and not mig_capable:
            raise serializers.ValidationError({"mig_enabled": "this GPU model does not support MIG"})
        return attrs
