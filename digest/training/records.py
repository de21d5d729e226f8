"""Metric rows and run summaries (docs/methods.md section 6), for both outer loops.

Every worker keeps one record per step it took: ``time``, ``loss``, ``cpu_time``, ``comm_time``,
``bytes_*``, ``messages``, ``peak_mem_mb`` and its policies' state (staleness, compression ratio).
``combine`` turns the records of one epoch (synchronous: one step per worker; DIGEST-A: the steps
whose gradients the server applied in that server epoch) into one metrics.csv row: the slowest
worker's time sets the pace (max over workers of its summed time), bytes and messages add up,
method state is the mean over steps, plus per-worker columns for the cost model. Every column and
summary key is named in record.py, with its unit.
"""
from __future__ import annotations

from .metrics import best_validation
from ..config import parse_slow_workers
from .record import (BYTES, BYTES_BY_CATEGORY, BYTES_TOTAL, COMM_TIME, COMPLETE, COMPUTE_TIME,
                     CPU_TIME, CUM_BYTES, DISCARDED, EPOCH, EPOCH_TIME, EPOCHS, FINAL, GRAD_SHARE,
                     LOOP_TIME, LOSS, MEAN_BYTES_PER_EPOCH, MEAN_EPOCH_TIME, MEDIAN_EPOCH_TIME,
                     MESSAGES, PARAM_VERSION, PEAK_MEM_MB, PEAK_MEM_MB_MAX, SERVER_EPOCHS_PER_S,
                     SERVER_VERSIONS, SLEPT, SLOW_FACTOR, STALENESS_PARAM, STALENESS_REPR,
                     STALENESS_REPR_MAX, STATUS, STEPS, STEPS_DONE, STEPS_PER_S, STEPS_PER_S_FAST,
                     STEPS_PER_S_SLOW, STORE_SYNCS, T_END, TEST_ACC, TIME, TOTAL_BYTES,
                     TOTAL_TRAIN_TIME, TRAIN_ACC, TRAIN_LOSS, TRAIN_TIME, TRAIN_WALL_TIME,
                     VAL_ACC, WALL_TIME, by_worker, byte_columns, is_bytes, max_of, mean_of,
                     per_worker)

# keys of a step record that ``combine`` handles itself (everything else is method state)
_OWN = {TIME, LOSS, COMM_TIME, PEAK_MEM_MB}


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def combine(per: list[list[dict]], skip=frozenset()) -> dict:
    """One row from ``per[r]`` = worker r's step records of the epoch (at least one step in all);
    ``skip``: record keys the caller reports itself."""
    flat = [s for mine in per for s in mine]
    row = {COMM_TIME: max(sum(s[COMM_TIME] for s in mine) for mine in per),
           COMPUTE_TIME: max(sum(s[TIME] - s[COMM_TIME] for s in mine) for mine in per),
           PEAK_MEM_MB: max(s[PEAK_MEM_MB] for s in flat)}
    for k in flat[0]:
        if is_bytes(k) or k == MESSAGES:
            row[k] = sum(s[k] for s in flat)
    for k in [k for k in flat[0] if k not in row and k not in _OWN and k not in skip]:
        row[k] = _mean(s.get(k) for s in flat)
    for r, mine in enumerate(per):
        row[per_worker(COMPUTE_TIME, r)] = sum(s[TIME] - s[COMM_TIME] for s in mine)
        row[per_worker(BYTES, r)] = sum(s[BYTES_TOTAL] for s in mine)
        row[per_worker(MESSAGES, r)] = sum(s[MESSAGES] for s in mine)
        row[per_worker(PEAK_MEM_MB, r)] = max((s[PEAK_MEM_MB] for s in mine), default=None)
        if flat and CPU_TIME in flat[0]:  # CPU seconds: compute without the wait for a core
            row[per_worker(CPU_TIME, r)] = sum(s[CPU_TIME] for s in mine)
    if SLEPT in flat[0]:  # --slow-workers: each worker's sleep
        row.update({per_worker(SLEPT, r): sum(s[SLEPT] for s in mine)
                    for r, mine in enumerate(per)})
    return row


def accumulate(row: dict, previous: dict | None) -> dict:
    """Adds the running totals ``wall_time`` (when not set) and ``cum_bytes``."""
    if WALL_TIME not in row:
        row[WALL_TIME] = row[EPOCH_TIME] + (previous[WALL_TIME] if previous else 0.0)
    row[CUM_BYTES] = row[BYTES_TOTAL] + (previous[CUM_BYTES] if previous else 0)
    return row


def summary(rows: list[dict]) -> dict:
    """The run's headline numbers from its rows."""
    times = [r[EPOCH_TIME] for r in rows]
    return {
        STATUS: COMPLETE,
        **best_validation(rows),
        FINAL: {k: rows[-1].get(k) for k in (TRAIN_ACC, VAL_ACC, TEST_ACC, TRAIN_LOSS)},
        EPOCHS: len(rows),
        MEAN_EPOCH_TIME: sum(times) / len(times),
        MEDIAN_EPOCH_TIME: sorted(times)[len(times) // 2],
        TOTAL_TRAIN_TIME: sum(times),
        BYTES_BY_CATEGORY: {k: sum(r[k] for r in rows) for k in byte_columns(rows[0])},
        TOTAL_BYTES: sum(r[BYTES_TOTAL] for r in rows),
        MEAN_BYTES_PER_EPOCH: sum(r[BYTES_TOTAL] for r in rows) / len(rows),
        PEAK_MEM_MB_MAX: max(r[PEAK_MEM_MB] for r in rows),
    }


def sync_pace(rows: list[dict], slow_workers: str, world: int) -> dict:
    """Per-worker pace of a synchronous run, in the keys DIGEST-A reports: every worker takes
    every step, so each one's steps/s = epochs / total training time (evaluation excluded; a
    straggler's sleep included, as everyone waits for it)."""
    factors = parse_slow_workers(slow_workers, world)
    rate = len(rows) / max(1e-12, sum(r[EPOCH_TIME] for r in rows))
    return {by_worker(SLOW_FACTOR): [factors.get(r, 1.0) for r in range(world)],
            by_worker(STEPS): [len(rows)] * world, by_worker(STEPS_PER_S): [rate] * world,
            STEPS_PER_S_FAST: rate, STEPS_PER_S_SLOW: rate if factors else None}


# -- DIGEST-A: one row per server epoch from every worker's own steps (asynchronous.py) ------------
_ASYNC_OWN = {SLEPT, T_END, PARAM_VERSION, STALENESS_REPR_MAX, STORE_SYNCS}


def server_epochs(everyone: list[dict], evals: dict[int, dict], times: list[float], M: int) -> list[dict]:
    """One row per server epoch: row e covers server versions M e + 1 .. M (e + 1), i.e. the
    steps whose ``param_version`` (the version their gradient created) lies there;
    ``wall_time`` = when version M (e + 1) was applied; the evaluation of server epoch e + 1 if
    kept. ``everyone[r]["rows"]``: worker r's step records, in order."""
    E = len(times) // M
    steps = [[[] for _ in range(E)] for _ in everyone]  # [worker][epoch] -> its applied steps
    for r, w in enumerate(everyone):
        for s in w["rows"]:
            steps[r][(s[PARAM_VERSION] - 1) // M].append(s)
    latest_loss = [w["rows"][0][LOSS] if w["rows"] else None for w in everyone]
    syncs, done = [0] * len(everyone), [0] * len(everyone)
    rows = []
    for e in range(E):
        per = [steps[r][e] for r in range(M)]
        for r, mine in enumerate(per):
            if mine:
                latest_loss[r] = mine[-1][LOSS]
                syncs[r] = mine[-1].get(STORE_SYNCS) or 0
            done[r] += len(mine)
        wall = times[M * (e + 1) - 1]
        row = {EPOCH: e, TRAIN_LOSS: sum(v for v in latest_loss if v is not None),
               EPOCH_TIME: wall - (times[M * e - 1] if e else 0.0),
               **combine(per, skip=_ASYNC_OWN)}
        flat = [s for mine in per for s in mine]
        row[STALENESS_REPR_MAX] = max((s[STALENESS_REPR_MAX] or 0 for s in flat), default=None)
        row[STORE_SYNCS] = sum(syncs)
        for r, mine in enumerate(per):
            row[per_worker(STEPS, r)] = len(mine)
            row[per_worker(STEPS_DONE, r)] = done[r]
            row[per_worker(STALENESS_PARAM, r)] = _mean(s[STALENESS_PARAM] for s in mine)
            row[per_worker(STALENESS_REPR, r)] = _mean(s[STALENESS_REPR] for s in mine)
            row[per_worker(STALENESS_REPR_MAX, r)] = max(
                (s[STALENESS_REPR_MAX] or 0 for s in mine), default=None)
        row.update(evals.get(e + 1, {}))
        row[WALL_TIME] = wall
        rows.append(accumulate(row, rows[-1] if rows else None))
    return rows


def async_summary(everyone: list[dict], rows: list[dict]) -> dict:
    """Per-worker pace, share of the applied gradients and staleness over every applied step."""
    M, E = len(everyone), len(rows)
    steps = [len(w["rows"]) for w in everyone]
    busy = [w["rows"][-1][T_END] if w["rows"] else w["loop_time"] for w in everyone]
    rate = [n / t if t > 0 else 0.0 for n, t in zip(steps, busy)]
    fast = [r for r in range(M) if everyone[r]["factor"] == 1.0] or list(range(M))
    slow = [r for r in range(M) if r not in fast]

    def stat(key, fn, ranks):
        vals = [s[key] for r in ranks for s in everyone[r]["rows"] if s.get(key) is not None]
        return fn(vals) if vals else None

    wall = rows[-1][WALL_TIME]
    out = {
        TRAIN_WALL_TIME: wall,  # = total_train_time: the server applied the budget's last gradient
        SERVER_VERSIONS: M * E,
        SERVER_EPOCHS_PER_S: E / wall if wall > 0 else None,
        by_worker(STEPS): steps,
        # each worker's share of the gradients the server applied (sum 1; a 3x straggler's is
        # below 1 / M: the global budget lets the fast workers supply the rest)
        by_worker(GRAD_SHARE): [n / max(1, sum(steps)) for n in steps],
        by_worker(DISCARDED): [w["discarded"] for w in everyone],
        by_worker(TRAIN_TIME): busy,
        by_worker(LOOP_TIME): [w["loop_time"] for w in everyone],
        by_worker(STEPS_PER_S): rate,
        by_worker(SLOW_FACTOR): [w["factor"] for w in everyone],
        STEPS_PER_S_FAST: _mean([rate[r] for r in fast]),
        STEPS_PER_S_SLOW: _mean([rate[r] for r in slow]) if slow else None,
    }
    # the representations' largest age is the steps' own maximum, not the max of their means
    largest = {STALENESS_PARAM: STALENESS_PARAM, STALENESS_REPR: STALENESS_REPR_MAX}
    for key, src in largest.items():
        out[mean_of(key)] = stat(key, _mean, range(M))
        out[max_of(key)] = stat(src, max, range(M))
    for key, src in largest.items():
        out[by_worker(mean_of(key))] = [stat(key, _mean, [r]) for r in range(M)]
        out[by_worker(max_of(key))] = [stat(src, max, [r]) for r in range(M)]
    return out
