"""The InfiniBand rate table against the IBTA figures (data rate after encoding, per 4x link), written out here."""

import dataclasses

import pytest

from fabric.topology.link_speeds import (
    SPEED_DATA_4X_GBPS,
    SPEEDS,
    WIDTHS,
    LinkRate,
    RateError,
    data_rate_gbps,
    parse_rate,
)

# SDR/DDR/QDR: 2.5/5/10 Gbaud per lane, 8b/10b; FDR10: 10.3125, 64b/66b; FDR: 14.0625, 64b/66b (54.5, as
# ibdiagnet rounds it); EDR 25.78125, 64b/66b; HDR, NDR, XDR: 50/100/200 Gb/s per lane (PAM4).
IBTA_4X = {
    "SDR": 8.0,
    "DDR": 16.0,
    "QDR": 32.0,
    "FDR10": 40.0,
    "FDR": 54.5,
    "EDR": 100.0,
    "HDR": 200.0,
    "NDR": 400.0,
    "XDR": 800.0,
}


def test_the_table_is_the_ibta_one_in_generation_order():
    assert SPEED_DATA_4X_GBPS == IBTA_4X
    assert SPEEDS == ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")
    assert WIDTHS == (1, 2, 4, 8, 12)


@pytest.mark.parametrize(
    ("width", "speed", "gbps"),
    [(1, "SDR", 2.0), (2, "QDR", 16.0), (4, "FDR", 54.5), (8, "NDR", 800.0), (12, "EDR", 300.0), (1, "XDR", 200.0)],
)
def test_the_data_rate_scales_with_the_lanes(width, speed, gbps):
    assert data_rate_gbps(width, speed) == gbps


def test_an_unknown_speed_carries_nothing():
    rate = parse_rate("4x???")
    assert (rate.width, rate.speed, rate.known, rate.data_gbps, rate.label, str(rate)) == (
        4, "", False, 0.0, "4x???", "4x???"
    )  # fmt: skip


def test_spaces_and_case_are_forgiven():
    assert parse_rate(" 4x hdr ") == LinkRate(4, "HDR")
    assert str(parse_rate("12xEDR")) == "12xEDR"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("HDR", "not a link rate: 'HDR' (expected e.g. '4xHDR')"),
        ("3xHDR", "link width 3x in '3xHDR' is not one of 1x, 2x, 4x, 8x, 12x"),
        ("4xGDR", "link speed 'GDR' in '4xGDR' is not one of SDR, DDR, QDR, FDR10, FDR, EDR, HDR, NDR, XDR"),
        ("4x?D", "link speed '?D' in '4x?D' is not one of SDR, DDR, QDR, FDR10, FDR, EDR, HDR, NDR, XDR"),
    ],
)
def test_a_rate_ib_does_not_define_is_refused_by_name(text, message):
    with pytest.raises(RateError) as err:
        parse_rate(text)
    assert str(err.value) == message


def test_a_rate_cannot_be_changed_in_place():
    with pytest.raises(dataclasses.FrozenInstanceError):
        LinkRate(4, "HDR").width = 8
