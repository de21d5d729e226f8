"""``python -m digest``: the thin entry point (arguments and printing; a run's lifecycle is
digest/training/run.py's).

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

from . import flags, methods
from .config import PARTITIONERS
from .data import DatasetError, cache, check_request, list_datasets
from .data.cache import CacheError, load_manifest, prepare_partition
from .data.part_file import write_assignment
from .data.partition import PartitionError
from .data.user_graph import FILE_ROWS
from .errors import FAILURE, USAGE, UsageError
from .runtime.launch import WorkerFailed
from .training.run import run


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag or value gives ONE line (not the whole usage), exit status 2."""

    def error(self, message):
        self.exit(USAGE, f"error: {message} (see `{self.prog} --help`)\n")


# Exception types that mean "the user's data or request is wrong" (or a worker died), with their
# exit status: said in one line.
_ERRORS = {UsageError: USAGE, PartitionError: USAGE, WorkerFailed: FAILURE, DatasetError: FAILURE,
           CacheError: FAILURE, FileNotFoundError: FAILURE, ValueError: FAILURE,
           MemoryError: FAILURE}


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
    methods.load_all()
    for name in sorted(methods.METHODS):
        print(f"{name:<14} {methods.METHODS[name].description}")
    return 0


def cmd_advise(args) -> int:
    """Which method to run: predicted, no training (digest/advise, docs/methods.md section 13)."""
    from .advise import command
    methods.load_all()
    return command.run(args)


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
    methods.load_all()
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
        for kind, status in _ERRORS.items():
            if isinstance(e, kind):
                print(f"error: {e}", file=sys.stderr)
                return status
        if os.environ.get("DIGEST_DEBUG"):
            raise
        print(f"error: {type(e).__name__}: {e} (set DIGEST_DEBUG=1 for the traceback)", file=sys.stderr)
        return FAILURE
