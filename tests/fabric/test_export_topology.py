"""The fabric exported for schedulers from the database: `manage.py export_topology`, GET /clusters/<id>/topology/,
the bulk adapter, and Node.nvlink_domain (spec, API) that Slurm's blocks come from. The formats themselves are
tested pure in tests/fabric/topology/test_export*.py and against a real slurmctld in tests/slurm/."""

from __future__ import annotations

import textwrap
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric.actions.imports import import_text
from fabric.graph_from_db import export_input_for_cluster
from fabric.models import Cluster, Node
from fabric.topology.export import render

FIXTURES = Path(__file__).parent.parent / "fixtures"
SX6036 = str(FIXTURES / "ibnetdiscover_sx6036_8switch.topo")
NDR_DGX = str(FIXTURES / "ibnetdiscover_topograph_ndr_dgx.topo")

pytestmark = pytest.mark.django_db

# Four B200 servers in two NVLink domains of two, one domain per leaf; the spine joins the leaves.
NVL_SPEC = textwrap.dedent(
    """\
    rate: NDR
    switches:
      - {name: spine1, role: spine, ports: 8}
      - {name: leaf1, role: leaf, ports: 8}
      - {name: leaf2, role: leaf, ports: 8}
    nodes:
      - {hostname: gb01, gpu_model: B200, gpus: 4, nvlink_domain: nvl-a, hcas: [{device: mlx5_0, to: "leaf1:1"}]}
      - {hostname: gb02, gpu_model: B200, gpus: 4, nvlink_domain: nvl-a, hcas: [{device: mlx5_0, to: "leaf1:2"}]}
      - {hostname: gb03, gpu_model: B200, gpus: 4, nvlink_domain: nvl-b, hcas: [{device: mlx5_0, to: "leaf2:1"}]}
      - {hostname: gb04, gpu_model: B200, gpus: 4, nvlink_domain: nvl-b, hcas: [{device: mlx5_0, to: "leaf2:2"}]}
    links:
      - {a: "leaf1:7", b: "spine1:1"}
      - {a: "leaf2:7", b: "spine1:2"}
    """
)


def _import(path: str, name: str = "lab") -> Cluster:
    call_command("import_fabric", path, "--cluster", name, "--format", "ibnetdiscover", "--json", stdout=StringIO())
    return Cluster.objects.get(name=name)


@pytest.fixture
def lab() -> Cluster:
    return _import(SX6036)


@pytest.fixture
def nvl() -> Cluster:
    import_text("nvl", "spec", NVL_SPEC, source="nvl.yaml")
    return Cluster.objects.get(name="nvl")


def _export(*args: str) -> str:
    out = StringIO()
    call_command("export_topology", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def _body(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("#")]


#
# Node.nvlink_domain
#


def test_spec_import_stores_the_nvlink_domain(nvl):
    assert dict(Node.objects.filter(cluster=nvl).values_list("hostname", "nvlink_domain")) == {
        "gb01": "nvl-a", "gb02": "nvl-a", "gb03": "nvl-b", "gb04": "nvl-b"
    }  # fmt: skip


def test_a_spec_without_the_domain_keeps_the_stored_one(nvl):
    import_text("nvl", "spec", NVL_SPEC.replace(", nvlink_domain: nvl-a", ""), source="nvl.yaml")
    assert Node.objects.get(cluster=nvl, hostname="gb01").nvlink_domain == "nvl-a"


def test_operator_sets_the_nvlink_domain(operator_api, lab):
    node = Node.objects.get(cluster=lab, hostname="stage1")
    response = operator_api.patch(f"/api/v1/nodes/{node.pk}/", {"nvlink_domain": "nvl72-r01"}, format="json")
    assert response.status_code == 200
    assert response.json()["nvlink_domain"] == "nvl72-r01"
    node.refresh_from_db()
    assert node.nvlink_domain == "nvl72-r01"


def test_an_nvlink_domain_a_scheduler_cannot_name_is_a_400(operator_api, lab):
    node = Node.objects.get(cluster=lab, hostname="stage1")
    response = operator_api.patch(f"/api/v1/nodes/{node.pk}/", {"nvlink_domain": "rack 7/a"}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "nvlink_domain": ["letters, digits, '-', '_' and '.', starting and ending with a letter or digit (at most 63)"]
    }


#
# The adapter
#


def test_the_adapter_reads_what_the_pure_export_reads(lab):
    inp = export_input_for_cluster(lab)
    assert len(inp.fabric.switches) == 8 and len(inp.fabric.hosts) == 144
    assert _export("--cluster", "lab", "--format", "slurm-tree") == render(inp, "slurm-tree").text


def test_the_adapter_leaves_out_unnamed_hosts():
    cluster = _import(NDR_DGX, "ndr")
    inp = export_input_for_cluster(cluster)
    assert sum(1 for f in inp.hosts.values() if f.unnamed) == 72
    assert "#   72 unnamed hosts (HCAs whose node description names no host;" in render(inp, "slurm-tree").text


def test_the_adapter_knows_nvlink_inside_a_server(nvl):
    # B200 GPUs have NVLink (fabric/topology/catalog.py): with no multi-node domain, 4 servers of NVLink inside.
    Node.objects.filter(cluster=nvl).update(nvlink_domain="")
    with pytest.raises(
        CommandError, match=r"\(4 of the 4 compute hosts have GPUs joined by NVLink inside the server\)"
    ):
        _export("--cluster", "nvl", "--format", "slurm-block")


def test_the_adapter_reads_in_a_fixed_number_of_queries(lab, nvl):
    counts = []
    for cluster in (lab, nvl):
        with CaptureQueriesContext(connection) as queries:
            export_input_for_cluster(cluster)
        counts.append(len(queries))
    assert counts[0] == counts[1] == 6


#
# manage.py export_topology
#


def test_command_writes_blocks_from_the_database(nvl):
    assert _body(_export("--cluster", "nvl", "--format", "slurm-block")) == [
        "BlockName=nvl-a Nodes=gb[01-02]",
        "BlockName=nvl-b Nodes=gb[03-04]",
        "BlockSizes=2,4",
    ]


def test_command_writes_the_file_named(lab, tmp_path):
    target = tmp_path / "topology.conf"
    err = StringIO()
    call_command("export_topology", "--cluster", "lab", "--format", "slurm-tree", "--output", str(target), stderr=err)
    assert target.read_text().splitlines()[-1] == "SwitchName=ib8 Switches=ib[1-6]"
    assert f"wrote {target} (slurm-tree, 12 lines) for cluster lab" in err.getvalue()


def test_command_names_the_clusters_there_are(lab):
    with pytest.raises(CommandError, match=r"no cluster named 'prod' \(known: lab\)"):
        _export("--cluster", "prod", "--format", "slurm-tree")


def test_command_refuses_an_unknown_format(lab):
    with pytest.raises(CommandError, match="argument --format: invalid choice: 'pbs'"):
        _export("--cluster", "lab", "--format", "pbs")


def test_command_refusal_writes_nothing(lab, tmp_path):
    target = tmp_path / "topology.conf"
    with pytest.raises(CommandError) as err:
        _export("--cluster", "lab", "--format", "slurm-block", "--output", str(target))
    assert str(err.value).startswith("cluster lab: no NVLink domain spans more than one server")
    assert str(err.value).endswith("\nnothing was written.")
    assert not target.exists()


def test_command_refuses_a_directory_as_output(lab, tmp_path):
    with pytest.raises(CommandError, match="is a directory; name the file to write"):
        _export("--cluster", "lab", "--format", "slurm-tree", "--output", str(tmp_path))


#
# GET /api/v1/clusters/<id>/topology/
#


def test_api_serves_the_file_with_its_media_type(operator_api, lab):
    response = operator_api.get(f"/api/v1/clusters/{lab.pk}/topology/", {"format": "slurm-tree"})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"] == 'inline; filename="topology.conf"'
    assert response.content.decode() == _export("--cluster", "lab", "--format", "slurm-tree")


@pytest.mark.parametrize(
    ("fmt", "media", "filename"),
    [
        ("slurm-yaml", "application/yaml", "topology.yaml"),
        ("kueue", "application/yaml", "kueue-topology.yaml"),
        ("kueue-labels", "text/x-shellscript", "kueue-node-labels.sh"),
        ("volcano", "application/yaml", "volcano-hypernodes.yaml"),
    ],
)
def test_api_media_types(operator_api, lab, fmt, media, filename):
    response = operator_api.get(f"/api/v1/clusters/{lab.pk}/topology/", {"format": fmt})
    assert (response.status_code, response["Content-Type"]) == (200, f"{media}; charset=utf-8")
    assert response["Content-Disposition"] == f'inline; filename="{filename}"'


def test_api_blocks(operator_api, nvl):
    response = operator_api.get(f"/api/v1/clusters/{nvl.pk}/topology/", {"format": "slurm-block"})
    assert _body(response.content.decode())[-1] == "BlockSizes=2,4"


def test_api_is_read_like_the_rest_of_the_inventory(tenant_api, lab):
    # IsStaffOrReadOnly, as /clusters/<id>/report/: any signed-in user reads the fabric.
    assert tenant_api.get(f"/api/v1/clusters/{lab.pk}/topology/", {"format": "kueue"}).status_code == 200


def test_api_refuses_anonymous(client, lab):
    assert client.get(f"/api/v1/clusters/{lab.pk}/topology/", {"format": "kueue"}).status_code in (401, 403)


def test_api_needs_a_format(operator_api, lab):
    response = operator_api.get(f"/api/v1/clusters/{lab.pk}/topology/")
    assert response.status_code == 400
    assert response.json() == {
        "format": [
            "this field is required; the formats are slurm-tree, slurm-block, slurm-yaml, kueue, kueue-labels, volcano"
        ]
    }


@pytest.mark.parametrize("fmt", ["json", "api", "pbs"])
def test_api_unknown_format_is_a_400_not_a_renderer(operator_api, lab, fmt):
    # DRF reads ?format= as a renderer (URL_FORMAT_OVERRIDE); here it names the export, whatever its value.
    response = operator_api.get(f"/api/v1/clusters/{lab.pk}/topology/", {"format": fmt})
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["format"][0].startswith(f"'{fmt}' is not a format; the formats are slurm-tree")


def test_api_unknown_cluster_is_a_404(operator_api, lab):
    response = operator_api.get(f"/api/v1/clusters/{lab.pk + 1000}/topology/", {"format": "slurm-tree"})
    assert response.status_code == 404
    assert set(response.json()) == {"detail"}


def test_api_refusal_is_a_409_with_the_reason(operator_api, lab):
    response = operator_api.get(f"/api/v1/clusters/{lab.pk}/topology/", {"format": "slurm-block"})
    assert response.status_code == 409
    assert response.json()["detail"].startswith("cluster lab: no NVLink domain spans more than one server")
