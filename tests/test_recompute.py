"""experiments/recompute.py (issue 16 item 7): a suite's tables are recomputed from its committed
run files (summary.json, metrics.csv, run.json) and any difference with the committed tables is
one line and exit status 1. A tiny fake suite in tmp (three runs), no training."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import yaml

from experiments import recompute
from experiments.config import expand, load_suite
from test_experiments import write_run

ROOT = Path(__file__).resolve().parents[1]


def fake_suite(tmp_path):
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


def args(path, tmp_path, *extra):
    return ["--suite", str(path), "--runs", str(tmp_path / "results" / "runs"),
            "--results", str(tmp_path / "results"), "--plots", str(tmp_path / "plots"), *extra]


def test_recompute_reproduces_then_reports_each_difference(tmp_path, capsys):
    path, runs = fake_suite(tmp_path)
    assert recompute.main(args(path, tmp_path, "--write")) == 0
    results = tmp_path / "results"
    assert {"tables.md", "accuracy.csv", "time_to_accuracy.csv", "runs.csv"} <= {
        p.name for p in results.iterdir()}
    assert list((tmp_path / "plots").glob("toy_*.png"))
    assert "Command: `./run_all.sh --suite fake`" in (results / "tables.md").read_text()
    capsys.readouterr()
    assert recompute.main(args(path, tmp_path)) == 0  # nothing changed: reproduced exactly
    out = capsys.readouterr()
    assert out.out == "" and "reproduced exactly" in out.err

    # a committed run file changes (its epoch times), and a committed table is gone
    m = pd.read_csv(runs / "toy" / "digest-I10_w2_s0" / "metrics.csv")
    m["epoch_time"] = 0.2
    m.to_csv(runs / "toy" / "digest-I10_w2_s0" / "metrics.csv", index=False)
    (results / "bytes.csv").unlink()
    assert recompute.main(args(path, tmp_path)) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith(str(results)) for line in lines), lines
    assert [line for line in lines if "bytes.csv" in line] == [
        f"{results / 'bytes.csv'}: missing (the runs give it: 3 lines)"]  # header, exact, digest
    changed = {line.split(":")[0] for line in lines}
    assert changed == {str(results / n) for n in ("bytes.csv", "epoch_time.csv", "runs.csv",
                                                  "tables.md")}, lines
    digest = [line for line in lines if "epoch_time.csv:" in line and "digest" in line]
    assert digest and "100" in digest[0].split("!=")[0] and "200" in digest[0].split("!=")[1]


def test_run_all_check_runs_the_recompute(tmp_path):
    """./run_all.sh --check SUITE is this command (exit 1 when there is nothing to check)."""
    out = subprocess.run([str(ROOT / "run_all.sh"), "--check", str(tmp_path / "none.yaml")],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2 and "no suite" in out.stderr


def test_run_all_refuses_a_wrong_suite_or_seed_list_in_one_line(tmp_path):
    """A wrong suite or --seeds stops run_all.sh with the runner's one line: no tables, no plots."""
    for args, said in ((["--suite", str(tmp_path / "none.yaml")], "no suite"),
                       (["--suite", "arxiv", "--seeds", "9"], "runs seeds 0, 1, 2")):
        out = subprocess.run([str(ROOT / "run_all.sh"), *args], capture_output=True, text=True,
                             cwd=ROOT)
        assert out.returncode == 2 and said in out.stderr and "tables:" not in out.stdout
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
