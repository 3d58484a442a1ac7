"""A round lasts until its decisions are committed: SchedulingRound.duration_ms is set after the COMMIT."""

from __future__ import annotations

import time

import pytest
from django.db import connections

from scheduler import actions, rounds
from scheduler.models import SchedulingRound
from scheduler.rounds import run_round


@pytest.fixture
def classes(transactional_db):
    actions.ensure_priority_classes()  # a transactional test's flush removed the migration's classes


@pytest.mark.django_db(transaction=True)
def test_duration_counts_the_commit(classes, cluster, submit, monkeypatch):
    submit(8)  # (in a transactional test its submit's own round has placed it already)
    wrapper = connections["default"]
    real_commit = wrapper.commit
    slow_commit_s = 0.3

    def slow(*a, **kw):  # the COMMIT of the round's transaction takes 300 ms
        time.sleep(slow_commit_s)
        return real_commit(*a, **kw)

    monkeypatch.setattr(wrapper, "commit", slow)
    t0 = time.perf_counter()
    record = run_round(cluster.pk, "test")
    wall_ms = (time.perf_counter() - t0) * 1000
    monkeypatch.setattr(wrapper, "commit", real_commit)
    stored = SchedulingRound.objects.get(pk=record.pk)
    assert stored.duration_ms >= slow_commit_s * 1000  # before: measured before the save and the commit
    assert stored.stats["commit_ms"] >= slow_commit_s * 1000
    assert stored.duration_ms <= wall_ms


@pytest.mark.django_db(transaction=True)
def test_the_collection_after_the_round_is_not_its_duration_and_comes_after_the_pages_news(
    classes, cluster, submit, monkeypatch
):
    from contextlib import contextmanager

    submit(8)
    order: list[str] = []
    collection_s = 1.0

    @contextmanager
    def paused():  # the collection the paused collector owes, run when it starts again: 1 s here
        yield
        order.append("collection")
        time.sleep(collection_s)

    monkeypatch.setattr(rounds, "gc_paused", paused)
    monkeypatch.setattr(rounds.events, "live_changed", lambda cluster_id, topics: order.append("pages told"))
    t0 = time.perf_counter()
    record = run_round(cluster.pk, "test")
    wall_ms = (time.perf_counter() - t0) * 1000
    stored = SchedulingRound.objects.get(pk=record.pk)
    assert order == ["pages told", "collection"]
    assert stored.duration_ms < collection_s * 1000 <= wall_ms


@pytest.mark.django_db
def test_inside_a_callers_transaction_nothing_is_rewritten(cluster, submit, monkeypatch):
    calls = []
    monkeypatch.setattr(rounds.SchedulingRound.objects, "filter", lambda **kw: calls.append(kw))
    submit(1)
    record = run_round(cluster.pk, "test")
    assert "commit_ms" not in record.stats and calls == []


@pytest.mark.django_db
def test_the_garbage_collector_waits_for_the_round_and_is_on_again_after(cluster, submit, monkeypatch):
    import gc

    during: list[bool] = []
    real = rounds.build_snapshot
    monkeypatch.setattr(rounds, "build_snapshot", lambda cid: during.append(gc.isenabled()) or real(cid))
    submit(1)
    during.clear()  # (submit's own round)
    run_round(cluster.pk, "test")
    assert during == [False] and gc.isenabled()
