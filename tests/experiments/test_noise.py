"""The noise floor across suites (experiments/analysis/noise.py, experiments/render/noise.py) on
hand-made timing.csv files: which A/A points pass the check, and the block that counts them."""
from __future__ import annotations

from pathlib import Path

from experiments.analysis.noise import points
from experiments.render.noise import block

HEAD = "dataset,method,workers,aa,aa_lo,aa_hi,verdict\n"


def _suite(root: Path, name: str, rows: str) -> None:
    folder = root / "results" / name
    (folder / "runs" / "g" / "r").mkdir(parents=True)
    (folder / "runs" / "g" / "r" / "run.json").write_text("{}")
    (folder / "timing.csv").write_text(HEAD + rows)


def test_points_read_reference_rows_and_judge_median_and_interval(tmp_path):
    _suite(tmp_path, "cluster_speed", "CS,exact@10gbit,4,0.97,0.9,1.1,reference\n"
                                      "CS,exact@1gbit,4,1.02,1.01,1.03,reference\n"
                                      "CS,exact-aa@1gbit,4,1.02,1.01,1.03,A/A (noise floor)\n"
                                      "CS,partition@1gbit,4,,,,faster\n")
    _suite(tmp_path, "timing_quick", "synthetic,exact,4,0.89,0.8,1.3,reference\n")
    p = points(tmp_path)
    assert list(p["suite"]) == ["cluster_speed", "cluster_speed", "timing_quick"]
    assert list(p["network"]) == ["10gbit", "1gbit", "loopback"]
    assert list(p["median_in_band"]) == [True, True, False]
    assert list(p["passes"]) == [True, False, False]  # 1gbit: the interval leaves out 1


def test_block_counts_and_lists_the_failing_points(tmp_path):
    _suite(tmp_path, "timing_quick", "synthetic,exact,4,0.89,0.8,1.3,reference\n")
    text = block(tmp_path)
    assert "Of the 1 A/A points" in text and "**0 (0%) have a median" in text
    row = "| synthetic default | 4 | loopback | 0.89x [0.80, 1.30] | median |"
    assert "| [timing_quick](timing_quick/README.md) " + row in text
    assert block(tmp_path / "nothing") == ""
