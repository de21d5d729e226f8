"""``python -m experiments.studies.advise check [--write | --check]``: advise's model against committed
emulated-cluster points it was not fitted on (results/advise/README.md; docs/methods.md
section 13).

Held out: every (graph, workers, bandwidth) point of the emulated suites (cluster*, bench_speed_*)
but experiments/studies/advise/fit.py's ``FIT``; "fresh": a point whose runs are all bench_speed_*
(measured after the epochs' distance rule was fixed). At each, every method the model prices is predicted with the library
(digest.advise: the methods' step counts, each worker's work, calibration.json's constants, the
run's own epochs, bandwidth and workers per core) and compared with what ran:

- per-epoch time: measured = the median over the point's runs (suites, rounds) of each run's MEAN
  epoch time after the warm-up; predicted = the same over the same runs' windows;
- time to target (docs/methods.md section 12): epochs x per-epoch time. Measured epochs: the
  convergence runs of the point's own graph and workers (the same width where committed, else
  the nearest); predicted epochs: advise's lookup with the point's graph left out (the nearest
  OTHER graph, as for a graph the benchmark never ran). Per point, the Spearman correlation of
  the two orders of the methods, and whether the predicted first choice is the measured fastest
  or within its interval (epochs over seeds x per-epoch time over runs, low to high).

--write writes results/advise/README.md and points.csv; --check recomputes them and fails
(exit 1) when the committed ones differ.
"""
from __future__ import annotations

import math

import numpy as np

from digest.advise.cost import Network, calibrated
from digest.advise.epochs import load_table, lookup
from digest.advise.predict import predict

from experiments.suites.suite import base_label
from .fit import FIT, groups, price
from .runs import FRESH, ROOT, records, timed_runs

OUT = ROOT / "advise"
TARGET = 0.99
# where the predicted epochs come from: the graph nearest the point's in advise's table, which for
# a graph of the benchmark is its own runs ("own"), or the nearest OTHER graph ("other": as for a
# graph the benchmark never ran)
VARIANTS = {"other": lambda dataset: (dataset,), "own": lambda dataset: ()}


def measured_group(table: dict, dataset: str, workers: int, methods: set, hidden: int) -> tuple:
    """The convergence runs a point's measured epochs come from: one group (suite, workers,
    width, depth) of its own graph, the one with most of the point's methods (default options),
    then the nearest workers and width (the wider of two as near), then the most seeds."""
    rows = [r for r in table["rows"] if r["dataset"] == dataset and r["default"]
            and r["model"] == "gcn" and r["dropout"] == 0.5]
    by: dict = {}
    for r in rows:
        by.setdefault((r["suite"], r["workers"], r["hidden"], r["layers"]), {})[r["method"]] = r
    if not by:
        return None, {}
    key = min(by, key=lambda k: (-len(methods & set(by[k])), abs(k[1] - workers),
                                 abs(math.log2(k[2] / hidden)), -k[2],
                                 -min(len(r["seeds"]) for r in by[k].values()), k[0]))
    return key, by[key]


def measured_epochs(group: tuple, rows: dict, method: str) -> dict | None:
    """Epochs to target of ``method`` in the point's group: median (every seed reached), low and
    high over seeds."""
    if method not in rows:
        return None
    r = rows[method]
    key = f"{TARGET:g}"
    got = [e for e in r["epochs"][key] if e is not None]
    med = float(np.median(got)) if len(got) == len(r["epochs"][key]) else None
    return {"epochs": med, "low": min(got) if got else None, "high": max(got) if got else None,
            "source": f"{group[0]}: M={group[1]}, hidden {group[2]}, "
                      f"{len(got)}/{len(r['epochs'][key])} seeds"}


def evaluate() -> dict:
    rates, table = calibrated(), load_table()
    priced = price(timed_runs())
    rows = []
    points = groups(priced)
    for (dataset, workers, bw, label), runs in sorted(points.items()):
        if (dataset, workers, bw) in FIT:
            continue
        methods = {g[0].run.cfg.method for k, g in points.items() if k[:3] == (dataset, workers, bw)}
        group, measured = measured_group(table, dataset, workers, methods, runs[0].run.cfg.model.hidden)
        cfg = runs[0].run.cfg
        pred = [predict(p.job, p.counted, rates, Network(p.run.bit_s / 8), p.run.share,
                        last=p.run.epochs).mean() for p in runs]
        meas = [p.run.seconds for p in runs]
        row = {"dataset": dataset, "workers": workers, "bandwidth": bw, "label": label,
               "method": cfg.method, "runs": len(runs), "measured_s": float(np.median(meas)),
               "measured_low": min(meas), "measured_high": max(meas),
               "predicted_s": float(np.median(pred)),
               "fresh": all(p.run.suite.startswith(FRESH) for p in runs)}
        row["error"] = row["predicted_s"] / row["measured_s"] - 1
        job, m = runs[0].job, cfg.model
        default = cfg.options == type(cfg.options)()
        got = measured_epochs(group, measured, cfg.method) if default else None
        if got is not None:
            row.update(measured_epochs=got["epochs"], epochs_low=got["low"],
                       epochs_high=got["high"], measured_source=got["source"])
        for variant, exclude in VARIANTS.items():
            e = lookup(table, cfg.method, {**job.stats, "workers": workers}, TARGET, m.model,
                       m.hidden, m.layers, m.dropout, exclude=exclude(dataset)) if default else None
            if e is not None:
                row[variant] = {"epochs": e.epochs, "source": e.source()}
        rows.append(row)
    return {"rows": rows, "rates": rates, "bytes": bytes_check(),
            "points": {v: summarise(rows, v) for v in VARIANTS}}


# every method of the suite on one graph, 4 workers
BYTES_SUITES = ("field_methods", "sat_sylvie_minibatch")
BYTES_GRAPH = "CS"


def bytes_check() -> list[dict]:
    """advise's mean bytes per epoch against summary.json's, for every seed-0 run of
    ``BYTES_SUITES`` on ``BYTES_GRAPH`` (one row a label; the reason where it cannot count)."""
    from digest.advise.job import load_job
    from digest.advise.traffic import count
    job, out, seen = None, [], set()
    for suite, r, cfg in records():
        label = base_label(r.label)
        if suite not in BYTES_SUITES or r.dataset != BYTES_GRAPH or r.seed != 0 or label in seen:
            continue
        seen.add(label)
        job = job or load_job(BYTES_GRAPH, r.workers)
        counted = count(job, cfg)
        recorded = r.summary["mean_bytes_per_epoch"]
        out.append({"suite": suite, "label": label, "method": cfg.method, "recorded": recorded,
                    "advise": counted.mean_bytes() if not counted.reason else None,
                    "reason": counted.reason})
    return sorted(out, key=lambda x: x["label"])


def _tta(r: dict, variant: str | None) -> float:
    """Time to target: measured (``variant`` None) or predicted with that variant's epochs;
    inf: not reached; nan: no figure."""
    if variant is None:
        e, t = r.get("measured_epochs", "missing"), r["measured_s"]
    else:
        e, t = r.get(variant, {}).get("epochs", "missing"), r["predicted_s"]
    if e == "missing":
        return math.nan
    return math.inf if e is None else e * t


def summarise(rows: list[dict], variant: str) -> list[dict]:
    """Per held-out point: its methods' per-epoch errors, the rank correlation of time to
    target (predicted epochs of ``variant``) and the first choice."""
    from scipy.stats import spearmanr
    out = []
    keys = sorted({(r["dataset"], r["workers"], r["bandwidth"]) for r in rows})
    for key in keys:
        mine = [r for r in rows if (r["dataset"], r["workers"], r["bandwidth"]) == key]
        point = {"dataset": key[0], "workers": key[1], "bandwidth": key[2],
                 "methods": len(mine), "fresh": all(r.get("fresh", False) for r in mine),
                 "median_abs_error": float(np.median([abs(r["error"]) for r in mine]))}
        ranked = [r for r in mine if not math.isnan(_tta(r, None))
                  and not math.isnan(_tta(r, variant))]
        if len(ranked) >= 3:
            p = [_tta(r, variant) for r in ranked]
            m = [_tta(r, None) for r in ranked]
            rho = spearmanr(p, m).statistic
            first = ranked[int(np.argmin(p))]
            best = ranked[int(np.argmin(m))]
            lo = (first["epochs_low"] or math.inf) * first["measured_low"]
            hi = (best["epochs_high"] or math.inf) * best["measured_high"]
            point.update(ranked=len(ranked), spearman=None if math.isnan(rho) else float(rho),
                         first=first["label"], fastest=best["label"],
                         first_ok=first is best or lo <= hi)
        out.append(point)
    return out
