"""The performance page's scale sections (the --scale run of ``python -m experiments.studies.bench``): the graph,
its generation and partitions, each run's epoch times, memory and bytes, and what they show."""
from __future__ import annotations

import statistics

from .analysis import halo_share


def generation_section(s: dict, scale: dict | None) -> list[str]:
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


def scale_section(s: dict, title: str) -> list[str]:
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
    L += [f"- {sentence}" for sentence in scale_sentences(s)] + [""]
    return L


def _halo_sentence(rows: dict) -> str:
    """The halo's weight, with the number that shows it, when the local rows at the most parts
    exceed twice their 1/M share."""
    share = halo_share(rows)
    if share is None or share[1] <= 2:
        return ""
    m, x = share
    return (f" At {m} workers a worker holds {x:.2f}x its 1/{m} share of the graph's rows: the halo "
            "rows do not shrink as fast as the inner set.")


def scale_sentences(s: dict) -> list[str]:
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

