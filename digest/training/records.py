"""Metric rows and run summaries (docs/methods.md section 6), for both outer loops.

Every worker keeps one record per step it took: ``time``, ``loss``, ``cpu_time``, ``comm_time``,
``bytes_*``, ``messages``, ``peak_mem_mb`` and its policies' state (staleness, compression ratio).
``combine`` turns the records of one epoch (synchronous: one step per worker; DIGEST-A: the steps
whose gradients the server applied in that server epoch) into one metrics.csv row: the slowest
worker's time sets the pace (max over workers of its summed time), bytes and messages add up,
method state is the mean over steps, plus per-worker columns for the cost model.
"""
from __future__ import annotations

from .metrics import best_validation
from ..config import parse_slow_workers

# keys of a step record that ``combine`` handles itself (everything else is method state)
_OWN = {"time", "loss", "comm_time", "peak_mem_mb"}


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def combine(per: list[list[dict]], skip=frozenset()) -> dict:
    """One row from ``per[r]`` = worker r's step records of the epoch (at least one step in all);
    ``skip``: record keys the caller reports itself."""
    flat = [s for mine in per for s in mine]
    row = {"comm_time": max(sum(s["comm_time"] for s in mine) for mine in per),
           "compute_time": max(sum(s["time"] - s["comm_time"] for s in mine) for mine in per),
           "peak_mem_mb": max(s["peak_mem_mb"] for s in flat)}
    for k in flat[0]:
        if k.startswith("bytes_") or k == "messages":
            row[k] = sum(s[k] for s in flat)
    for k in [k for k in flat[0] if k not in row and k not in _OWN and k not in skip]:
        row[k] = _mean(s.get(k) for s in flat)
    for r, mine in enumerate(per):
        row[f"compute_time_w{r}"] = sum(s["time"] - s["comm_time"] for s in mine)
        row[f"bytes_w{r}"] = sum(s["bytes_total"] for s in mine)
        row[f"messages_w{r}"] = sum(s["messages"] for s in mine)
        row[f"peak_mem_mb_w{r}"] = max((s["peak_mem_mb"] for s in mine), default=None)
        if flat and "cpu_time" in flat[0]:  # CPU seconds: compute without the wait for a core
            row[f"cpu_time_w{r}"] = sum(s["cpu_time"] for s in mine)
    if "slept" in flat[0]:  # --slow-workers: each worker's sleep
        row.update({f"slept_w{r}": sum(s["slept"] for s in mine) for r, mine in enumerate(per)})
    return row


def accumulate(row: dict, previous: dict | None) -> dict:
    """Adds the running totals ``wall_time`` (when not set) and ``cum_bytes``."""
    if "wall_time" not in row:
        row["wall_time"] = row["epoch_time"] + (previous["wall_time"] if previous else 0.0)
    row["cum_bytes"] = row["bytes_total"] + (previous["cum_bytes"] if previous else 0)
    return row


def summary(rows: list[dict]) -> dict:
    """The run's headline numbers from its rows."""
    times = [r["epoch_time"] for r in rows]
    cats = [k for k in rows[0] if k.startswith("bytes_") and "_w" not in k]
    return {
        "status": "complete",
        **best_validation(rows),
        "final": {k: rows[-1].get(k) for k in ("train_acc", "val_acc", "test_acc", "train_loss")},
        "epochs": len(rows),
        "mean_epoch_time": sum(times) / len(times),
        "median_epoch_time": sorted(times)[len(times) // 2],
        "total_train_time": sum(times),
        "bytes_by_category": {k: sum(r[k] for r in rows) for k in cats},
        "total_bytes": sum(r["bytes_total"] for r in rows),
        "mean_bytes_per_epoch": sum(r["bytes_total"] for r in rows) / len(rows),
        "peak_mem_mb_max": max(r["peak_mem_mb"] for r in rows),
    }


def sync_pace(rows: list[dict], slow_workers: str, world: int) -> dict:
    """Per-worker pace of a synchronous run, in the keys DIGEST-A reports: every worker takes
    every step, so each one's steps/s = epochs / total training time (evaluation excluded; a
    straggler's sleep included, as everyone waits for it)."""
    factors = parse_slow_workers(slow_workers, world)
    rate = len(rows) / max(1e-12, sum(r["epoch_time"] for r in rows))
    return {"slow_factor_by_worker": [factors.get(r, 1.0) for r in range(world)],
            "steps_by_worker": [len(rows)] * world, "steps_per_s_by_worker": [rate] * world,
            "steps_per_s_fast": rate, "steps_per_s_slow": rate if factors else None}


# -- DIGEST-A: one row per server epoch from every worker's own steps (asynchronous.py) ------------
_ASYNC_OWN = {"slept", "t_end", "param_version", "staleness_repr_max", "store_syncs"}


def server_epochs(everyone: list[dict], evals: dict[int, dict], times: list[float], M: int) -> list[dict]:
    """One row per server epoch: row e covers server versions M e + 1 .. M (e + 1), i.e. the
    steps whose ``param_version`` (the version their gradient created) lies there;
    ``wall_time`` = when version M (e + 1) was applied; the evaluation of server epoch e + 1 if
    kept. ``everyone[r]["rows"]``: worker r's step records, in order."""
    E = len(times) // M
    steps = [[[] for _ in range(E)] for _ in everyone]  # [worker][epoch] -> its applied steps
    for r, w in enumerate(everyone):
        for s in w["rows"]:
            steps[r][(s["param_version"] - 1) // M].append(s)
    latest_loss = [w["rows"][0]["loss"] if w["rows"] else None for w in everyone]
    syncs, done = [0] * len(everyone), [0] * len(everyone)
    rows = []
    for e in range(E):
        per = [steps[r][e] for r in range(M)]
        for r, mine in enumerate(per):
            if mine:
                latest_loss[r] = mine[-1]["loss"]
                syncs[r] = mine[-1].get("store_syncs") or 0
            done[r] += len(mine)
        wall = times[M * (e + 1) - 1]
        row = {"epoch": e, "train_loss": sum(v for v in latest_loss if v is not None),
               "epoch_time": wall - (times[M * e - 1] if e else 0.0),
               **combine(per, skip=_ASYNC_OWN)}
        flat = [s for mine in per for s in mine]
        row["staleness_repr_max"] = max((s["staleness_repr_max"] or 0 for s in flat), default=None)
        row["store_syncs"] = sum(syncs)
        for r, mine in enumerate(per):
            row[f"steps_w{r}"] = len(mine)
            row[f"steps_done_w{r}"] = done[r]
            row[f"staleness_param_w{r}"] = _mean(s["staleness_param"] for s in mine)
            row[f"staleness_repr_w{r}"] = _mean(s["staleness_repr"] for s in mine)
            row[f"staleness_repr_max_w{r}"] = max((s["staleness_repr_max"] or 0 for s in mine),
                                                  default=None)
        row.update(evals.get(e + 1, {}), wall_time=wall)
        rows.append(accumulate(row, rows[-1] if rows else None))
    return rows


def async_summary(everyone: list[dict], rows: list[dict]) -> dict:
    """Per-worker pace, share of the applied gradients and staleness over every applied step."""
    M, E = len(everyone), len(rows)
    steps = [len(w["rows"]) for w in everyone]
    busy = [w["rows"][-1]["t_end"] if w["rows"] else w["loop_time"] for w in everyone]
    rate = [n / t if t > 0 else 0.0 for n, t in zip(steps, busy)]
    fast = [r for r in range(M) if everyone[r]["factor"] == 1.0] or list(range(M))
    slow = [r for r in range(M) if r not in fast]

    def stat(key, fn, ranks):
        vals = [s[key] for r in ranks for s in everyone[r]["rows"] if s.get(key) is not None]
        return fn(vals) if vals else None

    wall = rows[-1]["wall_time"]
    out = {
        "train_wall_time": wall,  # = total_train_time: the server applied the budget's last gradient
        "server_versions": M * E,
        "server_epochs_per_s": E / wall if wall > 0 else None,
        "steps_by_worker": steps,
        # each worker's share of the gradients the server applied (sum 1; a 3x straggler's is
        # below 1 / M: the global budget lets the fast workers supply the rest)
        "grad_share_by_worker": [n / max(1, sum(steps)) for n in steps],
        "discarded_by_worker": [w["discarded"] for w in everyone],
        "train_time_by_worker": busy,
        "loop_time_by_worker": [w["loop_time"] for w in everyone],
        "steps_per_s_by_worker": rate,
        "slow_factor_by_worker": [w["factor"] for w in everyone],
        "steps_per_s_fast": _mean([rate[r] for r in fast]),
        "steps_per_s_slow": _mean([rate[r] for r in slow]) if slow else None,
    }
    for key in ("staleness_param", "staleness_repr"):
        src = key if key == "staleness_param" else "staleness_repr_max"
        out[f"{key}_mean"] = stat(key, _mean, range(M))
        out[f"{key}_max"] = stat(src, max, range(M))
    for key in ("staleness_param", "staleness_repr"):
        src = key if key == "staleness_param" else "staleness_repr_max"
        out[f"{key}_mean_by_worker"] = [stat(key, _mean, [r]) for r in range(M)]
        out[f"{key}_max_by_worker"] = [stat(src, max, [r]) for r in range(M)]
    return out
