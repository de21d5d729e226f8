"""What runs inside the benchmark workers (module-level, so spawned processes can import it)."""
from __future__ import annotations

import time


def make_exchange(rt, part_dir: str, width: int):
    """``loop(n)``: n forward halo exchanges of ``width``-column rows, timed inside the worker
    between two barriers; returns (bytes this worker sent to others, seconds)."""
    import torch

    from digest.data import cache
    from digest.runtime import comm
    from digest.policies.halo import HaloPlan, exchange
    part = cache.load_part(part_dir, rt.rank)
    plan = HaloPlan.of(part)
    h = torch.randn(part.n_inner, width)

    @torch.no_grad()
    def loop(n: int):
        comm.barrier()
        comm.traffic.reset()
        t0 = time.perf_counter()
        for _ in range(n):
            exchange(h, plan)
        comm.barrier()
        return comm.traffic.bytes["halo_fwd"], time.perf_counter() - t0

    return {"loop": loop}


def make_trainer(rt, cfg_dict: dict, part_dir: str):
    """``step()``: one training step (epoch) of the method in ``cfg_dict``."""
    from digest.data import cache
    from digest.methods import load_all
    from digest.config import TrainConfig
    from digest.training.trainer import Trainer

    methods = load_all()
    cfg = TrainConfig.of(**cfg_dict)
    trainer = (methods.get(cfg.method).trainer or Trainer)(cfg, rt, cache.load_part(part_dir, rt.rank))
    epoch = [0]

    def step():
        loss = trainer.step(epoch[0])
        epoch[0] += 1
        return loss

    return {"step": step}
