"""Run a suite, resumably: ``python -m experiments.runner --suite quick --out results/quick/runs``.

Each run is a subprocess ``python -m digest train <flags> --out <dir> --no-progress`` (the path a
user takes), its stdout/stderr in ``<dir>/log.txt``. A run whose ``summary.json`` says complete and
whose ``run.json`` holds the same config hash is skipped, so an interrupted suite resumes and loses
nothing finished; any other existing directory is cleared and rerun. A failed run is reported in
one line and the suite goes on. Runs start interleaved (experiments/suites/schedule.py: round by
round, point by point, the methods of a point in a seeded random order); run.json records each
run's round, position and start time. Methods not registered and datasets not available are
skipped with the reason printed (experiments/running/suite_runs.py runs the suite).

While it runs, the machine's load average is sampled every 20 s into the suite's load file
(``--load-file``; by default the committed results/<suite>/loadavg.csv for the suite's committed
runs folder, else loadavg.csv beside the runs folder), appended to over the parts a suite is run
in; RUNLOG.md reads it (experiments/running/loadavg.py). ``--loads`` starts no run: it prints
each run's 1-minute load (mean and largest sample inside the run) from that file.

Exit status: 0, or 1 when some run failed (``--loads``: when the load file cannot be read).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from digest.advise.protocol import TARGETS

from . import tables
from .analysis.costmodel import parse_network
from .render.plots import draw
from .running.loadavg import per_run, samples, sampling
from .running.suite_runs import run_suite
from .suites.layout import load_file, runs_folder
from .suites.load import load
from .suites.suite import Suite, base_label, expand, labels, load_suite


def _integers(text: str, flag: str) -> set[int]:
    try:
        return {int(x) for x in text.split(",")}
    except ValueError:
        raise ValueError(f"{flag} takes comma-separated integers (e.g. 0,1), not {text!r}") from None


def parse_seeds(text: str | None, suite: Suite) -> set[int] | None:
    """``--seeds 0,1`` as a set; every seed must be one the suite runs."""
    if text is None:
        return None
    seeds, known = _integers(text, "--seeds"), {r.seed for r in expand(suite)}
    if not seeds <= known:
        raise ValueError(f"suite {suite.name} runs seeds {', '.join(map(str, sorted(known)))}; "
                         f"--seeds {text} names others")
    return seeds


def parse_networks(text: str | None, suite: Suite) -> set[str] | None:
    """``--networks 10gbit,1gbit`` as a set; every one must be a bandwidth the suite emulates."""
    if text is None:
        return None
    nets = {x.strip() for x in text.split(",") if x.strip()}
    if not nets or not nets <= set(suite.networks):
        raise ValueError(f"suite {suite.name} emulates "
                         f"{', '.join(suite.networks) or 'no network'}; --networks {text} names "
                         "others")
    return nets


def parse_rounds(text: str | None, suite: Suite) -> set[int] | None:
    """``--rounds 0,1`` as a set; every one must be a round the suite runs (0 .. rounds - 1)."""
    if text is None:
        return None
    rounds = _integers(text, "--rounds")
    if not rounds <= set(range(suite.rounds)):
        raise ValueError(f"suite {suite.name} runs rounds 0 to {suite.rounds - 1}; --rounds {text} "
                         "names others")
    return rounds


def parse_labels(text: str | None, suite: Suite) -> set[str] | None:
    """``--labels exact,digest-I10`` as a set; every one must be a method label of the suite."""
    if text is None:
        return None
    names = {x.strip() for x in text.split(",") if x.strip()}
    known = list(dict.fromkeys(base_label(x) for x in labels(suite)))  # without @bandwidth
    if not names or not names <= set(known):
        raise ValueError(f"suite {suite.name} names the labels {', '.join(known)}; --labels "
                         f"{text} names others")
    return names


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m experiments.runner", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", default="quick", help="suite name in experiments/configs or a YAML path")
    p.add_argument("--out", default=None, help="runs root (default: results/<suite>/runs)")
    p.add_argument("--network", default=None, help="with --report: BANDWIDTH,LATENCY, e.g. 10gbit,5us")
    p.add_argument("--report", nargs=2, metavar=("RESULTS", "PLOTS"), default=None,
                   help="after the runs, write the tables into RESULTS and the plots into PLOTS")
    p.add_argument("--seeds", default=None, metavar="LIST",
                   help="only these seeds' runs, comma-separated (e.g. 0,1): a long suite in sittings")
    p.add_argument("--networks", default=None, metavar="LIST",
                   help="only the runs at these emulated bandwidths, comma-separated (e.g. "
                   "10gbit,1gbit): an emulated suite in parts")
    p.add_argument("--rounds", default=None, metavar="LIST",
                   help="only these timing rounds' runs, comma-separated (e.g. 0,1): a bandwidth "
                   "too long for one sitting, in parts that keep every method in every round")
    p.add_argument("--labels", default=None, metavar="LIST",
                   help="only these methods' runs (the suite's labels, comma-separated): a suite "
                   "whose seed alone is too long for one sitting, in parts")
    p.add_argument("--load-file", default=None, metavar="CSV",
                   help="where the load samples go (default: see above)")
    p.add_argument("--loads", action="store_true",
                   help="run nothing: print each run's load from the load file")
    return p


def loads(root: Path, load_path: Path) -> int:
    """``--loads``: each run's 1-minute load from the samples beside it (one line on an error)."""
    try:
        table = per_run(root, samples(load_path))
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(table.astype(object).fillna("-").to_string(index=False))
    return 0


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        suite = load_suite(args.suite)
        seeds = parse_seeds(args.seeds, suite)
        networks = parse_networks(args.networks, suite)
        chosen = parse_labels(args.labels, suite)
        rounds = parse_rounds(args.rounds, suite)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    root = Path(args.out) if args.out else runs_folder(suite.name)
    load_path = Path(args.load_file) if args.load_file else load_file(root, suite.name)
    if args.loads:
        return loads(root, load_path)
    try:
        with sampling(load_path):
            counts = run_suite(suite, root, seeds=seeds, networks=networks, labels=chosen,
                               rounds=rounds)
    except (ImportError, FileNotFoundError) as e:  # a method module (DIGEST_PLUGINS) that fails
        print(f"error: registering the methods failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: finished runs are kept; run the same command again to resume",
              file=sys.stderr)
        return 130
    if args.report:
        report(suite, root, *args.report, args.network, args.suite)
    return 1 if counts["failed"] else 0


def report(suite: Suite, root: Path, results: str, plots_dir: str, network: str | None,
           suite_ref: str) -> None:
    """``--report RESULTS PLOTS``: the suite's tables and plots from its runs under ``root``, as
    ``python -m experiments.tables --suite SUITE_REF`` and ``python -m experiments.plots`` write
    them."""
    loaded = load(root, suite)
    net = parse_network(network) if network else None
    flags = f" --network {network}" if network else ""
    command = os.environ.get("RUN_ALL_COMMAND") or (
        f"python -m experiments.tables --suite {suite_ref} --runs {root} --out {results}{flags}")
    written = tables.write(loaded, Path(results), net, TARGETS, command)
    print(f"tables: {loaded.done} runs -> {results}/" + ", ".join(written))
    print(f"plots: {len(draw(loaded, Path(plots_dir), net))} PNGs -> {plots_dir}/")


if __name__ == "__main__":
    sys.exit(main())
