"""Checkpoint and resume: one file per rank (model, optimiser, halo-policy state such as the
representation store or a learned compressor, RNG state, epoch, metrics so far), written
atomically so a kill mid-write leaves the previous checkpoint intact."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch

from . import comm


def _path(out_dir: Path, rank: int) -> Path:
    return Path(out_dir) / "checkpoint" / f"rank{rank}.pt"


def save(out_dir: Path, trainer, epoch: int) -> None:
    """``epoch`` = number of epochs completed."""
    rank = trainer.rt.rank
    state = {
        "epoch": epoch, "world_size": trainer.rt.world_size,
        "model": trainer.model.state_dict(), "opt": trainer.opt.state_dict(),
        "policy": trainer.policy.state_dict(), "rng": torch.get_rng_state(),
        "rows": trainer.rows, "config": vars(trainer.cfg),
    }
    path = _path(out_dir, rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    comm.barrier()  # every rank's file is in place before anyone moves on


def load(out_dir: Path, trainer) -> tuple[int, list[dict]]:
    """Restore ``trainer`` in place; returns (epochs completed, metric rows so far)."""
    path = _path(out_dir, trainer.rt.rank)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint to resume from: {path} is missing")
    try:
        state = torch.load(path, map_location=trainer.rt.device, weights_only=False)
    except Exception as e:
        raise ValueError(f"checkpoint {path} is unreadable ({type(e).__name__})") from e
    if state["world_size"] != trainer.rt.world_size:
        raise ValueError(f"checkpoint was written by {state['world_size']} workers, "
                         f"this run has {trainer.rt.world_size}")
    trainer.model.load_state_dict(state["model"])
    trainer.opt.load_state_dict(state["opt"])
    trainer.policy.load_state_dict(state["policy"])
    torch.set_rng_state(state["rng"])
    return state["epoch"], state["rows"]
