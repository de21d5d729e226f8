"""Network cost model (docs/methods.md section 7): what an M-machine cluster would see.

    modeled epoch time = max over workers r of
        cpu_time_w{r} + bytes_w{r} / bandwidth + messages_w{r} x latency

from the measured per-worker columns of metrics.csv. Compute is each worker's CPU seconds in the
step (all its threads), not its wall time minus its time inside collectives: with more workers
than cores, that difference also counts the time a worker waited for a shared core, which a
machine per worker would not see (exact in the emulated sweep: 0.232 s wall vs 0.166 CPU s per
worker). A run without cpu_time_w{r} columns gets no modeled time (NaN, "n/a" in the tables).
Always labelled "modeled @<network>" and kept in columns of their own, never mixed with measured
times.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

# unit -> (bytes per second per unit, printed unit)
BANDWIDTH_UNITS = {
    "gbit": (1e9 / 8, "Gbit/s"), "mbit": (1e6 / 8, "Mbit/s"), "kbit": (1e3 / 8, "kbit/s"),
    "gbps": (1e9 / 8, "Gbit/s"), "mbps": (1e6 / 8, "Mbit/s"),
    "gbyte": (1e9, "GB/s"), "mbyte": (1e6, "MB/s"), "kbyte": (1e3, "kB/s"),
}
LATENCY_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_NUMBER = r"\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*([a-z/]*)\s*"


@dataclass(frozen=True)
class Network:
    bandwidth: float  # bytes per second
    latency: float    # seconds per message
    label: str        # e.g. "10 Gbit/s, 5 us"

    @property
    def column(self) -> str:
        return f"modeled @{self.label}"


def _split(text: str, what: str) -> tuple[float, str]:
    m = re.fullmatch(_NUMBER, text.strip().lower())
    if not m:
        raise ValueError(f"cannot read {what} {text!r} (e.g. 10gbit, 1gbyte, 5us, 0.1ms)")
    return float(m.group(1)), m.group(2).removesuffix("/s")


def parse_bandwidth(text: str) -> tuple[float, str]:
    """'10gbit' -> (1.25e9 bytes/s, '10 Gbit/s')."""
    value, unit = _split(text, "bandwidth")
    if unit not in BANDWIDTH_UNITS:
        raise ValueError(f"bandwidth unit {unit!r} not one of {', '.join(BANDWIDTH_UNITS)}")
    scale, printed = BANDWIDTH_UNITS[unit]
    if value <= 0:
        raise ValueError("bandwidth must be > 0")
    return value * scale, f"{value:g} {printed}"


def parse_latency(text: str) -> tuple[float, str]:
    """'5us' -> (5e-6 s, '5 us')."""
    value, unit = _split(text, "latency")
    if unit not in LATENCY_UNITS:
        raise ValueError(f"latency unit {unit!r} not one of {', '.join(LATENCY_UNITS)}")
    return value * LATENCY_UNITS[unit], f"{value:g} {unit}"


def parse_network(text: str) -> Network:
    """'10gbit,5us' -> Network(1.25e9, 5e-6, '10 Gbit/s, 5 us')."""
    parts = text.split(",")
    if len(parts) != 2:
        raise ValueError(f"--network wants BANDWIDTH,LATENCY (e.g. 10gbit,5us), got {text!r}")
    (bw, bw_label), (lat, lat_label) = parse_bandwidth(parts[0]), parse_latency(parts[1])
    return Network(bw, lat, f"{bw_label}, {lat_label}")


# compute time per worker: "cpu" = its CPU seconds (the model); "wall" = wall time minus time in
# collectives (the old definition, kept for experiments/bench.py's history)
COMPUTE = {"cpu": "cpu_time_w", "wall": "compute_time_w"}


def worker_ranks(metrics: pd.DataFrame, compute: str = "cpu") -> list[int]:
    prefix = COMPUTE[compute]
    return sorted(int(c[len(prefix):]) for c in metrics.columns
                  if re.fullmatch(prefix + r"\d+", c))


def modeled_epoch_times(metrics: pd.DataFrame, net: Network, compute: str = "cpu",
                        share: float = 1.0) -> pd.Series:
    """One modeled time (s) per metrics.csv row: the slowest worker under ``net``; NaN when the
    run has no per-worker CPU seconds. ``share``: compute seconds are multiplied by it (workers
    per node / cores where workers share cores: each then computes at that fraction of a core)."""
    ranks, prefix = worker_ranks(metrics, compute), COMPUTE[compute]
    if not ranks:
        if not worker_ranks(metrics, "wall"):
            raise ValueError("metrics has no per-worker columns (cpu_time_w{r}, compute_time_w{r})")
        return pd.Series(float("nan"), index=metrics.index)
    per_worker = pd.concat([share * metrics[f"{prefix}{r}"] + metrics[f"bytes_w{r}"] / net.bandwidth
                            + metrics[f"messages_w{r}"] * net.latency for r in ranks], axis=1)
    return per_worker.max(axis=1)
