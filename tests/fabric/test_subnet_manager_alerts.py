"""manage.py subnet_manager: the real saquery captures of a failover (tests/fixtures/saquery_smir_ibsim_*) become the
cluster's SM alerts, with the previous reading as the rules' memory."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.base import CommandError

from fabric.models import Alert
from tests.conftest import FIXTURES
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster():
    c = fat_tree("smc", nodes=4, gpus_per_node=8, leaf_ports=16)
    cache.delete_many([f"fabric:sm:kept:{c.pk}", f"fabric:sm:latest:{c.pk}"])  # a reading of an earlier test's id
    return c


def run(cluster, *args: str) -> str:
    out = StringIO()
    call_command("subnet_manager", "--cluster", cluster.name, *args, stdout=out)
    return out.getvalue()


def open_rules(cluster) -> list[str]:
    return sorted(Alert.objects.filter(cluster=cluster, cleared_at__isnull=True).values_list("rule", flat=True))


def test_a_master_and_a_standby_with_opensms_default_routing_flag_min_hop(cluster):
    text = run(cluster, "--saquery-file", str(FIXTURES / "saquery_smir_ibsim_two_sms.out"),
               "--opensm-conf", str(FIXTURES / "opensm_3.3.23_default.conf"), "--at", "1000")  # fmt: skip
    assert "SM lid 1 guid 0x0000000000200000: master, priority 14, activity 165" in text
    assert open_rules(cluster) == ["sm_routing_engine"]


def test_the_captured_failover_raises_failover_and_no_standby(cluster):
    run(cluster, "--saquery-file", str(FIXTURES / "saquery_smir_ibsim_two_sms.out"), "--at", "1000")
    assert open_rules(cluster) == []
    run(cluster, "--saquery-file", str(FIXTURES / "saquery_smir_ibsim_after_failover.out"), "--at", "1080")
    assert open_rules(cluster) == ["sm_failover", "sm_no_standby"]
    alert = Alert.objects.get(cluster=cluster, rule="sm_failover")
    assert alert.message == "the master SM changed from 0x0000000000200000 to 0x0000000000100004 (lid 4, priority 5)"


def test_no_sm_answering_is_a_critical_alert(cluster, tmp_path):
    empty = tmp_path / "smir.out"
    empty.write_text("")
    run(cluster, "--saquery-file", str(empty), "--at", "1000")
    assert Alert.objects.get(cluster=cluster, cleared_at__isnull=True).severity == "critical"
    assert open_rules(cluster) == ["sm_none"]


def test_a_bad_hca_name_never_reaches_the_command_line(cluster):
    with pytest.raises(CommandError, match="--ca '-P 1; reboot' is not an HCA name"):
        run(cluster, "--run", "--ca", "-P 1; reboot")


def test_the_report_page_shows_the_sms_and_the_missing_standby(cluster, client, operator):
    client.force_login(operator)
    page = client.get(f"/clusters/{cluster.pk}/report/").content.decode()
    assert "Not read yet: the fabric agent reads it every" in page and "run <code>manage.py subnet_manager" in page
    run(cluster, "--saquery-file", str(FIXTURES / "saquery_smir_ibsim_after_failover.out"), "--at", "1080")
    page = client.get(f"/clusters/{cluster.pk}/report/").content.decode()
    assert "<td>0x0000000000100004</td><td>master</td>" in page
    assert 'data-testid="spof-sm"' in page


def test_a_master_with_a_standby_is_no_spof(cluster, client, operator):
    client.force_login(operator)
    run(cluster, "--saquery-file", str(FIXTURES / "saquery_smir_ibsim_two_sms.out"), "--at", "1000")
    page = client.get(f"/clusters/{cluster.pk}/report/").content.decode()
    assert "<td>standby</td>" in page and 'data-testid="spof-sm"' not in page


def test_fabric_report_prints_the_sms_and_the_spof(cluster):
    run(cluster, "--saquery-file", str(FIXTURES / "saquery_smir_ibsim_after_failover.out"), "--at", "1080")
    out = StringIO()
    call_command("fabric_report", "--cluster", cluster.name, stdout=out)
    text = out.getvalue()
    assert "lid 4 0x0000000000100004 master, priority 5, activity 162" in text
    assert "SPOF: no standby SM" in text
