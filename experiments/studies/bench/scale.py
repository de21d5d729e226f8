"""The scale run of ``python -m experiments.studies.bench --scale``: generate a graph of ogbn-products
size, partition it (METIS) into each worker count in a child process, then time a few epochs of
``python -m digest train`` per worker count (exact; DIGEST too at the most workers), skipping a
run whose memory need, scaled from a finished run's peaks by local rows, exceeds what is free."""
from __future__ import annotations

import datetime
import json
import multiprocessing as mp
import statistics
import time
from pathlib import Path

from digest.training import record

from experiments.running.launch import cli_run, root_flags

SCALE_SPEC = "synthetic:nodes=2400000,avg_degree=25,classes=47,features=100"


def _rss_gib() -> float:
    from digest.training.metrics import peak_memory_mb
    return peak_memory_mb() / 1024


def scale_prepare(spec: str, parts_list, root) -> dict:
    """In a child process (its memory is freed when it ends): generate, then partition into each
    number of parts (METIS), saving the per-worker part files. Times and edge cuts."""
    import torch

    from digest.data.cache import prepare_partition
    from digest.data import load_dataset
    from digest.training.metrics import available_cores
    torch.set_num_threads(available_cores())
    t0 = time.perf_counter()
    graph = load_dataset(spec, root)
    out = {"generate_s": time.perf_counter() - t0, "nodes": graph.num_nodes,
           "edges": graph.num_edges, "features": graph.num_features, "classes": graph.num_classes,
           "generate_peak_rss_gib": _rss_gib(), "partitions": {}}
    for parts in parts_list:
        t0, started = time.perf_counter(), time.time()
        d = prepare_partition(spec, parts, "metis", 0, root, graph=graph)
        total = time.perf_counter() - t0
        stats = json.loads((d / "manifest.json").read_text())["stats"]
        # a valid cache is reused, not rebuilt: its METIS time is then the one measured when it
        # was built (manifest.json's time), and ``total`` only the check of its files
        built = (d / "manifest.json").stat().st_mtime
        out["partitions"][parts] = {
            "partition_s": stats.get("seconds"), "partition_and_save_s": total,
            "cache_reused": built < started,
            "cache_built_utc": datetime.datetime.fromtimestamp(
                built, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "edge_cut": stats["edge_cut"], "edge_cut_fraction": stats["edge_cut_fraction"],
            "halo_sizes": stats["halo_sizes"], "inner_sizes": stats["inner_sizes"],
            "node_balance": stats["node_balance"], "dir": str(d)}
    out["peak_rss_gib"] = _rss_gib()
    return out


def _in_child(fn, *args):
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(fn, args)


def scale_run(args, work: Path) -> dict:
    spec = args.scale_spec
    if args.scale_generate_only:  # e.g. a preset's memory at full size
        print(f"scale: generating {spec} (only)", flush=True)
        prep = _in_child(scale_prepare, spec, [], args.data_root)
        print(f"  generated in {prep['generate_s']:.0f} s, peak resident memory "
              f"{prep['generate_peak_rss_gib']:.1f} GiB", flush=True)
        return {"spec": spec, "generate_only": True, **prep, "runs": {}}
    parts_list = sorted({8, *args.scale_workers})
    print(f"scale: generating {spec} and partitioning into {parts_list} (METIS)", flush=True)
    prep = _in_child(scale_prepare, spec, parts_list, args.data_root)
    print(f"  generated in {prep['generate_s']:.0f} s; partitions: " + ", ".join(
        f"{p}: {v['partition_s']:.0f} s{' (cached)' if v['cache_reused'] else ''}, cut "
        f"{v['edge_cut_fraction']:.1%}" for p, v in prep["partitions"].items()), flush=True)
    model = ["--layers", str(args.scale_layers), "--hidden", str(args.scale_hidden),
             *root_flags(args.data_root)]  # the runs read the caches prepared above
    runs, notes = {}, []
    rows = {int(p): [i + h for i, h in zip(v["inner_sizes"], v["halo_sizes"])]
            for p, v in prep["partitions"].items()}
    for workers in sorted(args.scale_workers, reverse=True):
        for method in ("exact", "digest") if workers == max(args.scale_workers) else ("exact",):
            name = f"{method}_w{workers}"
            avail = _available_gib()
            need = _memory_need(runs, rows, workers)
            print(f"  {name}: {args.scale_epochs} epochs ({avail:.1f} GiB available"
                  + (f", about {need:.1f} GiB needed)" if need else ")"), flush=True)
            if need and need > 0.9 * avail:
                runs[name] = {"error": f"skipped: about {need:.1f} GiB needed (from the measured "
                              f"{max(args.scale_workers)}-worker peaks scaled by rows per worker), "
                              f"{avail:.1f} GiB available"}
                print(f"    {runs[name]['error']}", flush=True)
                continue
            try:
                r = cli_run(work / name, spec, method, workers, args.scale_epochs, model)
            except RuntimeError as e:
                runs[name] = {"error": str(e)}
                print(f"    failed: {e}", flush=True)
                continue
            m = r["metrics"]
            runs[name] = {
                "method": method, "workers": workers,
                "epoch_times_s": [float(v) for v in m["epoch_time"]],
                "mean_epoch_s": float(m["epoch_time"].mean()),
                "peak_mem_mb_per_worker": [float(m[record.per_worker(record.PEAK_MEM_MB, w)].max())
                                           for w in range(workers)],
                "bytes_per_epoch": float(m["bytes_total"].mean()),
                "repr_bytes_per_epoch": float((m["bytes_halo_fwd"] + m["bytes_halo_bwd"]
                                               + m["bytes_store"]).mean()),
                "wall_s": r["wall_s"], "command": r["command"],
                "final_val_acc": r["summary"].get("final", {}).get("val_acc")}
            print(f"    epochs {[round(t, 1) for t in runs[name]['epoch_times_s']]} s, peak "
                  f"{max(runs[name]['peak_mem_mb_per_worker']) / 1024:.1f} GiB per worker", flush=True)
    return {"spec": spec, "model": f"GCN, {args.scale_layers} layers, hidden {args.scale_hidden}, "
            "dropout 0.5", **prep, "runs": runs, "rows_per_worker": rows}


def _available_gib() -> float:
    import psutil
    return psutil.virtual_memory().available / 2**30


_BASE_GIB = 0.5  # a worker process before its part is loaded (python, torch, torch_geometric)


def _memory_need(runs: dict, rows: dict, workers: int) -> float | None:
    """GiB a run with ``workers`` workers needs, scaled from a finished run's per-worker peaks by
    local rows (inner + halo) per worker; None before any run finished."""
    done = [r for r in runs.values() if "peak_mem_mb_per_worker" in r]
    if not done:
        return None
    r = done[0]
    per_row = (statistics.mean(r["peak_mem_mb_per_worker"]) / 1024 - _BASE_GIB) / \
        statistics.mean(rows[r["workers"]])
    return sum(_BASE_GIB + per_row * n for n in rows[workers])
