"""The emulated-cluster sweep rendered (its tables: experiments/analysis/cluster.py): tables.md's
section (emulated ms per epoch and speedup at each bandwidth, communication not hidden, the cost
model's error, time to accuracy) and the plots <dataset>_speedup_vs_bandwidth.png and
<dataset>_val_vs_emulated_time.png (lowest bandwidth)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..analysis.cluster import epoch_table, sweep_frame
from ..analysis.curves import curves
from ..analysis.timing import evaluated_once
from ..suites.load import Loaded
from ..suites.suite import base_label, dataset_slug, network_of
from .contention import has_quota
from .figures import markevery, panel_grid, panels, save, seed_labels, style, titles
from .markdown import cell, md_table, times


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
           "bandwidth. Modeled = experiments/analysis/costmodel.py at that bandwidth and zero latency: max "
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




def plots(loaded: Loaded, dataset: str, out: Path, written: list) -> None:
    """Speedup over exact vs bandwidth (a row of panels per method group, a column per M) and
    validation accuracy vs emulated time at the lowest bandwidth and the largest M (mean over
    seeds), both in small multiples (figures.panels)."""
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

