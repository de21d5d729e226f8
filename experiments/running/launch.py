"""Runs of ``python -m digest train`` as a user starts them, from the repository: one run of a
suite with its output in ``<dir>/log.txt`` (``launch``), one quick run returning its summary and
metrics (``cli_run``, the bench's and the scale run's)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ..suites.suite import Run

REPO = Path(__file__).resolve().parents[2]


def launch(run: Run, directory: Path, python: str = sys.executable) -> int:
    with open(directory / "log.txt", "w") as log:
        return subprocess.run([python, *run.argv(directory)], cwd=REPO, stdout=log,
                              stderr=subprocess.STDOUT).returncode


def cli_run(out: Path, dataset: str, method: str, workers: int, epochs: int, extra=()) -> dict:
    """``python -m digest train`` as a user runs it; returns its summary and metrics rows."""
    import pandas as pd
    flags = ["--dataset", dataset, "--method", method, "--workers", str(workers), "--epochs",
             str(epochs), "--eval-every", str(10 * epochs), *extra, "--no-progress"]
    cmd = [sys.executable, "-m", "digest", "train", *flags, "--out", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[2:])} failed ({proc.returncode}): "
                           f"{(proc.stderr.strip().splitlines() or [''])[-1]}")
    summary = json.loads((out / "summary.json").read_text())
    return {"summary": summary, "metrics": pd.read_csv(out / "metrics.csv"),
            "wall_s": time.perf_counter() - t0,
            "command": "python -m digest train " + " ".join(flags)}


def root_flags(root) -> tuple:
    return ("--data-root", str(root)) if root else ()
