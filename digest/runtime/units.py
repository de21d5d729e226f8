"""Bandwidths and latencies: the project's one table of their units, one reader and one printer
(``--emulate-network``, ``python -m digest advise``, the harness's cost model and cluster tables).

    Bandwidth.read("100mbit")  -> bits_per_s 1e8, bytes_per_s 12.5e6, tc "100mbit",
                                  label "100 Mbit/s"
    bandwidth_label(12.5e6)    -> "100 Mbit/s"     (a number of bytes per second, printed)
    read_latency("5us")        -> (5e-6, "5 us")

k = 1000, as tc. A value that cannot be read is a ``ValueError`` naming what was wrong; each
caller raises it as its own kind (a usage error, an emulation error).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

# unit -> (bits per second per unit, printed unit). "bps" is bits here (a network's usual
# meaning); tc reads it as BYTES, so only the TC units are ever handed to tc.
BANDWIDTH = {
    "gbit": (1e9, "Gbit/s"), "mbit": (1e6, "Mbit/s"), "kbit": (1e3, "kbit/s"), "bit": (1, "bit/s"),
    "tbit": (1e12, "Tbit/s"),
    "gbps": (1e9, "Gbit/s"), "mbps": (1e6, "Mbit/s"), "kbps": (1e3, "kbit/s"),
    "gbyte": (8e9, "GB/s"), "mbyte": (8e6, "MB/s"), "kbyte": (8e3, "kB/s"),
}
TC = ("bit", "kbit", "mbit", "gbit", "tbit")  # spelled and meant the same by tc
LATENCY = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}  # unit -> seconds
_NUMBER = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*([a-z/]*)\s*")


def split(text: str, what: str, example: str) -> tuple[str, str]:
    """'1.5 Gbit/s' -> ('1.5', 'gbit'): the number as written and the unit, lower case, without
    "/s"; ``ValueError`` "cannot read WHAT TEXT (e.g. EXAMPLE)" when it is not a number + unit."""
    m = _NUMBER.fullmatch(str(text).strip().lower())
    if not m:
        raise ValueError(f"cannot read {what} {text!r} (e.g. {example})")
    return m.group(1), m.group(2).removesuffix("/s")


@dataclass(frozen=True)
class Bandwidth:
    """A link's rate as written: ``number`` (its text, e.g. "1.5") in ``unit`` (a key of
    ``BANDWIDTH``). Each reading multiplies the number by its unit's constant once, so a rate is
    the same float wherever it is read."""

    number: str
    unit: str

    @classmethod
    def read(cls, text: str, units=tuple(BANDWIDTH), example: str = "10gbit, 100mbit, 1gbyte",
             ) -> "Bandwidth":
        """A positive rate in one of ``units``; ``ValueError`` otherwise."""
        number, unit = split(text, "bandwidth", example)
        if unit not in units:
            raise ValueError(f"bandwidth unit {unit or 'missing'!r} in {text!r}: use one of "
                             f"{', '.join(units)}")
        if float(number) <= 0:
            raise ValueError(f"bandwidth must be > 0, got {text!r}")
        return cls(number, unit)

    @property
    def bits_per_s(self) -> float:
        return float(self.number) * BANDWIDTH[self.unit][0]

    @property
    def bytes_per_s(self) -> float:
        return float(self.number) * (BANDWIDTH[self.unit][0] / 8)

    @property
    def tc(self) -> str:
        """tc's spelling, e.g. "20mbit" (the emulated runs' label)."""
        return f"{self.number}{self.unit}"

    @property
    def label(self) -> str:
        """Printed in the unit it was written in, e.g. "10 Gbit/s", "2 GB/s"."""
        return f"{float(self.number):g} {BANDWIDTH[self.unit][1]}"


def bandwidth_label(bytes_per_s: float) -> str:
    """A rate in bytes per second printed in bits: 12.5e6 -> '100 Mbit/s'; inf -> 'free links'."""
    if math.isinf(bytes_per_s):
        return "free links"
    bits = 8 * bytes_per_s
    for unit in ("gbit", "mbit", "kbit"):
        scale, printed = BANDWIDTH[unit]
        if bits >= scale:
            return f"{bits / scale:g} {printed}"
    return f"{bits:g} {BANDWIDTH['bit'][1]}"


def read_latency(text: str, example: str = "5us, 0.1ms") -> tuple[float, str]:
    """'5us' -> (5e-6 seconds per message, '5 us'); ``ValueError`` when it cannot be read."""
    number, unit = split(text, "latency", example)
    if unit not in LATENCY:
        raise ValueError(f"latency unit {unit or 'missing'!r} in {text!r}: use one of "
                         f"{', '.join(LATENCY)}")
    value = float(number)
    return value * LATENCY[unit], f"{value:g} {unit}"
