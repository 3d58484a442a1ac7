"""One node agent reports everything its host has (issue 13): TELEMETRY_COLLECTOR=nvml,sysfs-ib (or auto) polls a GPU
server's GPUs through NVML and its IB ports and HCA GUIDs through sysfs, as one sample; ingest stores the GPU metrics
and attaches the unnamed HCA whose GUID the agent reports. The agent keeps its collector from poll to poll.

The fabric is PSMN's real X5 capture (89 HCAs with the firmware-default description, so 89 unnamed placeholders); the
agent's NVML is the fake library (tests/fabric/collectors/fake_nvml.py) with two H100s, its sysfs is
tests/fixtures/sysfs_infiniband_x5_gluster1 (the node GUID of the X5 HCA r510gluster1, 0x0002c90300080e84)."""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured

from fabric import tasks
from fabric.actions.imports import import_text
from fabric.collectors.registry import agent_collector, check_settings
from fabric.latest import latest_key
from fabric.models import GPU, HCA, Cluster, GpuMetric, Node, PortMetric
from tests.fabric.collectors.fake_nvml import FakeNvml, h100

FIXTURES = Path(__file__).parent.parent / "fixtures"
X5 = (FIXTURES / "ibnetdiscover_psmn_x5_unnamed_hcas.topo").read_text()
SYSFS = FIXTURES / "sysfs_infiniband_x5_gluster1" / "class" / "infiniband"
GLUSTER1 = "0002c90300080e84"
GLUSTER1_PLACEHOLDER = "unnamed-0002c90300080e87"

pytestmark = pytest.mark.django_db


def options(settings, **entries) -> None:
    settings.COLLECTOR_OPTIONS = {**settings.COLLECTOR_OPTIONS, **entries}


# --- the agent's side: no database, one collector kept ---------------------------------------------------------------


def test_the_payload_of_a_combined_poll_carries_gpus_ports_and_hca_guids(settings, django_assert_num_queries):
    options(settings, nvml={"nvml": FakeNvml([h100(0), h100(1)])}, **{"sysfs-ib": {"root": str(SYSFS)}})
    with django_assert_num_queries(0):
        body = tasks.poll_node("r510gluster1", "nvml,sysfs-ib")
    assert (body["node"], body["collector"], body["errors"]) == ("r510gluster1", "nvml,sysfs-ib", [])
    assert [g["index"] for g in body["gpus"]] == [0, 1]
    assert [(p["device"], p["port"], p["state"]) for p in body["ports"]] == [("mlx4_0", 1, "ACTIVE")]
    assert body["hcas"] == [
        {"device": "mlx4_0", "node_guid": GLUSTER1, "system_guid": "0002c90300080e87", "node_type": "CA"}
    ]


def test_the_agent_keeps_its_nvml_collector_so_nvml_starts_once_and_xids_between_polls_arrive(settings):
    fake = FakeNvml([h100(0)])
    options(settings, nvml={"nvml": fake})
    assert tasks.poll_node("gpu017", "nvml")["gpus"][0]["xid_events"] == []
    fake.queue_xid(0, 79)  # between two polls
    assert tasks.poll_node("gpu017", "nvml")["gpus"][0]["xid_events"] == [79]
    # Before, each poll made a new collector: nvmlInit again and one more event set, never freed.
    assert fake.calls.count("nvmlInit") == 1 and len(fake.event_sets) == 1


def test_the_agent_keeps_its_prometheus_collector_so_an_old_xid_is_reported_once(settings, tmp_path):
    page = tmp_path / "metrics.prom"
    page.write_text('DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-1",modelName="NVIDIA H100 80GB HBM3"} 79\n')
    options(settings, prometheus={"file": str(page)})
    assert tasks.poll_node("gpu017", "prometheus")["gpus"][0]["xid_events"] == [79]
    assert tasks.poll_node("gpu017", "prometheus")["gpus"][0]["xid_events"] == []  # the same XID, not a new one


def test_changed_options_make_a_new_collector(settings):
    first, second = FakeNvml([h100(0)]), FakeNvml([h100(0), h100(1)])
    options(settings, nvml={"nvml": first})
    kept = agent_collector("nvml,sysfs-ib")
    assert agent_collector("nvml,sysfs-ib") is kept
    options(settings, nvml={"nvml": second})
    assert [g["index"] for g in tasks.poll_node("gpu017", "nvml,sysfs-ib")["gpus"]] == [0, 1]


# --- the setting, checked at start ----------------------------------------------------------------------------------


def test_a_misspelt_collector_setting_is_refused_naming_the_wrong_name(settings):
    settings.TELEMETRY_COLLECTOR = "nvml,sysfs-ibb"
    with pytest.raises(ImproperlyConfigured) as info:
        check_settings()
    assert str(info.value).startswith(
        "TELEMETRY_COLLECTOR='nvml,sysfs-ibb': unknown collector 'sysfs-ibb' in 'nvml,sysfs-ibb'; configured: nvml, "
    )


def test_an_unknown_switch_collector_is_refused(settings):
    settings.TELEMETRY_SWITCH_COLLECTOR = "nvml,perfquery"
    with pytest.raises(ImproperlyConfigured, match=r"^TELEMETRY_SWITCH_COLLECTOR='nvml,perfquery': unknown collector"):
        check_settings()


@pytest.mark.parametrize("value", ["", "nvml", "nvml,sysfs-ib", "nvml+sysfs-ib", "auto", "static"])
def test_good_collector_settings_pass(settings, value):
    settings.TELEMETRY_COLLECTOR = value
    check_settings()


def test_every_process_refuses_to_start_with_a_misspelt_collector(tmp_path):
    import os
    import subprocess
    import sys

    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")},
        "DJANGO_SETTINGS_MODULE": "clusterctl.settings",
        "CLUSTERCTL_ENV_FILE": "",
        "DEBUG": "1",
        "TELEMETRY_COLLECTOR": "nvml,sysfs-ibb",
    }
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "django.core.exceptions.ImproperlyConfigured: TELEMETRY_COLLECTOR='nvml,sysfs-ibb': unknown collector "
            "'sysfs-ibb' in 'nvml,sysfs-ibb'"
        )
    )


# --- the whole path: poll -> poll_node (combined) -> ingest -> GPU metrics stored, HCA attached --------------------


@pytest.fixture
def gpu_server(settings):
    """The X5 fabric, and r510gluster1 added by the operator with its two GPUs; its agent polled inline."""
    settings.TELEMETRY_NODE_QUEUES = False
    options(settings, nvml={"nvml": FakeNvml([h100(0), h100(1)])}, **{"sysfs-ib": {"root": str(SYSFS)}})
    import_text("x5", "ibnetdiscover", X5, source="x5.topo")
    cluster = Cluster.objects.get(name="x5")
    node = Node.objects.create(cluster=cluster, hostname="r510gluster1")
    for index in (0, 1):
        GPU.objects.create(node=node, index=index, model="H100", memory_mib=81_559)
    yield cluster
    for host in ("r510gluster1", GLUSTER1_PLACEHOLDER):
        cache.delete(latest_key(cluster.pk, host))


def attached_to(guid: str) -> tuple[str, bool, str]:
    hca = HCA.objects.select_related("node").get(guid=guid)
    return hca.node.hostname, hca.node.unnamed, hca.device


def test_one_combined_poll_stores_the_gpus_and_attaches_the_unnamed_hca(gpu_server):
    assert tasks.poll_cluster(gpu_server.pk, "nvml,sysfs-ib") == 1  # the 89 placeholders are not polled
    assert attached_to(GLUSTER1) == ("r510gluster1", False, "mlx4_0")
    assert not Node.objects.filter(hostname=GLUSTER1_PLACEHOLDER).exists()
    assert gpu_server.nodes.filter(unnamed=True).count() == 88
    # the fake H100s: 97 % busy, 70,000 MiB used
    rows = GpuMetric.objects.filter(gpu__node__hostname="r510gluster1").order_by("gpu__index")
    assert [(m.gpu.index, m.utilisation_pct, m.memory_used_mib) for m in rows] == [(0, 97, 70_000), (1, 97, 70_000)]


def test_after_the_attach_the_port_of_the_hca_gets_its_metrics_beside_the_gpus(gpu_server):
    for _ in range(3):
        tasks.poll_cluster(gpu_server.pk, "nvml,sysfs-ib")
    port = HCA.objects.get(guid=GLUSTER1).ports.get(number=1)
    # Poll 1 attaches (its batch's port map predates that); polls 2 and 3 each give a rate against the sample before.
    assert PortMetric.objects.filter(port=port).count() == 2
    assert GpuMetric.objects.filter(gpu__node__hostname="r510gluster1").count() == 6


def test_with_nvml_failing_the_hca_is_still_attached(gpu_server, settings):
    broken = FakeNvml([h100(0)], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    options(settings, nvml={"nvml": broken})
    tasks.poll_cluster(gpu_server.pk, "nvml,sysfs-ib")
    assert attached_to(GLUSTER1) == ("r510gluster1", False, "mlx4_0")
    assert not GpuMetric.objects.exists()
    stored = cache.get(latest_key(gpu_server.pk, "r510gluster1"))
    assert stored["errors"] == ["nvmlInit failed: NVMLError_DriverNotLoaded"] and stored["gpus"] == []


def test_auto_on_the_gpu_server_does_the_same(gpu_server, settings, tmp_path):
    (tmp_path / "proc-nvidia-gpus" / "0000:17:00.0").mkdir(parents=True)  # the NVIDIA driver knows a GPU
    options(settings, auto={"pci_root": str(tmp_path / "no-pci"), "nvidia_proc": str(tmp_path / "proc-nvidia-gpus")})
    tasks.poll_cluster(gpu_server.pk, "auto")
    assert attached_to(GLUSTER1) == ("r510gluster1", False, "mlx4_0")
    assert GpuMetric.objects.filter(gpu__node__hostname="r510gluster1").count() == 2
