"""Checkpoint and resume: one file per rank (model, optimiser, halo-policy state such as the
representation store or a learned compressor, RNG states, epoch, metrics so far), written
atomically into ``checkpoint/epoch<N>/``; once every rank's file is there, rank 0 commits the set
by rewriting ``checkpoint/config.json`` (settings, world size, epoch N) and removes older sets. A
kill at any moment therefore leaves the previous complete set usable. A trainer with state of its
own beyond these (DIGEST-A: its server's state and each worker's position) supplies it through
``Trainer.extra_state`` / ``load_extra_state``.

A damaged file is refused in one line, never loaded: ``torch.load`` reads a file whose tensor
bytes were overwritten without complaint (garbage parameters), so every file's zip CRCs are
checked first (``verify``); the launcher checks the whole committed set before it starts any
worker (``check``), so that a multi-worker run also ends with that one line, not a worker's
traceback."""
from __future__ import annotations

import json
import random
import shutil
import zipfile
from pathlib import Path

import numpy as np
import torch

from ..files import write_atomic
from ..runtime import comm
from .metrics import write_json

CONFIG = "config.json"  # the run's settings, next to the rank files, readable without torch
# Settings a resumed run may change: where and how it runs, how long, how often it reports.
# Every other setting (dataset, method, model, hyperparameters, seed...) must stay the same; the
# world size is checked on its own (``--workers`` is ignored under torchrun).
RUNNING = frozenset({"epochs", "stop_at_val", "out", "resume", "timeout", "checkpoint_every",
                     "device", "progress", "data_root", "eval_every", "workers", "profile",
                     "overwrite"})


def _path(out_dir: Path, rank: int, epoch: int) -> Path:
    return Path(out_dir) / "checkpoint" / f"epoch{epoch}" / f"rank{rank}.pt"


def read_config(out_dir) -> dict:
    """The settings a checkpointed run was started with (plus ``world_size``)."""
    path = Path(out_dir) / "checkpoint" / CONFIG
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint to resume from: {path} is missing")
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise ValueError(f"checkpoint {path} is unreadable ({e})") from None


def verify(path: Path) -> None:
    """Raise a one-line ValueError unless ``path`` is an intact torch.save file: a zip archive
    (a truncated file has lost its directory at the end) whose every member matches its CRC."""
    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ValueError(f"checkpoint {path} is unreadable (truncated or not a checkpoint: "
                         f"{e})") from None
    if bad is not None:
        raise ValueError(f"checkpoint {path} is unreadable (corrupt: {bad} fails its CRC check)")


def check(out_dir) -> None:
    """Every rank's file of the committed set exists and is intact (``verify``); a one-line
    error otherwise. The launcher's check before it starts the workers."""
    saved = read_config(out_dir)
    for rank in range(saved["world_size"]):
        path = _path(out_dir, rank, saved["epoch"])
        if not path.exists():
            raise FileNotFoundError(f"no checkpoint to resume from: {path} is missing")
        verify(path)


def differences(saved: dict, cfg: dict, names=None) -> list[str]:
    """``--flag saved -> now`` for every key setting (not in RUNNING) that differs."""
    names = [n for n in (names if names is not None else cfg) if n not in RUNNING and n in saved]
    return [f"--{n.replace('_', '-')} {saved[n]} -> {cfg[n]}" for n in names if saved[n] != cfg[n]]


def save(out_dir: Path, trainer, epoch: int) -> None:
    """``epoch`` = number of epochs completed."""
    rank = trainer.rt.rank
    state = {
        "epoch": epoch, "world_size": trainer.rt.world_size,
        "model": trainer.model.state_dict(), "opt": trainer.opt.state_dict(),
        "policy": trainer.policy.state_dict(), "rng": torch.get_rng_state(),
        "rng_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "rng_numpy": np.random.get_state(), "rng_python": random.getstate(),
        "rows": trainer.rows, "config": trainer.cfg.flat(), "extra": trainer.extra_state(),
    }
    path = _path(out_dir, rank, epoch)
    write_atomic(path, lambda f: torch.save(state, f))  # (creates the epoch's folder)
    comm.barrier()  # every rank's file is in place before the set is committed
    if rank == 0:  # commit: config.json names the newest complete set; then drop the others
        top = path.parent.parent
        write_json(top / CONFIG, {**trainer.cfg.flat(), "world_size": trainer.rt.world_size,
                                  "epoch": epoch})
        for old in top.iterdir():
            if old.is_dir() and old.name != path.parent.name:
                shutil.rmtree(old, ignore_errors=True)


def load(out_dir: Path, trainer) -> tuple[int, list[dict]]:
    """Restore ``trainer`` in place; returns (epochs completed, metric rows so far)."""
    path = _path(out_dir, trainer.rt.rank, read_config(out_dir)["epoch"])
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint to resume from: {path} is missing")
    verify(path)
    try:
        state = torch.load(path, map_location=trainer.rt.device, weights_only=False)
    except Exception as e:
        raise ValueError(f"checkpoint {path} is unreadable ({type(e).__name__})") from e
    if state["world_size"] != trainer.rt.world_size:
        raise ValueError(f"checkpoint was written by {state['world_size']} workers, "
                         f"this run has {trainer.rt.world_size}")
    changed = differences(state["config"], trainer.cfg.flat())
    if changed:
        raise ValueError(f"checkpoint {path} was written with other settings: {', '.join(changed)}")
    trainer.model.load_state_dict(state["model"])
    trainer.opt.load_state_dict(state["opt"])
    trainer.policy.load_state_dict(state["policy"])
    torch.set_rng_state(state["rng"].cpu())
    if state.get("rng_cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["rng_cuda"]])
    if state.get("rng_numpy") is not None:
        np.random.set_state(state["rng_numpy"])
        random.setstate(state["rng_python"])
    trainer.load_extra_state(state.get("extra") or {})
    return state["epoch"], state["rows"]
