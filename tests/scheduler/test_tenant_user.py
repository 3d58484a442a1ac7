"""`manage.py tenant_user` (issue 14): a password for the pages, never from the command line; everything checked before
anything is written; no scheduling round or broadcast run inside the command in embedded mode."""

from __future__ import annotations

import io
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from clusterctl.celery import app
from scheduler import actions
from scheduler.models import Pool, Quota, SchedulingRound, Tenant
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db
PASSWORD = "correct horse battery 42"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def tenant_user(*args: str, stdin=None) -> str:
    out = StringIO()
    given = {"stdin": stdin} if stdin is not None else {}
    call_command("tenant_user", "--tenant", "acme", "--user", "alice", *args, stdout=out, **given)
    return out.getvalue()


@pytest.fixture
def pool() -> Pool:
    return actions.ensure_scheduler(fat_tree("tu", nodes=2, gpus_per_node=8, leaf_ports=8))


def test_password_stdin_lets_the_tenant_sign_in_and_land_on_my_page():
    out = tenant_user("--password-stdin", "--no-token", stdin=io.StringIO(PASSWORD + "\n"))
    assert "password set" in out
    client = Client()
    resp = client.post("/accounts/login/", {"username": "alice", "password": PASSWORD})
    assert (resp.status_code, resp.headers["Location"]) == (302, "/my/")
    assert client.get("/my/").status_code == 200


def test_without_a_password_a_new_user_has_none_and_an_existing_one_keeps_theirs():
    tenant_user("--no-token")
    assert not get_user_model().objects.get(username="alice").has_usable_password()
    tenant_user("--password-stdin", "--no-token", stdin=io.StringIO(PASSWORD + "\n"))
    tenant_user("--no-token")
    assert get_user_model().objects.get(username="alice").check_password(PASSWORD)


def test_password_asks_twice_on_the_terminal(monkeypatch):
    answers = iter([PASSWORD, PASSWORD])
    prompts = []
    monkeypatch.setattr("getpass.getpass", lambda prompt: prompts.append(prompt) or next(answers))
    tenant_user("--password", "--no-token", stdin=Terminal())
    assert prompts == ["password for alice: ", "again: "]
    assert get_user_model().objects.get(username="alice").check_password(PASSWORD)


def test_two_different_passwords_change_nothing(monkeypatch):
    answers = iter([PASSWORD, PASSWORD + "!"])
    monkeypatch.setattr("getpass.getpass", lambda prompt: next(answers))
    with pytest.raises(CommandError, match="the two passwords differ; nothing was changed"):
        tenant_user("--password", stdin=Terminal())
    assert not Tenant.objects.exists() and not get_user_model().objects.exists()


def test_password_without_a_terminal_points_to_password_stdin():
    with pytest.raises(CommandError, match="--password asks on a terminal; give it on standard input with"):
        tenant_user("--password", stdin=io.StringIO(PASSWORD + "\n"))


def test_a_weak_password_is_refused_with_the_validators_reasons_and_nothing_is_written():
    with pytest.raises(CommandError, match="password refused: The password is too similar to the username"):
        tenant_user("--password-stdin", stdin=io.StringIO("alice\n"))
    with pytest.raises(CommandError, match="standard input held no password"):
        tenant_user("--password-stdin", stdin=io.StringIO(""))
    assert not Tenant.objects.exists() and not get_user_model().objects.exists()


def test_the_password_is_never_an_argument():
    with pytest.raises(CommandError):
        tenant_user("--password", PASSWORD)


def test_a_bad_quota_writes_nothing_and_lists_the_pools(pool):
    with pytest.raises(CommandError, match=rf"--quota '999:8:0': .* \(pools: {pool.pk} \(tu/default\)\)"):
        tenant_user("--quota", f"{pool.pk}:8:0", "--quota", "999:8:0")
    assert not Tenant.objects.exists() and not get_user_model().objects.exists() and not Quota.objects.exists()


def test_a_negative_quota_is_a_command_error_and_writes_nothing(pool):
    with pytest.raises(CommandError, match=rf"--quota {pool.pk}:-1:0: quotas cannot be negative"):
        tenant_user("--quota", f"{pool.pk}:-1:0")
    assert not Tenant.objects.exists()


@pytest.mark.django_db(transaction=True)  # the command's own commit runs its on-commit requests, as in production
def test_in_embedded_mode_the_quotas_round_is_left_to_the_demos_process(pool, monkeypatch):
    """Eager tasks on the in-memory broker (embedded): the round the new quota asks for is not run inside the
    command (before: a whole round and a broadcast ran in it, a log line each, before it exited)."""
    ran, requested = [], []
    monkeypatch.setattr("scheduler.rounds.run_round", lambda *a, **k: ran.append(a))
    real_request = __import__("scheduler.enqueue", fromlist=["request_round"]).request_round
    monkeypatch.setattr("scheduler.enqueue.request_round", lambda *a, **k: requested.append(a) or real_request(*a, **k))
    monkeypatch.setitem(app.conf, "broker_url", "memory://localhost/")
    monkeypatch.setitem(app.conf, "task_always_eager", True)
    tenant_user("--quota", f"{pool.pk}:8:0", "--no-token")
    assert requested == [(pool.cluster_id, "quota of acme changed")]  # the quota change did ask for one
    assert ran == [] and not SchedulingRound.objects.exists()
    assert Quota.objects.get(tenant__name="acme", pool=pool).guaranteed_gpus == 8
    assert app.conf.task_always_eager is True  # as it was
