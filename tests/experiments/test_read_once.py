"""Each of the harness's commands loads its suite once and reads each run's metrics.csv once
(experiments/tables.py, plots.py, studies/reproduce), on the committed quick suite's runs."""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from experiments import plots, tables
from experiments.studies.reproduce import command as reproduce
from experiments.suites import suite as suite_mod

ROOT = Path(__file__).resolve().parents[2]
QUICK = ROOT / "results" / "quick" / "runs"


@pytest.fixture
def reads(monkeypatch):
    """Counts: metrics.csv path -> reads, and "suite" -> suites parsed."""
    counts, read_csv, load_suite = Counter(), pd.read_csv, suite_mod.load_suite

    def counted_csv(path, *args, **kw):
        if str(path).endswith("metrics.csv"):
            counts[str(path)] += 1
        return read_csv(path, *args, **kw)

    def counted_suite(*args, **kw):
        counts["suite"] += 1
        return load_suite(*args, **kw)
    monkeypatch.setattr(pd, "read_csv", counted_csv)
    for module in (tables, plots, reproduce):
        monkeypatch.setattr(module, "load_suite", counted_suite)
    return counts


@pytest.mark.slow  # the quick suite's tables and plots, from its committed runs
@pytest.mark.parametrize("command", ["tables", "plots"])
def test_a_suite_command_reads_each_run_once(command, reads, tmp_path):
    main = {"tables": tables.main, "plots": plots.main}[command]
    assert main(["--suite", "quick", "--runs", str(QUICK), "--out", str(tmp_path)]) == 0
    runs = {k: v for k, v in reads.items() if k != "suite"}
    assert reads["suite"] == 1 and len(runs) == 23 and set(runs.values()) == {1}


@pytest.mark.slow
def test_the_reproduction_report_reads_each_run_once(reads, tmp_path):
    mine = tmp_path / "runs"
    shutil.copytree(QUICK, mine)
    reproduce.main(["--suite", "quick", "--runs", str(mine), "--out", str(tmp_path / "out")])
    runs = {k: v for k, v in reads.items() if k != "suite"}
    assert reads["suite"] == 1 and len(runs) == 46 and set(runs.values()) == {1}
