"""``python -m digest advise`` (digest/advise/command.py): bad input is one line and exit status
2 before anything is read; a small graph gets one row a method, ranked, the same rows in --json,
with each method that cannot be predicted listed with its reason."""
from __future__ import annotations

import json

import pytest

from digest.cli import main
from helpers import DATASET, here


def advise(capsys, *args) -> tuple[int, str, list[str]]:
    capsys.readouterr()
    try:
        rc = main(["advise", *map(str, args)])
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, [line for line in out.err.splitlines() if line.strip()]


@pytest.mark.parametrize("args, says", [
    (["--dataset", "NoSuchGraph", "--workers", 4, "--bandwidth", "1gbit"], "unknown dataset"),
    (["--dataset", DATASET, "--workers", 4, "--bandwidth", "fast"], "cannot read bandwidth"),
    (["--dataset", DATASET, "--workers", 4, "--bandwidth", "10gigs"], "bandwidth unit"),
    (["--dataset", DATASET, "--workers", 4, "--bandwidth", "0mbit"], "bandwidth must be > 0"),
    (["--dataset", DATASET, "--workers", 301, "--bandwidth", "1gbit"], "--workers must be between"),
    (["--dataset", DATASET, "--workers", 0, "--bandwidth", "1gbit"], "--workers must be between"),
    (["--dataset", DATASET, "--workers", 2, "--bandwidth", "1gbit", "--latency", "soon"],
     "cannot read latency"),
    (["--dataset", DATASET, "--workers", 2, "--bandwidth", "1gbit", "--compute-rate", "-3"],
     "cannot read compute rate"),
    (["--dataset", DATASET, "--workers", 2, "--bandwidth", "1gbit", "--target", 0.5], "--target"),
    (["--dataset", DATASET, "--workers", 2], "required"),
])
def test_bad_input_is_one_line_exit_2(capsys, data_root, args, says):
    rc, err = here(["advise", *args], capsys)
    assert rc == 2 and len(err) == 1 and says in err[0], err
    assert not (data_root / ".partitions").exists()  # refused before anything was built


def test_rows_ranked_and_json_the_same(capsys, session_data):
    base = ["--dataset", DATASET, "--workers", 3, "--bandwidth", "100mbit", "--hidden", 16,
            "--epochs", 30]
    rc, text, err = advise(capsys, *base)
    assert rc == 0, err
    rc, raw, _ = advise(capsys, *base, "--json")
    assert rc == 0
    doc = json.loads(raw)
    rows = doc["rows"]
    assert doc["predicted"] is True and doc["workers"] == 3 and doc["epochs"] == 30
    timed = [r for r in rows if "s_per_epoch" in r]
    assert {r["method"] for r in timed} >= {"exact", "partition", "digest", "varco", "pipegcn"}
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("method "))
    listed = [line.split()[0] for line in lines[head + 1: head + 1 + len(timed)]]
    assert listed == [r["method"] for r in timed]  # the same rows, the same order
    keys = [(0, r["time_to_target_s"]) if "time_to_target_s" in r else (1, r["s_per_epoch"])
            for r in timed]
    assert keys == sorted(keys)  # fastest to the target first
    for r in timed:
        assert f"{r['s_per_epoch']:.3f}" in lines[head + 1 + timed.index(r)]
    why = {r["method"]: r["reason"] for r in rows if "s_per_epoch" not in r}
    assert set(why) >= {"sancus", "minibatch", "digest-async", "sat"}
    assert all(why.values()) and "cannot predict:" in text
    exact = next(r for r in rows if r["method"] == "exact")
    assert exact["speedup_vs_exact"] == 1.0 and exact["ceiling"] > 1.0
    assert "not measured" in text
