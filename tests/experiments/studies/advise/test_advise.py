"""The experiments behind advise (experiments/studies/advise/, ``python -m experiments.studies.advise``): the epochs-to-target table from run
folders written by hand, the validation's rank correlation and first choice on hand-made rows,
the fit's fast pricing equal to the library's, and (slow) every committed file advise ships or
writes recomputed by its ``--check``."""
from __future__ import annotations

import math

import pytest

from digest.advise.cost import Network, calibrated
from digest.advise.job import load_job
from digest.advise.predict import predict
from digest.advise.protocol import WARMUP
from digest.advise.traffic import count
from digest.config import TrainConfig
from experiments.studies.advise import command as advise
from experiments.studies.advise import check as advise_check
from experiments.studies.advise import fit as advise_fit
from experiments.studies.advise import table as advise_table
from helpers import needs_shared
from experiments.studies.advise.runs import Timed
from fake_runs import write_run
from helpers import small_graph

SPEC = "synthetic:nodes=200,avg_degree=4,features=8,classes=3,seed=3"


def test_table_by_hand(tmp_path, data_root):
    """exact (two seeds, best 1.0 and 0.9: target 0.99 x 0.95 = 0.9405) and partition; the
    first evaluated epoch at or above the target, counted from 1; never: null."""
    runs = tmp_path / "suite" / "runs"
    write_run(runs, "exact", 2, 0, [0.1] * 4, [0.5, 0.8, 0.95, 1.0], dataset=SPEC)
    write_run(runs, "exact", 2, 1, [0.1] * 4, [0.5, 0.9, 0.9, 0.9], dataset=SPEC)
    write_run(runs, "partition", 2, 0, [0.1] * 4, [0.94, 0.9405, 0.7, 0.8], dataset=SPEC)
    write_run(runs, "varco-x", 2, 0, [0.1] * 4, [0.1, 0.2, 0.3, 0.4], method="varco",
              dataset=SPEC)
    table = advise_table.build(tmp_path)
    by = {r["label"]: r for r in table["rows"]}
    assert by["exact"]["epochs"]["0.99"] == [3, None] and by["exact"]["seeds"] == [0, 1]
    assert by["partition"]["epochs"]["0.99"] == [2]
    assert by["varco-x"]["epochs"]["0.99"] == [None] and by["varco-x"]["method"] == "varco"
    assert by["exact"]["default"] and by["exact"]["exact_test"] == [1.0, 0.9]
    assert set(table["graphs"]) == {f"{SPEC}|2"}
    stats = table["graphs"][f"{SPEC}|2"]
    assert stats["features"] == 8 and 0 < stats["homophily"] < 1


def test_table_counts_a_copied_run_once(tmp_path, data_root):
    """Suite "b" holds suite "a"'s two runs (copied: same hash, same curve) and one more: "a"'s
    group is left out; "c" repeats exact's configuration with another curve and stays."""
    for suite, extra in (("a", False), ("b", True)):
        runs = tmp_path / suite / "runs"
        write_run(runs, "exact", 2, 0, [0.1] * 4, [0.5, 0.8, 0.95, 1.0], dataset=SPEC,
                  flags_hash="e0")
        write_run(runs, "partition", 2, 0, [0.1] * 4, [0.5, 0.9, 0.9, 0.9], dataset=SPEC,
                  flags_hash="p0")
        if extra:
            write_run(runs, "digest", 2, 0, [0.1] * 4, [0.5, 0.9, 0.9, 0.9], dataset=SPEC,
                      flags_hash="d0")
    write_run(tmp_path / "c" / "runs", "exact", 2, 0, [0.1] * 4, [0.5, 0.8, 0.9, 0.97],
              dataset=SPEC, flags_hash="e0")
    rows = advise_table.build(tmp_path)["rows"]
    assert sorted((r["suite"], r["label"]) for r in rows) == [
        ("b", "digest"), ("b", "exact"), ("b", "partition"), ("c", "exact")]


def test_rank_correlation_and_first_choice_by_hand():
    def row(label, meas, pred, epochs, low, high, other):
        return {"dataset": "g", "workers": 4, "bandwidth": "1gbit", "label": label,
                "measured_s": meas, "measured_low": low, "measured_high": high,
                "predicted_s": pred, "error": pred / meas - 1, "measured_epochs": epochs,
                "epochs_low": epochs, "epochs_high": epochs, "other": {"epochs": other}}
    rows = [row("a", 1.0, 1.1, 10, 0.9, 1.2, 10), row("b", 2.0, 1.5, 10, 1.9, 2.1, 30),
            row("c", 3.0, 3.3, 10, 2.9, 3.1, 10)]
    point, = advise_check.summarise(rows, "other")
    # measured 10, 20, 30 s; predicted 11, 45, 33 s: order a, c, b against a, b, c
    assert point["spearman"] == pytest.approx(0.5)
    assert point["first"] == point["fastest"] == "a" and point["first_ok"]
    assert point["median_abs_error"] == pytest.approx(0.1)
    rows[0]["other"]["epochs"] = None  # not reached: last
    point, = advise_check.summarise(rows, "other")
    assert point["first"] == "c" and not point["first_ok"]  # 29 s against a's 12 s at most
    rows[2]["measured_low"] = 1.1  # c's interval now reaches down into a's
    assert advise_check.summarise(rows, "other")[0]["first_ok"]
    assert not point["fresh"]  # fresh: every row of the point from a bench_speed_* suite
    assert advise_check.summarise([{**r, "fresh": True} for r in rows], "other")[0]["fresh"]


def test_the_fits_pricing_is_the_library(tmp_path):
    graph = small_graph(seed=64, nodes=200, features=8)
    job = load_job("advise-fit", 4, root=tmp_path, graph=graph)
    rates = calibrated()
    for method, over in [("exact", {}), ("digest", {"sync_interval": 2}), ("pipegcn", {}),
                         ("sylvie", {"sync_every": 3}), ("adaqp", {"quant_bits": 4})]:
        cfg = TrainConfig.of(method=method, dataset="advise-fit", workers=4, epochs=10, hidden=16,
                             **over)
        timed = Timed("cluster_x", "advise-fit", 4, "1mbit", 1e6, method, cfg, 2.0, 10, 1.0)
        priced, = advise_fit.price([timed], jobs={("advise-fit", 4): job})
        library = predict(job, count(job, cfg), rates, Network(1e6 / 8), 2.0).mean(first=WARMUP, last=10)
        assert advise_fit.fast_mean(priced, rates) == pytest.approx(library, rel=1e-9)
        assert math.isfinite(library)


@pytest.mark.slow
@needs_shared("CS")
@needs_shared("Physics")
@pytest.mark.parametrize("what", ["table", "fit", "check"])
def test_committed_files_are_what_the_commands_give(what):
    """The graphs' statistics are computed from CS and Physics (copied from ../shared/datasets)."""
    assert advise.main([what, "--check"]) == 0
