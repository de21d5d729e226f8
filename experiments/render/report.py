"""tables.md: a header describing where the numbers came from (read from the runs' summary.json,
never hard-coded), then the tables (experiments/analysis/tables.py builds them) rendered as
markdown, a section each; measured and modeled kept apart."""
from __future__ import annotations

import json

import pandas as pd

from ..analysis import timing
from ..analysis.costmodel import Network
from ..suites.load import Loaded
from ..suites.suite import base_label, exact_for
from . import contention, timing as timing_render
from .budget import section as budget_section
from .cluster import markdown as cluster_markdown
from .fit import section as fit_section
from .markdown import cell, md_table, times
from .method_state import section as state_section
from .pareto import section as pareto_section

APART_NOTE = ("† The method's runs and exact's ran at different commits, i.e. at different times "
              "under whatever load each had (RUNLOG.md says when): that speedup is not a paired "
              "comparison and may be off by the load difference alone.")

SHORT_RUNS = ("A speed suite: each run is short and evaluated once, at its last epoch, so this is "
              "the accuracy after that many epochs, not a trained model's; its suite's full-length "
              "runs give the accuracy.")
EVALUATED_ONCE = ("Every run of this suite was evaluated once, at its last epoch (a speed suite): "
                  "no curve, so no time to accuracy here.")


def _distinct(values) -> list:
    seen = {}
    for v in values:
        seen.setdefault(json.dumps(v, sort_keys=True, default=str), v)
    return list(seen.values())


def _targets(target) -> str:
    """'0.98' or '0.98, 0.99 and 0.995' from one fraction or several."""
    ts = [f"{t:g}" for t in ((target,) if isinstance(target, (int, float)) else target)]
    return ts[0] if len(ts) == 1 else ", ".join(ts[:-1]) + " and " + ts[-1]


def header(loaded: Loaded, net: Network | None, target, command: str) -> str:
    sums = [r.summary for r in loaded.records]
    lines = ["# Results", "", f"Command: `{command}`", ""]
    for m in _distinct({k: s.get("machine", {}).get(k) for k in ("host", "cpu", "cores", "ram_gib", "gpu")}
                       for s in sums):
        lines.append(f"Machine: {m['host']} ({m['cpu']}), {m['cores']} cores, {m['ram_gib']} GiB RAM, "
                     f"GPU: {m['gpu']}")
    shared = sorted(_distinct((s.get("machine", {}).get("workers"), s.get("machine", {}).get("cores_shared"),
                               s.get("machine", {}).get("threads_per_worker")) for s in sums),
                    key=lambda t: t[0] or 0)
    lines.append("Cores shared by workers: " + "; ".join(f"{c} ({t} thread(s) each)" for _, c, t in shared))
    lines += contention.contention(loaded)  # runs that recorded their pinning / CPU quota
    for v in _distinct(s.get("versions", {}) for s in sums):
        lines.append("Software: " + ", ".join(f"{k} {x}" for k, x in v.items()))
    lines.append("Git commit: " + ", ".join(sorted({str(s.get("git_commit")) for s in sums})))
    lines.append(f"Runs: {loaded.done} complete" + (f" of {loaded.expected}" if loaded.expected else "")
                 + (f"; missing: {', '.join(loaded.missing)}" if loaded.missing else ""))
    lines += [f"Skipped by the runner: {note}" for note in loaded.skipped]
    lines += ["", "Per-run commands (with config and results) are in runs.csv; one per method:", ""]
    for label in loaded.labels:
        r = max((r for r in loaded.records if r.label == label), key=lambda r: (r.workers, -r.seed))
        lines.append(f"- {label}: `{r.summary.get('command')}`")
    # said only where a label names a model (the models suite), so other suites' tables keep
    # their committed text
    models = any(base_label(exact_for(label)) != "exact" for label in loaded.labels)
    lines += ["", "Definitions (docs/methods.md section 7): times are measured training time "
              "(evaluation excluded), the slowest worker per epoch; speedup over exact = exact's "
              "time / the method's, same dataset and worker count M" + (
                  ", and same model: a label that starts with a model's name (sage-*, gat-*) is "
                  "compared with that model's exact run (sage-exact, gat-exact)" if models else "")
              + ". Time to accuracy: first epoch whose "
              f"validation accuracy >= {_targets(target)} x exact's best validation accuracy (mean "
              "over seeds, same dataset" + (", M and model" if models else " and M") + "); a "
              "method that does not reach it in every seed reads 'not reached'. It is only as "
              "fine as the evaluation: 'eval every' = the largest spacing in epochs between two "
              "evaluations of the runs (a target reached in between is reported at the next "
              "evaluation)."]
    if net:
        lines.append(f"Columns labelled \"{net.column}\" are MODELED, not measured: max over "
                     f"workers of that worker's CPU seconds in the step (cpu_time_w*: not its wall "
                     f"time minus its time in collectives, which would count waiting for a shared "
                     f"core as compute) + bytes / bandwidth + messages x latency; 'n/a' for runs "
                     f"that recorded no CPU seconds.")
    return "\n".join(lines) + "\n"


def _by_dataset(df: pd.DataFrame):
    for dataset, part in df.groupby("dataset", sort=False):
        yield dataset, part


def _apart(hit: pd.DataFrame) -> bool:
    return "measured_apart" in hit and bool(hit["measured_apart"].iloc[0])


def markdown(loaded: Loaded, tables: dict, net: Network | None, target, command: str) -> str:
    """tables.md: the header, then a section per table (docs/methods.md section 7)."""
    once = timing.evaluated_once(loaded)  # a speed suite: short runs, no curve
    out = [header(loaded, net, target, command), accuracy_section(loaded, tables["accuracy"], once),
           epoch_section(loaded, tables, net), tta_section(loaded, tables, net, target, once),
           bytes_section(tables["bytes"])]
    if "method_state" in tables:
        out.append(state_section(tables["method_state"]))
    if "straggler" in tables:
        out.append(straggler_section(tables["straggler"]))
    number = 6 if "straggler" in tables else 5
    if "pareto" in tables:
        out.append(pareto_section(tables["pareto"], number))
        number += 1
    if "fit" in tables:
        out.append(fit_section(tables["fit"], number))
        number += 1
    if "budget" in tables:
        out.append(budget_section(tables["budget"], number))
        number += 1
    if "cluster_epoch_time" in tables:
        out.append(cluster_markdown(tables, loaded, number))
    return "".join(out)


def accuracy_section(loaded: Loaded, acc: pd.DataFrame, once: bool) -> str:
    """Section 1: test accuracy at best validation, a row per (method, M), a column per dataset."""
    seeds = sorted(set(acc["seeds"]))
    out = [f"\n## 1. Accuracy: test accuracy (%) at best validation, mean ± std over "
           f"{'/'.join(map(str, seeds))} seed(s)\n"]
    if once:
        out.append(f"\n{SHORT_RUNS}\n\n")
    datasets = list(dict.fromkeys(acc["dataset"]))
    keys = list(dict.fromkeys(zip(acc["method"], acc["workers"])))
    keys.sort(key=lambda k: (loaded.labels.index(k[0]) if k[0] in loaded.labels else 99, k[1]))
    look = {(d, m, w): s for d, m, w, s in zip(acc.dataset, acc.method, acc.workers, acc.test_at_best_val)}
    counts = {}  # (method, M) -> its seed counts over the datasets (a suite may vary them by method)
    for m, w, n in zip(acc.method, acc.workers, acc.seeds):
        counts.setdefault((m, w), set()).add(int(n))
    out.append(md_table(["method", "M", "seeds", *datasets],
                        [[m, w, "/".join(map(str, sorted(counts[m, w]))),
                          *(look.get((d, m, w), "") for d in datasets)] for m, w in keys]))
    return "".join(out)


def epoch_section(loaded: Loaded, tables: dict, net: Network | None) -> str:
    """Section 2: per-epoch time and speedup over exact, measured (the timing protocol's paired
    tables where the suite ran it), then modeled."""
    out = ["\n## 2. Per-epoch time (ms) and per-epoch speedup over exact at the same M\n"]
    kind = time_kind(loaded)
    for prefix, title in [("", kind), *([(f"{net.column} ", net.column + " (not measured)")] if net else [])]:
        if not prefix and "timing" in tables:  # the timing protocol: paired over rounds
            out.append(timing_render.protocol_note(loaded, tables["timing"])
                       + timing_render.epoch_tables(tables["timing"], kind)
                       + timing_render.floor_table(tables["timing"])
                       + timing_render.seed_floor_table(tables.get("timing_floor_seeds"))
                       + timing_render.change_table(tables.get("timing_rule_change")))
        else:
            out.append(epoch_tables(tables["epoch_time"], prefix, title))
    return "".join(out)


def epoch_tables(et: pd.DataFrame, prefix: str, title: str) -> str:
    """Per dataset: a row per method, per M its ``prefix`` epoch ms and speedup (a † where the
    method and exact ran at different commits)."""
    out, apart = [], False
    for dataset, part in _by_dataset(et):
        ms = sorted(set(part.workers))
        rows = []
        for label in dict.fromkeys(part.method):
            row = [label]
            for w in ms:
                hit = part[(part.method == label) & (part.workers == w)]
                mark = " †" if not prefix and len(hit) and _apart(hit) else ""
                apart |= bool(mark)
                row += ([cell(hit[f"{prefix}epoch_ms"].iloc[0], ".1f"),
                         times(hit[f"{prefix}speedup_vs_exact"].iloc[0]) + mark]
                        if len(hit) else ["", ""])
            rows.append(row)
        out.append(f"\n### {dataset}: {title}\n\n")
        out.append(md_table(["method", *[h for w in ms for h in (f"M={w} ms", f"M={w} speedup")]], rows))
    if apart:
        out.append(f"\n{APART_NOTE}\n")
    return "".join(out)


def tta_section(loaded: Loaded, tables: dict, net: Network | None, target, once: bool) -> str:
    """Section 3: time to accuracy at each target and its speedup over exact, measured (the
    timing protocol's paired tables where the suite ran it), then modeled."""
    tta, kind = tables["time_to_accuracy"], time_kind(loaded)
    out = [f"\n## 3. Time to accuracy (targets {_targets(target)} x exact's best val) and "
           "speedup over exact\n"]
    if once:  # no curve to read a time to accuracy from
        out.append(f"\n{EVALUATED_ONCE}\n")
    elif tta.empty:
        out.append("\nNo exact run at the same dataset and M: no target, nothing to report.\n")
    if "timing_tta" in tables:  # the timing protocol: paired over rounds
        out.append(timing_render.tta_tables(tables["timing_tta"], kind))
    for dataset, part in ([] if once else _by_dataset(tta)):
        if "timing_tta" not in tables:
            out.append(f"\n### {dataset}: {kind}\n\n")
            out.append(md_table(["target", "method", "M", "target val", "seeds reached",
                                 "eval every", "epochs", "time s", "speedup", "MiB sent"],
                                [[f"{r.target:g}", r.method, r.workers, cell(r.target_val, ".4f"),
                                  r.seeds_reached, r.eval_every, cell(r.epochs, ".1f"),
                                  cell(r.time_s, ".2f"), times(r.speedup_vs_exact),
                                  cell(r.MiB, ".2f")] for r in part.itertuples()]))
        if net:
            out.append(f"\n### {dataset}: {net.column} (not measured)\n\n")
            out.append(md_table(["target", "method", "M", f"{net.column} time s",
                                 f"{net.column} speedup"],
                                [[f"{f:g}", m, w, cell(t, ".2f"), times(s)] for f, m, w, t, s in zip(
                                    part.target, part.method, part.workers,
                                    part[f"{net.column} time_s"],
                                    part[f"{net.column} speedup_vs_exact"])]))
    return "".join(out)


def bytes_section(b: pd.DataFrame) -> str:
    """Section 4: bytes sent per epoch by category."""
    cols = [c for c in b.columns if c.endswith("MiB")]
    out = ["\n## 4. Bytes sent per epoch by category (MiB, all workers, mean over epochs and seeds)\n"]
    for dataset, part in _by_dataset(b):
        out.append(f"\n### {dataset}\n\n")
        out.append(md_table(["method", "M", *cols],
                            [[r["method"], r["workers"], *(cell(r[c], ".3f") for c in cols)]
                             for _, r in part.iterrows()]))
    return "".join(out)


def time_kind(loaded: Loaded) -> str:
    """What the time columns of sections 2 and 3 are (docs/methods.md section 9: never mixed
    unlabelled)."""
    emulated = [bool(r.summary.get("emulation")) for r in loaded.records]
    if emulated and all(emulated):
        return "emulated @ the bandwidth after each label's @"
    return "measured (loopback), or emulated @ B for labels ending @B" if any(emulated) else "measured"


def straggler_section(st: pd.DataFrame) -> str:
    out = ["\n## 5. Stragglers: pace of the fast and the slow workers, accuracy, staleness\n\n",
           "A worker's epoch = one of its own steps. Synchronous methods: every worker takes every "
           "step (fast = slow = epochs / total training time; the slow worker's sleep is inside, "
           "everyone waits for it). Gradient share: each worker's fraction of the gradients "
           "applied (synchronous: 1/M each; DIGEST-A: its applied gradients / all M x epochs, so "
           "a straggler's share is below 1/M). "
           "DIGEST-A: steps/s per worker = gradients the server applied / "
           "that worker's training time, mean over the fast (not slowed) and the slowed workers; "
           "its epochs/s are server epochs (M gradients applied). fast vs sync = fast steps/s over "
           "the synchronous `digest` run's with the same stragglers. Staleness: parameter version "
           "lag (synchronous all-reduce: 0) and halo-row age in the owners' steps, mean / max.\n"]
    for dataset, part in _by_dataset(st):
        out.append(f"\n### {dataset}\n\n")
        out.append(md_table(
            ["method", "M", "slow workers", "steps by worker", "gradient share by worker",
             "fast steps/s", "slow steps/s",
             "fast vs sync", "epochs/s", "total time s", "test at best val", "final test",
             "param staleness mean / max", "repr staleness mean / max"],
            [[r.method, r.workers, r.slow_workers, r.steps_by_worker, r.grad_share_by_worker,
              cell(r.fast_steps_per_s, ".1f"),
              cell(r.slow_steps_per_s, ".1f"),
              times(r.fast_vs_sync), cell(r.epochs_per_s, ".1f"),
              cell(r.total_time_s, ".2f"), cell(r.test_at_best_val, ".4f"), cell(r.final_test, ".4f"),
              f"{cell(r.staleness_param_mean, '.2f')} / {cell(r.staleness_param_max, '.0f')}",
              f"{cell(r.staleness_repr_mean, '.2f')} / {cell(r.staleness_repr_max, '.0f')}"]
             for r in part.itertuples()]))
    return "".join(out)
