"""The straggler comparison (``--slow-workers``; docs/methods.md section 8): per run, the pace of
the fast and of the slowed workers, total time, accuracy and the staleness observed, and each
worker's share of the gradients applied (straggler.csv)."""
from __future__ import annotations

import pandas as pd

from ..suites.load import Loaded


def _stat(summary: dict, metrics: pd.DataFrame, key: str, fn: str):
    """Staleness over the run: DIGEST-A's summary (over every applied step), else the metrics
    column's mean / max (synchronous methods: every worker at the same step), else None."""
    if summary.get(f"{key}_{fn}") is not None:
        return summary[f"{key}_{fn}"]
    col = metrics[key].dropna() if key in metrics.columns else pd.Series(dtype=float)
    return float(getattr(col, fn)()) if len(col) else None


def _get(summary: dict, key: str, default):
    return default if summary.get(key) is None else summary[key]


def straggler(loaded: Loaded) -> pd.DataFrame:
    """One row per run (the straggler comparison: does DIGEST-A keep its pace?). A worker's "epoch" is one of its own
    steps (a forward/backward over its partition). Synchronous methods: every worker takes every
    step, so fast and slow workers alike run epochs / total training time steps/s (the stragglers'
    sleep inside it: everyone waits for them). DIGEST-A: per worker, gradients the server applied
    / that worker's training time (summary.json), mean over the workers not slowed (fast) and the
    slowed ones (slow); its ``epochs/s`` counts server epochs (M gradients applied). Parameter
    staleness of a synchronous all-reduce is 0; representation staleness = age of the halo rows
    used, in their owners' steps. ``grad_share_by_worker``: each worker's fraction of the gradients
    applied (DIGEST-A: its applied steps / all; synchronous: 1/M each). ``fast vs sync`` = fast
    steps/s / those of the synchronous
    ``digest`` run with the same stragglers, dataset, M and seed."""
    rows = []
    for r in loaded.records:
        s, m = r.summary, r.metrics
        cfg = s.get("config", {})
        epochs = len(m)
        total = s.get("total_train_time") or float(m["epoch_time"].sum())
        factors = s.get("slow_factor_by_worker") or []
        slowed = any(f > 1 for f in factors) or bool(cfg.get("slow_workers"))
        synchronous = "server_epochs_per_s" not in s  # DIGEST-A and its variants: no
        rows.append({
            "dataset": r.dataset, "method": r.label, "algorithm": r.method, "workers": r.workers,
            "seed": r.seed, "slow_workers": cfg.get("slow_workers") or "none",
            "steps_by_worker": "/".join(str(n) for n in s.get("steps_by_worker") or [epochs] * r.workers),
            "grad_share_by_worker": "/".join(f"{x:.2f}" for x in _shares(s, epochs, r.workers)),
            "fast_steps_per_s": _get(s, "steps_per_s_fast", epochs / total),
            "slow_steps_per_s": _get(s, "steps_per_s_slow", epochs / total) if slowed else None,
            "epochs_per_s": epochs / total, "total_time_s": total,
            "test_at_best_val": s.get("test_at_best_val"),
            "final_test": (s.get("final") or {}).get("test_acc"),
            "staleness_param_mean": 0.0 if synchronous and cfg.get("local_steps", 1) <= 1
            else _stat(s, m, "staleness_param", "mean"),
            "staleness_param_max": 0.0 if synchronous and cfg.get("local_steps", 1) <= 1
            else _stat(s, m, "staleness_param", "max"),
            "staleness_repr_mean": _stat(s, m, "staleness_repr", "mean"),
            "staleness_repr_max": _stat(s, m, "staleness_repr", "max")})
    out = pd.DataFrame(rows)
    base = {(d, w, sd, sw): f for d, a, w, sd, sw, f in zip(
        out.dataset, out.algorithm, out.workers, out.seed, out.slow_workers, out.fast_steps_per_s)
        if a == "digest"}
    out["fast_vs_sync"] = [f / base[k] if k in base else float("nan") for k, f in zip(
        zip(out.dataset, out.workers, out.seed, out.slow_workers), out.fast_steps_per_s)]
    return out


def _shares(summary: dict, epochs: int, workers: int) -> list:
    """Each worker's share of the gradients applied: DIGEST-A's summary, else from its steps (a
    synchronous method: every worker supplies one of the M gradients of every step)."""
    if summary.get("grad_share_by_worker"):
        return summary["grad_share_by_worker"]
    steps = summary.get("steps_by_worker") or [epochs] * workers
    return [n / max(1, sum(steps)) for n in steps]


def has_stragglers(loaded: Loaded) -> bool:
    return any(r.summary.get("config", {}).get("slow_workers") for r in loaded.records)

