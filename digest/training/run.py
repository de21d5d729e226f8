"""One run's lifecycle, the contract every caller uses (``python -m digest train``, ``digest.train``
and the experiment harness): plan (check the request), identity (the settings that make the run),
prepare (the partition), launch (the workers), resume (a saved run's own settings) and whether a
folder holds the run complete.

    summary, folder = run({"dataset": "Cora", "method": "digest", "workers": 2})

Every method must be registered before (``digest.methods.load_all()``): this module only asks
the registry for the method's trainer.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from .. import config as config_mod
from .. import methods
from ..config import NOT_THE_RUN, TrainConfig, all_flags
from ..data import cache, check_request
from ..data.cache import prepare_partition
from ..data.user_graph import files_changed
from ..errors import UsageError
from ..runtime import comm, netem, perf, placement, unresponsive
from ..runtime.launch import interrupt_once, launch, launch_emulated, prestart, under_torchrun
from . import checkpoint, metrics
from .trainer import Trainer

# What a worker imports beyond launch.PRELOAD: the forkserver imports it once for all workers.
WORKER_MODULES = methods.BUILT_IN

def identity(config: dict, world: int | None) -> dict:
    """The settings that make a run: its flat config less ``NOT_THE_RUN``, with its world size."""
    return {**{k: v for k, v in config.items() if k not in NOT_THE_RUN}, "world_size": world}


def complete_summary(directory) -> dict | None:
    """The folder's summary.json when it records a complete run, else None."""
    try:
        summary = json.loads((Path(directory) / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) and summary.get("status") == "complete" else None


def holds_this_run(cfg: TrainConfig, world: int) -> bool:
    """Nothing already written is lost by a second ``train``: when the output folder holds a
    complete run, True if it is this configuration's (said on stdout), a one-line UsageError if
    it is another's; --overwrite replaces either. False otherwise."""
    out_dir = Path(cfg.run_dir(world))
    summary = complete_summary(out_dir)
    if summary is None or cfg.runtime.overwrite:
        return False
    saved = identity(dict(summary.get("config") or {}), summary.get("world_size"))
    now = identity(cfg.flat(), world)
    if saved["world_size"] is None:
        saved.pop("world_size")
    changed = [f"--{k.replace('_', '-')} {saved[k]} -> {now[k]}" for k in now
               if k in saved and saved[k] != now[k]] + files_changed(summary)
    if changed:
        raise UsageError(f"--out {out_dir} holds a complete run of another configuration "
                         f"({', '.join(changed)}); choose another --out, or give --overwrite to "
                         "replace it")
    print(f"{out_dir} already holds this run, complete; nothing to do (--overwrite runs it again)")
    return True


def resume_config(cfg: TrainConfig, given: dict, world: int | None) -> TrainConfig:
    """``--resume DIR`` continues the run saved there with ITS settings: a flag left out is
    taken from the checkpoint; a key setting given with another value is refused (one line)."""
    saved = checkpoint.read_config(cfg.runtime.resume)
    changed = checkpoint.differences(saved, cfg.flat(), sorted(given))
    saved_world = saved.get("world_size")
    if world is None and "workers" in given and cfg.runtime.workers != saved_world:
        changed.append(f"--workers {saved_world} -> {cfg.runtime.workers}")
    if world is not None and world != saved_world:
        changed.append(f"world size {saved_world} -> {world}")
    if changed:
        raise UsageError(f"--resume {cfg.runtime.resume}: the run was started with other settings "
                         f"({', '.join(changed)}); leave those flags out to continue it")
    inherited = {k: v for k, v in saved.items() if k in all_flags() and k not in ("out", "resume")}
    if world is None:
        inherited["workers"] = saved_world
    return TrainConfig.of(**{**inherited, **given})


def plan(given: dict, argv: list | None = None) -> tuple[TrainConfig, int | None]:
    """The run's config from its flags by field name, every check done before anything starts
    (one-line UsageError or DatasetError); the world size when under torchrun, else None. The
    workers' launcher starts meanwhile (its imports overlap with the checks and the partition)."""
    try:
        cfg = TrainConfig.of(**given)
        config_mod.validate(cfg)
    except ValueError as e:
        raise UsageError(str(e)) from None
    own = methods.get(cfg.method).trainer  # an outer loop of its own ignores Trainer's stop
    if cfg.optim.stop_at_val and own is not None and own.train is not Trainer.train:
        raise UsageError(f"--stop-at-val: {cfg.method} evaluates its snapshots after the run "
                         "(asynchronous); give --epochs")
    world = int(os.environ["WORLD_SIZE"]) if under_torchrun() else None
    if world is None and cfg.runtime.workers > 1:
        prestart(WORKER_MODULES)
    if cfg.runtime.resume:
        cfg = resume_config(cfg, given, world)
        if world is None:  # a damaged file: one line now, not a worker's traceback later
            checkpoint.check(cfg.runtime.resume)
    rt = cfg.runtime
    if rt.emulate_network or rt.emulate_latency:  # what is missing: one line (2), before anything
        netem.check(rt.emulate_network, rt.emulate_latency, world or rt.workers,
                    under_torchrun(), argv)
    unresponsive.grace_from_env()  # a bad DIGEST_STOPPED_GRACE_S: one line (2), before anything
    check_request(cfg.data.dataset, world or rt.workers, "--workers",
                  cfg.data.partition_file, (cfg.model.hidden, cfg.model.layers))
    return cfg, world


def prepare(cfg: TrainConfig, world: int) -> Path:
    """The run's partition into ``world`` parts, from the cache (built once, under a lock)."""
    d = cfg.data
    return prepare_partition(d.dataset, world, d.partitioner, cfg.seed, d.data_root, d.sparse,
                             partition_file=d.partition_file)


def check_writable(out_dir) -> None:
    """An --out the run cannot write is one line now, not a failure after the first epoch."""
    try:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out_dir):
            pass
    except OSError as e:
        raise UsageError(f"cannot write the run's files to {out_dir}: "
                         f"{e.strerror or type(e).__name__}") from None


def epoch_hooks() -> list:
    """``DIGEST_EPOCH_HOOK=module:function`` (or ``path/to/file.py:function``): a function called
    as ``function(epoch, rank)`` at the start of every training step (fault injection in tests,
    debugging); none when unset."""
    spec = os.environ.get("DIGEST_EPOCH_HOOK")
    if not spec:
        return []
    where, _, name = spec.rpartition(":")
    return [getattr(methods.load_module(where), name)]


def worker(cfg: TrainConfig, part_dir: str | None, out_dir: str) -> dict | None:
    """Body of every worker process (spawned by the launcher or started by torchrun)."""
    import torch

    methods.load_all()  # a spawned worker starts with an empty registry
    rt = comm.setup(cfg.runtime.timeout, cfg.runtime.device)
    threads = max(1, metrics.available_cores() // rt.local_world_size)
    torch.set_num_threads(threads)  # workers share the node's cores instead of oversubscribing
    machine = metrics.machine(rt.world_size, rt.local_world_size, threads)  # before pinning
    machine.update(placement.pin(rt.local_rank, rt.local_world_size, cfg.runtime.pin_workers))
    # large tensors reuse heap memory instead of fresh mmaps (perf.py)
    machine["heap_reuse"] = cfg.runtime.heap_reuse == "on" and perf.tune_allocator()
    try:
        if part_dir is None:  # torchrun: every rank asks; the cache lock lets one build it
            part_dir = str(prepare(cfg, rt.world_size))
        part = cache.load_part(Path(part_dir), rt.rank)
        manifest = cache.load_manifest(Path(part_dir))
        trainer_cls = methods.get(cfg.method).trainer or Trainer
        trainer = trainer_cls(cfg, rt, part, hooks=epoch_hooks())
        # the trainer's views now hold the edges as CSR blocks and nothing reads the part's own
        # edge list again (0.5 GB a worker at products size); the view build's freed temporaries
        # go back to the system too
        part.edge_index = None
        perf.release_free_memory()
        startup = comm.all_gather_object(metrics.startup_memory())  # every worker's, one list
        extra = {"config": cfg.flat(), "dataset": manifest.get("graph", {}),
                 "partition": manifest.get("stats", {}), "partition_cache": part_dir,
                 "machine": machine, "startup_memory": startup,
                 "versions": metrics.versions(), "git_commit": metrics.git_commit(),
                 "backend": rt.backend, "world_size": rt.world_size,
                 "command": " ".join(["python -m digest"] + sys.argv[1:]),
                 **netem.summary_extra()}  # --emulate-network: the links, under "emulation"
        return trainer.fit(Path(out_dir), extra)
    finally:
        comm.teardown()


def run(given: dict, argv: list | None = None) -> tuple[dict | None, str]:
    """One run from its ``train`` flags by field name (``{"dataset": "Cora", "workers": 2}``):
    plan, prepare, launch (or resume). Returns rank 0's summary (None when the run is complete
    in its folder already) and the folder. ``argv``: the command line, re-executed inside a
    network namespace under --emulate-network."""
    methods.load_all()
    cfg, world = plan(given, argv)
    size = world or cfg.runtime.workers
    if not cfg.runtime.resume and holds_this_run(cfg, size):
        return None, cfg.run_dir(size)  # the same run, complete there
    out_dir = cfg.runtime.resume or cfg.run_dir(size)
    check_writable(out_dir)
    if world is not None:  # this process is one of torchrun's workers
        interrupt_once()
        return worker(cfg, None, out_dir), out_dir
    args = (cfg, str(prepare(cfg, size)), out_dir)
    if cfg.runtime.emulate_network:  # every worker in a network namespace of its own
        summary = launch_emulated(worker, args, size, cfg.runtime.emulate_network,
                                  cfg.runtime.emulate_latency, cfg.runtime.cpu_quota == "auto")
    else:
        summary = worker(*args) if size == 1 else launch(worker, args, size)
    return summary, out_dir
