"""Run a test body in M real worker processes (torch.distributed over gloo, started by the same
elastic launcher as ``python -m digest train --workers M``)."""
from __future__ import annotations

from pathlib import Path

from digest.config import TrainConfig
from digest.runtime.launch import launch_all


def _body(fn, cfg_dict, part_dir, extra):
    import torch

    from digest.data import cache
    from digest.runtime import comm
    from digest.cli import import_methods

    import_methods()
    cfg = TrainConfig.of(**cfg_dict)
    rt = comm.setup(cfg.runtime.timeout, "cpu")
    torch.set_num_threads(1)
    try:
        part = cache.load_part(Path(part_dir), rt.rank)
        return fn(cfg, rt, part, **extra)
    finally:
        comm.teardown()


def run_workers(fn, cfg: TrainConfig, part_dir, world: int, **extra) -> list:
    """``fn(cfg, runtime, part, **extra)`` on every rank; returns the results by rank.
    ``fn`` must be importable (a module-level function), since workers are spawned."""
    args = (fn, cfg.flat(), str(part_dir), extra)
    if world == 1:
        return [_body(*args)]
    results = launch_all(_body, args, world)
    return [results[r] for r in range(world)]
