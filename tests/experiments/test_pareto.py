"""experiments/analysis/pareto.py and render/pareto.py: best test accuracy within a budget of bytes / of
time, the front marked, budgets as documented, the plot, and the recompute path. Hand-made run
folders (helpers.write_run), exact expected values, no training."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from experiments import plots, recompute, tables
from experiments.analysis import pareto, tables as frames
from experiments.render import pareto as pareto_render, report
from experiments.suites.load import load
from fake_runs import fake_suite, recompute_args as args, write_run


def blank_until(d, epoch):
    """Leave epochs before ``epoch`` unevaluated (val_acc and test_acc empty), as eval_every does."""
    m = pd.read_csv(d / "metrics.csv")
    m.loc[m["epoch"] < epoch, ["val_acc", "test_acc"]] = float("nan")
    m.to_csv(d / "metrics.csv", index=False)


@pytest.fixture
def runs(tmp_path):
    """Four methods at M=2 (cumulative bytes of epoch e = 2 x bytes_w x (e + 1)):
    a:    cum bytes 1000..4000, wall 0.1..0.4, val .5 .8 .8 .9,  test .5 .7 .9 .85
    b:    cum bytes 2000..8000, wall .05..0.2, val .6 .9 .9 .95, test .6 .7 .8 .9
    c:    cum bytes  500..2000, wall 0.1..0.4, val .7 .7 .7 .7,  test .7 .8 .8 .8
    late: cum bytes 2000..8000, wall 0.2..0.8, evaluated only at epoch 3: val .99, test .9
    and exact at M=1 (no bytes, 10 s epochs), left out of the default (largest M) front."""
    root = tmp_path / "runs"
    write_run(root, "a", 2, 0, [0.1] * 4, [.5, .8, .8, .9], tests=[.5, .7, .9, .85], bytes_w=500)
    write_run(root, "b", 2, 0, [0.05] * 4, [.6, .9, .9, .95], tests=[.6, .7, .8, .9], bytes_w=1000)
    write_run(root, "c", 2, 0, [0.1] * 4, [.7] * 4, tests=[.7, .8, .8, .8], bytes_w=250)
    blank_until(write_run(root, "late", 2, 0, [0.2] * 4, [0, 0, 0, .99], tests=[0, 0, 0, .9],
                          bytes_w=1000), 3)
    write_run(root, "exact", 1, 0, [10.0] * 4, [.5, .6, .7, .8], bytes_w=0)
    return root


def at(table, axis, budget, method, column="test_acc"):
    hit = table[(table.axis == axis) & (table.budget == budget) & (table.method == method)]
    assert len(hit) == 1, (axis, budget, method)
    return hit[column].iloc[0]


def test_within_budget_is_the_ogb_rule_inside_the_budget(runs):
    m = pd.read_csv(runs / "toy" / "a_w2_s0" / "metrics.csv")  # cum bytes 1000, 2000, 3000, 4000
    assert pareto.within_budget(m, "cum_bytes", 999) is None  # nothing evaluated yet: no value
    assert pareto.within_budget(m, "cum_bytes", 1000) == {"test_acc": .5, "val_acc": .5, "epochs": 1}
    # epochs 0-2: val .8 at epochs 1 and 2, the first wins: its test .7, not epoch 2's higher .9
    assert pareto.within_budget(m, "cum_bytes", 3999) == {"test_acc": .7, "val_acc": .8, "epochs": 2}
    assert pareto.within_budget(m, "cum_bytes", 4000)["test_acc"] == .85  # best val .9, test .85
    # wall time 0.1 + 0.1 + 0.1 = 0.30000000000000004 is within a budget of 0.3
    walls = pd.DataFrame({"epoch": [0, 1, 2], "wall_time": [0.1, 0.1 + 0.1, 0.1 + 0.1 + 0.1],
                          "val_acc": [.1, .2, .3], "test_acc": [.1, .2, .3]})
    assert pareto.within_budget(walls, "wall_time", 0.3)["epochs"] == 3
    late = pd.read_csv(runs / "toy" / "late_w2_s0" / "metrics.csv")
    assert pareto.within_budget(late, "cum_bytes", 7999) is None  # trained, never evaluated
    assert pareto.within_budget(late, "cum_bytes", 8000)["test_acc"] == .9


def test_budgets_log_spaced_from_the_first_evaluation_to_the_largest_total_rounded_up():
    assert pareto.budgets([1000, 5000], [20000, 64000], 6) == [1000, 2300, 5280, 12200, 27900,
                                                                64000]
    # geomspace: 2297.4, 5278.0, 12125.7, 27857.6 -> up to 3 significant digits
    assert pareto.budgets([0, 1000], [8000, 0], 4) == [1000, 2000, 4000, 8000]  # 0: smallest positive
    assert pareto.budgets([], [8000, 0, 1000], 4) == [1000, 2000, 4000, 8000]  # none: the totals'
    assert pareto.budgets([0], [0, 0]) == [0.0] and pareto.budgets([5], [5, 5]) == [5.0]
    assert pareto.budgets([0.1 + 0.1 + 0.1], [0.1 + 0.1 + 0.1]) == [0.3]  # float noise: not up
    assert pareto._ceil3(1234567) == 1240000 and pareto._ceil3(999.5) == 1000
    assert pareto.budgets([], []) == []
    assert pareto.N_BUDGETS == 8


def test_table_budgets_and_front_with_ties_and_a_method_not_yet_evaluated(runs):
    t = pareto.pareto_table(load(runs), n=3)
    assert list(t.columns) == pareto.COLUMNS
    assert set(t.workers) == {2}  # exact at M=1 is not compared (largest M only)
    assert list(dict.fromkeys(t.axis)) == ["bytes", "time, measured"]
    # M=2 runs, first evaluated epoch to last: bytes a 1000-4000, b 2000-8000, c 500-2000, late
    # 8000 -> 500, 2000, 8000; time a 0.1-0.4, b 0.05-0.2, c 0.1-0.4, late 0.8 -> 0.05, 0.2, 0.8
    assert sorted(set(t[t.axis == "bytes"].budget)) == [500, 2000, 8000]
    assert sorted(set(t[t.axis == "time, measured"].budget)) == [0.05, 0.2, 0.8]
    expect = {  # (axis, budget): {method: test accuracy}, front
        ("bytes", 500): ({"a": None, "b": None, "c": .7, "late": None}, {"c"}),
        ("bytes", 2000): ({"a": .7, "b": .6, "c": .7, "late": None}, {"a", "c"}),  # tie: both
        ("bytes", 8000): ({"a": .85, "b": .9, "c": .7, "late": .9}, {"b", "late"}),
        ("time, measured", 0.05): ({"a": None, "b": .6, "c": None, "late": None}, {"b"}),
        ("time, measured", 0.2): ({"a": .7, "b": .9, "c": .7, "late": None}, {"b"}),
        ("time, measured", 0.8): ({"a": .85, "b": .9, "c": .7, "late": .9}, {"b", "late"})}
    for (axis, budget), (accs, front) in expect.items():
        for method, acc in accs.items():
            got = at(t, axis, budget, method)
            if acc is None:  # absent, not zero, and never on the front
                assert math.isnan(got) and at(t, axis, budget, method, "seeds_in_budget") == "0/1"
            else:
                assert got == pytest.approx(acc)
        part = t[(t.axis == axis) & (t.budget == budget)]
        assert set(part.loc[part.on_front, "method"]) == front, (axis, budget)
    # the last budget covers every run whole: each method's usual test at best validation
    last = t[(t.axis == "bytes") & (t.budget == 8000)].set_index("method")["test_acc"]
    summary = {r.label: r.summary["test_at_best_val"] for r in load(runs).records if r.workers == 2}
    assert last.to_dict() == pytest.approx(summary)
    assert at(t, "bytes", 2000, "a", "epochs") == 2 and at(t, "bytes", 2000, "a", "val_acc") == .8


def test_mean_over_seeds_only_when_every_seed_has_a_value(runs):
    write_run(runs, "s", 2, 0, [0.1] * 4, [.5, .6, .7, .8], bytes_w=1000)
    blank_until(write_run(runs, "s", 2, 1, [0.1] * 4, [0, 0, .9, .9], tests=[0, 0, .75, .6],
                          bytes_w=1000), 2)
    t = pareto.pareto_table(load(runs), n=5)  # bytes budgets 500, 1000, 2000, 4000, 8000
    assert at(t, "bytes", 4000, "s", "seeds_in_budget") == "1/2"
    assert math.isnan(at(t, "bytes", 4000, "s"))  # not seed 0's 0.6 alone
    assert at(t, "bytes", 8000, "s") == pytest.approx((.8 + .75) / 2)  # seed 1: first best val .9
    assert at(t, "bytes", 8000, "s", "seeds") == 2
    # s has the most seeds (2): only s is ranked; a, b, c and late (one seed each) are shown with
    # their seed count and never on the front, even where their one seed reads higher
    assert at(t, "bytes", 8000, "s", "ranked") and not at(t, "bytes", 8000, "b", "ranked")
    assert at(t, "bytes", 8000, "b") == .9 and not at(t, "bytes", 8000, "b", "on_front")
    assert at(t, "bytes", 8000, "s", "on_front")
    assert not t[(t.axis == "bytes") & (t.budget == 4000)].on_front.any()  # s has no value there
    md = pareto_render.section(t, 5)
    assert ("| <= 0.00381 MiB | 85.00 (1 seed) | 70.00 (1 seed) | 70.00 (1 seed) | – "
            "| – (1/2 seeds) | – |") in md
    assert "| <= 0.00763 MiB | 85.00 (1 seed) | 90.00 (1 seed) | 70.00 (1 seed) | 90.00 (1 seed) " \
           "| **77.50** | s |" in md


def test_ties_after_averaging_seeds_are_ties():
    assert pareto.mark_front([(.1 + .2 + .3) / 3, (.3 + .2 + .1) / 3, .1, float("nan")]) == [
        True, True, False, False]
    assert pareto.mark_front([float("nan")] * 2) == [False, False]


def test_workers_all_gives_one_front_per_worker_count(runs):
    t = pareto.pareto_table(load(runs), workers="all", n=3)
    one = t[t.workers == 1]
    assert set(one.method) == {"exact"} and one.on_front.all()
    assert sorted(set(one[one.axis == "time, measured"].budget)) == [10.0, 20.0, 40.0]  # its own
    assert sorted(set(one[one.axis == "bytes"].budget)) == [0.0]  # no bytes at M=1
    assert at(one, "bytes", 0.0, "exact") == .8
    assert t[t.workers == 2].reset_index(drop=True).equals(pareto.pareto_table(load(runs), n=3))
    assert pareto.fronts(t)["toy"]["bytes (M=1)"] == [(0.0, "B", ["exact"])]
    assert pareto.fronts(t)["toy"]["bytes (M=2)"][:2] == [(500.0, "B", ["c"]),
                                                           (2000.0, "B", ["a", "c"])]


def test_emulated_times_are_their_own_axes(runs):
    d = write_run(runs, "a@100mbit", 2, 0, [1.0] * 4, [.5, .8, .8, .9], bytes_w=500)
    s = json.loads((d / "summary.json").read_text())
    s["emulation"] = {"kind": "emulated", "label": "emulated @ 100mbit", "bandwidth": "100mbit"}
    (d / "summary.json").write_text(json.dumps(s))
    m = pd.read_csv(runs / "toy" / "b_w2_s0" / "metrics.csv")
    m["emu_time"] = m["wall_time"] * 10  # a cumulative emulated-time column
    m.to_csv(runs / "toy" / "b_w2_s0" / "metrics.csv", index=False)
    t = pareto.pareto_table(load(runs), n=3, time_column="emu_time")
    methods = {axis: set(part.method) for axis, part in t.groupby("axis")}
    assert methods == {"bytes": {"a", "b", "c", "late"}, "time, measured": {"a", "b", "c", "late"},
                       "bytes, runs emulated @ 100mbit": {"a@100mbit"},
                       "time, emulated @ 100mbit": {"a@100mbit"},
                       "time, emulated (emu_time)": {"b"}}
    assert sorted(set(t[t.axis == "time, emulated (emu_time)"].budget)) == [0.5, 1.0, 2.0]
    assert sorted(set(t[t.axis == "time, emulated @ 100mbit"].budget)) == [1.0, 2.0, 4.0]
    assert list(dict.fromkeys(t.axis))[:2] == ["bytes", "time, measured"]
    assert set(pareto.pareto_table(load(runs), n=3).axis) == set(t.axis) - {
        "time, emulated (emu_time)"}  # the column's axis only when asked for


def test_markdown_section_and_the_reading(runs, tmp_path):
    t = pareto.pareto_table(load(runs), n=3)
    md = pareto_render.section(t, 5)
    assert "## 5. Pareto: best test accuracy (%) within a budget of bytes or of time" in md
    assert "### toy, M=2: bytes" in md and "### toy, M=2: time, measured" in md
    assert "| budget | a | b | c | late | front |" in md
    assert "| <= 0.00191 MiB | **70.00** | 60.00 | **70.00** | – | a, c |" in md
    assert "| <= 0.00763 MiB | 85.00 | **90.00** | 70.00 | **90.00** | b, late |" in md
    assert "| <= 0.2 s | 70.00 | **90.00** | 70.00 | – | b |" in md
    assert pareto.fronts(t)["toy"]["bytes"] == [(500.0, "B", ["c"]), (2000.0, "B", ["a", "c"]),
                                                (8000.0, "B", ["b", "late"])]
    assert pareto_render.reading(t) == [
        "toy, bytes: c at <= 0.000477, 0.00191 MiB; a at <= 0.00191 MiB; b at <= 0.00763 MiB; "
        "late at <= 0.00763 MiB",
        "toy, time, measured: b at <= 0.05, 0.2, 0.8 s; late at <= 0.8 s"]
    assert f"- {pareto_render.reading(t)[0]}" in md
    # through the tables: pareto.csv and the section after the others
    assert tables.main(["--runs", str(runs), "--out", str(tmp_path / "t")]) == 0
    csv = pd.read_csv(tmp_path / "t" / "pareto.csv")
    assert list(csv.columns) == pareto.COLUMNS
    assert len(csv) == 4 * csv.groupby("axis").budget.nunique().sum() == 4 * 16  # 8 budgets each
    assert "## 5. Pareto" in (tmp_path / "t" / "tables.md").read_text()
    assert "## 5. Pareto" in report.markdown(load(runs), frames.build(load(runs)), None, 0.98, "x")


def test_plot_and_its_curves_match_the_table_rule(runs, tmp_path):
    loaded = load(runs)
    recs = [r for r in loaded.records if r.label == "a"]
    grid = np.array([500.0, 999, 1000, 2999, 3000, 3999, 4000, 9000])
    want = [pareto.method_at(recs, "cum_bytes", b)["test_acc"] for b in grid]
    np.testing.assert_array_equal(pareto.curve_at(recs, "cum_bytes", grid), want)
    late = [r for r in loaded.records if r.label == "late"]
    assert np.isnan(pareto.curve_at(late, "wall_time", np.array([0.7]))).all()
    assert plots.main(["--runs", str(runs), "--out", str(tmp_path / "p")]) == 0
    assert (tmp_path / "p" / "toy_pareto.png").stat().st_size > 0


def test_recompute_covers_pareto_csv(tmp_path, capsys):
    assert "pareto.csv" in recompute.TABLES
    path, runs = fake_suite(tmp_path)
    assert recompute.main(args(path, tmp_path, "--write")) == 0
    results = tmp_path / "results"
    csv = pd.read_csv(results / "pareto.csv")
    # exact (2 seeds) and digest-I10: first evaluated at 2000 B and 0.1 s, both end at 6000 B
    # and 0.3 s: 8 budgets per axis between them, the last covering both runs whole
    for axis, lo, hi in [("bytes", 2000, 6000), ("time, measured", 0.1, 0.3)]:
        part = csv[csv.axis == axis]
        assert sorted(set(part.budget))[::7] == [lo, hi] and part.budget.nunique() == 8
        last = part[part.budget == hi]
        assert list(last.method) == ["exact", "digest-I10"] and list(last.test_acc) == [1.0, .99]
        assert list(last.on_front) == [True, False]
    assert "Pareto" in (results / "tables.md").read_text()
    assert (tmp_path / "plots" / "toy_pareto.png").exists()
    capsys.readouterr()
    assert recompute.main(args(path, tmp_path)) == 0  # reproduced exactly, pareto.csv included
    m = pd.read_csv(runs / "toy" / "digest-I10_w2_s0" / "metrics.csv")
    m.loc[1, "test_acc"] = 0.5  # a committed run file changes where only this table reads it
    m.to_csv(runs / "toy" / "digest-I10_w2_s0" / "metrics.csv", index=False)
    assert recompute.main(args(path, tmp_path)) == 1
    lines = capsys.readouterr().out.splitlines()
    assert {line.split(":")[0] for line in lines} == {str(results / "pareto.csv"),
                                                      str(results / "tables.md")}, lines
