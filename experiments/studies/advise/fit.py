"""``python -m experiments.studies.advise fit [--write | --check]``: the constants of advise's time model
(digest/advise/calibration.json; docs/methods.md section 13), fitted on some of the committed
emulated-cluster points and never on the others (experiments/studies/advise/check.py validates on
those).

Fitted on ``FIT``: (graph, workers, bandwidth) points of the emulated suites. At each point every
method the model can price (default options or not) gives one target: the median over its runs
(suites and rounds) of the run's mean epoch time after the warm-up. The constants (seconds per
unit of dense, sparse, sparse-feature and elementwise work at one core, per quantised value, per
byte moved and per step; the link's efficiency, the overhead per collective and the overlap of
pipelined methods) minimise the sum of squared log errors of the predicted medians (scipy's
least_squares, bounded: every constant >= 0, efficiency <= 1, overlap <= 1). The runs ran with
more workers than cores: their compute is priced at ``share`` = workers per core.

--write writes calibration.json (constants to 4 significant digits); --check refits and fails
(exit 1) when the committed constants differ.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from digest.advise.cost import Rates
from digest.advise.job import Job, load_job
from digest.advise.protocol import WARMUP
from digest.advise.traffic import Counted, count, parameters
from digest.advise.work import KINDS, MODELLED, step_work

from .runs import Timed, timed_runs

PRODUCTS_LIKE = "synthetic:nodes=40000,avg_degree=25,classes=47,features=100,communities=64,locality=0.97"
FIT = ((PRODUCTS_LIKE, 4, "1gbit"), (PRODUCTS_LIKE, 4, "50mbit"), ("Physics", 4, "1gbit"))
NAMES = ("dense", "sparse", "sparse_x", "elem", "codec", "byte_cpu", "step", "efficiency",
         "overhead", "overlap")
SCALE = np.array([1e-11, 1e-10, 1e-10, 1e-9, 1e-9, 1e-10, 1e-3, 1.0, 1e-3, 1.0])


@dataclass
class Priced:
    """One run ready to be priced: its measured time, its job and count, and per timed step s the
    workers' compute features ``comp[s] [M, 7]`` (KINDS, codec values, bytes moved, 1), and the
    bytes (largest direction of each collective, summed) and number of its blocking and of its
    overlapped collectives: ``wire[s] = (blocking bytes, blocking count, overlapped bytes,
    overlapped count)``."""

    run: Timed
    job: Job
    counted: Counted
    comp: np.ndarray
    wire: np.ndarray


def price(runs: list[Timed], jobs: dict | None = None) -> list[Priced]:
    """The runs the model can price (others dropped), with their features. ``jobs``: counted
    graphs by (dataset, workers) already at hand (loaded here otherwise)."""
    jobs = dict(jobs or {})
    models: dict = {}
    out = []
    for t in runs:
        cfg = t.cfg
        if cfg.model.model not in MODELLED:
            continue
        key = (t.dataset, t.workers)
        if key not in jobs:
            jobs[key] = load_job(t.dataset, t.workers)
        job = jobs[key]
        counted = count(job, cfg)
        if counted.reason or any(s.unmodelled for s in counted.steps):
            continue
        m = cfg.model
        mk = (key, m.model, m.hidden, m.layers, m.batch_norm)
        if mk not in models:
            models[mk] = parameters(job, cfg)
        widths, params = models[mk]
        works = {}
        comp, wire = [], []
        for step in counted.steps[WARMUP:t.epochs]:
            if step.halo not in works:
                works[step.halo] = [step_work(p, widths, m.model, step.halo, m.dropout,
                                              job.sparse_x, params) for p in job.parts]
                works["fill"] = [step_work(p, widths, m.model, "grad", m.dropout, job.sparse_x,
                                           params, backward=False) for p in job.parts]
            M = job.workers
            c = np.zeros((M, 7))
            for r in range(M):
                w = works[step.halo][r] + works["fill"][r].scaled(step.forwards)
                c[r, :4] = [getattr(w, k) for k in KINDS]
                c[r, 4] = (step.coded or (0,) * M)[r]
                c[r, 5] = sum(x.sent[r] + x.received[r] for x in step.collectives)
                c[r, 6] = 1.0
            row = [0.0, 0, 0.0, 0]
            for x in step.collectives:
                if any(x.messages):
                    i = 2 if x.overlapped else 0
                    row[i] += max(max(a, b) for a, b in zip(x.sent, x.received))
                    row[i + 1] += 1
            comp.append(c)
            wire.append(row)
        out.append(Priced(t, job, counted, np.array(comp), np.array(wire, dtype=float)))
    return out


def rates_of(x) -> Rates:
    v = dict(zip(NAMES, np.asarray(x, dtype=float) * SCALE))
    return Rates(**v)


def fast_mean(p: Priced, rates: Rates) -> float:
    """The run's predicted mean step time: cost.step_seconds in numpy (experiments/studies/advise/
    check.py prices with the library itself; tests/experiments check that the two agree)."""
    a = np.array([rates.dense, rates.sparse, rates.sparse_x, rates.elem, rates.codec,
                  rates.byte_cpu, rates.step])
    bw = p.run.bit_s / 8 * rates.efficiency
    C = p.run.share * (p.comp @ a).max(axis=1)
    B = p.wire[:, 0] / bw + p.wire[:, 1] * rates.overhead
    X = p.wire[:, 2] / bw + p.wire[:, 3] * rates.overhead
    return float(np.mean(C + B + X - rates.overlap * np.minimum(C, X)))


def groups(priced: list[Priced]) -> dict:
    """(dataset, workers, bandwidth, label) -> its priced runs."""
    out: dict = {}
    for p in priced:
        t = p.run
        out.setdefault((t.dataset, t.workers, t.bandwidth, t.label), []).append(p)
    return out


def fit(priced: list[Priced]) -> tuple[Rates, dict]:
    from scipy.optimize import least_squares
    chosen = {k: g for k, g in groups(priced).items() if k[:3] in FIT}
    measured = {k: float(np.median([p.run.seconds for p in g])) for k, g in chosen.items()}

    def residuals(x):
        r = rates_of(x)
        return [math.log(float(np.median([fast_mean(p, r) for p in g])) / measured[k])
                for k, g in chosen.items()]
    lo = np.zeros(len(NAMES))
    lo[NAMES.index("efficiency")] = 0.05
    hi = np.full(len(NAMES), np.inf)
    hi[NAMES.index("efficiency")] = hi[NAMES.index("overlap")] = 1.0
    x0 = np.array([1, 1, 1, 1, 1, 1, 1, 0.8, 1, 0.5], dtype=float)
    res = least_squares(residuals, x0, bounds=(lo, hi), x_scale="jac")
    # 4 significant digits; a constant the fit drove to its bound of 0 (below 1e-4 of its scale)
    # is 0, so that a refit on another machine writes the same file
    x = [0.0 if abs(v) < 1e-4 else float(f"{v:.4g}") for v in res.x]
    rounded = rates_of(x)
    rounded = Rates(**{n: float(f"{getattr(rounded, n):.4g}") for n in NAMES})
    errs = [abs(math.exp(e) - 1) for e in residuals(np.array([getattr(rounded, n) for n in NAMES])
                                                     / SCALE)]
    return rounded, {"targets": len(chosen), "median_abs_error": round(float(np.median(errs)), 4)}


def build() -> dict:
    priced = price(timed_runs(prefix=("cluster",)))  # bench_speed_* points stay held out
    rates, info = fit(priced)
    return {"generated_by": "python -m experiments.studies.advise fit --write",
            "fitted_on": [{"dataset": d, "workers": w, "bandwidth": b} for d, w, b in FIT],
            "rates": {n: getattr(rates, n) for n in NAMES}, **info}
