"""The one table of bandwidth and latency units (digest/runtime/units.py): every reader of a rate
gets the same float from the same text, and the printed labels are those the tables show."""
from __future__ import annotations

import math

import pytest

from digest.advise import units as advise_units
from digest.errors import UsageError
from digest.runtime import netem
from digest.runtime.units import TC, Bandwidth, bandwidth_label, read_latency
from experiments.analysis import costmodel


def test_a_rate_reads_the_same_everywhere():
    for text in ("20mbit", "1.5gbit", "100mbit", "10gbit", "0.3kbit"):
        rate = Bandwidth.read(text, units=TC)
        assert netem.parse_rate(text) == (rate.bits_per_s, rate.tc)
        assert costmodel.parse_bandwidth(text) == (rate.bytes_per_s, rate.label)
        assert advise_units.parse_bandwidth(text) == rate.bytes_per_s == rate.bits_per_s / 8
    assert Bandwidth.read("2gbyte").label == "2 GB/s" and Bandwidth.read("2gbyte").bytes_per_s == 2e9
    assert Bandwidth.read("1 Gbit/s").tc == "1gbit"


def test_what_each_reader_refuses():
    for bad in ("20", "20mb", "-1gbit", "0mbit", "1e3mbit", "1gbps"):  # tc: bits only, as written
        with pytest.raises(netem.EmulationError):
            netem.parse_rate(bad)
    assert advise_units.parse_bandwidth("1e3mbit") == 1.25e8  # not handed to tc: exponents read
    assert advise_units.parse_bandwidth("inf") == math.inf
    for bad in ("fast", "10furlongs", "0gbit"):
        with pytest.raises(UsageError):
            advise_units.parse_bandwidth(bad)
    with pytest.raises(UsageError, match="cannot read latency"):
        advise_units.parse_latency("soon")


def test_labels_and_latencies():
    assert [bandwidth_label(b) for b in (12.5e6, 1.25e9, 125.0, 10.0, math.inf)] == [
        "100 Mbit/s", "10 Gbit/s", "1 kbit/s", "80 bit/s", "free links"]
    assert read_latency("5us") == (pytest.approx(5e-6), "5 us")
    assert netem.parse_delay("1ms") == 1e-3 and advise_units.parse_latency("0.1ms") == 1e-4
