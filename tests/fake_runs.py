"""Experiment fixtures: complete run folders as the trainer and the runner leave them, and a small
suite over them, for the harness's tests (tables, pages, recompute, plots) without training."""
from __future__ import annotations

import json
from pathlib import Path


def write_run(root, label, workers, seed, epoch_times, vals, method=None, dataset="toy",
              bytes_w=1000, messages_w=4, tests=None, flags_hash="h", bandwidth=None):
    """A complete run directory as the trainer + runner would leave it."""
    import pandas as pd
    d = Path(root) / dataset / f"{label}_w{workers}_s{seed}"
    d.mkdir(parents=True)
    out, wall, cum = [], 0.0, 0
    for e, (t, v) in enumerate(zip(epoch_times, vals)):
        wall, cum = wall + t, cum + bytes_w * workers
        row = {"epoch": e, "epoch_time": t, "comm_time": t / 2, "bytes_halo_fwd": bytes_w * workers / 2,
               "bytes_halo_bwd": bytes_w * workers / 2, "bytes_store": 0, "bytes_params": 0,
               "bytes_total": bytes_w * workers, "messages": messages_w * workers,
               "val_acc": v, "test_acc": (tests or vals)[e], "wall_time": wall, "cum_bytes": cum}
        for r in range(workers):
            row.update({f"compute_time_w{r}": t / 2, f"cpu_time_w{r}": t / 2, f"bytes_w{r}": bytes_w,
                        f"messages_w{r}": messages_w})
        out.append(row)
    pd.DataFrame(out).to_csv(d / "metrics.csv", index=False)
    best = max(range(len(vals)), key=lambda i: (vals[i], -i))
    summary = {"status": "complete", "best_val": vals[best], "test_at_best_val": (tests or vals)[best],
               "config": {"method": method or label, "workers": workers, "seed": seed},
               "machine": {"host": "box", "cpu": "x86_64", "cores": 2, "ram_gib": 8.0, "gpu": "none",
                           "workers": workers, "cores_shared": f"{workers} workers on 2 cores",
                           "threads_per_worker": 1},
               "versions": {"torch": "9.9"}, "git_commit": "abc123",
               "command": f"python -m digest train --method {method or label} --workers {workers}"}
    if bandwidth:  # an --emulate-network run (digest/runtime/netem.py's record)
        summary["emulation"] = {"bandwidth": bandwidth[0], "bandwidth_bit_s": bandwidth[1],
                                "label": f"emulated @ {bandwidth[0]}", "mtu": 1500,
                                "qdisc": f"tbf rate {bandwidth[0]} burst 16384 latency 50ms"}
    (d / "summary.json").write_text(json.dumps(summary))
    (d / "run.json").write_text(json.dumps({"label": label, "dataset": dataset, "method": method or label,
                                            "workers": workers, "seed": seed, "hash": flags_hash}))
    return d


def fake_suite(tmp_path):
    """A suite YAML in ``tmp_path`` (exact at 2 seeds, DIGEST I = 10 at one) and its three complete
    runs under ``tmp_path/results/runs``. Returns (suite path, runs folder)."""
    import yaml

    from experiments.suites.suite import expand, load_suite
    path = tmp_path / "fake.yaml"
    path.write_text(yaml.safe_dump({
        "name": "fake", "datasets": ["toy"], "workers": [2], "seeds": [0], "epochs": 3,
        "model": {"hidden": 8}, "methods": [
            {"label": "exact", "method": "exact", "seeds_by_workers": {2: [0, 1]}},
            {"label": "digest-I10", "method": "digest", "flags": {"sync_interval": 10}}]}))
    runs = tmp_path / "results" / "runs"
    vals = {"exact": [0.5, 0.9, 1.0], "digest-I10": [0.5, 0.99, 0.95]}
    for run in expand(load_suite(str(path))):
        write_run(runs, run.label, run.workers, run.seed, [0.1, 0.1, 0.1], vals[run.label],
                  method=run.spec.method, dataset=run.dataset, flags_hash=run.hash)
    return path, runs


def recompute_args(path, tmp_path, *extra) -> list[str]:
    """``python -m experiments.recompute`` arguments for ``fake_suite``'s folders."""
    return ["--suite", str(path), "--runs", str(tmp_path / "results" / "runs"),
            "--results", str(tmp_path / "results"), "--plots", str(tmp_path / "plots"), *extra]
