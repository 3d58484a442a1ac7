"""fabric.topology.types: the analysis' input records, their defaults and their immutability."""

from __future__ import annotations

import dataclasses

import pytest

from fabric.topology.types import Fabric, THost, TLink, TSwitch


def test_a_link_given_only_its_ends_and_rate_is_an_up_4x_link_of_unknown_ports() -> None:
    link = TLink("1", "sw1", "gpu01", 400.0)
    assert (link.up, link.width, link.speed, link.supported_gbps, link.a_port, link.b_port) == (
        True,
        4,
        "",
        0.0,
        0,
        0,
    )


def test_switch_and_host_defaults() -> None:
    assert (TSwitch("g", "sw1").role, THost("gpu01").role) == ("", "compute")


@pytest.mark.parametrize(
    ("record", "name"), [(TSwitch("g", "sw1"), "role"), (THost("gpu01"), "role"), (TLink("1", "a", "b", 1.0), "up")]
)
def test_records_cannot_be_changed_in_place(record, name) -> None:
    # A Fabric is shared by every analysis of one report: none may edit what another reads.
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, name, None)


def test_an_empty_fabric_has_empty_lists_of_its_own() -> None:
    a, b = Fabric(), Fabric()
    a.switches.append(TSwitch("g", "sw1"))
    assert (b.switches, b.hosts, b.links) == ([], [], [])
