"""digest/training/metrics.py: peak memory is the measuring program's own."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from digest.training.metrics import peak_memory_mb

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_peak_memory_counts_this_program_not_the_parent_that_started_it():
    big = torch.ones(400 * 2**20 // 4)  # 400 MiB, written: resident
    mine = peak_memory_mb()
    assert mine >= 400
    # a worker is started by fork + exec from a launcher that may hold a whole dataset;
    # getrusage's ru_maxrss would report the launcher's resident memory in the worker
    code = "from digest.training.metrics import peak_memory_mb; print(peak_memory_mb())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert float(out.stdout) < mine - 300
    del big


def test_git_commit_is_dirty_for_code_changes_not_for_committed_results(tmp_path):
    """Rerunning a committed suite run rewrites its tracked summary.json: that must not mark the
    code as uncommitted; a change to a tracked source file must."""
    from digest.training.metrics import git_commit
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for f in ("digest/x.py", "results/repro/runs/a/summary.json", "plots/repro/p.png", "results/repro/tables.md"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("0\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], cwd=tmp_path, check=True)
    head = git_commit(tmp_path / "digest")
    assert len(head) == 40 and not head.endswith("-dirty")
    for f in ("results/repro/runs/a/summary.json", "plots/repro/p.png", "results/repro/tables.md"):
        (tmp_path / f).write_text("1\n")
    (tmp_path / "digest" / "new.py").write_text("untracked\n")
    assert git_commit(tmp_path / "digest") == head
    (tmp_path / "digest" / "x.py").write_text("1\n")
    assert git_commit(tmp_path / "digest") == head + "-dirty"
