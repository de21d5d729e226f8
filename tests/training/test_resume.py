"""Checkpoint and resume for every method (digest/training/checkpoint.py): a run interrupted right
after its checkpoint at epoch 4 of 6 and resumed from it gives the per-epoch metrics of the same
run uninterrupted, every column but times and memory (losses, accuracies, bytes and messages, the
method's own state columns); the resumed run really starts at epoch 4.

The interruption is an exception from the trainer's epoch hook at the start of step 4 on every
rank (after the checkpoint of epoch 4 was committed): the run stops as a killed one does, without
a new process. Every synchronous method runs in ONE launch of 2 workers (each configuration
three times: uninterrupted, interrupted, resumed); DIGEST-A, whose rpc agent starts once per
process, runs with one worker (step for step synchronous DIGEST, so deterministic) in a launch per
run. Killed processes and --resume through the command line: test_reliability.py and
test_async_resume.py (slow tier)."""
from __future__ import annotations

import re

import pytest

from digest.config import TrainConfig
from digest.methods import METHODS, get
from helpers import launch_world, rows, run_workers, small_graph

EPOCHS, EVERY, STOP = 6, 2, 4
BASE = TrainConfig.of(dataset="resume", hidden=8, layers=3, epochs=EPOCHS, progress=False,
                      timeout=60)  # dropout 0.5: the resumed run must redraw the same masks
# flags that give each method's restorable state something to do between epochs 4 and 6
SYNCHRONOUS = {
    "exact": dict(method="exact"),
    "partition": dict(method="partition", local_steps=3),  # resumed between averagings
    "digest": dict(method="digest", sync_interval=3),
    "digest-vanishing": dict(method="digest-vanishing", sync_interval=3),  # decreasing
    "digest-vanishing-drift": dict(method="digest-vanishing", sync_interval=3,
                                   sync_schedule="drift", drift_threshold=0.05),
    "varco": dict(method="varco", compressor="learned", comp_schedule="fixed", comp_ratio=4.0),
    "pipegcn": dict(method="pipegcn", pipe_smoothing=0.5),  # in-flight rows and gradients
    "bnsgcn": dict(method="bnsgcn", boundary_rate=0.3),
    # EPS 0.1 without dropout: blocks skipped at the resumed steps, from restored caches
    "sancus": dict(method="sancus", dropout=0.0, max_staleness=3),
    "adaqp": dict(method="adaqp", quant_assign="adaptive", quant_bits=4, quant_adapt_every=2),
    "sat": dict(method="sat", sync_interval=3),  # the predictor trained at each sync
    "sylvie": dict(method="sylvie", sync_every=3),  # quantised, pipelined, synchronous every 3
    "minibatch": dict(method="minibatch", batch_size=32),  # several sampled batches per epoch
}
# DIGEST-A: one launch per run (its rpc agent starts once per process)
ASYNCHRONOUS = {
    "digest-async": dict(method="digest-async", sync_interval=2),
    # its schedule's state (the last push, the rows pushed) is synchronous vanishing's, resumed
    # above: slow tier (each DIGEST-A run starts its server process from scratch)
    "digest-async-vanishing": dict(method="digest-async-vanishing", sync_interval=2,
                                   sync_schedule="drift", drift_threshold=0.05),
}
SLOW = {"digest-async", "digest-async-vanishing"}  # a server process and rpc each: slow tier
# columns a rerun does not reproduce: clocks, memory, how long waits took
NOT_REPRODUCIBLE = re.compile(r"time|mem|wait|ready|slept|steps_per_s")


class Interrupted(Exception):
    pass


def _stop_at(epoch: int, ran: list):
    def hook(e, rank):
        if e == epoch:
            raise Interrupted
        ran.append(e)
    return hook


def _fit(cfg, rt, part, out: str, stop: int) -> list:
    """One run into ``out``, interrupted at the start of step ``stop`` (none: -1); returns the
    epochs it took."""
    from pathlib import Path

    from digest.training.trainer import Trainer
    ran: list[int] = []
    try:
        (get(cfg.method).trainer or Trainer)(cfg, rt, part, hooks=[_stop_at(stop, ran)]).fit(
            Path(out), {})
    except Interrupted:
        pass
    return ran


def _three_runs(cfg, rt, part, out: str) -> list:
    """Uninterrupted into out/direct; interrupted after the checkpoint of epoch STOP into out/cut,
    then resumed there; returns the epochs the resumed run took."""
    _fit(cfg, rt, part, f"{out}/direct", -1)
    saving = cfg.replace(checkpoint_every=EVERY)
    _fit(saving, rt, part, f"{out}/cut", STOP)
    return _fit(saving.replace(resume=f"{out}/cut"), rt, part, f"{out}/cut", -1)


def resume_each(cfg, rt, part, runs: dict, out: str) -> dict:
    return {name: _three_runs(cfg.replace(**flags), rt, part, f"{out}/{name}")
            for name, flags in runs.items()}


@pytest.fixture(scope="module")
def synchronous(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("resume")
    _, ranks = launch_world(tmp, "resume", 2, resume_each, BASE, small_graph(seed=6),
                            runs=SYNCHRONOUS, out=str(tmp / "runs"))
    return tmp / "runs", ranks


def reproducible(path) -> list[dict]:
    return [{k: v for k, v in r.items() if not NOT_REPRODUCIBLE.search(k)} for r in rows(path)]


def test_every_method_is_covered():
    assert {f["method"] for f in [*SYNCHRONOUS.values(), *ASYNCHRONOUS.values()]} == set(METHODS)


@pytest.mark.parametrize("name", sorted(SYNCHRONOUS))
def test_resumed_run_continues_identically(synchronous, name):
    runs, ranks = synchronous
    assert all(r[name] == list(range(STOP, EPOCHS)) for r in ranks), [r[name] for r in ranks]
    direct, resumed = (reproducible(runs / name / k / "metrics.csv") for k in ("direct", "cut"))
    assert len(direct) == EPOCHS and [int(r["epoch"]) for r in resumed] == list(range(EPOCHS))
    assert resumed == direct
    if name == "sancus":  # the resumed steps did reuse restored caches
        assert min(float(r["sent_fraction"]) for r in direct[STOP:]) < 1
    if name == "adaqp":  # and the restored assignment changed at the resumed decision step
        assert len({r["quant_bits_l1"] for r in direct}) > 1


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory):
    """``runs(name)``: the three one-worker runs of ``ASYNCHRONOUS[name]`` (a launch each), made
    once per module: (their folder, the resumed run's epochs, the partition folder)."""
    from digest.data.cache import prepare_partition
    made = {}

    def runs(name):
        if name not in made:
            tmp = tmp_path_factory.mktemp(name)
            part_dir = prepare_partition("resume1", 1, "metis", 0, tmp, graph=small_graph(seed=6))
            cfg = BASE.replace(dataset="resume1", **ASYNCHRONOUS[name])
            saving, cut = cfg.replace(checkpoint_every=EVERY), str(tmp / "cut")
            for run_cfg, out, stop in [(cfg, tmp / "direct", -1), (saving, cut, STOP),
                                       (saving.replace(resume=cut), cut, -1)]:
                ran = run_workers(_fit, run_cfg, part_dir, 1, out=str(out), stop=stop)[0]
            made[name] = tmp, ran, part_dir
        return made[name]
    return runs


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in sorted(ASYNCHRONOUS)])
def test_one_worker_digest_a_resumes_identically(name, one_worker):
    tmp, ran, _ = one_worker(name)
    assert ran == list(range(STOP, EPOCHS))  # the resumed run's steps
    direct, resumed = (reproducible(tmp / k / "metrics.csv") for k in ("direct", "cut"))
    assert len(direct) == EPOCHS and resumed == direct


def test_one_worker_digest_a_is_synchronous_digest(one_worker):
    """With M = 1, DIGEST-A is step for step synchronous DIGEST (the same I, seed and dropout
    masks): its uninterrupted run above has DIGEST's per-epoch losses and accuracies (DIGEST-A's
    evaluated on the server's snapshot of each epoch)."""
    tmp, _, part_dir = one_worker("digest-async")
    cfg = BASE.replace(dataset="resume1", **{**ASYNCHRONOUS["digest-async"], "method": "digest"})
    run_workers(_fit, cfg, part_dir, 1, out=str(tmp / "sync"), stop=-1)
    sync, asyn = (rows(tmp / k / "metrics.csv") for k in ("sync", "direct"))
    assert [float(r["train_loss"]) for r in asyn] == \
        pytest.approx([float(r["train_loss"]) for r in sync], rel=1e-6)
    accuracies = ("train_acc", "val_acc", "test_acc")
    assert [[r[k] for k in accuracies] for r in asyn] == [[r[k] for k in accuracies] for r in sync]
