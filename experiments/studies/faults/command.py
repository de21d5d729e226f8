"""The fault campaign (results/reliability/README.md): for every method, N trials of a SIGKILL of a
random rank at a random moment of a random epoch after the first checkpoint, then ``--resume``; each
resumed run checked against the method's uninterrupted run, and each trial's committed checkpoint,
damaged in a copy, refused in one line::

    python -m experiments.studies.faults --trials 10      # every method; results/reliability/
    python -m experiments.studies.faults --methods exact --trials 2 --out /tmp/f --report /tmp/f/r.md
    python -m experiments.studies.faults --methods exact,digest --faults kill,stop,cut,flap \
        --network 50mbit --trials 2 --out results/reliability_links   # behind emulated links

A trial, as a user meets it, and the checks it must pass: experiments/studies/faults/campaign.py.

Writes ``OUT/trials.csv`` (one row per trial) and the report (``--report``, by default
``OUT/README.md``; markdown: experiments/studies/faults/render.py) with the command, the machine and
the versions. Trials of a method run one after another; the runs live in ``--work``.
"""
from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from pathlib import Path

from .render import report
from .campaign import (FAULTS, ROOT, digest, environment, namespaces, passed, train_args, trial, write)
from experiments.suites.registry import register_methods


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m experiments.studies.faults", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--methods", help="comma-separated (default: every registered method)")
    p.add_argument("--trials", type=int, default=10,
                   help="trials per method and fault (default 10)")
    p.add_argument("--faults", default="kill",
                   help=f"comma-separated, of {', '.join(FAULTS)} (default kill); cut and flap "
                        "need --network")
    p.add_argument("--network", default=None,
                   help="train behind emulated links of this bandwidth, e.g. 50mbit (root or user "
                        "namespaces; default: loopback)")
    p.add_argument("--seed", type=int, default=0, help="of the random ranks, steps and moments")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "reliability")
    p.add_argument("--report", type=Path, default=None,
                   help="the report (default: OUT/README.md, the folder's page)")
    p.add_argument("--work", type=Path, default=Path("/tmp/fault_campaign"),
                   help="where the runs live (failed trials' runs are kept there)")
    return p


def methods_of(args) -> list[str] | None:
    """The methods the campaign tries (every registered one by default); None (and one line)
    when one is unknown or --trials is below 1."""
    from digest.methods import METHODS
    register_methods()
    methods = args.methods.split(",") if args.methods else sorted(METHODS)
    unknown = [m for m in methods if m not in METHODS]
    args.faults = args.faults.split(",") if isinstance(args.faults, str) else args.faults
    odd = [f for f in args.faults if f not in FAULTS]
    why = (f"unknown method {', '.join(unknown)}" if unknown else
           "--trials must be >= 1" if args.trials < 1 else
           f"unknown fault {', '.join(odd)} (one of {', '.join(FAULTS)})" if odd else
           "cut and flap need --network (an emulated link to cut)"
           if {"cut", "flap"} & set(args.faults) and not args.network else None)
    if why:
        print(f"error: {why}", file=sys.stderr)
        return None
    return methods


def campaign(methods: list[str], args, table: Path, trials: list) -> bool | None:
    """Every method's uninterrupted run, then its trials, each row written to ``table`` as it
    ends; True when interrupted, None when an uninterrupted run failed."""
    from tqdm import tqdm

    data, rng = args.work / "data", random.Random(args.seed)
    bar = tqdm(total=len(methods) * (len(args.faults) * args.trials + 1), unit="run",
               desc="fault campaign")
    try:
        for method in methods:
            bar.set_postfix_str(f"{method} uninterrupted")
            ref = args.work / method / "uninterrupted"
            shutil.rmtree(ref, ignore_errors=True)
            done = digest(train_args(method, ref, args.network), args.work, environment(data))
            bar.update()
            if done.rc != 0:
                print(f"error: {method}'s uninterrupted run failed: "
                      f"{done.lines[-1] if done.lines else done.rc}", file=sys.stderr)
                return None
            for i, fault in enumerate(f for f in args.faults for _ in range(args.trials)):
                bar.set_postfix_str(f"{method} trial {i} ({fault})")
                row = trial(method, i, rng, ref, args.work, data, fault, args.network)
                row["passed"] = passed(row)
                if row["passed"]:
                    shutil.rmtree(args.work / method / f"trial{i}", ignore_errors=True)
                trials.append(row)
                write(table, trials)  # after every trial: an interrupted campaign keeps them
                bar.update()
    except KeyboardInterrupt:  # the trials done are kept, and reported as such
        return True
    finally:
        bar.close()
    return False


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    args.report = args.report or args.out / "README.md"
    methods = methods_of(args)
    if methods is None:
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    table = args.out / "trials.csv"
    table.unlink(missing_ok=True)
    command = "python -m experiments.studies.faults" + "".join(
        f" {a}" for a in (sys.argv[1:] if argv is None else argv))
    trials, t0 = [], time.monotonic()
    interrupted = campaign(methods, args, table, trials)
    if interrupted is None:
        return 1
    if not trials:
        print("interrupted before any trial ended" if interrupted else "no trial ran",
              file=sys.stderr)
        return 130 if interrupted else 1
    final = namespaces()  # left behind: created during a trial and still there now
    for row in trials:
        row["namespaces_left"] = len(set(row.get("namespaces_new", "").split()) & final)
        row["passed"] = passed(row)
    write(table, trials)
    shown = table.resolve().relative_to(ROOT) if table.resolve().is_relative_to(ROOT) else table
    text = report(trials, command, time.monotonic() - t0, str(shown), args.network)
    if interrupted:
        text += (f"\nInterrupted after {len(trials)} of "
                 f"{len(methods) * len(args.faults) * args.trials} trials.\n")
    args.report.write_text(text)
    failed = sum(not r["passed"] for r in trials)
    print(("interrupted; " if interrupted else "") +
          f"{len(trials) - failed} of {len(trials)} trials passed every check; {table}, "
          f"{args.report}" + (f"; failed runs kept in {args.work}" if failed else ""))
    return 130 if interrupted else 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
