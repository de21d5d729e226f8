"""The verdict page (docs/methods.md section 12): which method reaches exact's accuracy first on
each benchmark graph at each emulated bandwidth, from the benchmark's committed runs:

    python -m experiments.studies.verdict            # write results/verdict/ and plots/verdict/
    python -m experiments.studies.verdict --check    # write nothing; exit 1 if the page differs

Each graph of ``GRAPHS`` names its dataset, its convergence suite, its speed suite and, where one
exists, a suite of end-to-end emulated runs at the same model that checks the decomposition. A
graph whose suites have no complete runs yet is listed with what is missing.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

from digest.runtime.netem import parse_rate

from . import analysis as verdict
from . import render as verdict_render
from . import screen as verdict_screen
from experiments.suites.layout import runs_folder
from experiments.suites.load import Loaded, load, missing_parts
from experiments.suites.suite import load_suite, network_of

REPO = Path(__file__).resolve().parents[3]
OUT, PLOTS = Path("results/verdict"), Path("plots/verdict")
H07 = "synthetic:nodes=20000,classes=4,avg_degree=10,homophily=0.7,signal=0.1,train=0.1,val=0.2"
# name on the pages: (dataset spec, convergence suite, speed suite, end-to-end suite or None)
GRAPHS = {"CS": ("CS", "bench_converge_cs", "bench_speed_cs", "bench_e2e_cs"),
          "Physics": ("Physics", "bench_converge_physics", "bench_speed_physics",
                      "bench_e2e_physics"),
          # the third graph: partition-based training loses 2.29 points there at convergence
          # (results/partition_loss_converged)
          "synthetic-h07": (H07, "bench_converge_synthetic_h07", "bench_speed_synthetic_h07", None)}


# name on the pages: the suite of its synchronous methods trained behind a link up to the target
# on their own schedules, at two or more seeds (the verdict's cells checked end to end)
TO_TARGET = {"CS": "bench_e2e_sync_cs"}


def _runs(root: Path, name: str, dataset: str) -> Loaded:
    """A suite's committed runs on one graph (a suite may hold several graphs)."""
    loaded = load(root / runs_folder(name), load_suite(name))
    loaded.records = [r for r in loaded.records if r.dataset == dataset]
    loaded.later = [r for r in loaded.later if r.dataset == dataset]
    return loaded


def state(suites: tuple, root: Path, to_target: str | None = None) -> tuple:
    """Where a graph's benchmark stands: ("missing", counts), ("partial", accuracy frame, the
    speed suite's count) or ("verdict", GraphVerdict, bandwidths still waiting)."""
    dataset, converge, speed, e2e = suites
    conv_l, speed_l = _runs(root, converge, dataset), _runs(root, speed, dataset)
    counts = [f"{converge}: {conv_l.done} of {conv_l.expected} runs",
              f"{speed}: {speed_l.done} of {speed_l.expected} runs"]
    if not conv_l.records or conv_l.missing:
        return "missing", counts
    done, waiting = _complete_bandwidths(speed_l)
    if not done:  # accuracy and epochs now, speed when it is run
        return "partial", verdict.accuracy(verdict.convergence(conv_l)), counts[1]
    speed_l.records = [r for r in speed_l.records if network_of(r.label) in done]
    speed_l.later = [r for r in speed_l.later if network_of(r.label) in done]
    e2e_l = _runs(root, e2e, dataset) if e2e else None
    sync_l = _runs(root, to_target, dataset) if to_target else None
    return "verdict", verdict.of_graph(conv_l, speed_l, e2e_l, sync_l), waiting


def graph_section(graph: str, suites: tuple, root: Path, written: list,
                  draw: bool = True) -> list[str]:
    """The markdown lines of one graph (what is missing, or its verdict); its figure."""
    kind, *got = state(suites, root, TO_TARGET.get(graph))
    if kind == "missing":
        return verdict_render.missing_section(graph, got[0])
    if kind == "partial":
        return verdict_render.partial_section(graph, *got)
    v, waiting = got
    if draw:
        verdict_render.figure(graph, v.speed, v.points, root / PLOTS, written,
                              verdict_render.q_of(v.acc))
    return verdict_render.graph_section(graph, v, suites[3], waiting, TO_TARGET.get(graph))


def states(root: Path = REPO) -> dict:
    """Every benchmark graph's ``state``."""
    return {graph: state(suites, root, TO_TARGET.get(graph)) for graph, suites in GRAPHS.items()}


ADVISE = ("python -m digest advise --dataset file:my_graph.pt --workers 8 --bandwidth 10gbit "
          "--compute-rate 2tflops")


def lead(page_dir: Path, graphs: dict) -> str:
    """The block that leads README.md and results/README.md (``page_dir``: the page's folder,
    relative to the repository; ``graphs``: ``states()``): the one-screen table over the graphs
    whose speed runs have begun, the command that answers for the reader's own cluster, where the
    wide tables, the CSV and the figures are; one line for the graphs still waiting."""
    link = os.path.relpath(OUT / "README.md", page_dir)
    ready = {g: got[0] for g, (kind, *got) in graphs.items() if kind == "verdict"}
    waiting = [f"**{g}**" for g, (kind, *_) in graphs.items() if kind != "verdict"]
    lines = []
    if ready:
        figures = ", ".join(
            f"[{g}]({os.path.relpath(PLOTS / verdict_render.figure_name(g), page_dir)})"
            for g in ready)
        lines += [verdict_screen.screen(ready),
                  f"Each cell: the first to the target among the methods within "
                  f"{verdict.CLOSE} points of exact's test accuracy, its speedup to accuracy over "
                  "exact [95%], where its interval clears exact's A/A interval at a clean point. "
                  f"Per method, every point, what decides it and the cluster it stands for: "
                  f"[the verdict]({link}) ([verdict.csv]"
                  f"({os.path.relpath(OUT / 'verdict.csv', page_dir)}); figures: {figures}).", "",
                  f"Your graph and cluster, predicted before anything is trained: `{ADVISE}`.",
                  ""]
    if waiting:  # one line for the graphs still waiting
        lines += [f"{', '.join(waiting)}: speedups to accuracy not measured yet ([the verdict]"
                  f"({link}) says what has run).", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def csv_text(graphs: dict) -> str:
    """results/verdict/verdict.csv: every cell of every graph's verdict."""
    rows = [row for g, (kind, *got) in graphs.items() if kind == "verdict"
            for row in verdict_screen.csv_rows(g, got[0])]
    return pd.DataFrame(rows).to_csv(index=False, lineterminator="\n")


def _complete_bandwidths(speed: Loaded) -> tuple[list, list]:
    """The bandwidths whose speed runs are all complete (every method, every round: the suite
    runs in parts, one bandwidth at a time), and those still waiting for runs."""
    waiting = {network_of(missing_parts(m)[1]) for m in speed.missing}
    present = {network_of(r.label) for r in speed.records + speed.later}
    order = sorted(present | waiting, key=lambda b: -parse_rate(b)[0])
    return [b for b in order if b in present - waiting], [b for b in order if b in waiting]


def page(root: Path, written: list, draw: bool = True) -> str:
    return verdict_render.page([line for graph, suites in GRAPHS.items()
                                for line in graph_section(graph, suites, root, written, draw)])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.studies.verdict", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 on a difference")
    args = p.parse_args(argv)
    written: list = []
    if not args.check:
        (REPO / PLOTS).mkdir(parents=True, exist_ok=True)
    text = page(REPO, written, draw=not args.check)
    target, table = REPO / OUT / "README.md", REPO / OUT / "verdict.csv"
    cells = csv_text(states(REPO))
    if args.check:
        same = (target.exists() and target.read_text() == text and table.exists()
                and table.read_text() == cells)
        print(f"verdict: {target.relative_to(REPO)} and verdict.csv " + (
            "reproduced exactly" if same else "differ (run without --check)"))
        return 0 if same else 1
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    table.write_text(cells)
    print(f"verdict: {target.relative_to(REPO)}, verdict.csv, {len(written)} plot(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
