"""Performance ratios (results/performance.md), measured side by side in ONE run on this machine.

    python -m experiments.bench            # the ratios -> results/performance.{md,json}
    python -m experiments.bench --quick    # fewer epochs -> results/quick/performance.{md,json}
    python -m experiments.bench --scale    # the ogbn-products-size run (heavy: ~15 min, ~20 GiB)

Each --scale / ratios run keeps the other part of performance.json, and performance.md is always
rendered from the whole json, so the two can be run at different times.

How each ratio is measured:

* exact, 1 worker, versus plain PyG: long-lived processes, one running our ``Trainer`` set up as
  ``python -m digest train --workers 1`` does (threads = cores, allocator tuned), the others a
  plain single-process torch_geometric full-graph GCN of the same shape (3 layers, hidden 256,
  dropout 0.5, Adam; ``GCNConv(cached=True)``) on the same graph with default process settings:
  with dense features in PyG's two usual forms, on ``edge_index`` (gather/scatter, PyG's
  examples/gcn.py) and on a sparse CSR adjacency (the ``ToSparseTensor`` route); on Physics
  (sparse bag-of-words inputs, which our trainer keeps sparse) also with the features as a torch
  sparse CSR tensor, so that GCNConv's first linear transform is a sparse-dense product, on the
  sparse CSR adjacency. The controller asks them for one epoch each in turn, rotating who goes
  first; each times its own step. Ratio = our median / the FASTEST plain variant's median, after
  warm-up (on Physics the sparse-features variant: the fair reference); the ratio against every
  plain variant is kept too.
* DIGEST (I = 10) / exact with 4 workers: ``python -m digest train`` subprocesses, alternated
  (exact, digest, exact, digest, ...). Representation bytes = halo forward + halo backward + store,
  summed over all epochs (DIGEST's start-up fill included); epoch time = mean over epochs >= 1
  (epoch 0 includes warm-up and DIGEST's fill), the sync epochs included; modeled = the cost model
  of experiments/costmodel.py at 10 Gbit/s, 5 us on the measured per-worker columns.

This module is the harness (the measurements above and the command line); the plain PyG model is
``experiments/reference.py``, the --scale run ``experiments/scale.py``, the markdown report
``experiments/perf_report.py``.
"""
from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from .costmodel import modeled_epoch_times, parse_network
from .perf_report import TARGETS, render
from .reference import plain_step_fn
from .running.launch import REPO, cli_run, root_flags
from .scale import SCALE_SPEC, scale_run

NETWORK = "10gbit,5us"
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
PARTS = ("photo", "physics", "digest_vs_exact")  # the parts of a ratios record, each measured by a run


# -- contestants: long-lived processes that run one epoch when asked ------------------------------

def ours_step_fn(dataset: str, data_root=None, hidden=256, layers=3, dropout=0.5, method="exact",
                 info: dict | None = None):
    """Our Trainer with 1 worker, set up as ``cli.worker`` sets up ``--workers 1``; ``info``, when
    given, gets the input features' layout and size (``reference.features_info``)."""
    import torch

    from digest.data import cache
    from digest.runtime import comm, perf
    from digest.training import metrics
    from digest.cli import import_methods
    from digest.config import TrainConfig
    from digest.training.trainer import Trainer

    import_methods()
    cfg = TrainConfig.of(dataset=dataset, data_root=data_root, method=method, workers=1,
                      hidden=hidden, layers=layers, dropout=dropout, progress=False)
    rt = comm.setup(cfg.runtime.timeout, "cpu")
    torch.set_num_threads(max(1, metrics.available_cores() // rt.local_world_size))
    perf.tune_allocator()
    part_dir = cache.prepare_partition(dataset, 1, cfg.data.partitioner, cfg.seed, data_root, cfg.data.sparse)
    part = cache.load_part(part_dir, 0)
    if info is not None:
        from .reference import features_info
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
            from .reference import features_info
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


# -- DIGEST versus exact, 4 workers (CLI subprocesses) ---------------------------------------------

def digest_vs_exact(dataset: str, workers: int, epochs: int, reps: int, work: Path,
                    root_flags=()) -> dict:
    import pandas as pd

    net = parse_network(NETWORK)
    runs = {"exact": [], "digest": []}
    for r in range(reps):  # alternated, so that the other users' load hits both
        for method in ("exact", "digest") if r % 2 == 0 else ("digest", "exact"):
            extra = (*root_flags, *(("--sync-interval", "10") if method == "digest" else ()))
            runs[method].append(cli_run(work / f"{method}{r}", dataset, method, workers, epochs, extra))
    res = {}
    for method, rs in runs.items():
        m = pd.concat([x["metrics"] for x in rs], ignore_index=True)
        later = m[m["epoch"] >= 1]
        rep = m["bytes_halo_fwd"] + m["bytes_halo_bwd"] + m["bytes_store"]
        res[method] = {
            "repr_bytes_per_epoch": float(rep.mean()),
            "bytes_by_category_per_epoch": {c: float(m[f"bytes_{c}"].mean())
                                            for c in ("halo_fwd", "halo_bwd", "store", "params")},
            "mean_epoch_s": float(later["epoch_time"].mean()),
            "median_epoch_s": float(later["epoch_time"].median()),
            "mean_comm_s": float(later["comm_time"].mean()),
            # the history's "modeled" column keeps its definition (wall compute); the cost model
            # itself now uses CPU seconds, which is modeled_cpu_epoch_s here
            "modeled_epoch_s": float(modeled_epoch_times(later, net, compute="wall").mean()),
            "modeled_cpu_epoch_s": _modeled_cpu(later, net),
            "cpu_s_per_epoch": _cpu_seconds(later),
            "peak_mem_mb_per_worker": float(m["peak_mem_mb"].max()),
            "command": rs[0]["command"], "runs": len(rs), "epochs_per_run": epochs,
        }
    d, e = res["digest"], res["exact"]
    return {"dataset": dataset, "workers": workers, "network": net.label, **{k: res[k] for k in res},
            "bytes_ratio": d["repr_bytes_per_epoch"] / e["repr_bytes_per_epoch"],
            "time_ratio": d["mean_epoch_s"] / e["mean_epoch_s"],
            "time_ratio_median": d["median_epoch_s"] / e["median_epoch_s"],
            "modeled_ratio": d["modeled_epoch_s"] / e["modeled_epoch_s"],
            "modeled_cpu_ratio": (d["modeled_cpu_epoch_s"] / e["modeled_cpu_epoch_s"]
                                  if d["modeled_cpu_epoch_s"] and e["modeled_cpu_epoch_s"] else None),
            "cpu_ratio": (d["cpu_s_per_epoch"] / e["cpu_s_per_epoch"]
                          if d["cpu_s_per_epoch"] and e["cpu_s_per_epoch"] else None)}


def _cpu_seconds(metrics) -> float | None:
    """Mean CPU seconds per epoch summed over the workers (every thread of each process, kernel
    time of the loopback transfers included). When the workers saturate the machine's cores, the
    epoch time follows this total, whatever the bytes. None without cpu_time_w columns."""
    cols = [c for c in metrics.columns if c.startswith("cpu_time_w")]
    return float(metrics[cols].sum(axis=1).mean()) if cols else None


def _modeled_cpu(metrics, net) -> float | None:
    """The cost model with each worker's CPU seconds as its compute time: on a machine whose
    workers share cores, wall-clock compute includes waiting for a core, which a cluster with a
    machine per worker would not see. None when the run has no cpu_time_w columns."""
    ranks = [int(c[len("cpu_time_w"):]) for c in metrics.columns if c.startswith("cpu_time_w")]
    if not ranks:
        return None
    per = [metrics[f"cpu_time_w{r}"] + metrics[f"bytes_w{r}"] / net.bandwidth
           + metrics[f"messages_w{r}"] * net.latency for r in ranks]
    import pandas as pd
    return float(pd.concat(per, axis=1).max(axis=1).mean())


def machine_record() -> dict:
    from digest.training.metrics import available_cores, machine, versions
    return {"machine": machine(1, 1, available_cores()), "versions": versions()}


RUN_KEYS = ("date", "command", "git_commit", "load_start", "load_end", "machine")


def run_info(r: dict) -> dict:
    """The record of the run that measured a part: date, command, commit, load, machine."""
    return {k: r.get(k) for k in RUN_KEYS}


def measured_in(r: dict, key: str) -> dict:
    """Part ``key`` of ratios record ``r`` if run ``r`` measured it, else ``{}`` (a part kept from
    an earlier run carries that run's record in ``part["run"]``; records written before parts
    carried one were measured whole)."""
    part = r.get(key) or {}
    run = part.get("run")
    return part if run is None or run.get("date") == r.get("date") else {}


def _summary(r: dict) -> dict:
    """The headline numbers of an earlier ratios run, kept in the json's history: only the parts
    that run measured (a part it kept from an earlier run is in that run's summary)."""
    dv = measured_in(r, "digest_vs_exact")
    return {"date": r.get("date"), "command": r.get("command"), "load_start": r.get("load_start"),
            "git_commit": r.get("git_commit"),
            "photo": measured_in(r, "photo").get("ratio"),
            "physics": measured_in(r, "physics").get("ratio"),
            "physics_reference": measured_in(r, "physics").get("reference"),
            "digest_bytes": dv.get("bytes_ratio"), "digest_time": dv.get("time_ratio"),
            "digest_modeled": dv.get("modeled_ratio"), "digest_modeled_cpu": dv.get("modeled_cpu_ratio")}


def kept_parts(old: dict, skip: set) -> dict:
    """The previous record's parts that this run leaves out (``skip``: photo, physics, digest),
    each carrying the record of the run that measured it."""
    keys = {"digest": "digest_vs_exact"}
    out = {}
    for name in skip:
        key = keys.get(name, name)
        if old.get(key):
            out[key] = {**old[key], "run": old[key].get("run") or run_info(old)}
    return out


def graph_result(name: str, res: dict, epochs: int, warmup: int) -> dict:
    """A graph's record from ``interleaved``'s results: the ratio divides our median by the
    FASTEST plain variant's (the hardest reference; on Physics the sparse-features variant); the
    ratio against every plain variant is kept beside it."""
    plain = [n for n in res if n != OURS]
    ref = min(plain, key=lambda n: res[n]["median_s"])
    return {"dataset": name, "epochs": epochs, "warmup": warmup, "contestants": res,
            "reference": ref, "ratio": res[OURS]["median_s"] / res[ref]["median_s"],
            "ratios_by_reference": {n: res[OURS]["median_s"] / res[n]["median_s"] for n in plain}}


def _history(old: dict) -> list[dict]:
    """The new run's history: the previous run's history and the previous run itself. Every
    earlier run stays (a few hundred bytes each): the spread across runs is the point."""
    return old.get("history", []) + ([_summary(old)] if old.get("date") else [])


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer epochs; writes results/quick/")
    p.add_argument("--scale", action="store_true", help="only the ogbn-products-size run")
    p.add_argument("--out", default=None, help="folder for performance.{md,json}")
    p.add_argument("--data-root", default=None)
    p.add_argument("--epochs", type=int, default=None, help="timed epochs per contestant")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--skip", default="", help="comma list of photo,physics,digest to leave out")
    p.add_argument("--digest-epochs", type=int, default=None)
    p.add_argument("--digest-reps", type=int, default=None)
    p.add_argument("--scale-spec", default=SCALE_SPEC)
    p.add_argument("--scale-workers", default="1,2,4", help="worker counts of the scale run")
    p.add_argument("--scale-generate-only", action="store_true",
                   help="only generate --scale-spec (time, peak memory): no partitions, no runs")
    p.add_argument("--scale-epochs", type=int, default=3)
    p.add_argument("--scale-layers", type=int, default=2)
    p.add_argument("--scale-hidden", type=int, default=64)
    p.add_argument("--scale-malloc-tune", default="0", choices=("0", "1"),
                   help="DIGEST_MALLOC_TUNE for the scale run's workers (0: glibc defaults, the "
                   "least memory; see digest/runtime/perf.py)")
    p.add_argument("--keep", action="store_true", help="keep the run folders (printed)")
    p.add_argument("--render-only", action="store_true",
                   help="only rewrite performance.md from performance.json")
    args = p.parse_args(argv)
    args.scale_workers = [int(w) for w in args.scale_workers.split(",") if w]
    out_dir = Path(args.out) if args.out else REPO / ("results/quick" if args.quick else "results")
    epochs = args.epochs or (5 if args.quick else 20)
    d_epochs = args.digest_epochs or (12 if args.quick else 30)
    d_reps = args.digest_reps or (1 if args.quick else 4)  # alternated: other load hits both
    skip = set(filter(None, args.skip.split(",")))
    command = " ".join(["python -m experiments.bench", *(sys.argv[1:] if argv is None else argv)])
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    json_path = out_dir / "performance.json"
    doc = json.loads(json_path.read_text()) if json_path.exists() else {}
    if args.render_only:
        from digest.files import write_text_atomic
        write_text_atomic(out_dir / "performance.md", render(doc))
        print(f"wrote {out_dir / 'performance.md'}")
        return 0
    work = Path(tempfile.mkdtemp(prefix="digest-bench-"))
    data_kw = {"data_root": args.data_root}
    from digest.training.metrics import git_commit
    commit = git_commit()  # the code that runs: taken before, not after a long run
    try:
        if args.scale:
            os.environ["DIGEST_MALLOC_TUNE"] = args.scale_malloc_tune  # inherited by the runs
            s = scale_run(args, work)
            s["malloc_tune"] = args.scale_malloc_tune
            s.update(date=date, command=command, load_end=_load(), machine=machine_record(),
                     git_commit=commit)
            if args.scale_spec == SCALE_SPEC:
                doc["scale"] = s
            else:  # another spec (e.g. with communities) is kept beside the reference run
                doc.setdefault("scale_variants", {})[args.scale_spec] = s
        else:
            r = {"date": date, "command": command, "load_start": _load(), "machine": machine_record(),
                 "git_commit": commit, "targets": dict(TARGETS)}
            measured = []
            for key, name in (("photo", "Photo"), ("physics", "Physics")):
                if key in skip:
                    continue
                print(f"{name}: exact 1 worker vs plain PyG, {epochs} epochs each, interleaved", flush=True)
                res = interleaved({
                    OURS: ("ours", {"dataset": name, **data_kw}, {}),
                    **{n: ("plain", {"dataset": name, **PLAIN[n], **data_kw}, {})
                       for n in VARIANTS[key]},
                }, epochs, args.warmup)
                r[key] = graph_result(name, res, epochs, args.warmup)
                measured.append(key)
                print("  " + ", ".join(f"{n} {c['median_s'] * 1e3:.1f} ms" for n, c in res.items())
                      + f": ratio {r[key]['ratio']:.3f} vs {r[key]['reference']} "
                      f"(target <= {TARGETS[key]})", flush=True)
            if "digest" not in skip:
                print(f"Physics, 4 workers: exact and DIGEST (I=10), {d_reps} x {d_epochs} epochs each",
                      flush=True)
                dv = digest_vs_exact("Physics", 4, d_epochs, d_reps, work,
                                     root_flags(args.data_root))
                r["digest_vs_exact"] = dv
                measured.append("digest_vs_exact")
                print(f"  bytes ratio {dv['bytes_ratio']:.3f} (target <= 0.10), time ratio "
                      f"{dv['time_ratio']:.3f} (target <= 0.75), modeled @{dv['network']} "
                      f"{dv['modeled_ratio']:.3f} (with CPU seconds as compute: "
                      f"{dv['modeled_cpu_ratio'] or float('nan'):.3f})", flush=True)
            r["load_end"] = _load()
            for key in measured:
                r[key]["run"] = run_info(r)
            old = doc.get("ratios", {})
            r["history"] = _history(old)
            doc["ratios"] = {**kept_parts(old, skip), **r}
        doc = json.loads(json.dumps(doc, default=str))  # times_s lists etc. as plain JSON
        out_dir.mkdir(parents=True, exist_ok=True)
        from digest.files import write_text_atomic
        from digest.training.metrics import write_json
        write_json(json_path, doc)
        write_text_atomic(out_dir / "performance.md", render(doc))
        print(f"wrote {out_dir / 'performance.md'} and {json_path}")
    finally:
        if args.keep:
            print(f"run folders kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
