"""fabric.latest.node_loads reads a node's load again only when the seen map says a newer sample was stored (or the
load nears its expiry): a scheduling round reads 1,250 nodes' loads where a poll changed only some."""

from __future__ import annotations

import itertools
import time

import pytest
from django.core.cache import cache

from fabric import latest
from fabric.collectors.samples import FABRIC_SOURCE, NodeSample

_ids = itertools.count(900_000_001)  # clusters of their own: the process's memo is keyed by cluster id


class Reads:
    """The cache, counting the load keys each get_many asks for."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def get_many(self, keys):
        self.asked.append(list(keys))
        return cache.get_many(keys)

    def __getattr__(self, name):
        return getattr(cache, name)


@pytest.fixture
def cluster_id():
    cid = next(_ids)
    yield cid
    nodes = ["a", "b", FABRIC_SOURCE]
    cache.delete_many([latest.seen_key(cid), *(k(cid, n) for n in nodes for k in (latest.latest_key, latest.load_key))])
    latest._READ.pop(cid, None)
    latest._MEMO.pop(cid, None)


@pytest.fixture
def reads(monkeypatch) -> Reads:
    spy = Reads()
    monkeypatch.setattr(latest, "cache", spy)
    return spy


def load(gpu_util: float) -> dict:
    return {"links": {}, "smoothed": {}, "gpus": {1: gpu_util}, "gpu_metrics": {}, "at": 0.0}


def store(cluster_id: int, node: str, at: float, gpu_util: float) -> None:
    latest.store(cluster_id, {node: (NodeSample(node=node, collected_at=at, collector="nvml"), load(gpu_util))})


def test_loads_whose_sample_did_not_change_are_not_read_again(cluster_id, reads):
    now = time.time()
    store(cluster_id, "a", now, 0.5)
    store(cluster_id, "b", now, 0.25)
    assert latest.node_loads(cluster_id, ["a", "b"]) == {"a": load(0.5), "b": load(0.25)}
    reads.asked.clear()
    assert latest.node_loads(cluster_id, ["a", "b"]) == {"a": load(0.5), "b": load(0.25)}
    assert reads.asked == []


def test_a_node_with_a_newer_sample_is_read_again_alone(cluster_id, reads):
    now = time.time()
    store(cluster_id, "a", now, 0.5)
    store(cluster_id, "b", now, 0.25)
    latest.node_loads(cluster_id, ["a", "b"])
    reads.asked.clear()
    store(cluster_id, "b", now + 5, 0.75)
    assert latest.node_loads(cluster_id, ["a", "b"]) == {"a": load(0.5), "b": load(0.75)}
    assert reads.asked == [[latest.load_key(cluster_id, "b")]]


def test_a_load_near_its_expiry_is_read_every_time_and_reads_as_none_once_gone(cluster_id, reads):
    old = time.time() - (latest.LATEST_TTL_S - latest.REREAD_BEFORE_EXPIRY_S) - 1
    store(cluster_id, "a", old, 0.5)
    assert latest.node_loads(cluster_id, ["a"]) == {"a": load(0.5)}
    cache.delete(latest.load_key(cluster_id, "a"))  # what its expiry does
    reads.asked.clear()
    assert latest.node_loads(cluster_id, ["a"]) == {}
    assert reads.asked == [[latest.load_key(cluster_id, "a")]]


def test_a_node_the_seen_map_does_not_list_has_no_load(cluster_id, reads):
    store(cluster_id, "a", time.time(), 0.5)
    cache.set(latest.load_key(cluster_id, "b"), load(0.9))  # a load without its time: no writer leaves one
    assert latest.node_loads(cluster_id, ["a", "b"]) == {"a": load(0.5)}
    assert latest.load_key(cluster_id, "b") not in itertools.chain.from_iterable(reads.asked)


def test_the_fabric_agents_ports_are_read_with_the_nodes(cluster_id, reads):
    now = time.time()
    store(cluster_id, FABRIC_SOURCE, now, 0.0)
    store(cluster_id, "a", now, 0.5)
    assert list(latest.node_loads(cluster_id, ["a"])) == ["a", FABRIC_SOURCE]
