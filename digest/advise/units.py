"""The units advise reads: a link's bandwidth and a latency (digest/runtime/units.py's table, as
``--emulate-network``), and a compute rate. A value it cannot read is a ``UsageError`` (one line,
exit status 2)."""
from __future__ import annotations

import math

from ..errors import UsageError
from ..runtime.units import Bandwidth, read_latency, split
from ..runtime.units import bandwidth_label  # noqa: F401 (advise's report prints with it)

RATE = {"": 1.0, "gflops": 1.0, "tflops": 1e3}  # unit -> GFLOP/s per unit


def parse_bandwidth(text: str) -> float:
    """'100mbit' -> 12.5e6 bytes per second each way; 'inf': a link that costs nothing."""
    if str(text).strip().lower() == "inf":
        return math.inf
    try:
        return Bandwidth.read(text).bytes_per_s
    except ValueError as e:
        raise UsageError(str(e)) from None


def parse_latency(text: str) -> float:
    """'5us' -> 5e-6 seconds per message."""
    try:
        return read_latency(text)[0]
    except ValueError as e:
        raise UsageError(str(e)) from None


def parse_rate(text: str) -> float | None:
    """'auto' -> None (the calibrated rate); '500' or '500gflops' or '2tflops' -> GFLOP/s."""
    if str(text).strip().lower() == "auto":
        return None
    try:
        number, unit = split(text, "compute rate", "auto, 500, 2tflops")
    except ValueError as e:
        raise UsageError(str(e)) from None
    value = float(number)
    if unit not in RATE or value <= 0:
        raise UsageError(f"--compute-rate wants auto or a positive GFLOP/s (e.g. 500, 2tflops), "
                         f"got {text!r}")
    return value * RATE[unit]
