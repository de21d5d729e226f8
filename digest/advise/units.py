"""The units advise reads: a link's bandwidth (tc's spelling, as ``--emulate-network``), a
latency, a compute rate. A value it cannot read is a ``UsageError`` (one line, exit status 2)."""
from __future__ import annotations

import math
import re

from ..errors import UsageError

# unit -> bytes per second per unit (k = 1000, as tc)
BANDWIDTH = {"gbit": 1e9 / 8, "mbit": 1e6 / 8, "kbit": 1e3 / 8, "bit": 1 / 8,
             "gbps": 1e9 / 8, "mbps": 1e6 / 8, "kbps": 1e3 / 8,
             "gbyte": 1e9, "mbyte": 1e6, "kbyte": 1e3}
LATENCY = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
RATE = {"": 1.0, "gflops": 1.0, "tflops": 1e3}
_NUMBER = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*([a-z/]*)\s*")


def _split(text: str, what: str, example: str) -> tuple[float, str]:
    m = _NUMBER.fullmatch(str(text).strip().lower())
    if not m:
        raise UsageError(f"cannot read {what} {text!r} (e.g. {example})")
    return float(m.group(1)), m.group(2).removesuffix("/s")


def parse_bandwidth(text: str) -> float:
    """'100mbit' -> 12.5e6 bytes per second each way; 'inf': a link that costs nothing."""
    if str(text).strip().lower() == "inf":
        return math.inf
    value, unit = _split(text, "bandwidth", "10gbit, 100mbit, 1gbyte")
    if unit not in BANDWIDTH:
        raise UsageError(f"bandwidth unit {unit or 'missing'!r} in {text!r}: use one of "
                         f"{', '.join(BANDWIDTH)}")
    if value <= 0:
        raise UsageError(f"bandwidth must be > 0, got {text!r}")
    return value * BANDWIDTH[unit]


def parse_latency(text: str) -> float:
    """'5us' -> 5e-6 seconds per message."""
    value, unit = _split(text, "latency", "5us, 0.1ms")
    if unit not in LATENCY:
        raise UsageError(f"latency unit {unit or 'missing'!r} in {text!r}: use one of "
                         f"{', '.join(LATENCY)}")
    return value * LATENCY[unit]


def parse_rate(text: str) -> float | None:
    """'auto' -> None (the calibrated rate); '500' or '500gflops' or '2tflops' -> GFLOP/s."""
    if str(text).strip().lower() == "auto":
        return None
    value, unit = _split(text, "compute rate", "auto, 500, 2tflops")
    if unit not in RATE or value <= 0:
        raise UsageError(f"--compute-rate wants auto or a positive GFLOP/s (e.g. 500, 2tflops), "
                         f"got {text!r}")
    return value * RATE[unit]


def bandwidth_label(bytes_per_s: float) -> str:
    """12.5e6 -> '100 Mbit/s'."""
    if math.isinf(bytes_per_s):
        return "free links"
    bits = 8 * bytes_per_s
    for scale, unit in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if bits >= scale:
            return f"{bits / scale:g} {unit}"
    return f"{bits:g} bit/s"
