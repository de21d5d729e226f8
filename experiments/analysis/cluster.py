"""The emulated-cluster sweep (docs/methods.md section 9): tables and plots of runs made with
``--emulate-network BANDWIDTH`` (a suite's ``networks:``, labels "<method>@<bandwidth>").

Times here are EMULATED: wall time with each worker in a network namespace of its own, its link
to a virtual switch shaped to the bandwidth in both directions (tbf, MTU 1500; summary.json's
"emulation" says how); the workers still share the host's cores. They are labelled
"emulated @ BANDWIDTH" and never mixed with loopback measurements or modeled times. The cost
model (experiments/costmodel.py: each worker's CPU seconds + bytes / bandwidth, no latency: none
is emulated) is set beside the emulated time of the same run, its error in %.

    cluster_epoch_time.csv   per dataset, method, M, bandwidth: emulated ms per epoch, speedup
                             over exact at the same bandwidth, comm_ms (time waiting in
                             collectives: the communication computation did not hide)
    cluster_time_to_accuracy.csv   time to the target val accuracy at each bandwidth, speedup
    cluster_model.csv        emulated vs modeled ms per epoch, error (modeled - emulated) / emulated;
                             also modeled with the CPU seconds x workers per core (cores shared)
    <dataset>_speedup_vs_bandwidth.png, <dataset>_val_vs_emulated_time.png (lowest bandwidth)
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from . import periods
from .suites.suite import base_label, dataset_slug, network_of
from .costmodel import Network, modeled_epoch_times
from .suites.load import Loaded
from .render import (cell, curves, markevery, md_table, panel_grid, panels, save, seed_labels,
                     style, times, titles)
from .contention import has_quota
from .timing import evaluated_once


def emulated(loaded: Loaded) -> bool:
    return any(r.summary.get("emulation") for r in loaded.records)


def _bit_s(record) -> float:
    return float(record.summary["emulation"]["bandwidth_bit_s"])


def _share(record) -> float:
    """Workers per core on the run's node when they outnumber its cores (1 otherwise): the
    emulation does not isolate CPUs, so each worker computes at 1/share of a core."""
    machine = record.summary.get("machine", {})
    cores, workers = machine.get("cores") or 1, machine.get("workers_per_node") or 1
    return max(1.0, workers * (machine.get("threads_per_worker") or 1) / cores)


def sweep_frame(loaded: Loaded) -> pd.DataFrame:
    """One row per emulated run: its bandwidth, emulated and modeled ms per epoch (means over
    its window of whole periods after the warm-up, experiments/periods.py), accuracy."""
    rows = []
    for r in loaded.records:
        e = r.summary.get("emulation")
        if not e:
            continue
        m = periods.timed_rows(r.metrics, r.summary.get("config", {}), loaded.warmup)
        net = Network(_bit_s(r) / 8, 0.0, e["bandwidth"])
        cpu = [c for c in m.columns if c.startswith("cpu_time_w")]
        rows.append({"dataset": r.dataset, "method": base_label(r.label), "workers": r.workers,
                     "seed": r.seed, "bandwidth": e["bandwidth"], "bit_s": _bit_s(r),
                     "emulated_ms": m["epoch_time"].mean() * 1e3,
                     "comm_ms": m["comm_time"].mean() * 1e3,
                     "cpu_ms": m[cpu].max(axis=1).mean() * 1e3 if cpu else float("nan"),
                     "modeled_ms": modeled_epoch_times(m, net).mean() * 1e3,
                     "modeled_shared_ms": modeled_epoch_times(m, net, share=_share(r)).mean() * 1e3,
                     "MiB_per_epoch": m["bytes_total"].mean() / 2**20,
                     "best_val": r.summary.get("best_val"),
                     "test": r.summary.get("test_at_best_val")})
    return pd.DataFrame(rows)


def _by(frame: pd.DataFrame, cols: list) -> pd.DataFrame:
    keys = ["dataset", "method", "workers", "bandwidth"]
    out = frame.groupby(keys, sort=False).agg(
        seeds=("seed", "size"), bit_s=("bit_s", "first"),
        **{c: (c, "mean") for c in cols}).reset_index()
    return out


def epoch_table(frame: pd.DataFrame) -> pd.DataFrame:
    out = _by(frame, ["emulated_ms", "comm_ms", "cpu_ms", "MiB_per_epoch", "test"])
    exact = {(d, w, b): t for d, m, w, b, t in zip(out.dataset, out.method, out.workers,
                                                   out.bandwidth, out.emulated_ms) if m == "exact"}
    out["speedup_vs_exact"] = [exact[k] / t if (k := (d, w, b)) in exact and t > 0 else math.nan
                               for d, w, b, t in zip(out.dataset, out.workers, out.bandwidth,
                                                     out.emulated_ms)]
    return out


def model_table(frame: pd.DataFrame) -> pd.DataFrame:
    out = _by(frame, ["emulated_ms", "modeled_ms", "modeled_shared_ms"])
    out["error_pct"] = 100 * (out.modeled_ms - out.emulated_ms) / out.emulated_ms
    out["error_shared_pct"] = 100 * (out.modeled_shared_ms - out.emulated_ms) / out.emulated_ms
    return out


def tta_table(time_to_accuracy: pd.DataFrame) -> pd.DataFrame:
    """The suite's time-to-accuracy rows of emulated runs, the label split into method and
    bandwidth (the target and the exact run compared with are those at the same bandwidth)."""
    t = time_to_accuracy[[network_of(m) is not None for m in time_to_accuracy.method]].copy()
    t.insert(2, "bandwidth", [network_of(m) for m in t.method])
    t["method"] = [base_label(m) for m in t.method]
    return t


def build(loaded: Loaded, time_to_accuracy: pd.DataFrame) -> dict:
    frame = sweep_frame(loaded)
    return {"cluster_epoch_time": epoch_table(frame), "cluster_model": model_table(frame),
            "cluster_time_to_accuracy": tta_table(time_to_accuracy)}


# -- markdown ------------------------------------------------------------------------------------
def _pivot(part: pd.DataFrame, cell) -> tuple[list, list]:
    """Rows = methods, columns = bandwidths (fastest first), cells from ``cell(row)``."""
    bws = list(part.sort_values("bit_s", ascending=False).bandwidth.drop_duplicates())
    rows = []
    for method in dict.fromkeys(part.method):
        row = [method]
        for b in bws:
            hit = part[(part.method == method) & (part.bandwidth == b)]
            row.append(cell(hit.iloc[0]) if len(hit) else "")
        rows.append(row)
    return bws, rows


def markdown(tables: dict, loaded: Loaded, number: int = 6) -> str:
    sample = next(r.summary for r in loaded.records if r.summary.get("emulation"))
    e, machine = sample["emulation"], sample.get("machine", {})
    out = [f"\n## {number}. Emulated cluster: per-epoch time, speedup, time to accuracy, cost model\n\n",
           f"Times in this section are EMULATED (docs/methods.md section 9): each worker in a "
           f"network namespace of its own, one link to a virtual switch shaped to the bandwidth of "
           f"the column in both directions ({e['qdisc'].split(' rate')[0]} on each end, MTU "
           f"{e['mtu']}, no added latency); real gloo/TCP traffic crosses the links. The workers "
           f"still share the host's cores ({machine.get('cores_shared', '?')}): "
           + ("each capped at C/M cores by a CPU quota where the header's contention lines say "
              "so. " if any(has_quota(r.summary) for r in loaded.records)
              else "no CPU isolation. ") +
           "Speedup over exact = exact's emulated time / the method's, same dataset, M and "
           "bandwidth. Modeled = experiments/costmodel.py at that bandwidth and zero latency: max "
           "over workers of CPU seconds + bytes / bandwidth (a worker with a core of its own); "
           "'cores shared as here': the CPU seconds multiplied by workers per core on this node "
           "(each worker computes at that fraction of a core); error = (modeled - emulated) / "
           "emulated."
           + (" This section reads round 0's runs, each its mean epoch (warm-up included); "
              "section 2's speedups pair every round's runs." if loaded.later else "") + "\n"]
    et, mt, tt = tables["cluster_epoch_time"], tables["cluster_model"], tables["cluster_time_to_accuracy"]
    once = evaluated_once(loaded)  # a speed suite: no curve to read a time to accuracy from
    for (dataset, workers), part in et.groupby(["dataset", "workers"], sort=False):
        bws, rows = _pivot(part, lambda r: f"{cell(r.emulated_ms, '.0f')} ({times(r.speedup_vs_exact)})")
        out.append(f"\n### {dataset}, M={workers}: ms per epoch, emulated @ each bandwidth "
                   "(speedup over exact)\n\n")
        out.append(md_table(["method", *(f"emulated @ {b}" for b in bws)], rows))
        bws, rows = _pivot(part, lambda r: f"{cell(r.comm_ms, '.0f')} "
                           f"({cell(100 * r.comm_ms / r.emulated_ms, '.0f')}%)")
        out.append(f"\n### {dataset}, M={workers}: communication not hidden behind compute, ms per "
                   "epoch (comm_time: waiting in collectives; % of the epoch), emulated\n\n")
        out.append(md_table(["method", *(f"emulated @ {b}" for b in bws)], rows))
        sub = mt[(mt.dataset == dataset) & (mt.workers == workers)]
        bws, rows = _pivot(sub, lambda r: f"{cell(r.modeled_ms, '.0f')} ({cell(r.error_pct, '+.0f')}%)"
                           f" / {cell(r.modeled_shared_ms, '.0f')} ({cell(r.error_shared_pct, '+.0f')}%)")
        out.append(f"\n### {dataset}, M={workers}: cost model, modeled ms per epoch (error vs "
                   "emulated): one core per worker / cores shared as here\n\n")
        out.append(md_table(["method", *(f"modeled @ {b}" for b in bws)], rows))
        sub = tt[(tt.dataset == dataset) & (tt.workers == workers)]
        if once:
            continue
        for _, one in (sub.groupby("target", sort=False) if len(sub) else []):  # 0.98, 0.99, ...
            one = one.assign(bit_s=[part[part.bandwidth == b].bit_s.iloc[0]
                                    if (part.bandwidth == b).any() else 0 for b in one.bandwidth])
            bws, rows = _pivot(one, lambda r: f"{cell(r.time_s, '.1f')} s ({times(r.speedup_vs_exact)})"
                               if r.time_s != "not reached" else "not reached")
            out.append(f"\n### {dataset}, M={workers}: time to {cell(one.target_val.iloc[0], '.4f')} "
                       f"val accuracy ({one.target.iloc[0]:g} x exact's best), emulated (speedup "
                       "over exact)\n\n")
            out.append(md_table(["method", *(f"emulated @ {b}" for b in bws)], rows))
    return "".join(out)


# -- plots ---------------------------------------------------------------------------------------
def plots(loaded: Loaded, dataset: str, out: Path, written: list) -> None:
    """Speedup over exact vs bandwidth (a row of panels per method group, a column per M) and
    validation accuracy vs emulated time at the lowest bandwidth and the largest M (mean over
    seeds), both in small multiples (render.panels)."""
    frame = sweep_frame(Loaded([r for r in loaded.records if r.dataset == dataset], [dataset],
                               loaded.labels))
    if frame.empty:
        return
    methods = {base_label(r.label): r.method for r in loaded.records}
    et = epoch_table(frame)
    ms = sorted(set(et.workers))
    groups = panels(list(dict.fromkeys(et.method)), methods)
    fig, axes = panel_grid(len(groups) * len(ms), width=6, height=4.5, cols=len(ms))
    for i, panel in enumerate(groups):
        for j, w in enumerate(ms):
            ax = axes[i * len(ms) + j]
            at = et[et.workers == w]
            shown = [m for m in panel.labels if m in set(at.method)]
            if not shown or set(shown) <= {m for g in groups[:i] for m in g.labels
                                           if m in set(at.method)}:
                ax.set_visible(False)
                continue
            for method in shown:
                part = at[at.method == method].sort_values("bit_s")
                ax.plot(part.bit_s / 1e6, part.speedup_vs_exact, label=method,
                        **style(method, panel.labels, methods))
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_xscale("log")
            ax.set_xlabel("link bandwidth each way (Mbit/s, emulated)")
            ax.set_ylabel("per-epoch speedup over exact (x)")
            ax.set_title(f"M={w} workers: {panel.title}", fontsize=10)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(f"{dataset}: per-epoch speedup over exact vs link bandwidth\n(emulated; the "
                 "workers share the host's cores)", fontsize=10)
    save(fig, out / f"{dataset_slug(dataset)}_speedup_vs_bandwidth.png", written)

    low = frame.sort_values("bit_s").bandwidth.iloc[0]
    w = max(ms)
    cs = curves(loaded, dataset, w, [x for x in loaded.labels if network_of(x) == low])
    named, of = seed_labels(loaded, dataset, w, list(cs))
    methods = {r.label: r.method for r in loaded.records}
    groups = panels(list(cs), methods)
    fig, axes = panel_grid(len(groups))
    for ax, panel in zip(axes, groups):
        for k, label in enumerate(panel.labels):
            c = cs[label]
            ax.plot(c["wall_time"], c["val_acc"], lw=1.4,
                    label=base_label(label) + named[label][len(label):],
                    markevery=markevery(len(c), k, len(panel.labels)),
                    **style(label, panel.labels, methods))
        ax.set_xlabel(f"training time (s, emulated @ {low})")
        ax.set_ylabel("validation accuracy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    titles(fig, axes, groups,
           f"{dataset}:\nvalidation accuracy vs emulated time @ {low}, M={w}, {of}")
    save(fig, out / f"{dataset_slug(dataset)}_val_vs_emulated_time.png", written)
