"""Counter deltas, port rates, link utilisation and EWMA (pure, no Django)."""

import pytest

from fabric.collectors.samples import PortSample
from fabric.telemetry.rates import Delta, Ewma, PortRates, counter_delta, link_utilisation, port_rates


def _port(**counters: int) -> PortSample:
    return PortSample(device="mlx5_0", port=1, state="ACTIVE", counters=dict(counters))


def test_delta_normal():
    assert counter_delta(100, 250) == Delta(150, reset=False, saturated=False)


def test_delta_reset_is_traffic_since_reset_never_negative():
    d = counter_delta(1_000_000, 40)
    assert d.value == 40
    assert d.reset is True


def test_delta_unknown_when_a_reading_is_missing():
    assert counter_delta(None, 5).value is None
    assert counter_delta(5, None).value is None


def test_delta_saturated_32bit_counter():
    d = counter_delta(2**32 - 100, 2**32 - 1, bits=32)
    assert d.saturated is True
    assert d.value == 99  # a lower bound


def test_delta_not_saturated_below_max_or_without_width():
    assert counter_delta(0, 2**32 - 2, bits=32).saturated is False
    assert counter_delta(0, 2**32 - 1).saturated is False


def test_delta_from_zero_is_the_current_reading():
    assert counter_delta(0, 5) == Delta(5)


def test_delta_of_a_flat_counter_is_zero_not_a_reset():
    assert counter_delta(7, 7) == Delta(0)


def test_delta_of_a_counter_reset_to_zero_is_zero_since_the_reset():
    assert counter_delta(5, 0) == Delta(0, reset=True)


def test_delta_unknown_when_a_reading_is_negative():
    # A negative reading is no count (a collector's error value), not a reset nor traffic.
    assert counter_delta(-1, 5) == Delta(None)
    assert counter_delta(5, -1) == Delta(None)


def test_port_rates_convert_4_octet_units_to_bytes():
    r = port_rates(_port(port_xmit_data=0, port_rcv_data=0), 10.0, _port(port_xmit_data=1000, port_rcv_data=500), 11.0)
    assert r.tx_bytes_per_s == 4000.0
    assert r.rx_bytes_per_s == 2000.0


def test_port_rates_divide_by_interval():
    r = port_rates(_port(port_xmit_data=0, port_xmit_wait=0), 0.0, _port(port_xmit_data=1000, port_xmit_wait=50), 4.0)
    assert r.interval_s == 4.0
    assert r.tx_bytes_per_s == 1000.0
    assert r.xmit_wait_per_s == 12.5


@pytest.mark.parametrize("cur_t", [10.0, 9.0])
def test_port_rates_zero_or_negative_interval_gives_no_rates(cur_t):
    r = port_rates(_port(port_xmit_data=0), 10.0, _port(port_xmit_data=1000), cur_t)
    assert r.tx_bytes_per_s is None and r.rx_bytes_per_s is None and r.xmit_wait_per_s is None
    assert "interval" in r.reason


def test_port_rates_missing_timestamp_gives_no_rates():
    r = port_rates(_port(port_xmit_data=0), None, _port(port_xmit_data=1000), 1.0)
    assert r.tx_bytes_per_s is None
    assert r.reason


def test_port_rates_report_reset_counter():
    r = port_rates(_port(port_xmit_data=10_000), 0.0, _port(port_xmit_data=250), 1.0)
    assert r.resets == ["port_xmit_data"]
    assert r.tx_bytes_per_s == 1000.0  # 250 units since the reset, never negative


def test_port_rates_report_saturated_counter():
    prev, cur = _port(port_xmit_wait=2**32 - 11), _port(port_xmit_wait=2**32 - 1)
    cur.counter_bits = {"port_xmit_wait": 32}
    r = port_rates(prev, 0.0, cur, 1.0)
    assert r.saturated == ["port_xmit_wait"]
    assert r.xmit_wait_per_s == 10.0


def test_port_rates_32_bit_counter_one_below_its_maximum_is_not_saturated():
    # 2**32 - 2 still counts: only 2**32 - 1 is pinned.
    prev, cur = _port(port_xmit_wait=2**32 - 12), _port(port_xmit_wait=2**32 - 2)
    cur.counter_bits = {"port_xmit_wait": 32}
    r = port_rates(prev, 0.0, cur, 1.0)
    assert r.saturated == []
    assert r.xmit_wait_per_s == 10.0


def test_port_rates_of_an_idle_port_are_zero_not_unknown():
    idle = _port(port_xmit_data=0, port_rcv_data=0, port_xmit_wait=0)
    r = port_rates(idle, 0.0, idle, 2.0)
    assert (r.tx_bytes_per_s, r.rx_bytes_per_s, r.xmit_wait_per_s) == (0.0, 0.0, 0.0)
    assert (r.resets, r.saturated, r.reason) == ([], [], "")


def test_port_rates_error_deltas():
    prev = _port(symbol_error=5, link_downed=1, port_rcv_errors=0, port_xmit_discards=3)
    cur = _port(symbol_error=17, link_downed=1, port_rcv_errors=2, port_xmit_discards=3)
    r = port_rates(prev, 0.0, cur, 1.0)
    assert r.error_deltas == {"symbol_error": 12, "link_downed": 0, "port_rcv_errors": 2, "port_xmit_discards": 0}


def test_port_rates_missing_data_counter_is_none():
    r = port_rates(_port(port_rcv_data=0), 0.0, _port(port_rcv_data=10), 1.0)
    assert r.tx_bytes_per_s is None
    assert r.rx_bytes_per_s == 40.0


def test_port_rates_counter_missing_before_gives_no_rate():
    # port_xmit_data appears only in the second sample: no delta, and no error either.
    r = port_rates(_port(port_rcv_data=0), 0.0, _port(port_xmit_data=100, port_rcv_data=10), 1.0)
    assert (r.tx_bytes_per_s, r.rx_bytes_per_s) == (None, 40.0)


def test_port_rates_negative_reading_gives_no_rate():
    r = port_rates(_port(port_xmit_data=-1, port_rcv_data=0), 0.0, _port(port_xmit_data=10, port_rcv_data=-1), 1.0)
    assert (r.tx_bytes_per_s, r.rx_bytes_per_s, r.resets) == (None, None, [])


def test_utilisation_takes_busiest_direction_of_either_end():
    a = PortRates(interval_s=1.0, tx_bytes_per_s=1e9, rx_bytes_per_s=2e9)  # 16 Gb/s
    b = PortRates(interval_s=1.0, tx_bytes_per_s=5e9, rx_bytes_per_s=0.0)  # 40 Gb/s
    assert link_utilisation(a, b, 100.0) == pytest.approx(0.4)
    assert link_utilisation(b, a, 100.0) == pytest.approx(0.4)


def test_utilisation_is_bytes_times_8_over_the_capacity_in_bits():
    # 12.5e9 B/s x 8 = 100 Gb/s on a 400 Gb/s link: exactly a quarter.
    assert link_utilisation(PortRates(interval_s=1.0, tx_bytes_per_s=12.5e9), None, 400.0) == 0.25


def test_utilisation_with_one_end_only():
    a = PortRates(interval_s=1.0, tx_bytes_per_s=1.25e9, rx_bytes_per_s=None)
    assert link_utilisation(a, None, 100.0) == pytest.approx(0.1)


def test_utilisation_clamped_to_one():
    a = PortRates(interval_s=1.0, tx_bytes_per_s=100e9)
    assert link_utilisation(a, None, 100.0) == 1.0


def test_utilisation_unknown_without_rates_or_capacity():
    assert link_utilisation(None, PortRates(), 100.0) is None
    assert link_utilisation(PortRates(interval_s=1.0, tx_bytes_per_s=1.0), None, 0.0) is None


@pytest.mark.parametrize("capacity", [-100.0, -0.5])
def test_utilisation_unknown_with_a_negative_capacity(capacity):
    assert link_utilisation(PortRates(interval_s=1.0, tx_bytes_per_s=1.0), None, capacity) is None


def test_utilisation_of_a_1_gbps_link():
    # 62.5e6 B/s x 8 = 0.5 Gb/s on 1 Gb/s: half.
    assert link_utilisation(PortRates(interval_s=1.0, rx_bytes_per_s=62.5e6), None, 1.0) == 0.5


def test_utilisation_clamped_to_zero():
    assert link_utilisation(PortRates(interval_s=1.0, tx_bytes_per_s=-5e9), None, 100.0) == 0.0


def test_ewma_first_value_then_smooths_per_key():
    e = Ewma(0.5)
    assert e.update("l1", 10.0) == 10.0
    assert e.update("l1", 20.0) == 15.0
    assert e.update("l2", 2.0) == 2.0  # keys are independent
    assert e.get("l1") == 15.0


def test_ewma_rejects_bad_alpha():
    with pytest.raises(ValueError):
        Ewma(0.0)


@pytest.mark.parametrize("alpha", [1.5, -0.5])
def test_ewma_rejects_alpha_outside_zero_to_one(alpha):
    with pytest.raises(ValueError, match=r"alpha must be in \(0, 1\]"):
        Ewma(alpha)


def test_ewma_with_alpha_one_follows_each_value():
    e = Ewma(1.0)
    e.update("l1", 10.0)
    assert e.update("l1", 20.0) == 20.0
