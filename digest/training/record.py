"""The run record's schema (docs/methods.md section 6): every column of metrics.csv and every key
of summary.json that a run writes, named once here with its unit (``COLUMNS``, ``PER_WORKER``,
``SUMMARY``). The writer (records.py) and the readers (experiments/analysis/: costmodel, cluster,
method_state) use these names.

Three kinds of column are families, made and recognised by the functions below, never by
regular expressions: a worker's copy ``<base>_w<rank>`` (``per_worker``, ``worker_ranks``,
``is_per_worker``), a layer's ``<stem>_l<layer>`` (``per_layer``, ``layer_of``, ``is_error``)
and a byte category ``bytes_<category>`` (``bytes_of``, ``is_bytes``, ``byte_columns``). A column
named nowhere here is a method's own state (its policies' ``state()``, e.g. ``comp_ratio``): the
mean over the epoch's steps.
"""
from __future__ import annotations

from collections.abc import Iterable

_WORKER, _LAYER, _BYTES = "_w", "_l", "bytes_"


def per_worker(base: str, rank: int) -> str:
    """Worker ``rank``'s copy of column ``base``: per_worker("bytes", 3) -> "bytes_w3"."""
    return f"{base}{_WORKER}{rank}"


def _number(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def split_worker(column: str) -> tuple[str, int] | None:
    """"cpu_time_w3" -> ("cpu_time", 3); None for a column that is no worker's copy."""
    base, sep, rank = column.rpartition(_WORKER)
    r = _number(rank) if sep else None
    return None if r is None else (base, r)


def is_per_worker(column: str) -> bool:
    """Whether ``column`` is some worker's copy of a column (any ``*_w<rank>``)."""
    return split_worker(column) is not None


def worker_ranks(columns: Iterable[str], base: str) -> list[int]:
    """The ranks that have a copy of ``base`` among ``columns``, in order:
    worker_ranks(["cpu_time_w1", "cpu_time_w0", "bytes_w0"], "cpu_time") -> [0, 1]."""
    prefix = base + _WORKER
    return sorted(r for c in columns if c.startswith(prefix)
                  and (r := _number(c.removeprefix(prefix))) is not None)


def per_layer(stem: str, layer: int) -> str:
    """Layer ``layer``'s column of ``stem``: per_layer("stale_err", 1) -> "stale_err_l1"."""
    return f"{stem}{_LAYER}{layer}"


def layer_of(column: str, stem: str) -> int | None:
    """"stale_err_l1", "stale_err" -> 1; None where ``column`` is not one of ``stem``'s."""
    prefix = stem + _LAYER
    return _number(column.removeprefix(prefix)) if column.startswith(prefix) else None


def is_error(column: str) -> bool:
    """Whether ``column`` is a layer's error against fresh rows (a stem of ``ERRORS``)."""
    return any(layer_of(column, stem) is not None for stem in ERRORS)


def bytes_of(category: str) -> str:
    """The column of a byte category: bytes_of("halo_fwd") -> "bytes_halo_fwd"."""
    return _BYTES + category


def is_bytes(column: str) -> bool:
    """Whether ``column`` counts bytes: a category's, the total, or a worker's."""
    return column.startswith(_BYTES)


def byte_columns(columns: Iterable[str]) -> list[str]:
    """The byte categories and ``bytes_total`` among ``columns`` (no worker's copy), in order."""
    return [c for c in columns if is_bytes(c) and not is_per_worker(c)]


def by_worker(key: str) -> str:
    """The summary's list of ``key``, one entry per worker: "steps" -> "steps_by_worker"."""
    return key + "_by_worker"


def mean_of(key: str) -> str:
    return key + "_mean"


def max_of(key: str) -> str:
    return key + "_max"


# -- a worker's record of one step (trainer.Loop.step); the rows are made of these ----------------
TIME, LOSS, SLEPT = "time", "loss", "slept"
T_END, PARAM_VERSION = "t_end", "param_version"
STEP = {  # and, under the rows' names: cpu_time, comm_time, bytes_*, messages, peak_mem_mb, state
    TIME: "s: the step's wall time, the straggler's sleep included",
    LOSS: "nats: this worker's share of the full-graph mean cross-entropy",
    SLEPT: "s: --slow-workers' sleep in the step",
    T_END: "s: DIGEST-A: when the step ended, from the start of the worker's loop",
    PARAM_VERSION: "count: DIGEST-A: the server version the step's gradient created",
}

# -- metrics.csv: one row per epoch (DIGEST-A: per server epoch) ----------------------------------
EPOCH, TRAIN_LOSS, EPOCH_TIME = "epoch", "train_loss", "epoch_time"
COMM_TIME, COMPUTE_TIME, CPU_TIME = "comm_time", "compute_time", "cpu_time"
PEAK_MEM_MB, BYTES_TOTAL, MESSAGES = "peak_mem_mb", "bytes_total", "messages"
TRAIN_ACC, VAL_ACC, TEST_ACC, EVAL_TIME = "train_acc", "val_acc", "test_acc", "eval_time"
WALL_TIME, CUM_BYTES = "wall_time", "cum_bytes"
STALENESS_PARAM, STALENESS_REPR = "staleness_param", "staleness_repr"
STALENESS_REPR_MAX, STORE_SYNCS = "staleness_repr_max", "store_syncs"
SERVER_VERSION, SERVER_WALL_TIME = "server_version", "server_wall_time"
COLUMNS = {
    EPOCH: "count, from 0",
    TRAIN_LOSS: "nats: the sum over workers of their loss = the full-graph mean cross-entropy "
                "(DIGEST-A: of each worker's latest applied step)",
    EPOCH_TIME: "s, wall: the slowest worker's step (DIGEST-A: between two server epochs)",
    COMM_TIME: "s: max over workers of their time inside collectives",
    COMPUTE_TIME: "s: max over workers of their time outside collectives",
    CPU_TIME: "CPU s: mean over the steps of a worker's CPU seconds (all its threads)",
    PEAK_MEM_MB: "MiB: the largest peak resident memory of a worker so far",
    SLEPT: "s: mean over the steps of --slow-workers' sleep (synchronous runs)",
    bytes_of("<category>"): "bytes sent to other processes in the category, over workers",
    BYTES_TOTAL: "bytes sent to other processes, summed over workers and categories",
    MESSAGES: "count: messages sent, summed over workers",
    TRAIN_ACC: "fraction (an OGB graph: its evaluator's metric); evaluated rows only",
    VAL_ACC: "fraction, as train_acc", TEST_ACC: "fraction, as train_acc",
    EVAL_TIME: "s, wall: the evaluation (not in epoch_time)",
    WALL_TIME: "s: running total of epoch_time (DIGEST-A: the server's clock)",
    CUM_BYTES: "bytes: running total of bytes_total",
    STALENESS_PARAM: "versions: DIGEST-A: mean age of the parameters the steps used",
    STALENESS_REPR: "steps: mean age of the stored representations the steps read (DIGEST)",
    STALENESS_REPR_MAX: "steps: DIGEST-A: the oldest stored representation read in the epoch",
    STORE_SYNCS: "count, running: store refreshes so far (DIGEST-A: summed over workers)",
    SERVER_VERSION: "count: DIGEST-A: the server version evaluated",
    SERVER_WALL_TIME: "s: DIGEST-A: the server's clock at that evaluation",
}
# a worker's copy, per_worker(base, rank): the cost model's inputs (docs/methods.md section 7)
BYTES, STEPS, STEPS_DONE = "bytes", "steps", "steps_done"
PER_WORKER = {
    COMPUTE_TIME: "s: the worker's time outside collectives",
    CPU_TIME: "CPU s: the worker's CPU seconds (a run without them: no modeled time)",
    BYTES: "bytes: the worker's bytes_total",
    MESSAGES: "count: the worker's messages",
    PEAK_MEM_MB: "MiB: the worker's peak resident memory",
    SLEPT: "s: --slow-workers' sleep of the worker",
    STEPS: "count: DIGEST-A: the worker's steps applied in the server epoch",
    STEPS_DONE: "count, running: DIGEST-A: the worker's steps applied so far",
    STALENESS_PARAM: "versions: DIGEST-A: mean age of the parameters its steps used",
    STALENESS_REPR: "steps: DIGEST-A: mean age of the stored representations its steps read",
    STALENESS_REPR_MAX: "steps: DIGEST-A: the oldest of those",
}
# a layer's error of the rows a method used against fresh ones, per_layer(stem, layer): a
# fraction, ||used - fresh|| / ||fresh|| (DIGEST's stale rows; SAT's predicted and served rows)
ERRORS = ("stale_err", "pred_err", "served_err")

# -- summary.json: the run's headline numbers (written last: its presence = a complete run) -------
STATUS, COMPLETE = "status", "complete"
BEST_VAL, TEST_AT_BEST_VAL, BEST_EPOCH = "best_val", "test_at_best_val", "best_epoch"
FINAL, EPOCHS = "final", "epochs"
MEAN_EPOCH_TIME, MEDIAN_EPOCH_TIME = "mean_epoch_time", "median_epoch_time"
TOTAL_TRAIN_TIME, BYTES_BY_CATEGORY = "total_train_time", "bytes_by_category"
TOTAL_BYTES, MEAN_BYTES_PER_EPOCH = "total_bytes", "mean_bytes_per_epoch"
PEAK_MEM_MB_MAX, FEATURES_NORMALIZED = "peak_mem_mb_max", "features_normalized"
STEPS_PER_S = "steps_per_s"
STEPS_PER_S_FAST, STEPS_PER_S_SLOW = "steps_per_s_fast", "steps_per_s_slow"
TRAIN_WALL_TIME, SERVER_VERSIONS = "train_wall_time", "server_versions"
SERVER_EPOCHS_PER_S = "server_epochs_per_s"
SLOW_FACTOR, GRAD_SHARE, DISCARDED = "slow_factor", "grad_share", "discarded"
TRAIN_TIME, LOOP_TIME = "train_time", "loop_time"
SUMMARY = {
    STATUS: f"{COMPLETE!r}",
    BEST_VAL: "fraction: the best val_acc", TEST_AT_BEST_VAL: "fraction: test_acc at that epoch",
    BEST_EPOCH: "count: that epoch (the first of equals)",
    FINAL: "{train_acc, val_acc, test_acc, train_loss} of the last row",
    EPOCHS: "count: rows of metrics.csv",
    MEAN_EPOCH_TIME: "s", MEDIAN_EPOCH_TIME: "s", TOTAL_TRAIN_TIME: "s: the sum of epoch_time",
    BYTES_BY_CATEGORY: "{bytes_<category> and bytes_total: bytes over the run}",
    TOTAL_BYTES: "bytes over the run", MEAN_BYTES_PER_EPOCH: "bytes",
    PEAK_MEM_MB_MAX: "MiB: the largest peak_mem_mb",
    FEATURES_NORMALIZED: "bool: every input row scaled to sum 1",
    STEPS_PER_S_FAST: "steps/s: mean over the workers at full speed",
    STEPS_PER_S_SLOW: "steps/s: mean over the slowed workers (null: none slowed)",
    TRAIN_WALL_TIME: "s: DIGEST-A: when the server applied the budget's last gradient",
    SERVER_VERSIONS: "count: DIGEST-A: gradients applied", SERVER_EPOCHS_PER_S: "1/s: DIGEST-A",
    # lists, one entry per worker
    by_worker(SLOW_FACTOR): "x: --slow-workers' factor (1: full speed)",
    by_worker(STEPS): "count: steps taken (DIGEST-A: applied)",
    by_worker(STEPS_PER_S): "steps/s: steps over the training time",
    by_worker(GRAD_SHARE): "fraction: DIGEST-A: of the gradients the server applied (sum 1)",
    by_worker(DISCARDED): "count: DIGEST-A: steps whose gradient the server did not apply",
    by_worker(TRAIN_TIME): "s: DIGEST-A: until the worker's last applied step ended",
    by_worker(LOOP_TIME): "s: DIGEST-A: the worker's loop",
    # DIGEST-A's staleness over every applied step, and worker by worker (by_worker of each)
    mean_of(STALENESS_PARAM): "versions", max_of(STALENESS_PARAM): "versions",
    mean_of(STALENESS_REPR): "steps", max_of(STALENESS_REPR): "steps",
}
# written beside them by the worker (digest/training/run.py): what ran, where, on which code
RUN = ("config", "dataset", "partition", "partition_cache", "machine", "startup_memory",
       "versions", "git_commit", "backend", "world_size", "command", "emulation")
