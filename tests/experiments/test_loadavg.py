"""experiments/running/loadavg.py: the runner samples the load beside a suite; each run's load
from those samples (``python -m experiments.runner --loads``)."""
from __future__ import annotations

import json
import time
from datetime import datetime

from experiments.runner import main
from experiments.running.loadavg import per_run, samples, sampling


def test_mean_and_max_of_the_samples_inside_each_run(tmp_path, capsys):
    start = datetime(2026, 12, 1, 3, 0, 0)
    t0 = int(start.timestamp())
    for label, offset, seconds in [("exact", 0, 60), ("digest", 100, 30), ("late", 1000, 10)]:
        d = tmp_path / "runs" / "CS" / f"{label}_w4_s0"
        d.mkdir(parents=True)
        started = datetime.fromtimestamp(t0 + offset).isoformat(timespec="seconds")
        (d / "run.json").write_text(json.dumps({"dataset": "CS", "label": label, "workers": 4,
                                                "seed": 0, "started": started,
                                                "seconds": seconds}))
    # samples every 20 s: 4.0, 6.0, 8.0, 10.0 at t0 .. t0+60, then 5.0, 7.0 at t0+100, t0+120
    lines = [(t0 + 20 * i, 4.0 + 2 * i) for i in range(4)] + [(t0 + 100, 5.0), (t0 + 120, 7.0)]
    path = tmp_path / "load.csv"
    path.write_text("".join(f"{t},{v},1,1\n" for t, v in lines))
    table = per_run(tmp_path / "runs", samples(path)).set_index("label")
    assert table.loc["exact", "samples"] == 4 and table.loc["exact", "load1_mean"] == 7.0
    assert table.loc["exact", "load1_max"] == 10.0
    assert table.loc["digest", "samples"] == 2 and table.loc["digest", "load1_mean"] == 6.0
    assert table.loc["late", "samples"] == 0  # no sample inside its window: no number
    assert list(table.workers) == [4, 4, 4]  # a suite may run one label at several worker counts
    assert main(["--out", str(tmp_path / "runs"), "--load-file", str(path), "--loads"]) == 0
    assert "late" in capsys.readouterr().out


def test_a_missing_samples_file_is_one_line(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--load-file", str(tmp_path / "nope.csv"), "--loads"]) == 1
    assert capsys.readouterr().err.startswith("error: ")


def test_a_malformed_samples_line_is_one_line_naming_it(tmp_path, capsys):
    path = tmp_path / "load.csv"
    path.write_text("1796155563,3.0,2.8,1.4\n1796155593,2.79 2.82 1.45\n")  # spaces, not commas
    assert main(["--out", str(tmp_path), "--load-file", str(path), "--loads"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}:2: expected unix_time,load1,load5,load15")
    assert len(err.strip().splitlines()) == 1


def test_the_runner_samples_the_load_while_it_runs(tmp_path):
    """``sampling`` appends one sample at once and one every ``every`` seconds, in the format
    ``samples`` reads, and stops with its block."""
    path = tmp_path / "results" / "x" / "loadavg.csv"
    path.parent.mkdir(parents=True)
    path.write_text("1796155563,3.0,2.8,1.4\n")  # an earlier part's: kept
    with sampling(path, every=0.05):
        time.sleep(0.3)
    n = len(samples(path))
    assert n >= 3 and samples(path).t.iloc[0] == 1796155563
    time.sleep(0.2)
    assert len(samples(path)) == n  # stopped
