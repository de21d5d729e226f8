"""Network cost model (docs/methods.md section 7): what an M-machine cluster would see.

    modeled epoch time = max over workers r of
        cpu_time_w{r} + bytes_w{r} / bandwidth + messages_w{r} x latency

from the measured per-worker columns of metrics.csv. Compute is each worker's CPU seconds in the
step (all its threads), not its wall time minus its time inside collectives: with more workers
than cores, that difference also counts the time a worker waited for a shared core, which a
machine per worker would not see (exact in the emulated sweep: 0.232 s wall vs 0.166 CPU s per
worker). A run without cpu_time_w{r} columns gets no modeled time (NaN, "n/a" in the tables).
Always labelled "modeled @<network>" and kept in columns of their own, never mixed with measured
times. The network is the library's (digest/advise/cost.py's ``Network``), its bandwidth and
latency read with the project's one table of units (digest/runtime/units.py), its per-worker
columns named by the run record's schema (digest/training/record.py).
"""
from __future__ import annotations

import pandas as pd

from digest.advise.cost import Network  # the project's one network; the harness takes it from here
from digest.runtime.units import Bandwidth, read_latency
from digest.training import record
from digest.training.record import BYTES, COMPUTE_TIME, CPU_TIME, MESSAGES, per_worker

_EXAMPLE = "10gbit, 1gbyte, 5us, 0.1ms"


def parse_bandwidth(text: str) -> tuple[float, str]:
    """'10gbit' -> (1.25e9 bytes/s, '10 Gbit/s')."""
    rate = Bandwidth.read(text, example=_EXAMPLE)
    return rate.bytes_per_s, rate.label


def parse_latency(text: str) -> tuple[float, str]:
    """'5us' -> (5e-6 s, '5 us')."""
    return read_latency(text, example=_EXAMPLE)


def parse_network(text: str) -> Network:
    """'10gbit,5us' -> Network(1.25e9, 5e-6, '10 Gbit/s, 5 us')."""
    parts = text.split(",")
    if len(parts) != 2:
        raise ValueError(f"--network wants BANDWIDTH,LATENCY (e.g. 10gbit,5us), got {text!r}")
    (bw, bw_label), (lat, lat_label) = parse_bandwidth(parts[0]), parse_latency(parts[1])
    return Network(bw, lat, f"{bw_label}, {lat_label}")


# compute time per worker, a per-worker column of digest/training/record.py: "cpu" = its CPU
# seconds (the model); "wall" = wall time minus time in collectives (the old definition, kept for
# experiments/studies/bench/command.py's history)
COMPUTE = {"cpu": CPU_TIME, "wall": COMPUTE_TIME}


def worker_ranks(metrics: pd.DataFrame, compute: str = "cpu") -> list[int]:
    """The ranks that have a per-worker compute column (``COMPUTE[compute]``) in ``metrics``."""
    return record.worker_ranks(metrics.columns, COMPUTE[compute])


def modeled_epoch_times(metrics: pd.DataFrame, net: Network, compute: str = "cpu",
                        share: float = 1.0) -> pd.Series:
    """One modeled time (s) per metrics.csv row: the slowest worker under ``net``; NaN when the
    run has no per-worker CPU seconds. ``share``: compute seconds are multiplied by it (workers
    per node / cores where workers share cores: each then computes at that fraction of a core)."""
    ranks, base = worker_ranks(metrics, compute), COMPUTE[compute]
    if not ranks:
        if not worker_ranks(metrics, "wall"):
            raise ValueError("metrics has no per-worker columns (cpu_time_w{r}, compute_time_w{r})")
        return pd.Series(float("nan"), index=metrics.index)
    per = pd.concat([share * metrics[per_worker(base, r)]
                     + metrics[per_worker(BYTES, r)] / net.bandwidth
                     + metrics[per_worker(MESSAGES, r)] * net.latency for r in ranks], axis=1)
    return per.max(axis=1)
