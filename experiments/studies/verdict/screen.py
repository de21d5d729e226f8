"""The verdict's one screen and its CSV (docs/methods.md section 12): what decides each point
and the cluster it stands for (``points_table``), the table that leads README.md (``screen``: a
row per graph, a column per point, the first close method to the target or none), and every cell
of a graph's verdict as rows of results/verdict/verdict.csv (``csv_rows``)."""
from __future__ import annotations

import math

import pandas as pd

from digest.advise.cost import calibrated
from digest.runtime.netem import parse_rate

from experiments.render.markdown import md_table
from experiments.analysis.convergence import Q
from experiments.analysis.paired import few_pairs
from .analysis import GraphVerdict, clean_at, winner
from .points import COMPUTE_BOUND, DEVICE_GFLOPS, WORKER_CORES, device_k


def q_of(acc: pd.DataFrame) -> float:
    """The graph's target fraction (analysis/convergence.py ``convergence``)."""
    return float(acc.q.iloc[0]) if "q" in acc else Q


def _rate(bit_s: float) -> str:
    for unit, size in (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6)):
        if bit_s >= size:
            return f"{bit_s / size:.3g} {unit}"
    return f"{bit_s:.3g} bit/s"


def stands_for(bw: str, dense_s_per_flop: float, compute_bound: bool = False) -> str:
    """The cluster an emulated point stands for (docs/methods.md section 13): devices k times a
    worker here on links k times as fast (at least that fast, at a compute-bound point, which the
    link does not decide), for a core of this machine and for a device of DEVICE_GFLOPS dense
    GFLOP/s (k from advise's fitted dense rate)."""
    k, core, bits = device_k(dense_s_per_flop), 1 / WORKER_CORES, parse_rate(bw)[0]
    links = "links of at least" if compute_bound else "links of"
    return (f"1-core nodes on {links} {_rate(core * bits)}; {DEVICE_GFLOPS / 1000:g} TFLOP/s "
            f"devices (k = {k:.0f}) on {links} {_rate(k * bits)}")


def points_table(points: pd.DataFrame, dense_s_per_flop: float) -> str:
    """Per point, what decides it and the cluster it stands for."""
    rows = [[p.bandwidth, f"{p.exact_epoch_s:.3f}", f"{p.exact_comm_share:.1%}",
             f"{p.comm_compute_ratio:.2f}", f"{p.wire_share:.0%}",
             "compute-bound" if p.compute_bound else "the link",
             stands_for(p.bandwidth, dense_s_per_flop, p.compute_bound)]
            for p in points.itertuples()]
    return md_table(["point (emulated)", "exact's epoch (s)", "exact in collectives",
                     "communication / compute", "the link alone", "decided by", "stands for"],
                    rows)


def points_lines(points: pd.DataFrame | None) -> list[str]:
    if points is None or points.empty:
        return []
    return ["What decides each point, and the cluster it stands for (docs/methods.md sections "
            "12 and 13; exact's speed runs, the timed epochs of every round: the busiest "
            "worker's time in collectives over its epoch; the link alone: the busiest worker's "
            f"bytes at the bandwidth over exact's epoch, compute-bound under "
            f"{COMPUTE_BOUND:.0%}):", "", points_table(points, calibrated().dense), ""]


def screen_cell(v: GraphVerdict, bw: str) -> str:
    """One cell of the one-screen table: the first close method to the target whose interval
    clears the A/A interval, its speedup [95%] (and its pairs where below MIN_PAIRS); "none
    measurably faster"; or "A/A not clean" where no winner can be named."""
    if bw not in v.bandwidths:
        return "not timed"
    if not clean_at(v.speed, bw):
        return "A/A not clean: none named"
    best = winner(v.acc, v.speed, bw)
    if best is None:
        return "none measurably faster"
    r = v.speed[(v.speed.method == best) & (v.speed.bandwidth == bw)].iloc[0]
    few = few_pairs(r.pairs, short=True)
    return f"{best} {r.speedup:.2f}x [{r.lo:.2f}, {r.hi:.2f}]" + (f", {few}" if few else "")


def screen(graphs: dict) -> str:
    """The one-screen table (docs/methods.md section 12): a row per graph, a column per point
    (the bandwidths, fastest first, each headed by exact's share of its epoch in collectives over
    the graphs), each cell ``screen_cell``."""
    bws = sorted({bw for v in graphs.values() for bw in v.bandwidths},
                 key=lambda b: -parse_rate(b)[0])
    heads = []
    for bw in bws:
        ps = [v.points[v.points.bandwidth == bw] for v in graphs.values() if v.points is not None]
        ps = pd.concat(ps) if ps else pd.DataFrame()
        if ps.empty:  # exact's speed runs say nothing of the point (no comm_time recorded)
            heads.append(bw)
            continue
        lo, hi = ps.exact_comm_share.min(), ps.exact_comm_share.max()
        share = f"{lo:.0%}" if f"{lo:.0%}" == f"{hi:.0%}" else f"{lo:.0%}-{hi:.0%}"
        heads.append(f"{bw}: " + ("compute-bound, " if ps.compute_bound.all() else "")
                     + f"exact {share} in collectives")
    rows = [[graph, f"{q_of(v.acc):g}", *[screen_cell(v, bw) for bw in bws]]
            for graph, v in graphs.items()]
    return md_table(["graph", "target (x exact's best val.)", *heads], rows)


def _checked(check: pd.DataFrame | None, method: str, bw: str) -> dict:
    """The cell's run to the target on its own schedule, where there is one: its speedup end to
    end and the cell's difference from it (schedule_check.py)."""
    row = (check[(check.method == method) & (check.bandwidth == bw)]
           if check is not None and not check.empty else pd.DataFrame())
    if row.empty or math.isnan(row.e2e_speedup.iloc[0]):
        return {"checked_e2e_speedup": "", "checked_difference_pct": ""}
    return {"checked_e2e_speedup": round(float(row.e2e_speedup.iloc[0]), 3),
            "checked_difference_pct": round(float(row.error_pct.iloc[0]), 1)}


def csv_rows(graph: str, v: GraphVerdict) -> list[dict]:
    """Every cell of a graph's verdict, one row per (point, method), for results/verdict/
    verdict.csv: what decides the point, the target, accuracy, epochs to target by seed, exact's
    time to target and the method's (the decomposition's: epochs x per-epoch time), speedup with
    its interval and pairs, the point's A/A interval, and where the cell's time comes from."""
    out = []
    target = v.acc[v.acc.method == "exact"].iloc[0]
    for p in v.points.itertuples():
        ref = v.speed[(v.speed.method == "exact") & (v.speed.bandwidth == p.bandwidth)].iloc[0]
        t_exact = target.epochs * p.exact_epoch_s
        for a in v.acc.itertuples():
            r = v.speed[(v.speed.method == a.method) & (v.speed.bandwidth == p.bandwidth)]
            r = r.iloc[0] if len(r) else None
            out.append({
                "graph": graph, "point": p.bandwidth,
                "decided_by": "compute" if p.compute_bound else "link",
                "exact_comm_share": round(p.exact_comm_share, 4),
                "comm_compute_ratio": round(p.comm_compute_ratio, 3),
                "target": f"{a.q:g} x exact's mean best validation",
                "method": a.method, "test_acc": round(a.test_mean, 2),
                "delta": round(a.delta, 2) if a.method != "exact" else 0.0,
                "epochs_to_target": ";".join("-" if e is None else str(e)
                                              for e in a.epochs_by_seed),
                "time_to_target_s": (round(t_exact / r.speedup, 2) if r is not None and
                                     not math.isnan(r.speedup) else
                                     round(t_exact, 2) if a.method == "exact" else ""),
                "speedup": "" if r is None or math.isnan(r.speedup) else round(r.speedup, 3),
                "lo": "" if r is None or math.isnan(r.lo) else round(r.lo, 3),
                "hi": "" if r is None or math.isnan(r.hi) else round(r.hi, 3),
                "pairs": 0 if r is None else int(r.pairs),
                "aa_lo": round(ref.aa_lo, 3), "aa_hi": round(ref.aa_hi, 3),
                "verdict": "reference" if a.method == "exact" else
                ("" if r is None else (r.verdict or r.note)),
                "source": "reference" if a.method == "exact" else
                ("end to end" if r is not None and r.note.startswith("end to end") else
                 "decomposition (epochs x per-epoch time)"),
                **_checked(v.check, a.method, p.bandwidth)})
    return out


CHECK_TOLERANCE = 10  # percent: the verdict's cell against its run to the target (section 12)


def check_lines(check: pd.DataFrame | None, suite: str) -> list[str]:
    """The verdict's cells against each synchronous method trained behind the link up to the
    target on its own schedule (``suite``; schedule_check.py): per method and point,
    its seeds, epochs and seconds to the target, the speedup end to end, the cell's, their
    difference, and how many lie within CHECK_TOLERANCE."""
    if check is None or check.empty:
        return []
    rest = check[check.method != "exact"]
    ok = int((rest.error_pct.abs() <= CHECK_TOLERANCE).sum())
    worst = rest.error_pct.abs().max()
    rows = [[r.method, r.bandwidth, f"{r.reached}/{r.seeds}", r.epochs,
             "" if math.isnan(r.seconds) else f"{r.seconds:.1f}",
             "" if math.isnan(r.e2e_speedup) else f"{r.e2e_speedup:.2f}x",
             "" if math.isnan(r.verdict_speedup) else f"{r.verdict_speedup:.2f}x",
             "" if math.isnan(r.error_pct) else f"{r.error_pct:+.1f}%"]
            for r in check.itertuples()]
    return [f"The cells checked end to end ({suite}): each synchronous method trained behind the "
            "link with its convergence run's flags (its own schedule) up to the target, its time "
            "to the target read from its metrics.csv (training clock); speedup end to end = "
            f"exact's mean time over the method's. {ok} of {len(rest)} cells within "
            f"{CHECK_TOLERANCE}% of it (largest difference {worst:.1f}%).", "",
            md_table(["method", "point", "reached", "epochs to target by seed",
                      "seconds to target (mean)", "speedup end to end", "verdict's cell",
                      "difference"], rows), ""]
