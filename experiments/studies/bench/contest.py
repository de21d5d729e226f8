"""The bench's measurements (``python -m experiments.studies.bench``; docs/performance.md): long-lived
contestant processes, ours (our ``Trainer`` set up as ``python -m digest train --workers 1`` does)
and the plain PyG variants (experiments/studies/bench/reference.py), each asked for one epoch in turn
with the first rotating (``interleaved``); exact and DIGEST as CLI subprocesses, alternated
(``alternated``); the machine they ran on."""
from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import time
from pathlib import Path

from experiments.running.launch import cli_run
from .reference import plain_step_fn

OURS = "ours (exact, 1 worker)"
PLAIN_EI = "plain PyG, edge_index"


PLAIN_SP = "plain PyG, sparse adjacency"
PLAIN_SPX = "plain PyG, sparse features"
# the plain variants timed on each graph: {name: plain_step_fn keywords}. Photo's features are
# dense enough that our trainer keeps them dense, so only dense variants there; on Physics the
# sparse-features variant (on the sparse adjacency, the faster propagation in the dense runs) is
# the fair reference, and the dense ones are kept beside it.


PLAIN = {PLAIN_EI: {}, PLAIN_SP: {"adjacency": "sparse"},
         PLAIN_SPX: {"adjacency": "sparse", "features": "sparse"}}
VARIANTS = {"photo": (PLAIN_EI, PLAIN_SP), "physics": (PLAIN_EI, PLAIN_SP, PLAIN_SPX)}


def ours_step_fn(dataset: str, data_root=None, hidden=256, layers=3, dropout=0.5, method="exact",
                 info: dict | None = None):
    """Our Trainer with 1 worker, set up as ``run.worker`` sets up ``--workers 1``; ``info``, when
    given, gets the input features' layout and size (``reference.features_info``)."""
    import torch

    from digest.data import cache
    from digest.runtime import comm, perf
    from digest.training import metrics
    from digest.config import TrainConfig
    from digest.training.trainer import Trainer

    from experiments.suites.registry import register_methods
    register_methods()
    cfg = TrainConfig.of(dataset=dataset, data_root=data_root, method=method, workers=1,
                      hidden=hidden, layers=layers, dropout=dropout, progress=False)
    rt = comm.setup(cfg.runtime.timeout, "cpu")
    torch.set_num_threads(max(1, metrics.available_cores() // rt.local_world_size))
    perf.tune_allocator()
    part_dir = cache.prepare_partition(dataset, 1, cfg.data.partitioner, cfg.seed, data_root, cfg.data.sparse)
    part = cache.load_part(part_dir, 0)
    if info is not None:
        from experiments.running.running.reference import features_info
        info.update(features_info(part.x))
    trainer = Trainer(cfg, rt, part)
    return trainer.step


def _contestant(conn, kind: str, kwargs: dict, env: dict) -> None:
    os.environ.update(env)
    try:
        import warnings
        warnings.filterwarnings("ignore")
        import torch

        from digest.training.metrics import available_cores, peak_memory_mb
        info = {}
        if kind == "ours":
            step = ours_step_fn(**kwargs, info=info)
        else:
            from digest.runtime import perf
            from digest.data import load_dataset
            torch.set_num_threads(available_cores())
            if kwargs.pop("tune_allocator", False):
                perf.tune_allocator()
            # sparse features are loaded sparse (never densified: the peak memory is the variant's)
            sparse = "always" if kwargs.get("features") == "sparse" else "never"
            graph = load_dataset(kwargs.pop("dataset"), kwargs.pop("data_root", None), sparse=sparse)
            step = plain_step_fn(graph, **kwargs)
            from experiments.running.running.reference import features_info
            info.update(features_info(graph.x))
            del graph
        conn.send(("ready", info))
        while True:
            cmd, epoch = conn.recv()
            if cmd == "stop":
                conn.send(("peak_mem_mb", peak_memory_mb()))
                return
            t0 = time.perf_counter()
            step(epoch)
            conn.send(("time", time.perf_counter() - t0))
    except BaseException as e:  # noqa: BLE001 - reported by the controller
        conn.send(("error", f"{type(e).__name__}: {e}"))


def interleaved(contestants: dict, epochs: int, warmup: int) -> dict:
    """Run ``{name: (kind, kwargs, env)}`` one epoch each in turn (rotating who goes first) for
    ``warmup + epochs`` rounds; returns ``{name: {"median_s", "times_s", "peak_mem_mb",
    "features"}}`` (``features``: the input features' layout and size as the contestant holds
    them)."""
    ctx = mp.get_context("spawn")
    procs, infos = {}, {}
    try:
        for name, (kind, kwargs, env) in contestants.items():
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_contestant, args=(child, kind, dict(kwargs), dict(env)),
                            daemon=True)
            p.start()
            procs[name] = (p, parent)
            tag, val = parent.recv()  # one at a time: set-up (loading, partitioning) not overlapped
            if tag == "error":
                raise RuntimeError(f"{name}: {val}")
            infos[name] = val
        times = {n: [] for n in procs}
        names = list(procs)
        for r in range(warmup + epochs):
            k = r % len(names)
            for name in names[k:] + names[:k]:
                procs[name][1].send(("step", r))
                tag, val = procs[name][1].recv()
                if tag == "error":
                    raise RuntimeError(f"{name}: {val}")
                if r >= warmup:
                    times[name].append(val)
        out = {}
        for name, (p, conn) in procs.items():
            conn.send(("stop", 0))
            out[name] = {"median_s": statistics.median(times[name]), "times_s": times[name],
                         "peak_mem_mb": conn.recv()[1], "features": infos[name]}
        return out
    finally:
        for p, _ in procs.values():
            p.join(timeout=30)
            if p.is_alive():
                p.kill()


def alternated(dataset: str, workers: int, epochs: int, reps: int, work: Path,
               root_flags=()) -> dict:
    """Exact and DIGEST (I = 10) as ``python -m digest train`` subprocesses, ``reps`` runs each,
    alternated so that the other users' load hits both: {method: [cli_run's result]}."""
    runs = {"exact": [], "digest": []}
    for r in range(reps):
        for method in ("exact", "digest") if r % 2 == 0 else ("digest", "exact"):
            extra = (*root_flags, *(("--sync-interval", "10") if method == "digest" else ()))
            runs[method].append(cli_run(work / f"{method}{r}", dataset, method, workers, epochs, extra))
    return runs


def machine_record() -> dict:
    from digest.training.metrics import available_cores, machine, versions
    return {"machine": machine(1, 1, available_cores()), "versions": versions()}
