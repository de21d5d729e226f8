"""``results/performance.md`` rendered from ``performance.json`` (``python -m experiments.bench``
writes both; ``--render-only`` rewrites the markdown alone): the ratio table, every ratio met or
not, the DIGEST-versus-exact detail, the history of earlier runs and the scale runs. Every sentence
states a measurement; an explanation appears only together with the measured number that shows it.
"""
from __future__ import annotations

import csv
import re
import statistics
from pathlib import Path

TARGETS = {"photo": 1.10, "physics": 0.33, "digest_bytes": 0.10, "digest_time": 0.75}
PART_LABELS = {"photo": "Photo, 1 worker", "physics": "Physics, 1 worker",
               "digest_vs_exact": "DIGEST vs exact"}
REPRO_SPEED = Path(__file__).resolve().parent.parent / "results" / "repro_speed"


def _met(value, target) -> str:
    return "met" if value <= target else "NOT met"


def render(doc: dict) -> str:
    L = ["# Performance", ""]
    r = doc.get("ratios")
    if r:
        T = {**TARGETS, **(r.get("targets") or {})}
        m = r["machine"]["machine"]
        v = r["machine"]["versions"]
        L += _provenance(r) + [
              f"Machine: {m['cores']} cores ({m['cpu']}), {m['ram_gib']} GiB RAM, GPU {m['gpu']}; "
              + ", ".join(f"{k} {val}" for k, val in v.items()) + ".", "",
              "| ratio | measured | target | |", "| --- | --- | --- | --- |"]
        rows = []
        for key, label in (("photo", "Photo"), ("physics", "Physics")):
            if key in r:
                x = r[key]
                rows.append((f"exact, 1 worker / {_name(x['reference'], x)}, {label}"
                             + _ours_layout(x), x["ratio"], T[key]))
        dv = r.get("digest_vs_exact")
        if dv:
            rows.append((f"DIGEST (I={_sync_interval(dv)}) / exact, {dv['workers']} workers, Physics: representation bytes per epoch",
                         dv["bytes_ratio"], T["digest_bytes"]))
            rows.append((f"DIGEST (I={_sync_interval(dv)}) / exact, {dv['workers']} workers, Physics: measured epoch time",
                         dv["time_ratio"], T["digest_time"]))
        for name, val, target in rows:
            L.append(f"| {name} | {val:.3f} | <= {target:.2f} | {_met(val, target)} |")
        if dv:
            L.append(f"| DIGEST / exact, modeled epoch time @{dv['network']} (modeled) | "
                     f"{dv['modeled_ratio']:.3f} | (reported) | |")
            if dv.get("modeled_cpu_ratio"):
                L.append(f"| DIGEST / exact, modeled @{dv['network']}, compute = CPU seconds "
                         f"(modeled) | {dv['modeled_cpu_ratio']:.3f} | (reported) | |")
            if dv.get("cpu_ratio"):
                L.append(f"| DIGEST / exact, CPU seconds per epoch summed over the workers "
                         f"(measured) | {dv['cpu_ratio']:.3f} | (reported) | |")
        L.append("")
        for key, label in (("photo", "Photo"), ("physics", "Physics")):
            if key not in r:
                continue
            x = r[key]
            when = (x.get("run") or {}).get("date") or r["date"]
            L.append(f"**{label}** ({x['epochs']} epochs after {x['warmup']} warm-up, interleaved; "
                     f"run of {when}): "
                     + "; ".join(f"{_name(n, x)} {c['median_s'] * 1e3:.1f} ms/epoch (median), peak "
                                 f"{c['peak_mem_mb'] / 1024:.2f} GiB"
                                 for n, c in x["contestants"].items()) + ".")
            feats = _features_line(x)
            if feats:
                L.append(feats)
            L.append("Ratio against each plain variant: " + "; ".join(
                f"{_name(n, x)}: {v:.3f}" for n, v in x.get("ratios_by_reference", {}).items())
                + f" (the table uses the fastest, {_name(x.get('reference'), x)}).")
            L.append("")
        if dv:
            d, e = dv["digest"], dv["exact"]
            when = (dv.get("run") or {}).get("date") or r["date"]
            L += [f"**DIGEST vs exact, {dv['workers']} workers on {dv['dataset']}** "
                  f"({e['runs']} run(s) of {e['epochs_per_run']} epochs each, alternated; run of "
                  f"{when}):", "",
                  "| | exact | DIGEST |", "| --- | --- | --- |",
                  f"| representation bytes / epoch (MiB) | {e['repr_bytes_per_epoch'] / 2**20:.2f} | {d['repr_bytes_per_epoch'] / 2**20:.2f} |",
                  f"| parameter bytes / epoch (MiB) | {e['bytes_by_category_per_epoch']['params'] / 2**20:.2f} | {d['bytes_by_category_per_epoch']['params'] / 2**20:.2f} |",
                  f"| mean epoch time, epochs >= 1 (s) | {e['mean_epoch_s']:.3f} | {d['mean_epoch_s']:.3f} |",
                  f"| median epoch time (s) | {e['median_epoch_s']:.3f} | {d['median_epoch_s']:.3f} |",
                  f"| communication time / epoch (s) | {e['mean_comm_s']:.3f} | {d['mean_comm_s']:.3f} |",
                  f"| modeled epoch time @{dv['network']} (s, modeled) | {e['modeled_epoch_s']:.3f} | {d['modeled_epoch_s']:.3f} |",
                  *([f"| modeled, compute = CPU seconds (s, modeled) | {e['modeled_cpu_epoch_s']:.3f} | {d['modeled_cpu_epoch_s']:.3f} |"]
                    if e.get("modeled_cpu_epoch_s") and d.get("modeled_cpu_epoch_s") else []),
                  *([f"| CPU seconds / epoch, all workers (s) | {e['cpu_s_per_epoch']:.3f} | {d['cpu_s_per_epoch']:.3f} |",
                     f"| core utilisation (CPU seconds / (cores x epoch time)) | {_util(e, r, dv):.0%} | {_util(d, r, dv):.0%} |"]
                    if e.get("cpu_s_per_epoch") and d.get("cpu_s_per_epoch") else []),
                  f"| peak memory per worker (GiB) | {e['peak_mem_mb_per_worker'] / 1024:.2f} | {d['peak_mem_mb_per_worker'] / 1024:.2f} |",
                  "", f"Commands: `{e['command']}`; `{d['command']}`.", ""]
        L += [f"- {sentence}" for sentence in _sentences(r)] + [""]
        # a run whose code no commit holds (commit not recorded, or uncommitted changes) is left
        # out of the report: its numbers stay in performance.json, but nobody can rerun that code
        history = [h for h in r.get("history") or [] if _traceable(h.get("git_commit"))]
        dropped = len(r.get("history") or []) - len(history)
        if history:
            L += ["Earlier runs of the bench on this machine (the tables above are the latest; "
                  "the spread shows how much the other users' load moves these numbers; a run "
                  "shows only the parts it measured):", "",
                  "| date | git commit | load at start | Photo | Physics | Physics divides by | "
                  "DIGEST bytes | DIGEST time | modeled | modeled (CPU s) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
            for h in history:
                ref = h.get("physics_reference") or (
                    "the faster dense-features variant" if h.get("physics") is not None else "")
                L.append(f"| {h['date']} | {(h.get('git_commit') or '-')[:7]} | {h['load_start']} | {_fmt(h['photo'])} | "
                         f"{_fmt(h['physics'])} | {ref} | {_fmt(h['digest_bytes'])} | "
                         f"{_fmt(h['digest_time'])} | {_fmt(h['digest_modeled'])} | "
                         f"{_fmt(h['digest_modeled_cpu'])} |")
            L.append("")
        if dropped:
            L += [f"{dropped} earlier run(s) are not shown: their code is in no commit (git commit "
                  "not recorded, or a working tree with uncommitted changes); performance.json "
                  "keeps their record.", ""]
    if doc.get("scale"):
        L += _render_scale(doc["scale"], "## Scale run: synthetic graph of ogbn-products size")
    for s in doc.get("scale_variants", {}).values():
        if s.get("generate_only"):
            L += _render_generation(s, doc.get("scale"))
        else:
            L += _render_scale(s, "## Scale run, the same size with community structure")
    return "\n".join(L)


def _traceable(commit: str | None) -> bool:
    """A git commit that holds the code that ran: recorded, and no uncommitted changes."""
    return bool(commit) and not str(commit).endswith("-dirty")


def _render_generation(s: dict, scale: dict | None) -> list[str]:
    """A spec only generated (``--scale-generate-only``), beside the scale run's memory."""
    L = [f"## Generation only: `{s['spec']}`", "",
         f"{s['nodes']:,} nodes, {s['edges']:,} directed edges, {s['features']} features, "
         f"{s['classes']} classes; generated on {s['date']} with `{s['command']}`"
         + (f" at git commit {s['git_commit'][:7]}" if s.get("git_commit") else "") + ".", "",
         f"- generation: {s['generate_s']:.0f} s, peak resident memory of the generating process "
         f"{s['generate_peak_rss_gib']:.1f} GiB"]
    runs = [r for r in (scale or {}).get("runs", {}).values() if "peak_mem_mb_per_worker" in r]
    if runs:  # what the scale run above already needed, measured
        top = max(runs, key=lambda r: sum(r["peak_mem_mb_per_worker"]))
        L.append(f"- the scale run above: generation peak {scale['generate_peak_rss_gib']:.1f} "
                 f"GiB; its largest run, {top['method']} with {top['workers']} workers, peaked "
                 f"at {sum(top['peak_mem_mb_per_worker']) / 1024:.1f} GiB for its workers together")
    return L + [""]


def _render_scale(s: dict, title: str) -> list[str]:
    L = [title, "",
          f"`{s['spec']}` ({s['nodes']:,} nodes, {s['edges']:,} directed edges, "
          f"{s['features']} features, {s['classes']} classes), run on {s['date']} with "
          f"`{s['command']}`" + (f" at git commit {s['git_commit'][:7]}" if s.get("git_commit")
                                 else "") + f". Model: {s['model']}. Workers ran with "
          f"DIGEST_MALLOC_TUNE={s.get('malloc_tune', '1')} (0: glibc's default allocator "
          "settings, the least memory; see digest/runtime/perf.py).", "",
          f"- generation: {s['generate_s']:.0f} s (peak resident memory of the generating "
          f"process {s['generate_peak_rss_gib']:.1f} GiB)"]
    for p, v in sorted(s["partitions"].items(), key=lambda kv: int(kv[0])):
        cut = (f"edge cut {v['edge_cut']:,} undirected edges ({v['edge_cut_fraction']:.1%} of "
               f"edges); node balance {v['node_balance']:.3f}")
        if v.get("cache_reused"):  # records older than this field were all built by their run
            reused = f"this run reused the cache (checked in {v['partition_and_save_s']:.0f} s)"
            L.append(f"- 1 part (no partitioning): cache built {v['cache_built_utc']}; {reused}"
                     if int(p) == 1 else
                     f"- METIS into {p} parts: {v['partition_s']:.0f} s, measured when its cache "
                     f"was built ({v['cache_built_utc']}); {reused}; {cut}")
        elif int(p) == 1:
            L.append(f"- 1 part (no partitioning): writing the part file "
                     f"{v['partition_and_save_s']:.0f} s")
        else:
            L.append(f"- METIS into {p} parts: {v['partition_s']:.0f} s (with the partition book; "
                     f"{v['partition_and_save_s']:.0f} s with writing the part files); {cut}")
    L += ["", "| run | epoch times (s) | peak memory per worker (GiB) | bytes / epoch (MiB) |",
          "| --- | --- | --- | --- |"]
    for name, run in s["runs"].items():
        if "error" in run:
            L.append(f"| {name} | failed: {run['error']} | | |")
            continue
        L.append(f"| {name} | {', '.join(f'{t:.1f}' for t in run['epoch_times_s'])} | "
                 f"{', '.join(f'{m / 1024:.2f}' for m in run['peak_mem_mb_per_worker'])} | "
                 f"{run['bytes_per_epoch'] / 2**20:.0f} |")
    L.append("")
    L += [f"- {sentence}" for sentence in _scale_sentences(s)] + [""]
    return L


def _halo_share(rows: dict) -> tuple[int, float] | None:
    """(M, mean local rows at the most parts M / the 1/M share of the single part's rows), or
    None without a 1-part and a multi-part record."""
    if 1 not in rows or len(rows) < 2:
        return None
    m = max(rows)
    return m, statistics.mean(rows[m]) / (statistics.mean(rows[1]) / m)


def _halo_sentence(rows: dict) -> str:
    """The halo's weight, with the number that shows it, when the local rows at the most parts
    exceed twice their 1/M share."""
    share = _halo_share(rows)
    if share is None or share[1] <= 2:
        return ""
    m, x = share
    return (f" At {m} workers a worker holds {x:.2f}x its 1/{m} share of the graph's rows: the halo "
            "rows do not shrink as fast as the inner set.")


def _scale_sentences(s: dict) -> list[str]:
    out = []
    runs = {k: v for k, v in s["runs"].items() if "peak_mem_mb_per_worker" in v}
    rows = {int(k): v for k, v in s.get("rows_per_worker", {}).items()}
    exact = {v["workers"]: v for k, v in runs.items() if v["method"] == "exact"}
    if rows:
        out.append("Local rows per worker (inner + halo): " + "; ".join(
            f"{m} worker(s): {statistics.mean(rows[m]):,.0f}" for m in sorted(rows) if m in exact
            or m == 8) + "." + _halo_sentence(rows))
    if 1 in exact and len(exact) > 1:
        one = statistics.mean(exact[1]["peak_mem_mb_per_worker"])
        out.append("Peak memory per worker relative to 1 worker: " + "; ".join(
            f"{m} workers: {statistics.mean(v['peak_mem_mb_per_worker']) / one:.2f} "
            f"(1/M = {1 / m:.2f})" for m, v in sorted(exact.items()) if m > 1) + ".")
    cores, ram = s["machine"]["machine"]["cores"], s["machine"]["machine"]["ram_gib"]
    if "exact_w4" in runs and "digest_w4" in runs:
        e, d = runs["exact_w4"], runs["digest_w4"]
        later = statistics.mean(d["epoch_times_s"][1:]) / statistics.mean(e["epoch_times_s"][1:]) \
            if len(e["epoch_times_s"]) > 1 else float("nan")
        nbytes = d["repr_bytes_per_epoch"] / max(1, e["repr_bytes_per_epoch"])
        out.append(f"With 4 workers, DIGEST's mean epoch is {d['mean_epoch_s'] / e['mean_epoch_s']:.2f}x "
                   f"exact's over all {len(e['epoch_times_s'])} epochs (DIGEST's first includes the "
                   f"exact store fill) and {later:.2f}x over the later ones; it moves {nbytes:.2f}x "
                   f"the representation bytes per epoch (mean over the {len(d['epoch_times_s'])} "
                   "epochs, fill included)." + (
                       f" The time saved ({1 - later:.0%}) is much smaller than the bytes saved "
                       f"({1 - nbytes:.0%})." if 1 - later < (1 - nbytes) / 2 else ""))
        tot = {k: sum(v["peak_mem_mb_per_worker"]) / 1024 for k, v in runs.items() if k.endswith("_w4")}
        out.append("Total peak memory of the 4 workers: " + "; ".join(
            f"{k}: {v:.1f} GiB" for k, v in tot.items())
            + f" ({'within' if max(tot.values()) <= ram else 'MORE than'} the machine's {ram} GiB).")
    mean = {m: statistics.mean(v["epoch_times_s"]) for m, v in exact.items()}
    if 1 in mean and len(mean) > 1 and all(mean[1] < t for m, t in mean.items() if m != 1):
        out.append(f"With {cores} cores, 1 worker's epoch is the fastest (mean " + "; ".join(
            f"{m} worker(s): {t:.1f} s" for m, t in sorted(mean.items())) + "): this run shows "
            "memory per worker and that the run completes, not a speed-up.")
    failed = [k for k, v in s["runs"].items() if "error" in v]
    if failed:
        out.append("Not completed: " + "; ".join(f"{k} ({s['runs'][k]['error']})" for k in failed) + ".")
    return out


def _sentences(r: dict) -> list[str]:
    """One plain sentence per measured ratio, met or not."""
    T = {**TARGETS, **(r.get("targets") or {})}
    out = []
    if "photo" in r:
        px = r["photo"]
        x, allow = px["ratio"], T["photo"] - 1
        out.append(f"Photo{_ours_layout(px)}: our exact trainer with 1 worker needs {x:.2f}x the "
                   f"epoch time of the fastest plain PyG variant ({_name(px['reference'], px)}), " + (
                       f"at most the plain model's time: target (<= {T['photo']:.2f}) met"
                       if x <= 1.0 else
                       f"within the {allow:.0%} allowance for framework overhead: target "
                       f"(<= {T['photo']:.2f}) met" if x <= T["photo"] else
                       f"more than the {allow:.0%} allowed for framework overhead: target "
                       f"(<= {T['photo']:.2f}) NOT met") + ".")
    if "physics" in r:
        out.append(_physics_sentence(r["physics"], T["physics"]))
    dv = r.get("digest_vs_exact")
    if dv:
        b, t, m = dv["bytes_ratio"], dv["time_ratio"], dv["modeled_ratio"]
        out.append(f"DIGEST with I = {_sync_interval(dv)} moves {b:.3f}x the representation bytes "
                   "of exact per epoch" + _bytes_detail(dv) + f": target <= {T['digest_bytes']:.2f} "
                   + ("met." if b <= T["digest_bytes"] else "NOT met."))
        out.append(f"Measured on this machine ({dv['workers']} worker processes sharing its cores, "
                   f"loopback gloo), DIGEST's mean epoch takes {t:.2f}x exact's (median "
                   f"{dv['time_ratio_median']:.2f}x): target <= {T['digest_time']:.2f} "
                   + ("met" if t <= T["digest_time"] else "NOT met")
                   + f". At {dv['network']} the cost model gives {m:.2f}x (modeled, not measured)"
                   + (f", or {dv['modeled_cpu_ratio']:.2f}x with each worker's CPU seconds as its "
                      "compute time" if dv.get("modeled_cpu_ratio") else "") + ".")
        if dv.get("cpu_ratio"):
            d, e = dv["digest"], dv["exact"]
            ue, ud = _util(e, r, dv), _util(d, r, dv)
            busy = min(ue, ud) >= 0.9
            out.append(f"CPU: the {dv['workers']} workers use the machine's "
                       f"{_machine(r, dv)['cores']} cores at {ue:.0%} (exact) and "
                       f"{ud:.0%} (DIGEST) of their capacity over an epoch"
                       + (" (busy nearly all epoch, so the summed CPU work of the workers sets "
                          "the epoch time)" if busy else "")
                       + f". DIGEST's summed CPU seconds per epoch are {dv['cpu_ratio']:.2f}x "
                       f"exact's (the CPU work it saves is {1 - dv['cpu_ratio']:.0%} of exact's CPU "
                       f"work), against a measured epoch-time ratio of {t:.2f}x.")
        out += _digest_across_runs(r, dv)
    return out


def _physics_sentence(px: dict, target: float) -> str:
    """Physics against its reference (the sparse-features variant when measured), the target,
    and the ratios against the dense-features variants beside it."""
    x, ref = px["ratio"], px["reference"]
    f = _features(px)
    cols = (f" ({f['columns']:,} input columns, {f['nonzeros'] / (f['rows'] * f['columns']):.2%} "
            "of the entries nonzero)" if f else "")
    speed = f"{1 / x:.1f}x faster" if x < 1 else f"{x:.1f}x slower"
    if _layout(ref, px) == "sparse":
        against = (f"against plain PyG fed the same sparse features ({ref}: a torch sparse CSR "
                   "input, GCNConv's own linear transform a sparse-dense product, sparse "
                   "adjacency), the fair reference")
    else:
        against = f"against the fastest plain PyG variant, fed dense features ({_name(ref, px)})"
    dense = {n: v for n, v in px.get("ratios_by_reference", {}).items()
             if n != ref and _layout(n, px) == "dense"}
    return (f"Physics{cols}: our exact trainer with 1 worker keeps the inputs sparse (CSR, first "
            f"layer a sparse-dense product); {against}, our epoch takes {x:.2f}x its epoch "
            f"({speed}); the target (<= {target:.2f}, i.e. >= {1 / target:.0f}x faster) is "
            + ("met" if x <= target else "NOT met")
            + (". Against the plain variants fed dense features it takes " + " and ".join(
                f"{v:.3f}x ({n})" for n, v in dense.items()) if dense and _layout(ref, px) == "sparse"
               else "") + ".")


def _sync_interval(dv: dict) -> str:
    """DIGEST's sync interval, read from its recorded command."""
    found = re.search(r"--sync-interval (\d+)", dv["digest"].get("command", ""))
    return found.group(1) if found else "?"


def _digest_across_runs(r: dict, dv: dict) -> list[str]:
    """DIGEST/exact epoch time over every traceable run of the bench, and how that measurement
    differs from results/repro_speed's paired per-epoch speedups (not averaged with them)."""
    vals = [h["digest_time"] for h in r.get("history") or []
            if _traceable(h.get("git_commit")) and h.get("digest_time") is not None]
    if measured_from(r, "digest_vs_exact"):
        vals.append(dv["time_ratio"])
    out = []
    if len(vals) > 1:
        out.append(f"Across the {len(vals)} runs of the DIGEST-versus-exact part at committed code (the latest and "
                   f"the history below), DIGEST's mean epoch took {min(vals):.2f}-{max(vals):.2f}x "
                   "exact's on loopback.")
    e = dv["exact"]
    n, i = e["epochs_per_run"], _sync_interval(dv)
    whole = i.isdigit() and (n - 1) % int(i) == 0
    verdict = _repro_speed_verdict(dv["dataset"])
    out.append(f"This ratio and results/repro_speed's per-epoch speedup of DIGEST (I = {i}) on "
               f"{dv['dataset']} are two different measurements, not to be averaged: here each of "
               f"{e['runs']} runs per method times {n} epochs, its time is the mean of epochs 1 to "
               f"{n - 1} ({'a whole' if whole else 'not a whole'} number of {i}-epoch sync "
               "periods), exact's and DIGEST's runs alternate, and the ratio divides DIGEST's "
               "mean epoch pooled over its runs by exact's, unpaired and without an interval or "
               "a noise floor; repro_speed times short runs in interleaved rounds beside an A/A "
               "twin (exact timed against itself), takes each run's time as a mean over whole "
               "sync periods after warm-up, pairs each DIGEST run with exact's run of the same "
               "seed and round, and reports exact's time over DIGEST's (a speedup, the inverse "
               "of this ratio) as the median of the paired ratios with a bootstrap interval"
               + (f"; its {dv['dataset']} row reads \"{verdict}\"" if verdict else "") + " (results/repro_speed/README.md).")
    return out


def _repro_speed_verdict(dataset: str) -> str | None:
    """results/repro_speed/timing.csv's verdict for DIGEST (I = 10) on ``dataset``, if there."""
    try:
        with open(REPRO_SPEED / "timing.csv", newline="") as fh:
            for row in csv.DictReader(fh):
                if row["dataset"] == dataset and row["method"] == "digest-I10":
                    return row["verdict"]
    except (OSError, KeyError):
        return None
    return None


def measured_from(r: dict, key: str) -> bool:
    """Whether run ``r`` itself measured part ``key`` (not kept it from an earlier run)."""
    run = (r.get(key) or {}).get("run")
    return bool(r.get(key)) and (run is None or run.get("date") == r.get("date"))


def _provenance(r: dict) -> list[str]:
    """Which run measured which part: one line when one run measured them all."""
    runs: dict = {}
    for key in PART_LABELS:
        if r.get(key):
            run = r[key].get("run") or r
            runs.setdefault(run["date"], (run, []))[1].append(key)
    shared = ("Other users shared this machine: within each part the sides ran interleaved (one "
              "epoch each in turn with the first rotating, or DIGEST's and exact's multi-worker "
              "runs alternated), so the load hits every side; the ratios come from interleaved epochs "
              "on a shared, loaded machine, not from an idle one.")

    def commit(run):
        return f" at git commit {run['git_commit'][:7]}" if run.get("git_commit") else ""
    if len(runs) <= 1:
        return [f"Ratios measured side by side in one run on {r['date']} with `{r['command']}`"
                + commit(r) + ".",
                f"Load average at start / end: {r['load_start']} / {r['load_end']}. " + shared]
    L = [f"The ratios come from {len(runs)} runs of the bench, each part from the latest run "
         "that measured it:", ""]
    for date, (run, keys) in sorted(runs.items(), reverse=True):
        L.append(f"- {'; '.join(PART_LABELS[k] for k in keys)}: run on {date} with "
                 f"`{run['command']}`{commit(run)}; load average at start / end "
                 f"{run['load_start']} / {run['load_end']}.")
    return L + ["", shared]


def _ours(x: dict) -> dict:
    """Our contestant's record in a graph's results."""
    return next((c for n, c in x["contestants"].items() if n.startswith("ours")), {})


def _layout(name: str | None, x: dict) -> str:
    """A contestant's input-feature layout: as recorded, else by its name (records older than
    the layout field had only dense-feature plain variants)."""
    c = x["contestants"].get(name) or {}
    lay = (c.get("features") or {}).get("layout")
    if lay:
        return lay
    return "sparse" if name and "sparse features" in name else "dense"


def _name(name: str | None, x: dict) -> str:
    """A contestant's name, with "(dense features)" for a dense-feature plain variant."""
    if not name or name.startswith("ours") or "features" in name:
        return str(name)
    return f"{name} (dense features)" if _layout(name, x) == "dense" else name


def _ours_layout(x: dict) -> str:
    """`` (sparse features on both sides)`` and the like, when our layout was recorded."""
    ours = (_ours(x).get("features") or {}).get("layout")
    if not ours:
        return ""
    ref = _layout(x.get("reference"), x)
    return (f" ({ours} features on both sides)" if ref == ours
            else f" (ours {ours} features, the reference {ref})")


def _features(x: dict) -> dict | None:
    """The input features' size as the contestants recorded it (rows, columns, nonzeros)."""
    return next((c["features"] for c in x["contestants"].values()
                 if (c.get("features") or {}).get("rows")), None)


def _features_line(x: dict) -> str:
    f = _features(x)
    if not f:
        return ""
    by = {}
    for n, c in x["contestants"].items():
        by.setdefault(_layout(n, x), []).append("ours" if n.startswith("ours") else n)
    return (f"Input features: {f['rows']:,} x {f['columns']:,}, {f['nonzeros']:,} nonzeros "
            f"({f['nonzeros'] / (f['rows'] * f['columns']):.2%}); "
            + "; ".join(f"held {lay} by {', '.join(ns)}" for lay, ns in by.items()) + ".")


def _machine(r: dict, part: dict | None = None) -> dict:
    """The machine of the run that measured ``part`` (the latest run's without a record)."""
    run = (part or {}).get("run") or {}
    return (run.get("machine") or r["machine"])["machine"]


def _bytes_detail(dv: dict) -> str:
    """`` (exact: A MiB halo forward + B MiB halo backward; DIGEST: ...)`` per epoch, from the
    measured bytes by category; empty when a run recorded none of them."""
    def side(x):
        c = x.get("bytes_by_category_per_epoch", {})
        parts = [f"{c[k] / 2**20:.2f} MiB {label}" for k, label in
                 (("halo_fwd", "halo forward"), ("halo_bwd", "halo backward"),
                  ("store", "store sync")) if c.get(k)]
        return " + ".join(parts) if parts else None
    e, d = side(dv["exact"]), side(dv["digest"])
    if e is None or d is None:
        return ""
    return (f" (measured per epoch: exact {e}; DIGEST {d}, its start-up fill and every 10th "
            "step's sync included)")


def _util(side: dict, r: dict, part: dict | None = None) -> float:
    """CPU seconds per epoch over (cores x mean epoch time): 1.0 = every core busy all epoch."""
    return side["cpu_s_per_epoch"] / (_machine(r, part)["cores"] * side["mean_epoch_s"])


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"
