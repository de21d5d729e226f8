"""The emulated-cluster sweep (docs/methods.md section 9): the tables of runs made with
``--emulate-network BANDWIDTH`` (a suite's ``networks:``, labels "<method>@<bandwidth>").

Times here are EMULATED: wall time with each worker in a network namespace of its own, its link
to a virtual switch shaped to the bandwidth in both directions (tbf, MTU 1500; summary.json's
"emulation" says how); the workers still share the host's cores. They are labelled
"emulated @ BANDWIDTH" and never mixed with loopback measurements or modeled times. The cost
model (experiments/analysis/costmodel.py: each worker's CPU seconds + bytes / bandwidth, no latency: none
is emulated) is set beside the emulated time of the same run, its error in %.

    cluster_epoch_time.csv   per dataset, method, M, bandwidth: emulated ms per epoch, speedup
                             over exact at the same bandwidth, comm_ms (time waiting in
                             collectives: the communication computation did not hide)
    cluster_time_to_accuracy.csv   time to the target val accuracy at each bandwidth, speedup
    cluster_model.csv        emulated vs modeled ms per epoch, error (modeled - emulated) / emulated;
                             also modeled with the CPU seconds x workers per core (cores shared)

experiments/render/cluster.py renders them (tables.md's section) and draws the sweep's plots.
"""
from __future__ import annotations

import math

import pandas as pd

from digest.runtime.units import bandwidth_label
from digest.training.record import (BEST_VAL, BYTES_TOTAL, COMM_TIME, CPU_TIME, EPOCH_TIME,
                                    TEST_AT_BEST_VAL, per_worker, worker_ranks)
from .costmodel import Network, modeled_epoch_times
from ..suites.load import Loaded
from ..suites.suite import base_label, network_of
from . import periods


def emulated(loaded: Loaded) -> bool:
    return any(r.summary.get("emulation") for r in loaded.records)


def _bit_s(record) -> float:
    """The emulated link's rate in bits per second, as the run recorded it (digest/runtime/netem.py
    read it from the run's label once: the label is not read again here)."""
    return float(record.summary["emulation"]["bandwidth_bit_s"])


def _share(record) -> float:
    """Workers per core on the run's node when they outnumber its cores (1 otherwise): the
    emulation does not isolate CPUs, so each worker computes at 1/share of a core."""
    machine = record.summary.get("machine", {})
    cores, workers = machine.get("cores") or 1, machine.get("workers_per_node") or 1
    return max(1.0, workers * (machine.get("threads_per_worker") or 1) / cores)


def sweep_frame(loaded: Loaded) -> pd.DataFrame:
    """One row per emulated run: its bandwidth, emulated and modeled ms per epoch (means over
    its window of whole periods after the warm-up, experiments/analysis/periods.py), accuracy."""
    rows = []
    for r in loaded.records:
        e = r.summary.get("emulation")
        if not e:
            continue
        m = periods.timed_rows(r.metrics, r.summary.get("config", {}), loaded.warmup)
        link = _bit_s(r) / 8  # bytes per second each way; no latency: none is emulated
        net = Network(link, 0.0, bandwidth_label(link))
        cpu = [per_worker(CPU_TIME, w) for w in worker_ranks(m.columns, CPU_TIME)]
        rows.append({"dataset": r.dataset, "method": base_label(r.label), "workers": r.workers,
                     "seed": r.seed, "bandwidth": e["bandwidth"], "bit_s": _bit_s(r),
                     "emulated_ms": m[EPOCH_TIME].mean() * 1e3,
                     "comm_ms": m[COMM_TIME].mean() * 1e3,
                     "cpu_ms": m[cpu].max(axis=1).mean() * 1e3 if cpu else float("nan"),
                     "modeled_ms": modeled_epoch_times(m, net).mean() * 1e3,
                     "modeled_shared_ms": modeled_epoch_times(m, net, share=_share(r)).mean() * 1e3,
                     "MiB_per_epoch": m[BYTES_TOTAL].mean() / 2**20,
                     "best_val": r.summary.get(BEST_VAL),
                     "test": r.summary.get(TEST_AT_BEST_VAL)})
    return pd.DataFrame(rows)


def _by(frame: pd.DataFrame, cols: list) -> pd.DataFrame:
    keys = ["dataset", "method", "workers", "bandwidth"]
    out = frame.groupby(keys, sort=False).agg(
        seeds=("seed", "size"), bit_s=("bit_s", "first"),
        **{c: (c, "mean") for c in cols}).reset_index()
    return out


def epoch_table(frame: pd.DataFrame) -> pd.DataFrame:
    out = _by(frame, ["emulated_ms", "comm_ms", "cpu_ms", "MiB_per_epoch", "test"])
    exact = {(d, w, b): t for d, m, w, b, t in zip(out.dataset, out.method, out.workers,
                                                   out.bandwidth, out.emulated_ms) if m == "exact"}
    out["speedup_vs_exact"] = [exact[k] / t if (k := (d, w, b)) in exact and t > 0 else math.nan
                               for d, w, b, t in zip(out.dataset, out.workers, out.bandwidth,
                                                     out.emulated_ms)]
    return out


def model_table(frame: pd.DataFrame) -> pd.DataFrame:
    out = _by(frame, ["emulated_ms", "modeled_ms", "modeled_shared_ms"])
    out["error_pct"] = 100 * (out.modeled_ms - out.emulated_ms) / out.emulated_ms
    out["error_shared_pct"] = 100 * (out.modeled_shared_ms - out.emulated_ms) / out.emulated_ms
    return out


def tta_table(time_to_accuracy: pd.DataFrame) -> pd.DataFrame:
    """The suite's time-to-accuracy rows of emulated runs, the label split into method and
    bandwidth (the target and the exact run compared with are those at the same bandwidth)."""
    t = time_to_accuracy[[network_of(m) is not None for m in time_to_accuracy.method]].copy()
    t.insert(2, "bandwidth", [network_of(m) for m in t.method])
    t["method"] = [base_label(m) for m in t.method]
    return t


def build(loaded: Loaded, time_to_accuracy: pd.DataFrame) -> dict:
    frame = sweep_frame(loaded)
    return {"cluster_epoch_time": epoch_table(frame), "cluster_model": model_table(frame),
            "cluster_time_to_accuracy": tta_table(time_to_accuracy)}
