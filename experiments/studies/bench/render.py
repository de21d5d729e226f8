"""``results/performance/README.md`` from ``performance.json`` (its record: experiments/analysis/
performance.py; the scale sections: experiments/studies/bench/scale_render.py) (``python -m experiments.studies.bench``
writes both; ``--render-only`` rewrites the markdown alone): the ratio table, every ratio met or
not, the DIGEST-versus-exact detail, the history of earlier runs and the scale runs. Every sentence
states a measurement; an explanation appears only together with the measured number that shows it.
"""
from __future__ import annotations

from .analysis import (GOALS, machine_of, measured_from, repro_speed_verdict, sync_interval, traceable, utilisation)
from .scale_render import generation_section, scale_section

PART_LABELS = {"photo": "Photo, 1 worker", "physics": "Physics, 1 worker",
               "digest_vs_exact": "DIGEST vs exact"}
def _met(value, target) -> str:
    return "met" if value <= target else "NOT met"


def render(doc: dict) -> str:
    """The page from the whole performance.json: the ratios (the table, each graph's contestants,
    DIGEST versus exact, a sentence per ratio, earlier runs), then the scale runs."""
    L = ["# Performance", ""]
    r = doc.get("ratios")
    if r:
        L += _ratio_table(r) + _graphs(r) + _digest_table(r)
        L += [f"- {sentence}" for sentence in _sentences(r)] + [""]
        L += _history_table(r)
    if doc.get("scale"):
        L += scale_section(doc["scale"], "## Scale run: synthetic graph of ogbn-products size")
    for s in doc.get("scale_variants", {}).values():
        if s.get("generate_only"):
            L += generation_section(s, doc.get("scale"))
        else:
            L += scale_section(s, "## Scale run, the same size with community structure")
    return "\n".join(L)


def _ratio_table(r: dict) -> list[str]:
    """Which run measured what, the machine, and every ratio against its target, met or not."""
    T = {**GOALS, **(r.get("targets") or {})}
    m = r["machine"]["machine"]
    v = r["machine"]["versions"]
    L = _provenance(r) + [
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
        rows.append((f"DIGEST (I={sync_interval(dv)}) / exact, {dv['workers']} workers, Physics: representation bytes per epoch",
                     dv["bytes_ratio"], T["digest_bytes"]))
        rows.append((f"DIGEST (I={sync_interval(dv)}) / exact, {dv['workers']} workers, Physics: measured epoch time",
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
    return L + [""]


def _graphs(r: dict) -> list[str]:
    """Each graph's contestants: median epoch time and peak memory, features, every ratio."""
    L = []
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
    return L


def _digest_table(r: dict) -> list[str]:
    """DIGEST versus exact side by side: bytes, times, the cost model, CPU, memory, commands."""
    dv = r.get("digest_vs_exact")
    if not dv:
        return []
    d, e = dv["digest"], dv["exact"]
    when = (dv.get("run") or {}).get("date") or r["date"]
    return [f"**DIGEST vs exact, {dv['workers']} workers on {dv['dataset']}** "
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
               f"| core utilisation (CPU seconds / (cores x epoch time)) | {utilisation(e, r, dv):.0%} | {utilisation(d, r, dv):.0%} |"]
              if e.get("cpu_s_per_epoch") and d.get("cpu_s_per_epoch") else []),
            f"| peak memory per worker (GiB) | {e['peak_mem_mb_per_worker'] / 1024:.2f} | {d['peak_mem_mb_per_worker'] / 1024:.2f} |",
            "", f"Commands: `{e['command']}`; `{d['command']}`.", ""]


def _history_table(r: dict) -> list[str]:
    """Earlier runs of the bench, each with the parts it measured. A run whose code no commit
    holds (commit not recorded, or uncommitted changes) is left out of the report: its numbers
    stay in performance.json, but nobody can rerun that code."""
    history = [h for h in r.get("history") or [] if traceable(h.get("git_commit"))]
    dropped = len(r.get("history") or []) - len(history)
    L = []
    if history:
        L += ["Earlier runs of the bench on this machine (the tables above are the latest; "
              "the spread shows how much the other users' load moves these numbers; a run "
              "shows only the parts it measured):", "",
              "| date | git commit | load at start | Photo | Physics | Physics divides by | "
              "DIGEST bytes | DIGEST time | modeled | modeled (CPU s) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for h in history:
            ref = h.get("physics_reference")  # without "features" in it: a dense variant
            ref = (ref if ref and "features" in ref else f"{ref} (dense features)" if ref
                   else "the faster dense-features variant" if h.get("physics") is not None
                   else "")
            L.append(f"| {h['date']} | {(h.get('git_commit') or '-')[:7]} | {h['load_start']} | {_fmt(h['photo'])} | "
                     f"{_fmt(h['physics'])} | {ref} | {_fmt(h['digest_bytes'])} | "
                     f"{_fmt(h['digest_time'])} | {_fmt(h['digest_modeled'])} | "
                     f"{_fmt(h['digest_modeled_cpu'])} |")
        L.append("")
    if dropped:
        L += [f"{dropped} earlier run(s) are not shown: their code is in no commit (git commit "
              "not recorded, or a working tree with uncommitted changes); performance.json "
              "keeps their record.", ""]
    return L


def _sentences(r: dict) -> list[str]:
    """One plain sentence per measured ratio, met or not."""
    T = {**GOALS, **(r.get("targets") or {})}
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
        out.append(f"DIGEST with I = {sync_interval(dv)} moves {b:.3f}x the representation bytes "
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
            ue, ud = utilisation(e, r, dv), utilisation(d, r, dv)
            busy = min(ue, ud) >= 0.9
            out.append(f"CPU: the {dv['workers']} workers use the machine's "
                       f"{machine_of(r, dv)['cores']} cores at {ue:.0%} (exact) and "
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


def _digest_across_runs(r: dict, dv: dict) -> list[str]:
    """DIGEST/exact epoch time over every traceable run of the bench, and how that measurement
    differs from results/repro_speed's paired per-epoch speedups (not averaged with them)."""
    vals = [h["digest_time"] for h in r.get("history") or []
            if traceable(h.get("git_commit")) and h.get("digest_time") is not None]
    latest = measured_from(r, "digest_vs_exact")
    if latest:
        vals.append(dv["time_ratio"])
    out = []
    if len(vals) > 1:
        out.append(f"Across the {len(vals)} runs of the DIGEST-versus-exact part at committed code "
                   f"({'the latest run and ' if latest else ''}the history below), DIGEST's mean "
                   f"epoch took {min(vals):.2f}-{max(vals):.2f}x exact's on loopback.")
    e = dv["exact"]
    n, i = e["epochs_per_run"], sync_interval(dv)
    whole = i.isdigit() and (n - 1) % int(i) == 0
    verdict = repro_speed_verdict(dv["dataset"])
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
               "of this ratio) as the mean of the paired ratios with a bootstrap interval"
               + (f"; its {dv['dataset']} row reads \"{verdict}\"" if verdict else "") + " (results/repro_speed/README.md).")
    return out


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
        by.setdefault(_layout(n, x), []).append("ours" if n.startswith("ours") else f'"{n}"')
    return (f"Input features: {f['rows']:,} x {f['columns']:,}, {f['nonzeros']:,} nonzeros "
            f"({f['nonzeros'] / (f['rows'] * f['columns']):.2%}); "
            + "; ".join(f"held {lay} by {' and '.join(ns)}" for lay, ns in by.items()) + ".")


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


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"
