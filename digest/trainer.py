"""The one training loop, shared by every method (METHODS.md sections 1 and 6).

A method only supplies a halo policy (where each layer's halo rows come from) and a parameter-sync
policy; everything else (loss weighting, exact evaluation, metrics, checkpoints) is here.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from . import checkpoint, comm, evaluation, methods
from .config import TrainConfig
from .data import normalize_rows
from .halo import ExactHalo, HaloPlan
from .metrics import best_validation, csv_text, atomic_write, peak_memory_mb, write_json
from .models import MODELS
from .part import LocalPart
from .profile import StepProfiler, label
from .straggler import Straggler, parse_slow_workers


PROGRESS = "progress.csv"  # rows so far of a running run (rank 0, atomically replaced)
PROGRESS_S = 2.0  # at most this often, and at every checkpoint


class Trainer:
    def __init__(self, cfg: TrainConfig, rt: comm.Runtime, part: LocalPart):
        self.cfg, self.rt, self.part, dev = cfg, rt, part, rt.device
        torch.manual_seed(cfg.seed)  # identical initial parameters on every worker
        model_cls = MODELS[cfg.model]
        self.model = model_cls(part.x.size(1), cfg.hidden, part.num_classes, cfg.layers,
                               cfg.dropout, cfg.batch_norm).to(dev)
        for p in self.model.parameters():
            comm.broadcast_(p.data)
        self.y = part.y.to(dev)
        self.masks = [m.to(dev) for m in (part.train_mask, part.val_mask, part.test_mask)]
        self.train_idx = self.masks[0].nonzero().squeeze(1)  # once, not a mask lookup per step
        self.y_train = self.y.index_select(0, self.train_idx)
        self.plan = HaloPlan.of(part, dev)
        self.policy, self.sync = methods.build(cfg, part, self.plan, self.model)
        self.view = model_cls.view(part, induced=self.policy.induced)
        self.eval_view = model_cls.view(part) if self.policy.induced else self.view
        # (inner, halo) input rows; sparse inputs stay sparse where the model can use them. The
        # induced graph reads inner rows only; evaluation always reads inner + halo rows.
        # --normalize-features: row by row, so a worker's rows are the whole graph's rows
        x = normalize_rows(part.x) if cfg.normalize_features else part.x
        self.x = tuple(t if t is None else t.to(dev)
                       for t in model_cls.inputs(x, part.n_inner))
        self.x_train = (self.x[0], None) if self.policy.induced else self.x
        self.view, self.eval_view = _to(self.view, dev), _to(self.eval_view, dev)
        self.eval_halo = ExactHalo(part, self.plan, fwd="eval")  # not counted as training bytes
        # fused: one kernel over every parameter (CPU and CUDA); measured 5-30x faster than the
        # default multi-tensor Adam on CPU, the same update up to float round-off
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay,
                                    fused=dev.type in ("cpu", "cuda"))
        torch.manual_seed(cfg.seed * 1000 + rt.rank + 1)  # worker-local dropout masks
        self.rows: list[dict] = []
        self.start_epoch = 0

    def step(self, epoch: int) -> float:
        """One full-graph step on this worker's partition; returns its loss contribution."""
        self.model.train()
        self.policy.before_step(epoch, lambda halo: self.model(self.x_train, self.view, halo))
        self.opt.zero_grad(set_to_none=True)
        out = self.model(self.x_train, self.view, self.policy.halo)
        # sum over workers of these losses == the full-graph mean loss (global training count)
        loss = F.cross_entropy(out.index_select(0, self.train_idx), self.y_train,
                               reduction="sum") / self.part.num_train_global
        (loss * self.sync.loss_scale).backward()
        self.sync.after_backward(self.model)
        self.opt.step()
        self.sync.after_step(epoch, self.model)
        self.policy.after_step(epoch)
        return float(loss.detach())

    @torch.no_grad()
    def evaluate(self) -> dict:
        """Exact full-graph inference: fresh halos, no dropout; accuracies over all workers."""
        self.model.eval()
        totals = [self.part.num_train_global, self.part.num_val_global, self.part.num_test_global]
        with label("evaluate"):
            pred = self.model(self.x, self.eval_view, self.eval_halo.halo).argmax(-1)
            # hit counts over all workers; ogbn-*: ogb's Evaluator on the gathered predictions
            return evaluation.accuracies(self.cfg.dataset, pred, self.y, self.masks, totals)

    def fit(self, out_dir: Path, summary_extra: dict) -> dict | None:
        cfg, rank, out_dir = self.cfg, self.rt.rank, Path(out_dir)
        if cfg.resume:
            self.start_epoch, self.rows = checkpoint.load(Path(cfg.resume), self)
        if rank == 0:  # a result already there is not this run's: retract it (summary first)
            for name in ("summary.json", "metrics.csv", PROGRESS):
                (out_dir / name).unlink(missing_ok=True)
        # --slow-workers: this rank sleeps (FACTOR - 1) x its compute time after every step; the
        # sleep is part of the step's wall time (the others wait for it at the next collective)
        straggle = Straggler.of(cfg.slow_workers, self.rt.world_size, rank)
        prof = StepProfiler(cfg.profile, rank, self.start_epoch, cfg.epochs)
        tqdm.set_lock(threading.RLock())  # one bar, one process: no multiprocessing semaphore
        shown = float("-inf")  # when progress.csv was last written
        bar = tqdm(range(self.start_epoch, cfg.epochs), desc=f"{cfg.method} x{self.rt.world_size}",
                   disable=rank != 0 or not cfg.progress, leave=False, dynamic_ncols=True)
        for epoch in bar:
            _fault_injection(rank, epoch)
            comm.traffic.reset()
            prof.before(epoch)
            t0, c0 = time.perf_counter(), time.process_time()
            with label("train_step"):
                loss = self.step(epoch)
            cpu = time.process_time() - c0  # this process's CPU seconds (all its threads)
            slept = straggle(time.perf_counter() - t0 - comm.traffic.seconds)
            mine = {"time": time.perf_counter() - t0, "loss": loss, "cpu_time": cpu,
                    **comm.traffic.snapshot(),
                    "peak_mem_mb": peak_memory_mb(), **self.policy.state()}
            if cfg.slow_workers:
                mine["slept"] = slept
            per = comm.all_gather_object(mine)
            row = {"epoch": epoch, **_aggregate(per)}
            if cfg.slow_workers:  # per worker; "slept" itself is their mean (_aggregate)
                row.update({f"slept_w{r}": w["slept"] for r, w in enumerate(per)})
            if (epoch + 1) % cfg.eval_every == 0 or epoch == cfg.epochs - 1:
                t1 = time.perf_counter()
                row.update(self.evaluate(), eval_time=time.perf_counter() - t1)
            row["wall_time"] = row["epoch_time"] + (self.rows[-1]["wall_time"] if self.rows else 0.0)
            row["cum_bytes"] = row["bytes_total"] + (self.rows[-1]["cum_bytes"] if self.rows else 0)
            self.rows.append(row)
            bar.set_postfix(loss=f"{row['train_loss']:.4f}", val=f"{row.get('val_acc', float('nan')):.3f}")
            saving = cfg.checkpoint_every and (epoch + 1) % cfg.checkpoint_every == 0
            if rank == 0 and (saving or ("val_acc" in row and time.monotonic() - shown > PROGRESS_S)):
                # progress of an unfinished run, never mistaken for a result (no summary.json)
                atomic_write(out_dir / PROGRESS, csv_text(self.rows), fsync=False)
                shown = time.monotonic()
            if saving:
                checkpoint.save(out_dir, self, epoch + 1)
            prof.after(epoch)
        prof.close(cfg.epochs - self.start_epoch)  # a no-op unless the window was never reached
        bar.close()
        if rank != 0:
            return None
        summary = {**summary_extra, **self.summary(), **_pace(self.rows, cfg.slow_workers,
                                                               self.rt.world_size)}
        atomic_write(out_dir / "metrics.csv", csv_text(self.rows))
        write_json(out_dir / "summary.json", summary)  # written last: its presence = complete
        (out_dir / PROGRESS).unlink(missing_ok=True)  # superseded by metrics.csv
        return summary

    def summary(self) -> dict:
        rows = self.rows
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


def _pace(rows: list[dict], slow_workers: str, world: int) -> dict:
    """Per-worker pace of a synchronous run, in the keys DIGEST-A reports: every worker takes
    every step, so each one's steps/s = epochs / total training time (evaluation excluded; a
    straggler's sleep included, as everyone waits for it)."""
    factors = parse_slow_workers(slow_workers, world)
    rate = len(rows) / max(1e-12, sum(r["epoch_time"] for r in rows))
    return {"slow_factor_by_worker": [factors.get(r, 1.0) for r in range(world)],
            "steps_by_worker": [len(rows)] * world, "steps_per_s_by_worker": [rate] * world,
            "steps_per_s_fast": rate, "steps_per_s_slow": rate if factors else None}


def _fault_injection(rank: int, epoch: int) -> None:
    """TEST-ONLY fault-injection hook (tests/test_reliability.py); inert unless these are set:
    DIGEST_TEST_KILL_EPOCH=e and DIGEST_TEST_KILL_RANK=r (SIGKILL rank r at the start of epoch e,
    while its peers enter the epoch's collectives; r=group: rank 0 SIGKILLs its process group,
    launcher included) or DIGEST_TEST_RAISE_RANK=r (rank r raises there)."""
    env = os.environ
    if env.get("DIGEST_TEST_KILL_EPOCH") != str(epoch):
        return
    if env.get("DIGEST_TEST_KILL_RANK") == str(rank):
        os.kill(os.getpid(), signal.SIGKILL)
    if env.get("DIGEST_TEST_KILL_RANK") == "group" and rank == 0:
        os.killpg(0, signal.SIGKILL)
    if env.get("DIGEST_TEST_RAISE_RANK") == str(rank):
        raise RuntimeError(f"injected failure in rank {rank} at epoch {epoch}")


def _aggregate(per_worker: list[dict]) -> dict:
    """One CSV row from every worker's record: times are the max (the slowest worker sets the
    pace), bytes and messages the sum, memory the max; plus per-worker columns for the cost model."""
    row = {"train_loss": sum(w["loss"] for w in per_worker),
           "epoch_time": max(w["time"] for w in per_worker),
           "comm_time": max(w["comm_time"] for w in per_worker),
           "compute_time": max(w["time"] - w["comm_time"] for w in per_worker),
           "peak_mem_mb": max(w["peak_mem_mb"] for w in per_worker)}
    for k in per_worker[0]:
        if k.startswith("bytes_") or k == "messages":
            row[k] = sum(w[k] for w in per_worker)
    extra = [k for k in per_worker[0] if k not in row and k not in ("time", "loss")]
    for k in extra:  # method state: mean over workers
        vals = [w[k] for w in per_worker if w.get(k) is not None]
        row[k] = sum(vals) / len(vals) if vals else None
    for r, w in enumerate(per_worker):
        row[f"compute_time_w{r}"] = w["time"] - w["comm_time"]
        row[f"bytes_w{r}"] = w["bytes_total"]
        row[f"messages_w{r}"] = w["messages"]
        row[f"peak_mem_mb_w{r}"] = w["peak_mem_mb"]
        if "cpu_time" in w:  # CPU seconds: compute without the wait for a shared core
            row[f"cpu_time_w{r}"] = w["cpu_time"]
    return row


def _to(view, device):
    for name in ("adj", "adj_t", "adj_halo", "adj_halo_t", "edge_index"):
        t = getattr(view, name)
        if t is not None:
            setattr(view, name, t.to(device))
    return view
