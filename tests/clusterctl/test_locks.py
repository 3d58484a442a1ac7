"""clusterctl.locks.TaskLock: the token check, on Redis (REDIS_URL set) or the local-memory cache."""

from __future__ import annotations

import time

import pytest

from clusterctl.locks import TaskLock, hold


def test_a_held_lock_is_refused_to_a_second_taker():
    first, second = TaskLock("t:held", 5), TaskLock("t:held", 5)
    assert first.acquire()
    try:
        assert not second.acquire() and second.locked() and not second.owned() and first.owned()
    finally:
        assert first.release()
    assert not first.locked()


def test_a_lapsed_holder_neither_owns_nor_releases_the_next_holders_lock():
    slow, later = TaskLock("t:lapse", 0.2), TaskLock("t:lapse", 5)
    assert slow.acquire()
    time.sleep(0.3)
    assert later.acquire()
    assert not slow.owned() and not slow.release()
    assert later.owned() and later.locked()
    assert later.release()


def test_hold_says_whether_it_got_the_lock():
    with hold("t:ctx", 5) as got:
        assert got
        with hold("t:ctx", 5) as again:
            assert not again
    assert not TaskLock("t:ctx", 5).locked()


def test_a_timeout_must_be_positive():
    with pytest.raises(ValueError, match="timeout must be positive"):
        TaskLock("t:bad", 0)


def test_a_kept_alive_lock_outlasts_its_timeout_while_its_holder_runs():
    held, other = TaskLock("t:keep", 0.3, keepalive=True), TaskLock("t:keep", 5)
    assert held.acquire()
    try:
        time.sleep(1.0)  # three timeouts: renewed every 0.1 s
        assert held.owned() and not other.acquire()
    finally:
        assert held.release()
    assert not held.locked()


def test_a_kept_alive_lock_stops_renewing_at_release():
    lock = TaskLock("t:keep-release", 0.3, keepalive=True)
    assert lock.acquire()
    assert lock.release()
    time.sleep(0.2)  # a renewal after release would put the key back
    assert not lock.locked()


def test_a_holder_that_stops_renewing_frees_the_lock_within_its_timeout():
    # A killed worker's renewal thread dies with it; here the thread is stopped the same way, without release.
    dead, next_run = TaskLock("t:keep-dead", 0.3, keepalive=True), TaskLock("t:keep-dead", 5)
    assert dead.acquire()
    dead._released.set()
    dead._renewer.join()
    time.sleep(0.4)
    assert next_run.acquire()
    assert not dead.owned() and not dead.release()
    assert next_run.release()
