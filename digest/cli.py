"""``python -m digest``: the thin entry point, and the one place that sees every method.

    python -m digest datasets
    python -m digest partition --dataset synthetic --parts 4
    python -m digest train --dataset Cora --method exact --workers 4
    torchrun --nproc-per-node 2 -m digest train --dataset Cora     (same command, multi-node too)
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

from . import config as config_mod
from .config import TrainConfig

USAGE, FAILURE = 2, 1


class UsageError(ValueError):
    """A bad flag or value: exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag or value gives ONE line (not the whole usage), exit status 2."""

    def error(self, message):
        self.exit(USAGE, f"error: {message} (see `{self.prog} --help`)\n")


def _import_methods():
    """Register every method: digest's own, then the baselines (the only import of baselines/)."""
    from . import methods
    import baselines  # noqa: F401  (registers partition, varco on import)

    from . import asynchronous  # noqa: F401  (DIGEST-A, rpc based)
    return methods


def _errors():
    """Exception types that mean "the user's data or request is wrong", with their exit status."""
    from .cache import CacheError
    from .data import DatasetError
    from .partition import PartitionError
    return {UsageError: USAGE, PartitionError: USAGE, DatasetError: FAILURE, CacheError: FAILURE,
            FileNotFoundError: FAILURE, ValueError: FAILURE, MemoryError: FAILURE}


def cmd_datasets(args) -> int:
    from .data import list_datasets
    rows = list_datasets(args.data_root)
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        state = "available" if r["available"] else "missing  "
        print(f"{r['name']:<{width}}  {state}  {r['where']}" + ("" if r["available"] else f"  <- {r['url']}"))
    return 0


def cmd_partition(args) -> int:
    from .cache import load_manifest, prepare_partition
    _check_dataset(args.dataset, args.parts)
    t0 = time.perf_counter()
    directory = prepare_partition(args.dataset, args.parts, args.partitioner, args.seed,
                                  args.data_root, args.sparse)
    stats = load_manifest(directory)["stats"]
    print(f"dataset {args.dataset}: {stats['nodes']:,} nodes, {stats['edges']:,} directed edges; "
          f"{stats['parts']} parts by {stats['method']} ({time.perf_counter() - t0:.1f} s)")
    print(f"edge cut: {stats['edge_cut']:,} undirected edges ({100 * stats['edge_cut_fraction']:.2f}% of edges)")
    print(f"node balance {stats['node_balance']:.3f}, edge balance {stats['edge_balance']:.3f} (max / mean)")
    print(f"{'part':>4} {'inner':>10} {'halo':>10} {'boundary':>10}")
    for m in range(stats["parts"]):
        print(f"{m:>4} {stats['inner_sizes'][m]:>10,} {stats['halo_sizes'][m]:>10,} {stats['boundary_sizes'][m]:>10,}")
    print(f"cache: {directory}")
    return 0


def cmd_methods(args) -> int:
    methods = _import_methods()
    for name in sorted(methods.METHODS):
        print(f"{name:<14} {methods.DESCRIPTIONS[name]}")
    return 0


def worker(cfg_dict: dict, part_dir: str | None, out_dir: str) -> dict | None:
    """Body of every worker process (spawned by the launcher or started by torchrun)."""
    import torch

    from . import cache, comm, metrics, perf
    from .trainer import Trainer

    methods = _import_methods()
    cfg = TrainConfig(**cfg_dict)
    rt = comm.setup(cfg.timeout, cfg.device)
    threads = max(1, metrics.available_cores() // rt.local_world_size)
    torch.set_num_threads(threads)  # workers share the node's cores instead of oversubscribing
    perf.tune_allocator()  # large tensors reuse heap memory instead of fresh mmaps (perf.py)
    try:
        if part_dir is None:  # torchrun: every rank asks; the cache lock lets one build it
            part_dir = str(cache.prepare_partition(cfg.dataset, rt.world_size, cfg.partitioner,
                                                   cfg.seed, cfg.data_root, cfg.sparse))
        part = cache.load_part(Path(part_dir), rt.rank)
        manifest = cache.load_manifest(Path(part_dir))
        trainer = methods.TRAINERS.get(cfg.method, Trainer)(cfg, rt, part)
        extra = {"config": dataclasses.asdict(cfg), "dataset": manifest.get("graph", {}),
                 "partition": manifest.get("stats", {}), "partition_cache": part_dir,
                 "machine": metrics.machine(rt.world_size, rt.local_world_size, threads),
                 "versions": metrics.versions(), "git_commit": metrics.git_commit(),
                 "backend": rt.backend, "world_size": rt.world_size,
                 "command": " ".join(["python -m digest"] + sys.argv[1:])}
        return trainer.fit(Path(out_dir), extra)
    finally:
        comm.teardown()


def _check_dataset(spec: str, parts: int | None = None, flag: str = "--parts") -> None:
    """A dataset name or option the registry rejects, or more parts than nodes, is a usage error
    (2); a dataset this machine cannot hold is refused with the memory estimate (1), before
    anything is generated or read."""
    from .data import SIZES, DatasetError, check_memory, parse_spec
    try:
        info, opts = parse_spec(spec)
    except DatasetError as e:
        raise UsageError(str(e)) from None
    nodes = opts.get("nodes", 3000) if info.kind == "synthetic" else SIZES[info.name][0]
    if parts is not None and not 1 <= parts <= nodes:
        raise UsageError(f"{flag} must be between 1 and the number of nodes ({nodes}), got {parts}")
    check_memory(spec)


def _given(argv) -> set[str]:
    """The TrainConfig fields set explicitly on the ``train`` command line."""
    if argv is None:
        return {f.name for f in dataclasses.fields(TrainConfig)}  # unknown: treat all as given
    p = argparse.ArgumentParser(add_help=False)
    config_mod.add_arguments(p, TrainConfig)
    unset = object()  # argparse fills in a default only where the namespace has no value yet
    ns = argparse.Namespace(**{f.name: unset for f in dataclasses.fields(TrainConfig)})
    rest = list(argv)[list(argv).index("train") + 1:] if "train" in argv else list(argv)
    return {k for k, v in vars(p.parse_known_args(rest, ns)[0]).items() if v is not unset}


def _resume_config(cfg: TrainConfig, argv, world: int | None) -> TrainConfig:
    """``--resume DIR`` continues the run saved there with ITS settings: a flag left out is
    taken from the checkpoint; a key setting given with another value is refused (one line)."""
    from . import checkpoint
    saved = checkpoint.read_config(cfg.resume)
    given = _given(argv)
    now = dataclasses.asdict(cfg)
    changed = checkpoint.differences(saved, now, sorted(given))
    saved_world = saved.get("world_size")
    if world is None and "workers" in given and cfg.workers != saved_world:
        changed.append(f"--workers {saved_world} -> {cfg.workers}")
    if world is not None and world != saved_world:
        changed.append(f"world size {saved_world} -> {world}")
    if changed:
        raise UsageError(f"--resume {cfg.resume}: the run was started with other settings "
                         f"({', '.join(changed)}); leave those flags out to continue it")
    keep = {"out", "resume"} | given
    inherited = {k: v for k, v in saved.items() if k in now and k not in keep}
    if world is None and "workers" not in given:
        inherited["workers"] = saved_world
    return dataclasses.replace(cfg, **inherited)


# What a worker imports beyond launch.PRELOAD: the forkserver imports it once for all workers.
WORKER_MODULES = ("baselines", "digest.asynchronous")


def cmd_train(args) -> int:
    from .launch import interrupt_once, launch, prestart, under_torchrun

    cfg = config_mod.from_namespace(args)
    try:
        config_mod.validate(cfg)
    except ValueError as e:
        raise UsageError(str(e)) from None
    world = int(os.environ["WORLD_SIZE"]) if under_torchrun() else None
    if world is None and cfg.workers > 1:
        prestart(WORKER_MODULES)  # its imports overlap with ours and the partition's loading
    if cfg.resume:
        cfg = _resume_config(cfg, getattr(args, "argv", None), world)
    _check_dataset(cfg.dataset, world or cfg.workers, "--workers")  # before the slow imports
    methods = _import_methods()
    if cfg.method not in methods.METHODS:
        raise UsageError(f"unknown method {cfg.method!r}; choose from {', '.join(sorted(methods.METHODS))}")
    if under_torchrun():  # this process is one of torchrun's workers
        interrupt_once()
        out_dir = cfg.resume or cfg.run_dir(world)
        summary = worker(dataclasses.asdict(cfg), None, out_dir)
    else:
        from .cache import prepare_partition
        world = cfg.workers
        out_dir = cfg.resume or cfg.run_dir(world)
        part_dir = str(prepare_partition(cfg.dataset, world, cfg.partitioner, cfg.seed,
                                         cfg.data_root, cfg.sparse))
        args_ = (dataclasses.asdict(cfg), part_dir, out_dir)
        summary = worker(*args_) if world == 1 else launch(worker, args_, world)
    if summary:
        mb = summary["mean_bytes_per_epoch"] / 2**20
        print(f"{cfg.method} on {cfg.dataset} with {world} worker(s): best val "
              f"{summary['best_val']:.4f}, test at best val {summary['test_at_best_val']:.4f}, "
              f"{summary['mean_epoch_time'] * 1e3:.1f} ms/epoch, {mb:.2f} MiB/epoch -> {out_dir}")
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
    q.add_argument("--partitioner", default="metis", choices=config_mod.PARTITIONERS)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--data-root", default=None)
    q.add_argument("--sparse", default="auto", choices=("auto", "always", "never"))
    q.set_defaults(func=cmd_partition)
    sub.add_parser("methods", help="list training methods").set_defaults(func=cmd_methods)
    t = sub.add_parser("train", help="train with one method on M workers")
    config_mod.add_arguments(t, TrainConfig)
    t.set_defaults(func=cmd_train)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)  # argparse itself exits 2 with one usage line on bad flags
    args.argv = list(sys.argv[1:] if argv is None else argv)  # which flags were given (--resume)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # one line for the user, never a raw traceback
        from .launch import WorkerFailed
        if isinstance(e, UsageError):  # before _errors(), which imports torch
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
