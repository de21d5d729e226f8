"""Performance ratios (results/performance/README.md), measured side by side in ONE run on this
machine.

    python -m experiments.studies.bench            # the ratios -> results/performance/ (README.md, .json)
    python -m experiments.studies.bench --quick    # fewer epochs -> results/performance/quick/
    python -m experiments.studies.bench --scale    # the ogbn-products-size run (heavy: ~15 min, ~20 GiB)

Each --scale / ratios run keeps the other part of performance.json, and the page (README.md beside
it) is always rendered from the whole json, so the two can be run at different times.

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
  of experiments/analysis/costmodel.py at 10 Gbit/s, 5 us on the measured per-worker columns.

This module is the command line; the measurements are experiments/studies/bench/contest.py's, the plain
PyG model ``experiments/studies/bench/reference.py``, the --scale run ``experiments/studies/bench/scale.py``,
the record (performance.json) ``experiments/studies/bench/analysis.py``, the markdown report
``experiments/studies/bench/render.py``.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .analysis import (GOALS, digest_vs_exact, graph_result, history, kept_parts, run_info)
from .render import render
from .contest import (OURS, PLAIN, VARIANTS, alternated, interleaved, machine_record)
from experiments.running.launch import REPO, root_flags
from .scale import SCALE_SPEC, scale_run

OUT, PAGE = Path("results/performance"), "README.md"  # the page beside its record, performance.json


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m experiments.studies.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="fewer epochs; writes results/performance/quick/")
    p.add_argument("--scale", action="store_true", help="only the ogbn-products-size run")
    p.add_argument("--out", default=None, help="folder for the page (README.md) and performance.json "
                   "(default: results/performance/)")
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
                   help="only rewrite the page (README.md) from performance.json")
    return p


def scale(args, work: Path, doc: dict, run: dict) -> None:
    """--scale: the ogbn-products-size run into ``doc`` (beside the reference run for another
    spec)."""
    os.environ["DIGEST_MALLOC_TUNE"] = args.scale_malloc_tune  # inherited by the runs
    s = scale_run(args, work)
    s["malloc_tune"] = args.scale_malloc_tune
    s.update(date=run["date"], command=run["command"], load_end=_load(), machine=machine_record(),
             git_commit=run["git_commit"])
    if args.scale_spec == SCALE_SPEC:
        doc["scale"] = s
    else:  # another spec (e.g. with communities) is kept beside the reference run
        doc.setdefault("scale_variants", {})[args.scale_spec] = s


def graphs(args, r: dict, skip: set, epochs: int) -> list[str]:
    """Photo and Physics: exact with 1 worker against the plain PyG variants, interleaved, into
    record ``r``; the parts measured."""
    measured = []
    for key, name in (("photo", "Photo"), ("physics", "Physics")):
        if key in skip:
            continue
        print(f"{name}: exact 1 worker vs plain PyG, {epochs} epochs each, interleaved", flush=True)
        data_kw = {"data_root": args.data_root}
        res = interleaved({
            OURS: ("ours", {"dataset": name, **data_kw}, {}),
            **{n: ("plain", {"dataset": name, **PLAIN[n], **data_kw}, {}) for n in VARIANTS[key]},
        }, epochs, args.warmup)
        r[key] = graph_result(name, res, epochs, args.warmup)
        measured.append(key)
        print("  " + ", ".join(f"{n} {c['median_s'] * 1e3:.1f} ms" for n, c in res.items())
              + f": ratio {r[key]['ratio']:.3f} vs {r[key]['reference']} "
              f"(target <= {GOALS[key]})", flush=True)
    return measured


def digest_part(args, r: dict, work: Path) -> None:
    """DIGEST (I = 10) against exact, 4 workers on Physics, alternated CLI runs, into ``r``."""
    reps, epochs = args.digest_reps, args.digest_epochs
    print(f"Physics, 4 workers: exact and DIGEST (I=10), {reps} x {epochs} epochs each", flush=True)
    runs = alternated("Physics", 4, epochs, reps, work, root_flags(args.data_root))
    dv = r["digest_vs_exact"] = digest_vs_exact(runs, "Physics", 4, epochs)
    print(f"  bytes ratio {dv['bytes_ratio']:.3f} (target <= 0.10), time ratio "
          f"{dv['time_ratio']:.3f} (target <= 0.75), modeled @{dv['network']} "
          f"{dv['modeled_ratio']:.3f} (with CPU seconds as compute: "
          f"{dv['modeled_cpu_ratio'] or float('nan'):.3f})", flush=True)


def ratios(args, work: Path, doc: dict, run: dict, epochs: int) -> None:
    """The ratios into ``doc``: the parts this run measures, the others kept from the previous
    record, the previous record into the history."""
    skip = set(filter(None, args.skip.split(",")))
    r = {"date": run["date"], "command": run["command"], "load_start": _load(),
         "machine": machine_record(), "git_commit": run["git_commit"], "targets": dict(GOALS)}
    measured = graphs(args, r, skip, epochs)
    if "digest" not in skip:
        digest_part(args, r, work)
        measured.append("digest_vs_exact")
    r["load_end"] = _load()
    for key in measured:
        r[key]["run"] = run_info(r)
    old = doc.get("ratios", {})
    r["history"] = history(old)
    doc["ratios"] = {**kept_parts(old, skip), **r}


def write(out_dir: Path, doc: dict) -> None:
    from digest.files import write_text_atomic
    from digest.training.metrics import write_json
    doc = json.loads(json.dumps(doc, default=str))  # times_s lists etc. as plain JSON
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "performance.json", doc)
    write_text_atomic(out_dir / PAGE, render(doc))
    print(f"wrote {out_dir / PAGE} and {out_dir / 'performance.json'}")


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    args.scale_workers = [int(w) for w in args.scale_workers.split(",") if w]
    out_dir = Path(args.out) if args.out else REPO / OUT / ("quick" if args.quick else "")
    epochs = args.epochs or (5 if args.quick else 20)
    args.digest_epochs = args.digest_epochs or (12 if args.quick else 30)
    args.digest_reps = args.digest_reps or (1 if args.quick else 4)  # alternated: other load hits both
    json_path = out_dir / "performance.json"
    doc = json.loads(json_path.read_text()) if json_path.exists() else {}
    if args.render_only:
        from digest.files import write_text_atomic
        write_text_atomic(out_dir / PAGE, render(doc))
        print(f"wrote {out_dir / PAGE}")
        return 0
    from digest.training.metrics import git_commit
    run = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "command": " ".join(["python -m experiments.studies.bench", *(sys.argv[1:] if argv is None else argv)]),
           "git_commit": git_commit()}  # the code that runs: taken before, not after a long run
    work = Path(tempfile.mkdtemp(prefix="digest-bench-"))
    try:
        if args.scale:
            scale(args, work, doc, run)
        else:
            ratios(args, work, doc, run, epochs)
        write(out_dir, doc)
    finally:
        if args.keep:
            print(f"run folders kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
