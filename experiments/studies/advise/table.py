"""``python -m experiments.studies.advise table [--write | --check]``: the epochs-to-target table that
``python -m digest advise`` ships (digest/advise/convergence.json; docs/methods.md section 13),
from the committed convergence runs.

A convergence run: one evaluated every epoch for at least 20 epochs, on 2 or more workers, not
stopped at a target (``--stop-at-val``; one
emulated bandwidth per configuration and seed: a synchronous method's curve is the same at every
bandwidth). Runs are grouped by suite, graph, workers, model, width, depth, dropout, learning
rate and budget; a group whose runs all appear in another group (a suite that copied another's
runs, e.g. bench_converge_synthetic_h07 those of partition_loss_converged) is left out; a group
that shares only some of its runs with another keeps them, since its targets come from its own
exact runs (advise reads the nearest row, ties going to the suite that sorts first); within a
group the target is q x the mean over seeds of exact's best validation accuracy (docs/methods.md
section 12), and a run's epochs to it are the first evaluated epoch at or above it (null: never).
Each (graph, workers) pair gets the statistics advise compares graphs by, measured on its
partition (seed 0) as advise measures the user's (digest/advise/job.py).

--write writes the table; --check recomputes it and fails (exit 1) when the committed one differs.
"""
from __future__ import annotations

import json
from pathlib import Path

from digest.advise.job import load_job
from digest.advise.protocol import TARGETS

from experiments.suites.suite import base_label
from .runs import ROOT, TWINS, is_default, records



def _epochs(metrics, target: float) -> int | None:
    hit = metrics.index[metrics["val_acc"].notna() & (metrics["val_acc"] >= target)]
    return int(metrics.loc[hit[0], "epoch"]) + 1 if len(hit) else None


def _curve(r, cfg) -> bool:
    """A convergence curve: every epoch evaluated, 20 or more, 2+ workers, not stopped at a
    target (``--stop-at-val``: its exact's best validation accuracy would be the stop)."""
    return (cfg.optim.eval_every == 1 and cfg.optim.epochs >= 20 and r.workers >= 2
            and not cfg.optim.stop_at_val)


def _run_id(r) -> tuple:
    """A run's identity across suites: its label, seed, the runner's configuration hash
    (run.json) and its result (a copied run keeps all four; a rerun of the same configuration
    differs in its curve)."""
    return (base_label(r.label), r.seed, r.hash or str(r.directory), r.summary.get("best_val"),
            r.summary.get("best_epoch"))


def _repeated(groups: dict) -> list:
    """The keys of the groups whose runs all appear in another group: in a larger one, or in
    an equal one whose key sorts first."""
    ids = {key: frozenset(_run_id(r) for _, r, _ in runs) for key, runs in groups.items()}
    return [k for k, mine in ids.items()
            if any(k != o and mine <= theirs and (mine < theirs or o < k)
                   for o, theirs in ids.items())]


def build(root: Path = ROOT) -> dict:
    groups: dict = {}
    seen = set()
    for suite, r, cfg in records(root):
        label = base_label(r.label)
        if not _curve(r, cfg) or TWINS.search(label) or (suite, r.dataset, r.workers, label,
                                                          r.seed) in seen:
            continue
        seen.add((suite, r.dataset, r.workers, label, r.seed))
        m, o = cfg.model, cfg.optim
        key = (suite, r.dataset, r.workers, m.model, m.hidden, m.layers, m.dropout, o.lr,
               o.epochs)
        groups.setdefault(key, []).append((label, r, cfg))
    rows, graphs = [], {}
    for key in _repeated(groups):
        del groups[key]
    for key, runs in groups.items():
        suite, dataset, workers, model, hidden, layers, dropout, lr, budget = key
        exact = [r for label, r, cfg in runs if cfg.method == "exact" and is_default(cfg)]
        if not exact:
            continue
        best = sum(r.summary["best_val"] for r in exact) / len(exact)
        by_label: dict = {}
        for label, r, cfg in runs:
            by_label.setdefault(label, []).append((r, cfg))
        for label, mine in sorted(by_label.items()):
            mine.sort(key=lambda rc: rc[0].seed)
            cfg = mine[0][1]
            rows.append({
                "suite": suite, "dataset": dataset, "workers": workers, "model": model,
                "hidden": hidden, "layers": layers, "dropout": dropout, "lr": lr,
                "budget": budget, "label": label, "method": cfg.method,
                "default": is_default(cfg), "seeds": [r.seed for r, _ in mine],
                "epochs": {f"{q:g}": [_epochs(r.metrics, q * best) for r, _ in mine]
                           for q in TARGETS},
                "test": [r.summary.get("test_at_best_val") for r, _ in mine],
                "exact_test": [r.summary.get("test_at_best_val") for r in exact],
                "converged": all(r.summary.get("best_epoch", budget) + 1 <= 0.8 * budget
                                 for r in exact)})
        gkey = f"{dataset}|{workers}"
        if gkey not in graphs:
            job = load_job(dataset, workers)
            graphs[gkey] = {k: round(v, 6) for k, v in job.stats.items()}
    rows.sort(key=lambda x: (x["dataset"], x["workers"], x["suite"], x["hidden"], x["label"]))
    return {"generated_by": "python -m experiments.studies.advise table --write",
            "targets": list(TARGETS), "graphs": dict(sorted(graphs.items())), "rows": rows}


def text(table: dict) -> str:
    """JSON, one row a line (diffs stay readable)."""
    head = {k: v for k, v in table.items() if k != "rows"}
    body = json.dumps(head, indent=1, sort_keys=True)[:-2]
    rows = ",\n".join("  " + json.dumps(r, sort_keys=True) for r in table["rows"])
    return body + ',\n "rows": [\n' + rows + "\n ]\n}\n"
