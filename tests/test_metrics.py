"""digest/metrics.py: peak memory is the measuring program's own."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from digest.metrics import peak_memory_mb

REPO = Path(__file__).resolve().parents[1]


def test_peak_memory_counts_this_program_not_the_parent_that_started_it():
    big = torch.ones(400 * 2**20 // 4)  # 400 MiB, written: resident
    mine = peak_memory_mb()
    assert mine >= 400
    # a worker is started by fork + exec from a launcher that may hold a whole dataset;
    # getrusage's ru_maxrss would report the launcher's resident memory in the worker
    code = "from digest.metrics import peak_memory_mb; print(peak_memory_mb())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert float(out.stdout) < mine - 300
    del big
