"""The noise floor across suites (experiments/studies/across_suites/noise.py, experiments/studies/across_suites/noise_render.py) on
hand-made timing.csv files: which A/A points are clean (their interval inside [0.95, 1.05]), and
the block that counts them."""
from __future__ import annotations

from pathlib import Path

from experiments.studies.across_suites.noise import points
from experiments.studies.across_suites.noise_render import block

HEAD = "dataset,method,workers,pairs,speedup,speedup_lo,speedup_hi,verdict\n"


def _suite(root: Path, name: str, rows: str) -> None:
    folder = root / "results" / name
    (folder / "runs" / "g" / "r").mkdir(parents=True)
    (folder / "runs" / "g" / "r" / "run.json").write_text("{}")
    (folder / "timing.csv").write_text(HEAD + rows)


def test_points_read_the_a_a_rows_and_test_equivalence(tmp_path):
    _suite(tmp_path, "cluster_speed", "CS,exact@10gbit,4,0,1.0,,,reference\n"
                                      "CS,exact-aa@10gbit,4,3,0.97,0.9,1.1,A/A (noise floor)\n"
                                      "CS,exact-aa@1gbit,4,6,1.02,1.01,1.03,A/A (noise floor)\n"
                                      "CS,exact-aa@50mbit,4,1,1.0,,,A/A (noise floor)\n"
                                      "CS,partition@1gbit,4,6,1.4,1.3,1.5,faster\n")
    _suite(tmp_path, "timing_quick", "synthetic,exact-aa,4,9,0.97,0.95,1.05,A/A (noise floor)\n")
    p = points(tmp_path)
    assert list(p["suite"]) == ["cluster_speed"] * 3 + ["timing_quick"]
    assert list(p["network"]) == ["10gbit", "1gbit", "50mbit", "loopback"]
    assert list(p["pairs"]) == [3, 6, 1, 9]
    # wide around 1: not clean; tight just off 1: clean; one pair: no interval, not clean; the
    # band's own ends count as inside
    assert list(p["clean"]) == [False, True, False, True]


def test_block_counts_the_clean_points_and_lists_the_others(tmp_path):
    _suite(tmp_path, "timing_quick", "synthetic,exact-aa,4,3,0.89,0.8,1.3,A/A (noise floor)\n"
                                     "synthetic,exact-aa,2,9,1.0,0.97,1.02,A/A (noise floor)\n")
    text = block(tmp_path)
    assert "Of the 2 A/A points" in text and "**1 (50%) are clean**" in text
    assert "1 of the 2 rest on fewer than the 6 pairs the protocol asks" in text
    row = ("| synthetic default | 4 | loopback | 0.89x [0.80, 1.30] | 3 pairs: below the 6 the "
           "protocol asks | below and above the band |")
    assert "| [timing_quick](timing_quick/README.md) " + row in text
    assert "| 2 | loopback |" not in text  # the clean point is not listed
    assert block(tmp_path / "nothing") == ""
