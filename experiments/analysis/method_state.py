"""What each method did, beside what it sent: its own metrics.csv columns and peak memory, as a frame
(method_state.csv; experiments/render/method_state.py renders it).

Every method logs the state its paper is about (docs/methods.md sections 4, 5 and 8): PipeGCN
the staleness used and how often the exchange was ready, BNS-GCN the sampled fraction, SANCUS the
fraction of (layer, peer) blocks sent and the staleness reached, AdaQP the bits per layer, DIGEST
the store syncs and the stale representations' error, VARCO the compression ratio. This table puts
them side by side:

- state: every metrics column that is not one of the harness's own (``HARNESS``: losses,
  accuracies, times, bytes, messages, memory, the per-worker ``*_w<k>`` copies), as its mean over
  the epochs that have it, then over seeds; a running count (``CUMULATIVE``, e.g. DIGEST's
  ``store_syncs``) as its last value, named ``... total``; an error against fresh rows (``ERRORS``
  of digest/training/record.py: DIGEST's ``stale_err_l<l>``, SAT's ``pred_err_l<l>``) also as
  its mean over the second half of the epochs, named ``... 2nd half``: the first syncs, while the
  rows still move fast, dominate the whole run's mean;
- peak memory: the run's largest per-worker peak (``summary.json`` ``peak_mem_mb_max``, MiB),
  mean over seeds; the same process-level measure for every method;
- an asynchronous run's per-worker pace (``BY_WORKER``, from ``summary.json``): each worker's
  share of the gradients the server applied and their mean staleness, worker by worker, mean over
  seeds: a co-located or faster worker can make most of the steps (docs/digest-a.md).
"""
from __future__ import annotations

import pandas as pd

from digest.training.record import (COMM_TIME, COMPUTE_TIME, CPU_TIME, CUM_BYTES, EPOCH, EPOCH_TIME,
                                    EVAL_TIME, GRAD_SHARE, MESSAGES, PEAK_MEM_MB, PEAK_MEM_MB_MAX,
                                    SERVER_VERSION, SERVER_WALL_TIME, STALENESS_PARAM, STORE_SYNCS,
                                    TEST_ACC, TRAIN_ACC, TRAIN_LOSS, VAL_ACC, WALL_TIME, by_worker,
                                    is_bytes, is_error, is_per_worker, mean_of)
from ..suites.load import Loaded

HARNESS = {EPOCH, TRAIN_LOSS, EPOCH_TIME, COMM_TIME, COMPUTE_TIME, PEAK_MEM_MB, MESSAGES, CPU_TIME,
           TRAIN_ACC, VAL_ACC, TEST_ACC, EVAL_TIME, WALL_TIME, CUM_BYTES}
# running: the last value is the total
CUMULATIVE = {STORE_SYNCS, SERVER_VERSION, SERVER_WALL_TIME, "sat_gate_closed"}
BY_WORKER = {by_worker(GRAD_SHARE): ("grad share by worker", ".2f"),
             by_worker(mean_of(STALENESS_PARAM)): ("staleness_param by worker", ".1f")}


def state_columns(metrics: pd.DataFrame) -> list[str]:
    """The method's own columns of one run's metrics.csv, in file order."""
    return [c for c in metrics.columns if c not in HARNESS and not is_bytes(c)
            and not is_per_worker(c)]


def table(loaded: Loaded) -> pd.DataFrame:
    """One row per (dataset, method, M): seeds, peak memory (MiB) and the state, one string."""
    groups: dict = {}
    for r in loaded.records:
        groups.setdefault((r.dataset, r.label, r.workers), []).append(r)
    rows = []
    for (dataset, label, workers), recs in groups.items():
        means: dict = {}
        for r in recs:
            for c in state_columns(r.metrics):
                col = pd.to_numeric(r.metrics[c], errors="coerce").dropna()
                if len(col):
                    key, value = ((f"{c} total", col.iloc[-1]) if c in CUMULATIVE
                                  else (c, col.mean()))
                    means.setdefault(key, []).append(float(value))
                if len(col) and is_error(c):
                    late = col[r.metrics[EPOCH][col.index] >= r.metrics[EPOCH].max() / 2]
                    if len(late):
                        means.setdefault(f"{c} 2nd half", []).append(float(late.mean()))
        mem = [r.summary[PEAK_MEM_MB_MAX] for r in recs if r.summary.get(PEAK_MEM_MB_MAX)]
        state = [f"{c} {sum(v) / len(v):.4g}" for c, v in means.items()] + _by_worker(recs)
        rows.append({"dataset": dataset, "method": label, "workers": workers, "seeds": len(recs),
                     "peak_mem_mb": sum(mem) / len(mem) if mem else float("nan"),
                     "state": "; ".join(state)})
    return pd.DataFrame(rows, columns=["dataset", "method", "workers", "seeds", "peak_mem_mb",
                                       "state"])


def _by_worker(recs: list) -> list[str]:
    """``BY_WORKER``'s entries, worker by worker (mean over the seeds that have them), e.g.
    ``grad share by worker 0.84/0.05/0.05/0.06``."""
    out = []
    for key, (name, fmt) in BY_WORKER.items():
        lists = [r.summary[key] for r in recs if r.summary.get(key)]
        if lists and len({len(x) for x in lists}) == 1:
            cols = [[v for v in col if v is not None] for col in zip(*lists)]
            out.append(name + " " + "/".join(format(sum(c) / len(c), fmt) if c else "n/a"
                                             for c in cols))
    return out
