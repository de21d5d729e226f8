"""The one training loop, shared by every method (docs/methods.md sections 1 and 6).

A method only supplies a halo policy (where each layer's halo rows come from) and a parameter
policy; everything else (loss weighting, exact evaluation, metrics, checkpoints) is here. DIGEST-A
replaces only the epoch loop (``AsyncTrainer.train``); start, progress, stragglers, profiling and
result writing are ``fit``'s and ``Loop``'s for both.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from . import checkpoint, evaluation, records
from ..runtime import comm
from .. import methods
from ..config import TrainConfig
from ..data import normalize_rows
from ..policies.halo import ExactHalo, HaloPlan
from ..data.local_graph import LocalPart
from ..files import write_text_atomic
from .metrics import csv_text, peak_memory_mb, write_json
from ..models import MODELS
from ..runtime.profile import StepProfiler, label
from .straggler import Straggler

PROGRESS = "progress.csv"  # rows so far of a running run (rank 0, atomically replaced)
PROGRESS_S = 2.0  # at most this often, and at every checkpoint


class Trainer:
    """One worker's model, optimiser, halo policy and parameter policy.

    Args:
        hooks: callables ``hook(epoch, rank)`` run at the start of every step (tests inject
            faults through them; ``DIGEST_EPOCH_HOOK`` names one for a CLI run, e.g.
            digest/runtime/faults.py).
    """

    def __init__(self, cfg: TrainConfig, rt: comm.Runtime, part: LocalPart, hooks=()):
        self.cfg, self.rt, self.part, dev = cfg, rt, part, rt.device
        self.hooks = list(hooks)
        m = cfg.model
        torch.manual_seed(cfg.seed)  # identical initial parameters on every worker
        model_cls = MODELS[m.model]
        self.model = model_cls(part.x.size(1), m.hidden, part.num_classes, m.layers, m.dropout,
                               m.batch_norm).to(dev)
        for p in self.model.parameters():
            comm.broadcast_(p.data)
        self.y = part.y.to(dev)
        self.masks = [m.to(dev) for m in (part.train_mask, part.val_mask, part.test_mask)]
        self.train_idx = self.masks[0].nonzero().squeeze(1)  # once, not a mask lookup per step
        self.y_train = self.y.index_select(0, self.train_idx)
        self.plan = HaloPlan.of(part, dev)
        comm.traffic.extra.clear()  # this run's method declares its own byte categories
        self.policy, self.params = methods.build(cfg, part, self.plan, self.model)
        self.view = model_cls.view(part, induced=self.policy.induced)
        self.eval_view = model_cls.view(part) if self.policy.induced else self.view
        # (inner, halo) input rows; sparse inputs stay sparse where the model can use them. The
        # induced graph reads inner rows only; evaluation always reads inner + halo rows.
        # --normalize-features (unset: the model's default on non-negative features, decided on
        # the whole graph): row by row, so a worker's rows are the whole graph's rows
        flag = cfg.data.normalize_features
        nonneg = flag is None and model_cls.normalize_by_default and all_nonnegative(part.x)
        self.features_normalized = model_cls.normalizes(flag, nonneg)
        x = normalize_rows(part.x) if self.features_normalized else part.x
        self.x = tuple(t if t is None else t.to(dev)
                       for t in model_cls.inputs(x, part.n_inner))
        self.x_train = (self.x[0], None) if self.policy.induced else self.x
        self.view, self.eval_view = _to(self.view, dev), _to(self.eval_view, dev)
        self.eval_halo = ExactHalo(part, self.plan, fwd="eval")  # not counted as training bytes
        self.totals = [part.num_train_global, part.num_val_global, part.num_test_global]
        # fused: one kernel over every parameter (CPU and CUDA); measured 5-30x faster than the
        # default multi-tensor Adam on CPU, the same update up to float round-off
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.optim.lr,
                                    weight_decay=cfg.optim.weight_decay,
                                    fused=dev.type in ("cpu", "cuda"))
        torch.manual_seed(cfg.seed * 1000 + rt.rank + 1)  # worker-local dropout masks
        self.rows: list[dict] = []
        self.start_epoch = 0
        # layer 0: the halo's input features, fetched once (docs/methods.md section 2), counted at
        # step 0 as received (from every owner that has rows for this worker)
        self.input_fetch = (0, 0) if self.policy.induced else (
            part.halo_input_bytes(), sum(1 for c in part.recv_counts if c))

    def forward(self, halo):
        """The model on this worker's training inputs with halo policy ``halo(layer, h_inner)``."""
        return self.model(self.x_train, self.view, halo)

    def step(self, epoch: int) -> float:
        """One full-graph step on this worker's partition; returns its loss contribution."""
        self.model.train()
        if epoch == 0 and self.input_fetch[0]:
            comm.traffic.add("halo_fwd", *self.input_fetch)
        self.policy.before_step(epoch, self.forward)
        self.opt.zero_grad(set_to_none=True)
        out = self.forward(self.policy.halo)
        # sum over workers of these losses == the full-graph mean loss (global training count)
        loss = F.cross_entropy(out.index_select(0, self.train_idx), self.y_train,
                               reduction="sum") / self.part.num_train_global
        (loss * self.params.loss_scale).backward()
        self.params.after_backward(self.model)
        self.params.apply(epoch, self.opt, self.model)
        self.policy.after_step(epoch)
        return float(loss.detach())

    @torch.no_grad()
    def evaluate(self) -> dict:
        """Exact full-graph inference: fresh halos, no dropout; accuracies over all workers."""
        self.model.eval()
        with label("evaluate"):
            pred = self.model(self.x, self.eval_view, self.eval_halo.halo).argmax(-1)
            # hit counts over all workers; ogbn-*: ogb's Evaluator on the gathered predictions
            return evaluation.accuracies(self.cfg.data.dataset, pred, self.y, self.masks, self.totals)

    # -- the outer loop --------------------------------------------------------------------------
    def fit(self, out_dir: Path, summary_extra: dict) -> dict | None:
        """Train, write metrics.csv and summary.json (rank 0); returns the summary on rank 0."""
        out_dir = Path(out_dir)
        self.restore()
        if self.rt.rank == 0:  # a result already there is not this run's: retract it (summary first)
            for name in ("summary.json", "metrics.csv", PROGRESS):
                (out_dir / name).unlink(missing_ok=True)
        extra = self.train(out_dir)
        if self.rt.rank != 0:
            return None
        summary = {**summary_extra, **records.summary(self.rows), **extra,
                   "features_normalized": self.features_normalized}
        write_text_atomic(out_dir / "metrics.csv", csv_text(self.rows))
        write_json(out_dir / "summary.json", summary)  # written last: its presence = complete
        (out_dir / PROGRESS).unlink(missing_ok=True)  # superseded by metrics.csv
        return summary

    def restore(self) -> None:
        if self.cfg.runtime.resume:
            self.start_epoch, self.rows = checkpoint.load(Path(self.cfg.runtime.resume), self)

    def extra_state(self) -> dict:
        """What a checkpoint keeps beyond the model, optimiser, halo policy, RNGs and rows: none
        here; a trainer with a loop of its own (DIGEST-A) adds its loop's state."""
        return {}

    def load_extra_state(self, state: dict) -> None:
        """Restore what ``extra_state`` returned (called by ``checkpoint.load``)."""

    def train(self, out_dir: Path) -> dict:
        """Synchronous epochs: every worker one step, then one metrics row. Returns the summary's
        method-specific part."""
        cfg, rank = self.cfg, self.rt.rank
        epochs = cfg.optim.epochs
        loop = Loop(self, epochs - self.start_epoch, f"{cfg.method} x{self.rt.world_size}",
                    record_sleep=bool(cfg.runtime.slow_workers), first=self.start_epoch)
        shown = float("-inf")  # when progress.csv was last written
        for epoch in range(self.start_epoch, epochs):
            mine = loop.step(epoch, lambda: self.step(epoch))
            per = comm.all_gather_object(mine)
            row = {"epoch": epoch, "train_loss": sum(w["loss"] for w in per),
                   "epoch_time": max(w["time"] for w in per), **records.combine([[w] for w in per])}
            # evaluate (and finish) only where the replicas agree: under --local-steps K the
            # parameters between averaging steps are M different local models
            due = (epoch + 1) % cfg.optim.eval_every == 0 or epoch == epochs - 1
            if due and self.params.averaged(epoch):
                t1 = time.perf_counter()
                row.update(self.evaluate(), eval_time=time.perf_counter() - t1)
            self.rows.append(records.accumulate(row, self.rows[-1] if self.rows else None))
            loop.show(row)
            saving = cfg.runtime.checkpoint_every and (epoch + 1) % cfg.runtime.checkpoint_every == 0
            if rank == 0 and (saving or ("val_acc" in row and time.monotonic() - shown > PROGRESS_S)):
                # progress of an unfinished run, never mistaken for a result (no summary.json)
                write_text_atomic(out_dir / PROGRESS, csv_text(self.rows), fsync=False)
                shown = time.monotonic()
            if saving:
                checkpoint.save(out_dir, self, epoch + 1)
            loop.prof.after(epoch)
            # every rank evaluated the same all-reduced accuracy: they all stop at this epoch
            if cfg.optim.stop_at_val and row.get("val_acc", -1.0) >= cfg.optim.stop_at_val:
                break
        loop.close(epochs - self.start_epoch)
        return records.sync_pace(self.rows, cfg.runtime.slow_workers, self.rt.world_size)


class Loop:
    """What every outer loop does around a step: the epoch hooks, the byte counter, the profiler
    window, timing, the straggler's sleep (``--slow-workers``) and the progress bar."""

    def __init__(self, trainer: Trainer, total: int, desc: str, record_sleep: bool, first: int = 0):
        cfg, rt = trainer.cfg, trainer.rt
        self.trainer, self.rank, self.record_sleep = trainer, rt.rank, record_sleep
        # --slow-workers: this rank sleeps (FACTOR - 1) x its compute time after every step
        self.straggle = Straggler.of(cfg.runtime.slow_workers, rt.world_size, rt.rank)
        self.prof = StepProfiler(cfg.runtime.profile, rt.rank, first, cfg.optim.epochs)
        tqdm.set_lock(threading.RLock())  # one bar, one process: no multiprocessing semaphore
        self.bar = tqdm(total=total, desc=desc, disable=rt.rank != 0 or not cfg.runtime.progress,
                        leave=False, dynamic_ncols=True)

    def step(self, i: int, fn, sleep=lambda: True, applied=lambda: True) -> dict | None:
        """Run ``fn()`` (one training step, returning its loss) as step ``i``; returns this
        worker's record of it, or None when ``applied()`` says the step did not count (asked,
        like ``sleep()``, after the step)."""
        for hook in self.trainer.hooks:
            hook(i, self.rank)
        comm.traffic.reset()
        self.prof.before(i)
        t0, c0 = time.perf_counter(), time.process_time()
        with label("train_step"):
            loss = fn()
        cpu = time.process_time() - c0  # this process's CPU seconds (all its threads)
        if not applied():
            return None
        # the sleep is part of the step's time (synchronous: the others wait for it)
        slept = self.straggle(time.perf_counter() - t0 - comm.traffic.seconds) if sleep() else 0.0
        t = self.trainer
        mine = {"time": time.perf_counter() - t0, "loss": loss, "cpu_time": cpu,
                **comm.traffic.snapshot(), "peak_mem_mb": peak_memory_mb(),
                **t.policy.state(), **t.params.state()}
        if self.record_sleep:
            mine["slept"] = slept
        return mine

    def show(self, row: dict) -> None:
        self.bar.update(1)
        self.bar.set_postfix(loss=f"{row['train_loss']:.4f}", val=f"{row.get('val_acc', float('nan')):.3f}")

    def close(self, steps_taken: int) -> None:
        self.prof.close(steps_taken)  # a no-op unless the window was never reached
        self.bar.close()


def all_nonnegative(x) -> bool:
    """Whether every input feature of the whole graph is >= 0 (bag-of-words), from every worker's
    rows (dense or sparse COO): one MIN all-reduce, not counted (start-up control traffic)."""
    vals = x.coalesce().values() if x.is_sparse else x
    low = float(vals.min()) if vals.numel() else 0.0
    low = comm.all_reduce_(torch.tensor([low], dtype=torch.float64), None, op=comm.dist.ReduceOp.MIN)
    return float(low) >= 0


def _to(view, device):
    for name in ("adj", "adj_t", "adj_halo", "adj_halo_t", "edge_index"):
        t = getattr(view, name)
        if t is not None:
            setattr(view, name, t.to(device))
    return view
