"""``python -m digest``: the thin entry point, and the one place that sees every method.

    python -m digest datasets
    python -m digest partition --dataset synthetic --parts 4
    python -m digest train --dataset Cora --method exact --workers 4
    torchrun --nproc-per-node 2 -m digest train --dataset Cora     (same command, multi-node too)
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import baselines  # noqa: F401  (registers the baselines on import; the only import of baselines/)

from . import asynchronous  # noqa: F401  (DIGEST-A, rpc based)
from . import config as config_mod
from . import flags, methods
from .config import PARTITIONERS, TrainConfig
from .data import DatasetError, cache, check_request, list_datasets
from .data.cache import CacheError, load_manifest, prepare_partition
from .data.part_file import write_assignment
from .data.user_graph import FILE_ROWS, files_changed
from .data.partition import PartitionError
from .errors import FAILURE, USAGE, UsageError
from .runtime import comm, netem, perf, placement, unresponsive
from .runtime.launch import (WorkerFailed, interrupt_once, launch, launch_emulated, prestart,
                             under_torchrun)
from .training import checkpoint, metrics
from .training.trainer import Trainer


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag or value gives ONE line (not the whole usage), exit status 2."""

    def error(self, message):
        self.exit(USAGE, f"error: {message} (see `{self.prog} --help`)\n")


def import_methods():
    """Register every method: digest's own, the baselines (the only import of baselines/), then
    the modules named in ``DIGEST_PLUGINS`` (``methods.import_plugins``: comma-separated module
    names or ``.py`` paths, a method of your own without editing this repository; workers inherit
    the variable)."""
    methods.import_plugins()
    return methods


def _errors():
    """Exception types that mean "the user's data or request is wrong", with their exit status."""
    return {UsageError: USAGE, PartitionError: USAGE, DatasetError: FAILURE, CacheError: FAILURE,
            FileNotFoundError: FAILURE, ValueError: FAILURE, MemoryError: FAILURE}


def cmd_datasets(args) -> int:
    rows = list_datasets(args.data_root)
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        state = "available" if r["available"] else "missing  "
        print(f"{r['name']:<{width}}  {state}  {r['where']}" + ("" if r["available"] else f"  <- {r['url']}"))
    for name, what in FILE_ROWS:  # the user's own graph and partition
        print(f"{name:<{width}}  {'yours':<9}  {what}")
    return 0


def cmd_partition(args) -> int:
    check_request(args.dataset, args.parts, partition_file=args.partition_file)
    t0 = time.perf_counter()
    directory = prepare_partition(args.dataset, args.parts, args.partitioner, args.seed,
                                  args.data_root, args.sparse, partition_file=args.partition_file)
    stats = load_manifest(directory)["stats"]
    print(f"dataset {args.dataset}: {stats['nodes']:,} nodes, {stats['edges']:,} directed edges; "
          f"{stats['parts']} parts by {stats['method']} ({time.perf_counter() - t0:.1f} s)")
    print(f"edge cut: {stats['edge_cut']:,} undirected edges ({100 * stats['edge_cut_fraction']:.2f}% of edges)")
    print(f"node balance {stats['node_balance']:.3f}, edge balance {stats['edge_balance']:.3f} (max / mean)")
    print(f"{'part':>4} {'inner':>10} {'halo':>10} {'boundary':>10}")
    for m in range(stats["parts"]):
        print(f"{m:>4} {stats['inner_sizes'][m]:>10,} {stats['halo_sizes'][m]:>10,} {stats['boundary_sizes'][m]:>10,}")
    print(f"cache: {directory}")
    if args.write:  # the assignment in open formats, for other tools and --partition-file
        print("wrote " + ", ".join(map(str, write_assignment(cache.load_book(directory).part_of, args.write))))
    return 0


def cmd_methods(args) -> int:
    methods = import_methods()
    for name in sorted(methods.METHODS):
        print(f"{name:<14} {methods.METHODS[name].description}")
    return 0


def cmd_advise(args) -> int:
    """Which method to run: predicted, no training (digest/advise, docs/methods.md section 13)."""
    from .advise import command
    import_methods()
    return command.run(args)


def worker(cfg: TrainConfig, part_dir: str | None, out_dir: str) -> dict | None:
    """Body of every worker process (spawned by the launcher or started by torchrun)."""
    import torch

    methods = import_methods()
    rt = comm.setup(cfg.runtime.timeout, cfg.runtime.device)
    threads = max(1, metrics.available_cores() // rt.local_world_size)
    torch.set_num_threads(threads)  # workers share the node's cores instead of oversubscribing
    machine = metrics.machine(rt.world_size, rt.local_world_size, threads)  # before pinning
    machine.update(placement.pin(rt.local_rank, rt.local_world_size, cfg.runtime.pin_workers))
    # large tensors reuse heap memory instead of fresh mmaps (perf.py)
    machine["heap_reuse"] = cfg.runtime.heap_reuse == "on" and perf.tune_allocator()
    try:
        if part_dir is None:  # torchrun: every rank asks; the cache lock lets one build it
            part_dir = str(_prepare(cfg, rt.world_size))
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


def _prepare(cfg: TrainConfig, world: int):
    d = cfg.data
    return prepare_partition(d.dataset, world, d.partitioner, cfg.seed, d.data_root, d.sparse,
                             partition_file=d.partition_file)


def epoch_hooks() -> list:
    """``DIGEST_EPOCH_HOOK=module:function`` (or ``path/to/file.py:function``): a function called
    as ``function(epoch, rank)`` at the start of every training step (fault injection in tests,
    debugging); none when unset."""
    spec = os.environ.get("DIGEST_EPOCH_HOOK")
    if not spec:
        return []
    where, _, name = spec.rpartition(":")
    return [getattr(methods.load_module(where), name)]


def _resume_config(cfg: TrainConfig, given: dict, world: int | None) -> TrainConfig:
    """``--resume DIR`` continues the run saved there with ITS settings: a flag left out is
    taken from the checkpoint; a key setting given with another value is refused (one line)."""
    saved = checkpoint.read_config(cfg.runtime.resume)
    now = cfg.flat()
    changed = checkpoint.differences(saved, now, sorted(given))
    saved_world = saved.get("world_size")
    if world is None and "workers" in given and cfg.runtime.workers != saved_world:
        changed.append(f"--workers {saved_world} -> {cfg.runtime.workers}")
    if world is not None and world != saved_world:
        changed.append(f"world size {saved_world} -> {world}")
    if changed:
        raise UsageError(f"--resume {cfg.runtime.resume}: the run was started with other settings "
                         f"({', '.join(changed)}); leave those flags out to continue it")
    inherited = {k: v for k, v in saved.items() if k in flags.all_flags() and k not in ("out", "resume")}
    if world is None:
        inherited["workers"] = saved_world
    return TrainConfig.of(**{**inherited, **given})


# What a worker imports beyond launch.PRELOAD: the forkserver imports it once for all workers.
WORKER_MODULES = ("baselines", "digest.asynchronous")


# Settings that do not change a run's results: a complete run differing only in these is the same
# run (--out, and how the run is watched, checkpointed or profiled).
_NOT_THE_RUN = frozenset({"out", "resume", "overwrite", "progress", "timeout", "data_root",
                          "checkpoint_every", "profile", "workers"})  # (the world size is compared)


def _complete_in(cfg: TrainConfig, world: int) -> bool:
    """Nothing already written is lost by a second ``train``: when the output directory holds a
    complete run (its summary.json), True if it is this configuration's (said on stdout), a
    one-line UsageError if it is another's; --overwrite replaces either. False otherwise."""
    import json
    out_dir = Path(cfg.run_dir(world))
    try:
        summary = json.loads((out_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(summary, dict) or summary.get("status") != "complete":
        return False
    if cfg.runtime.overwrite:
        return False
    saved, now = dict(summary.get("config") or {}), {**cfg.flat(), "world_size": world}
    if summary.get("world_size") is not None:
        saved["world_size"] = summary["world_size"]
    changed = [f"--{k.replace('_', '-')} {saved[k]} -> {now[k]}" for k in now
               if k not in _NOT_THE_RUN and k in saved and saved[k] != now[k]] + files_changed(summary)
    if changed:
        raise UsageError(f"--out {out_dir} holds a complete run of another configuration "
                         f"({', '.join(changed)}); choose another --out, or give --overwrite to "
                         "replace it")
    print(f"{out_dir} already holds this run, complete; nothing to do (--overwrite runs it again)")
    return True


def _check_writable(out_dir) -> None:
    """An --out the run cannot write is one line now, not a failure after the first epoch."""
    import tempfile
    try:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out_dir):
            pass
    except OSError as e:
        raise UsageError(f"cannot write the run's files to {out_dir}: "
                         f"{e.strerror or type(e).__name__}") from None


def run(given: dict, argv: list | None = None) -> tuple[dict | None, str]:
    """One run from its ``train`` flags by field name (``{"dataset": "Cora", "workers": 2}``), as
    ``python -m digest train`` makes it: checks, partition, workers (``digest.train`` calls it).
    Returns rank 0's summary (None when the run is complete in its folder already) and the folder."""
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
        prestart(WORKER_MODULES)  # its imports overlap with the partition's loading
    if cfg.runtime.resume:
        cfg = _resume_config(cfg, given, world)
        if world is None:  # a damaged file: one line now, not a worker's traceback later
            checkpoint.check(cfg.runtime.resume)
    rt = cfg.runtime
    if rt.emulate_network or rt.emulate_latency:  # what is missing: one line (2), before anything
        netem.check(rt.emulate_network, rt.emulate_latency, world or rt.workers,
                        under_torchrun(), argv)
    unresponsive.grace_from_env()  # a bad DIGEST_STOPPED_GRACE_S: one line (2), before anything
    check_request(cfg.data.dataset, world or cfg.runtime.workers, "--workers",
                  cfg.data.partition_file, (cfg.model.hidden, cfg.model.layers))
    if not cfg.runtime.resume and _complete_in(cfg, world or cfg.runtime.workers):
        return None, cfg.run_dir(world or cfg.runtime.workers)  # the same run, complete there
    _check_writable(cfg.runtime.resume or cfg.run_dir(world or cfg.runtime.workers))
    if under_torchrun():  # this process is one of torchrun's workers
        interrupt_once()
        out_dir = cfg.runtime.resume or cfg.run_dir(world)
        summary = worker(cfg, None, out_dir)
    else:
        world = cfg.runtime.workers
        out_dir = cfg.runtime.resume or cfg.run_dir(world)
        args_ = (cfg, str(_prepare(cfg, world)), out_dir)
        if cfg.runtime.emulate_network:  # every worker in a network namespace of its own
            summary = launch_emulated(worker, args_, world, cfg.runtime.emulate_network,
                                      cfg.runtime.emulate_latency, cfg.runtime.cpu_quota == "auto")
        else:
            summary = worker(*args_) if world == 1 else launch(worker, args_, world)
    return summary, out_dir


def cmd_train(args) -> int:
    summary, out_dir = run(flags.given(args), getattr(args, "argv", None))
    if summary:
        mb, c, world = summary["mean_bytes_per_epoch"] / 2**20, summary["config"], summary["world_size"]
        print(f"{c['method']} on {c['dataset']} with {world} worker(s): best val "
              f"{summary['best_val']:.4f}, test at best val {summary['test_at_best_val']:.4f}, "
              f"{summary['mean_epoch_time'] * 1e3:.1f} ms/epoch"
              + (f" ({summary['emulation']['label']})" if summary.get("emulation") else "")
              + f", {mb:.2f} MiB/epoch -> {out_dir}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m digest", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("datasets", help="list datasets, whether they are available, where files go")
    d.add_argument("--data-root", default=None)
    d.set_defaults(func=cmd_datasets)
    q = sub.add_parser("partition", help="partition a dataset and print its statistics")
    q.add_argument("--dataset", default="synthetic")
    q.add_argument("--parts", type=int, required=True)
    q.add_argument("--partitioner", default="metis", choices=PARTITIONERS)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--data-root", default=None)
    q.add_argument("--sparse", default="auto", choices=("auto", "always", "never"))
    q.add_argument("--partition-file", default=None, help="an assignment made elsewhere (train's flag)")
    q.add_argument("--write", default=None, metavar="DIR", help="write part_of.txt (METIS) and part_of.npy")
    q.set_defaults(func=cmd_partition)
    sub.add_parser("methods", help="list training methods").set_defaults(func=cmd_methods)
    a = sub.add_parser("advise", help="predict every method's time on a graph and a cluster, "
                       "fastest to the target first (no training)")
    from .advise.command import add_arguments
    add_arguments(a)
    a.set_defaults(func=cmd_advise)
    t = sub.add_parser("train", help="train with one method on M workers",
                       description="Every flag with its default; method options are grouped by "
                       "the methods that take them (another method's flag is an error).")
    import_methods()
    flags.add_train_arguments(t)
    t.set_defaults(func=cmd_train)
    return p


def main(argv=None) -> int:
    try:
        # building the train parser imports every method (torch): Ctrl-C may come in there too
        args = parser().parse_args(argv)  # argparse exits 2 with one usage line on bad flags
        args.argv = list(sys.argv[1:] if argv is None else argv)  # re-executed in a namespace
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # one line for the user, never a raw traceback
        if isinstance(e, UsageError):
            print(f"error: {e}", file=sys.stderr)
            return USAGE
        if isinstance(e, WorkerFailed):
            print(f"error: {e}", file=sys.stderr)
            return FAILURE
        for kind, status in _errors().items():
            if isinstance(e, kind):
                print(f"error: {e}", file=sys.stderr)
                return status
        if os.environ.get("DIGEST_DEBUG"):
            raise
        print(f"error: {type(e).__name__}: {e} (set DIGEST_DEBUG=1 for the traceback)", file=sys.stderr)
        return FAILURE
