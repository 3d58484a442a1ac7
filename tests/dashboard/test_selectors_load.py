"""New load into the states of an earlier build (selectors.with_load): after an ingest that changed nothing but the
load, the same states a new build gives, without reading the database."""

from __future__ import annotations

import copy

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard import selectors
from dashboard.selectors import fabric_topic
from fabric.collectors.samples import GpuSample, NodeSample, PortSample
from fabric.ingest import ingest_samples
from fabric.latest import forget_node
from fabric.models import GPU, Port

pytestmark = pytest.mark.django_db
LOAD = ("overview", "fabric", "gpus")


def poll(cluster_id: int, at: float, util: float, hosts=("gpu0001", "gpu0003")) -> None:
    """One poll of `hosts`: every GPU at `util` % (one at 2 x), each cabled HCA port's counters moving."""
    samples = []
    for host in hosts:
        gpus = GPU.objects.filter(node__cluster_id=cluster_id, node__hostname=host).order_by("index")
        ports = Port.objects.filter(hca__node__hostname=host, hca__node__cluster_id=cluster_id, link__isnull=False)
        units = int(at * 1e9)  # grows with time: a rate the next poll turns into utilisation
        samples.append(
            NodeSample(
                node=host, collected_at=at, collector="test",
                gpus=[GpuSample(index=g.index, utilisation_gpu_pct=util * (2 if g.index == 0 else 1),
                                memory_used_mib=1000.0 * g.index, memory_total_mib=81559.0, temperature_c=50.0 + util,
                                power_w=300.0 + util) for g in gpus],
                ports=[PortSample(device=p.hca.device, port=p.number, state="ACTIVE", phys_state="LinkUp",
                                  rate_gbps=400.0, counters={"port_xmit_data": units * (p.number + 1),
                                                             "port_rcv_data": units}) for p in ports],
            )
        )  # fmt: skip
    ingest_samples(cluster_id, samples)


@pytest.fixture
def polled(site):
    yield site
    for host in ("gpu0001", "gpu0003"):
        forget_node(site.cluster.pk, host)


@pytest.mark.parametrize("aggregate_above", [256, 2])
def test_new_load_into_an_earlier_build_equals_a_new_build(polled, monkeypatch, aggregate_above):
    monkeypatch.setattr(fabric_topic, "AGGREGATE_ABOVE", aggregate_above)
    cid = polled.cluster.pk
    poll(cid, 1000.0, 10.0)
    states, load_map = selectors.build_mapped(cid, LOAD)
    kept = copy.deepcopy(states)
    poll(cid, 1001.0, 35.0)
    poll(cid, 1002.5, 70.0)
    with CaptureQueriesContext(connection) as queries:
        loaded = dict(selectors.with_load(cid, states, load_map))
    fresh = selectors.build(cid, LOAD)
    assert loaded == fresh
    assert loaded["gpus"] != states["gpus"] and loaded["fabric"] != states["fabric"]  # the load did change
    assert len(queries) == 0
    assert states == kept  # the earlier build is not changed


def test_the_load_lands_where_a_build_puts_it(polled):
    cid = polled.cluster.pk
    states, load_map = selectors.build_mapped(cid, LOAD)
    poll(cid, 1000.0, 20.0)
    poll(cid, 1001.0, 40.0)
    loaded = dict(selectors.with_load(cid, states, load_map))
    busy = [g for g in loaded["gpus"]["gpus"] if g["node"] == "gpu0003"]
    # worked out from the poll: index 0 at 2 x 40 %, the others at 40 %, memory 1,000 MiB per index, 90 C, 340 W
    assert [(g["index"], g["util"], g["mem_used"], g["temp"], g["power"]) for g in busy] == [
        (i, 80.0 if i == 0 else 40.0, 1000 * i, 90, 340) for i in range(8)
    ]
    assert all(g["util"] is None for g in loaded["gpus"]["gpus"] if g["node"] == "gpu0002")  # no sample: no value
    # the overview: 16 GPUs with samples (2 hosts x 8): 2 at 80 %, 14 at 40 %, mean 0.45
    assert loaded["overview"]["utilisation"]["mean"] == 0.45
    hot = [link for link in loaded["fabric"]["links"] if link["util"] > 0]
    assert hot, "the moving counters give the host links a load"


def test_only_load_topics_take_new_load(polled):
    states, load_map = selectors.build_mapped(polled.cluster.pk, ("alerts",))
    with pytest.raises(ValueError, match="'alerts' is not changed by load alone"):
        dict(selectors.with_load(polled.cluster.pk, states, load_map))
