"""The twin of a stored cluster (fabric/stored_twin.py): built from the database, driven by the scheduler."""

from __future__ import annotations

import time

import pytest

from fabric import actions as fabric_actions
from fabric import stored_twin
from fabric.choices import LinkState
from fabric.collectors.twin import TwinCollector
from fabric.collectors.twin_model import FLAP, XID
from fabric.models import Link, Node, Port, Switch
from fabric.telemetry.rates import port_rates
from scheduler import actions
from scheduler.models import Allocation, PriorityClass
from scheduler.rounds import run_round
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_twins():
    stored_twin.forget_twins()
    yield
    stored_twin.forget_twins()


@pytest.fixture
def place():
    """Submit a job to the cluster's default pool and run a round; returns the job's (host, GPU index) set."""

    def make(cluster, gpus: int, **request):
        pool = actions.ensure_scheduler(cluster)
        tenant = actions.create_tenant("acme", max_priority="high")
        normal = PriorityClass.objects.get(name="normal")
        job = actions.submit_job(tenant, pool, normal, gpus=gpus, name=f"job-{gpus}", **request)
        run_round(cluster.pk, "test")
        return set(Allocation.objects.filter(job=job, active=True).values_list("gpu__node__hostname", "gpu__index"))

    return make


def hosts_of(cluster) -> list[str]:
    return sorted(Node.objects.filter(cluster=cluster).values_list("hostname", flat=True))


def guids_of(cluster) -> list[str]:
    return ["0x" + g for g in Switch.objects.filter(cluster=cluster).values_list("guid", flat=True)]


def test_placed_job_drives_exactly_its_gpus(place):
    cluster = fat_tree("twin1", nodes=4, leaf_ports=16)
    held = place(cluster, 4)
    assert len(held) == 4
    collector = TwinCollector()
    busy, idle = set(), set()
    for host in hosts_of(cluster):
        sample = collector.collect(host)
        assert sample.errors == [] and sample.collector == "twin" and len(sample.gpus) == 8
        for g in sample.gpus:
            assert g.uuid.startswith("GPU-") and g.memory_total_mib > 0
            (busy if g.utilisation_gpu_pct > 50 and g.power_w > 400 else idle).add((host, g.index))
            if (host, g.index) not in held:
                assert g.utilisation_gpu_pct <= 2 and g.power_w < 80
    assert busy == held


def test_sample_ports_are_the_stored_ports(place):
    cluster = fat_tree("twin2", nodes=4, leaf_ports=16)
    host = hosts_of(cluster)[0]
    sample = TwinCollector().collect(host)
    stored = set(
        Port.objects.filter(cluster=cluster, hca__node__hostname=host, link__isnull=False).values_list(
            "hca__device", "number"
        )
    )
    assert {(p.device, p.port) for p in sample.ports} == stored and len(stored) == 8
    switches = TwinCollector().collect_switches(host, guids_of(cluster))
    stored_switch = {
        ("0x" + guid, number)
        for guid, number in Port.objects.filter(cluster=cluster, switch__isnull=False, link__isnull=False).values_list(
            "switch__guid", "number"
        )
    }
    assert switches.errors == [] and {(p.device, p.port) for p in switches.ports} == stored_switch


def test_multi_node_job_loads_its_host_links_and_the_leaf_spine_links(place):
    # two leaf groups of four servers (2:1 at the leaves): six nodes cannot stay under one group
    cluster = fat_tree("twin3", nodes=8, leaf_ports=8, oversubscription=2.0)
    held = place(cluster, 48, nodes=6, gpus_per_node=8)
    job_hosts = {h for h, _ in held}
    assert len(job_hosts) == 6
    collector = TwinCollector()
    guids = guids_of(cluster)
    before = {h: collector.collect(h) for h in hosts_of(cluster)}
    sw_before = collector.collect_switches(hosts_of(cluster)[0], guids)
    time.sleep(1.2)  # past the job refresh: the twin advances with the real clock
    after = {h: collector.collect(h) for h in hosts_of(cluster)}
    sw_after = collector.collect_switches(hosts_of(cluster)[0], guids)
    for host in hosts_of(cluster):
        a, b = before[host], after[host]
        rates = [port_rates(p, a.collected_at, q, b.collected_at) for p, q in zip(a.ports, b.ports, strict=True)]
        sent = sum(r.tx_bytes_per_s for r in rates)
        if host in job_hosts:
            assert sent > 10e9  # tens of GB/s of all-reduce out of each of its nodes
        else:
            assert sent == 0
    roles = dict(Switch.objects.filter(cluster=cluster).values_list("guid", "role"))
    old = {(p.device, p.port): p for p in sw_before.ports}
    uplink_traffic = 0
    for link in Link.objects.filter(cluster=cluster).prefetch_related("ports__switch"):
        ends = [p for p in link.ports.all() if p.switch_id]
        if len(ends) == 2 and {roles[e.switch.guid] for e in ends} == {"leaf", "spine"}:
            leaf = next(e for e in ends if roles[e.switch.guid] == "leaf")
            key = ("0x" + leaf.switch.guid, leaf.number)
            now = next(p for p in sw_after.ports if (p.device, p.port) == key)
            uplink_traffic += now.counters["port_xmit_data"] - old[key].counters["port_xmit_data"]
    assert uplink_traffic > 0
    for p in sw_after.ports:  # switch counters never go backwards
        for name in ("port_xmit_data", "port_rcv_data", "port_xmit_wait"):
            assert p.counters[name] >= old[(p.device, p.port)].counters[name]


def test_model_is_kept_per_fabric_version_and_rebuilt_with_counters_carried_over(place):
    cluster = fat_tree("twin4", nodes=4, leaf_ports=16)
    place(cluster, 16, nodes=2, gpus_per_node=8)
    first = stored_twin.twin_for_cluster(cluster.pk, now=1000.0)
    assert stored_twin.twin_for_cluster(cluster.pk, now=1010.0) is first
    host = next(h for h, _ in Allocation.objects.filter(active=True).values_list("gpu__node__hostname", "gpu__id"))
    tx_before = sum(p.counters["port_xmit_data"] for p in first.sample(host, 1010.0).ports)
    assert tx_before > 0
    # the control plane marking a link down (an alert did) is not a change of the twin's hardware
    Link.objects.filter(pk=Link.objects.filter(cluster=cluster).first().pk).update(state=LinkState.DOWN)
    assert stored_twin.twin_for_cluster(cluster.pk, now=1020.0) is first
    # a changed fabric is: new model, same counters going on
    spare = Link.objects.filter(cluster=cluster, ports__switch__isnull=False, ports__hca__isnull=True).first()
    Link.objects.filter(pk=spare.pk).update(capacity_gbps=200.0)
    second = stored_twin.twin_for_cluster(cluster.pk, now=1030.0)
    assert second is not first
    tx_after = sum(p.counters["port_xmit_data"] for p in second.sample(host, 1030.0).ports)
    assert tx_after >= tx_before * 1.5  # 10 s more on top of the first 10
    assert stored_twin.twin_for_cluster(cluster.pk, now=1030.5) is second


def test_jobs_are_read_once_per_refresh(place, django_assert_max_num_queries):
    cluster = fat_tree("twin5", nodes=4, leaf_ports=16)
    place(cluster, 8)
    collector = TwinCollector()
    hosts = hosts_of(cluster)
    collector.collect(hosts[0])
    with django_assert_max_num_queries(len(hosts)):  # at most the hostname look-ups: no jobs, no fabric
        for host in hosts[1:]:
            assert collector.collect(host).errors == []


def test_cluster_option_and_ambiguous_hostnames():
    a = fat_tree("twin-a", nodes=2, leaf_ports=16)
    b = fat_tree("twin-b", nodes=2, leaf_ports=16)  # same hostnames, same (generated) switch GUIDs
    ambiguous = TwinCollector().collect("gpu0001")
    assert ambiguous.gpus == [] and "2 clusters" in ambiguous.errors[0]
    assert TwinCollector(cluster="twin-a").collect("gpu0001").errors == []
    assert TwinCollector(cluster=a.pk).collect("gpu0001").errors == []
    assert "no cluster 'nope'" in TwinCollector(cluster="nope").collect("gpu0001").errors[0]
    assert "no cluster has a node" in TwinCollector().collect("nowhere").errors[0]
    guids = guids_of(a)
    assert "2 clusters" in TwinCollector().collect_switches("@fabric", guids).errors[0]
    assert TwinCollector(cluster="twin-b").collect_switches("@fabric", guids).errors == []
    # the fabric agent's switches name their cluster when its hostname does not
    fabric_actions.delete_cluster(b)
    by_switches = TwinCollector().collect_switches("@fabric", guids)
    assert by_switches.errors == [] and len(by_switches.ports) > 0


def test_seed_and_fault_rate_from_options_and_settings(settings):
    cluster = fat_tree("twin6", nodes=2, leaf_ports=16)
    settings.TWIN_SEED, settings.TWIN_FAULT_RATE = 11, 0.0
    m = stored_twin.twin_for_cluster(cluster.pk, now=0.0)
    assert (m.seed, m.fault_rate) == (stored_twin.cluster_seed(11, cluster.pk), 0.0)
    assert stored_twin.cluster_seed(11, cluster.pk) != stored_twin.cluster_seed(11, cluster.pk + 1)
    fresh = stored_twin.twin_for_cluster(cluster.pk, seed=3, fault_rate=3600.0, now=0.0)
    assert fresh is not m and (fresh.seed, fresh.fault_rate) == (stored_twin.cluster_seed(3, cluster.pk), 3600.0)
    stored_twin.twin_for_cluster(cluster.pk, seed=3, fault_rate=3600.0, now=60.0)
    assert len(fresh.faults) > 10  # about one a second


def test_schedule_fault_picks_a_busy_node_by_default(place, settings):
    settings.TWIN_FAULT_RATE = 0.0
    cluster = fat_tree("twin7", nodes=4, leaf_ports=16)
    held = place(cluster, 8)
    (busy_host,) = {h for h, _ in held}
    flap = stored_twin.schedule_fault(cluster.pk, FLAP, in_s=-1.0, duration=60.0)
    assert flap.node == busy_host
    ports = TwinCollector().collect(busy_host).ports
    assert [p.state for p in ports].count("DOWN") == 1
    xid = stored_twin.schedule_fault(cluster.pk, XID, in_s=-1.0)
    assert (xid.node, xid.gpu_index) in held
    gpus = TwinCollector().collect(busy_host).gpus
    assert [g.xid_events for g in gpus if g.index == xid.gpu_index] == [[79]]
