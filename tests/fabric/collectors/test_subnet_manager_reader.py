"""The fabric agent's reading of the subnet managers (fabric.collectors.subnet_manager): saquery's real output from
OpenSM 3.3.23 on ibsim (tests/fixtures/saquery_smir_ibsim_*), no SA answering, and the host's own trouble."""

from __future__ import annotations

import subprocess

import pytest

from fabric.collectors.subnet_manager import SmReadError, read_subnet_managers
from tests.conftest import FIXTURES


def saquery(stdout: str = "", code: int = 0, stderr: str = "", calls: list | None = None):
    def run(argv, **kw):
        if calls is not None:
            calls.append(argv)
        return subprocess.CompletedProcess(argv, code, stdout, stderr)

    return run


def test_a_master_and_a_standby_with_the_routing_engine_of_opensm_conf():
    calls = []
    text = (FIXTURES / "saquery_smir_ibsim_two_sms.out").read_text()
    view = read_subnet_managers("mlx5_1", str(FIXTURES / "opensm_3.3.23_default.conf"),
                                run=saquery(text, calls=calls), now=lambda: 1000.0)  # fmt: skip
    assert calls == [["saquery", "SMIR", "-C", "mlx5_1"]]
    assert view.at == 1000.0 and view.routing_engine == "minhop"
    assert [(s.lid, s.guid, s.state_name, s.priority, s.activity) for s in view.sms] == [
        (1, "0x0000000000200000", "master", 14, 165),
        (4, "0x0000000000100004", "standby", 5, 68),
    ]


def test_no_sa_answering_is_a_reading_without_sm():
    view = read_subnet_managers(run=saquery("", 255, "ibwarn: [1234] sa_query: query failed"), now=lambda: 5.0)
    assert view.sms == ()


@pytest.mark.parametrize(
    "stderr", ["ibwarn: umad_open_port: Failed to open '/dev/infiniband/umad0'", "saquery: Permission denied"]
)
def test_the_hosts_own_trouble_is_an_error_not_a_fabric_without_sm(stderr):
    with pytest.raises(SmReadError, match="saquery SMIR: "):
        read_subnet_managers(run=saquery("", 255, stderr))


def test_a_missing_saquery_or_a_bad_ca_is_an_error_naming_it():
    def missing(argv, **kw):
        raise FileNotFoundError(2, "No such file or directory", "saquery")

    with pytest.raises(SmReadError, match=r"saquery SMIR: .*No such file"):
        read_subnet_managers(run=missing)
    with pytest.raises(SmReadError, match="HCA 'mlx5_0; reboot' is not an HCA name"):
        read_subnet_managers("mlx5_0; reboot", run=saquery())


def test_output_saquery_never_prints_is_an_error():
    with pytest.raises(SmReadError, match="saquery SMIR: saquery line 1"):
        read_subnet_managers(run=saquery("\t\tLID...................1\n"))


def test_the_local_opensm_log_gives_the_state_changes_and_the_last_sweep():
    text = (FIXTURES / "saquery_smir_ibsim_after_failover.out").read_text()
    view = read_subnet_managers(opensm_log=str(FIXTURES / "opensm_ibsim_standby_to_master.log"), run=saquery(text))
    # the capture: the standby enters STANDBY at 07:18:31, takes over at 07:19:41 and brings the subnet up
    assert view.log_events[-2:] == (("Dec 03 07:19:41", "Entering MASTER state"), ("Dec 03 07:19:41", "SUBNET UP"))
    assert view.last_sweep == "Dec 03 07:19:41"


def test_an_unreadable_opensm_log_is_an_error_naming_it(tmp_path):
    with pytest.raises(SmReadError, match=f"{tmp_path}/none.log: No such file"):
        read_subnet_managers(opensm_log=str(tmp_path / "none.log"), run=saquery(""))
