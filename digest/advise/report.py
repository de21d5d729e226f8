"""The advice: one row a registered method (default options), fastest to the target first, as
a table or JSON (``python -m digest advise``; docs/methods.md section 13).

Each row: predicted per-epoch time (mean over the timed window, section 11), its speedup over
exact and the per-epoch ceiling (section 13), epochs to the target and the runs that figure comes
from, predicted time to target (epochs x per-epoch time, section 12), the accuracy difference
from exact on those runs, and bytes per epoch (as a run of ``--epochs`` epochs records them). A
method that cannot be predicted is listed with the reason.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

from .. import methods
from ..config import TrainConfig
from .cost import Network, Rates
from .epochs import lookup
from .job import Job
from .predict import predict
from .traffic import count


@dataclass(frozen=True)
class Request:
    """What the user asked: the cluster (``workers``, ``net``), the worker's speed (``rates``,
    ``rate_source``), the model and budget (``cfg``: a TrainConfig whose method is replaced per
    row), the target fraction of exact's best validation accuracy."""

    cfg: TrainConfig
    net: Network
    rates: Rates
    rate_source: str
    target: float
    share: float = 1.0


def _row(job: Job, req: Request, name: str, table: dict, exclude: tuple) -> dict:
    cfg = req.cfg.replace(method=name)
    counted = count(job, cfg)
    row = {"method": name, "reason": counted.reason}
    if counted.steps:
        row["bytes_per_epoch"] = counted.mean_bytes()
    timing = predict(job, counted, req.rates, req.net, req.share)
    if timing.reason:
        row["reason"] = timing.reason
        return row
    row.update(s_per_epoch=timing.mean(), compute_s=timing.mean("compute"),
               comm_s=timing.mean("comm"), hidden_s=timing.mean("hidden"),
               overlapped=any(c.overlapped for st in counted.steps for c in st.collectives))
    m = cfg.model
    e = lookup(table, name, {**job.stats, "workers": job.workers}, req.target, m.model, m.hidden,
               m.layers, m.dropout, exclude)
    if e is None:
        row["epochs_source"] = "no convergence run of this method in the table"
        return row
    row.update(epochs=e.epochs, epochs_low=e.low, epochs_high=e.high, epochs_source=e.source(),
               accuracy_gap=e.accuracy_gap, nearest=e.dataset)
    if e.epochs is not None:
        row["time_to_target_s"] = e.epochs * row["s_per_epoch"]
    else:
        row["epochs_source"] = "not reached at every seed; " + e.source()
    return row


def rows(job: Job, req: Request, table: dict, exclude: tuple = (),
         names: list[str] | None = None) -> list[dict]:
    """Every method's row, ranked: by predicted time to target, then (no epochs figure) by
    per-epoch time, then those that cannot be predicted. ``exclude``: datasets whose
    convergence runs are not read (a held-out graph's own)."""
    out = [_row(job, req, n, table, exclude) for n in (names or sorted(methods.METHODS))]
    by = {r["method"]: r for r in out}
    exact, part = by.get("exact", {}), by.get("partition", {})
    ceiling = exact.get("s_per_epoch", math.nan) / part.get("s_per_epoch", math.nan) \
        if part.get("s_per_epoch") else math.nan
    for r in out:
        if "s_per_epoch" not in r:
            continue
        r["speedup_vs_exact"] = exact.get("s_per_epoch", math.nan) / r["s_per_epoch"]
        r["ceiling"] = None if r["method"] == "partition" else \
            (min(2.0, ceiling) if r["overlapped"] else ceiling)

    def rank(r):
        if "time_to_target_s" in r:
            return (0, r["time_to_target_s"], r["method"])
        if "s_per_epoch" in r:
            return (1, r["s_per_epoch"], r["method"])
        return (2, 0.0, r["method"])
    return sorted(out, key=rank)


def _f(x, fmt: str, none: str = "-") -> str:
    return none if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def text(job: Job, req: Request, ranked: list[dict]) -> str:
    m, o = req.cfg.model, req.cfg.optim
    st = job.stats
    lines = [
        f"advise: {job.dataset} on {job.workers} workers, links of {_bw(req.net)} each way, "
        f"latency {req.net.latency * 1e6:g} us; {m.model.upper()} {m.layers} x {m.hidden}, "
        f"dropout {m.dropout:g}, {o.epochs} epochs",
        f"graph: {job.nodes:,} nodes, {job.edges:,} directed edges, {job.features:,} features; "
        f"edge cut {100 * st['edge_cut']:.1f}%, halo {st['halo']:.2f} of the nodes, "
        f"homophily {st['homophily']:.2f}",
        f"compute: {req.rate_source}",
        f"target: {req.target:g} x exact's best validation accuracy; epochs from the convergence "
        "runs of the nearest graph (source column)",
        "every time below is PREDICTED by the model of docs/methods.md section 13, not measured"]
    if m.model != "gcn":
        lines.append(f"note: the constants were fitted and checked on GCN runs only: {m.model} "
                     "rows are priced with them, unchecked")
    lines.append("")
    head = ["method", "s/epoch", "x exact", "ceiling", "epochs to target", "to target (s)",
            "acc vs exact (pts)", "MiB/epoch", "source of the epochs"]
    table, notes = [head], []
    for r in ranked:
        if "s_per_epoch" not in r:
            mib = f" ({r['bytes_per_epoch'] / 2**20:.2f} MiB/epoch)" if "bytes_per_epoch" in r else ""
            notes.append(f"  {r['method']}: {r['reason']}{mib}")
            continue
        ep = "-" if "epochs_low" not in r else (
            f"{_f(r['epochs'], '.0f', 'not reached')} [{_f(r['epochs_low'], '.0f')}-"
            f"{_f(r['epochs_high'], '.0f')}]")
        table.append([r["method"], _f(r["s_per_epoch"], ".3f"), _f(r["speedup_vs_exact"], ".2f"),
                      _f(r["ceiling"], ".2f"), ep, _f(r.get("time_to_target_s"), ".1f"),
                      _f(r.get("accuracy_gap"), "+.2f"), _f(r["bytes_per_epoch"] / 2**20, ".2f"),
                      r.get("epochs_source", "")])
    widths = [max(len(row[i]) for row in table) for i in range(len(head) - 1)]
    for row in table if len(table) > 1 else []:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1])
    if len(table) == 1:
        lines.append("no method's time can be predicted here")
    if notes:
        lines += ["", "cannot predict:"] + notes
    return "\n".join(lines) + "\n"


def _bw(net: Network) -> str:
    from .units import bandwidth_label
    return bandwidth_label(net.bandwidth)


def as_json(job: Job, req: Request, ranked: list[dict]) -> str:
    m, o = req.cfg.model, req.cfg.optim
    clean = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
             for r in ranked]
    return json.dumps({
        "dataset": job.dataset, "workers": job.workers,
        "bandwidth_bytes_per_s": None if math.isinf(req.net.bandwidth) else req.net.bandwidth,
        "latency_s": req.net.latency, "model": m.model, "layers": m.layers, "hidden": m.hidden,
        "dropout": m.dropout, "epochs": o.epochs, "target": req.target,
        "compute": req.rate_source, "graph": job.stats, "predicted": True, "rows": clean},
        indent=1) + "\n"
