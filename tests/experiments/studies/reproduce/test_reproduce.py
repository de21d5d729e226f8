"""experiments/studies/reproduce/command.py, the reproduction report (a user's runs against the committed ones),
and run_all.sh's user folder: on fake run folders (no training), a rerun identical to the committed
runs is "reproduced", one whose bytes or accuracy moved "differs" and says where, DIGEST-A's bytes
are not compared, and a partial run is compared for what ran; (slow) in a fresh repository whose
tiny suite's results are committed, ``./run_all.sh --suite tiny`` trains every run into runs/tiny/
(none skipped for being committed), leaves ``git status`` clean and writes the report."""
from __future__ import annotations

import json
import shutil
import subprocess

import pandas as pd
import pytest
import yaml

from experiments.studies.reproduce import command as reproduce
from fake_runs import fake_suite
from helpers import DATASET, ROOT, cli


def report(path, mine, tmp_path, capsys) -> tuple[int, str, str]:
    """(exit status, last line, reproduction.md) of the report on ``mine`` against fake_suite's."""
    out = tmp_path / "mine_tables"
    rc = reproduce.main(["--suite", str(path), "--runs", str(mine), "--out", str(out),
                         "--committed", str(tmp_path / "results")])
    printed = capsys.readouterr().out
    text = (out / "reproduction.md").read_text()
    assert printed == text
    return rc, text.strip().splitlines()[-1], text


@pytest.fixture
def committed_and_mine(tmp_path):
    path, runs = fake_suite(tmp_path)
    mine = tmp_path / "mine" / "runs"
    shutil.copytree(runs, mine)
    return path, mine


def test_a_rerun_identical_to_the_committed_runs_is_reproduced(committed_and_mine, tmp_path, capsys):
    rc, last, text = report(*committed_and_mine, tmp_path, capsys)
    assert rc == 0 and last.startswith("reproduction of suite fake: reproduced (2 of 2 points"), last
    assert "2 identical to the last digit" in last
    assert "| toy | exact | 2 | 2 | 100.00 | 100.00 | +0.00 | yes (±0.50) |" in text  # 2 seeds: floor
    assert "| toy | digest-I10 | 2 | 1 | 99.00 | 99.00 | +0.00 | yes (±1.50) |" in text


def test_bytes_that_differ_from_the_committed_ones_are_reported(committed_and_mine, tmp_path, capsys):
    path, mine = committed_and_mine
    m = mine / "toy" / "digest-I10_w2_s0" / "metrics.csv"
    df = pd.read_csv(m)
    df.loc[1, "bytes_total"] += 8
    df.to_csv(m, index=False)
    rc, last, text = report(path, mine, tmp_path, capsys)
    assert rc == 1 and last.startswith("reproduction of suite fake: differs at 1 of 2 points: "
                                       "toy digest-I10 M=2 (bytes: "), last
    assert "| DIFFER |" in text and "| differs: bytes |" in text


def test_an_accuracy_outside_the_spread_differs_and_digest_a_is_not_judged(
        committed_and_mine, tmp_path, capsys):
    path, mine = committed_and_mine
    for seed in (0, 1):  # exact: 2 points lower at both seeds (outside +- 0.5)
        s = mine / "toy" / f"exact_w2_s{seed}" / "summary.json"
        summary = json.loads(s.read_text())
        s.write_text(json.dumps({**summary, "test_at_best_val": summary["test_at_best_val"] - 0.02}))
    for root in (mine, tmp_path / "results" / "runs"):  # DIGEST-A: bytes follow timing
        s = root / "toy" / "digest-I10_w2_s0" / "summary.json"
        summary = json.loads(s.read_text())
        s.write_text(json.dumps({**summary, "config": {**summary["config"], "method": "digest-async"}}))
    m = mine / "toy" / "digest-I10_w2_s0" / "metrics.csv"
    pd.read_csv(m).assign(bytes_total=1).to_csv(m, index=False)
    rc, last, text = report(path, mine, tmp_path, capsys)
    assert rc == 1 and "differs at 1 of 1 points: toy exact M=2 (accuracy: Δ -2.00 points" in last
    assert last.endswith("; not judged (timing-dependent): toy digest-I10 M=2 (Δ +0.00 points)")
    assert "| not compared (timing-dependent) |" in text and "| not judged (timing-dependent) |" in text


def test_a_partial_run_is_compared_for_what_ran(committed_and_mine, tmp_path, capsys):
    path, mine = committed_and_mine
    shutil.rmtree(mine / "toy" / "exact_w2_s1")
    shutil.rmtree(mine / "toy" / "digest-I10_w2_s0")
    rc, last, text = report(path, mine, tmp_path, capsys)
    assert rc == 0 and "reproduced (1 of 1 points" in last, last
    assert "| toy | exact | 2 | 1 | 100.00 | 100.00 | +0.00 | yes (±0.50) |" in text
    assert "digest-I10" not in text


# -- run_all.sh from a fresh repository --------------------------------------------------------------
TINY = {"name": "tiny", "datasets": [DATASET], "workers": [2], "seeds": [0], "epochs": 2,
        "model": {"hidden": 8, "eval_every": 1},
        "methods": [{"label": "exact", "method": "exact"},
                    {"label": "digest-I1", "method": "digest", "flags": {"sync_interval": 1}}]}


def git(repo, *argv) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *argv], cwd=repo,
                          check=True, capture_output=True, text=True).stdout


@pytest.mark.slow
def test_run_all_trains_into_the_users_folder_and_compares_with_the_committed_runs(tmp_path):
    """A fresh repository (this checkout's code, .gitignore and a tiny suite, all committed) whose
    tiny suite's results were made with --into-results and committed: ./run_all.sh --suite tiny
    trains both runs anyway, into runs/tiny/, leaves git status clean and says reproduced; a second
    call resumes (its own complete runs skipped)."""
    repo = tmp_path / "repo"
    for name in ("digest", "baselines", "experiments", "scripts"):
        shutil.copytree(ROOT / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("run_all.sh", "requirements.txt", ".gitignore"):
        shutil.copy2(ROOT / name, repo / name)
    (repo / "experiments" / "configs" / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    git(repo, "init", "-q")
    (repo / ".venv").symlink_to(ROOT / ".venv")  # this checkout's packages, not part of the tree
    with open(repo / ".git" / "info" / "exclude", "a") as f:
        f.write(".venv\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "code")

    def run_all(*argv):
        done = cli(argv, tmp_path / "data", repo, program=[str(repo / "run_all.sh")], timeout=600)
        assert done.rc == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout

    out = run_all("--suite", "tiny", "--into-results")
    assert "suite tiny: 2 runs: 2 ran" in out and "reproduction" not in out
    git(repo, "add", "results", "plots")
    git(repo, "commit", "-qm", "the committed tiny suite")
    assert git(repo, "status", "--porcelain") == ""
    done = cli(["--suite", "tiny", "--out", "."], tmp_path / "data", repo,
               program=[str(repo / "run_all.sh")])  # a folder git would track: refused
    assert done.rc == 2 and "git would track what the run writes there (./tiny/)" in done.stderr

    out = run_all("--suite", "tiny")
    assert "suite tiny: 2 runs: 2 ran, 0 already complete (skipped), 0 failed" in out, out
    assert "-> runs/tiny/runs" in out and (repo / "runs/tiny/reproduction.md").exists()
    assert "reproduction of suite tiny: reproduced (2 of 2 points" in out, out
    assert (repo / "runs/tiny/tables.md").exists() and list((repo / "runs/tiny/plots").glob("*.png"))
    assert git(repo, "status", "--porcelain") == ""
    out = run_all("--suite", "tiny")
    assert "suite tiny: 2 runs: 0 ran, 2 already complete (skipped)" in out, out

    # the committed bytes of one run change: the report says differs, and where
    m = next((repo / "results/tiny/runs").glob("*/digest-I1_w2_s0/metrics.csv"))
    pd.read_csv(m).assign(bytes_total=lambda d: d.bytes_total + 1).to_csv(m, index=False)
    done = subprocess.run([str(repo / ".venv/bin/python"), "-m", "experiments.studies.reproduce.command", "--suite",
                           "tiny", "--runs", "runs/tiny/runs", "--out", "runs/tiny"], cwd=repo,
                          capture_output=True, text=True, env={"PYTHONPATH": str(repo)})
    assert done.returncode == 1, done.stderr
    assert f"differs at 1 of 2 points: {DATASET} digest-I1 M=2 (bytes" in done.stdout.splitlines()[-1]
