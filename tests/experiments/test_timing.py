"""The timing protocol's statistics (experiments/analysis/timing.py, docs/methods.md section 11) on
hand-made numbers: paired same-round ratios (their mean), their bootstrap interval, the A/A
equivalence check, the warm-up and the training clock; then the tables of a hand-made suite with
rounds. No training. The interval's coverage: tests/experiments/test_paired.py."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from experiments.analysis import timing
from experiments.render import contention
from experiments.suites.suite import expand, load_suite
from experiments.suites.load import load
from experiments.analysis.timing import NO_DIFFERENCE, Interval, paired_ratio, verdict


def test_identical_series_give_one_with_a_zero_width_interval():
    t = [0.11, 0.13, 0.12, 0.19, 0.10]
    iv = paired_ratio([(t, t), (t, t), (t, t)])
    assert (iv.mean, iv.lo, iv.hi, iv.pairs) == (1.0, 1.0, 1.0, 3)


def test_a_method_twice_as_fast_in_every_epoch_gives_two_exactly():
    method = [0.05, 0.07, 0.06, 0.08]
    exact = [2 * t for t in method]
    iv = paired_ratio([(exact, method)] * 3)
    assert (iv.mean, iv.lo, iv.hi) == pytest.approx((2.0, 2.0, 2.0))


def test_pairing_cancels_a_slow_round():
    """Round 1 runs 3x slower for every method (a slow hour): the same-round ratio is still 2."""
    method = np.array([0.05, 0.07, 0.06])
    pairs = [(2 * method, method), (2 * 3 * method, 3 * method), (2 * method, method)]
    iv = paired_ratio(pairs)
    assert (iv.mean, iv.lo, iv.hi) == (2.0, 2.0, 2.0)


def test_the_speedup_is_the_mean_over_rounds_and_the_interval_spans_them():
    one = [0.1, 0.1, 0.1]  # constant epochs: only the draw of rounds varies
    pairs = [([0.15] * 3, one), ([0.2] * 3, one), ([0.4] * 3, one)]  # ratios 1.5, 2, 4
    iv = paired_ratio(pairs)
    assert iv.mean == pytest.approx(2.5, abs=1e-12)  # the median would say 2
    # three pairs: the widened tails reach the draws of one pair three times, the extremes
    assert iv.lo == pytest.approx(1.5, abs=1e-12) and iv.hi == pytest.approx(4.0, abs=1e-12)


def test_the_bootstrap_is_reproducible_and_its_interval_holds_the_median():
    rng = np.random.default_rng(7)
    pairs = [(0.2 + 0.02 * rng.random(20), 0.1 + 0.01 * rng.random(20)) for _ in range(3)]
    a, b = paired_ratio(pairs), paired_ratio(pairs)
    assert a == b  # a fixed seed: the same tables from the same runs
    assert a.lo < a.mean < a.hi


def test_no_pairs_no_interval():
    assert paired_ratio([]) is None and verdict(None, None) == "n/a"


def test_the_verdict_follows_from_the_interval_and_the_a_a_floor():
    floor = Interval(1.0, 0.95, 1.04, 6)  # a clean A/A interval (its lower end on the band's)
    assert timing.clean(floor)
    assert verdict(Interval(1.04, 0.99, 1.10, 6), floor) == NO_DIFFERENCE  # overlaps it
    assert verdict(Interval(1.04, 1.02, 1.10, 6), floor) == NO_DIFFERENCE  # excludes 1, overlaps
    assert verdict(Interval(1.30, 1.05, 1.41, 6), floor) == "faster"  # wholly above
    assert verdict(Interval(0.80, 0.75, 0.94, 6), floor) == "slower"  # wholly below
    assert verdict(Interval(1.30, 1.04, 1.41, 6), floor) == NO_DIFFERENCE  # touches its end
    # a tight A/A interval just off 1 is clean: a speedup clearing it is faster, 1 in it or not
    off = Interval(0.97, 0.96, 0.98, 6)
    assert verdict(Interval(1.00, 0.99, 1.01, 6), off) == "faster"
    # no A/A run: against 1 alone
    assert verdict(Interval(1.04, 0.99, 1.10, 3), None) == NO_DIFFERENCE
    assert verdict(Interval(1.04, 1.01, 1.10, 3), None) == "faster"
    assert verdict(Interval(0.9, 0.8, 0.99, 3), None) == "slower"
    # a point that is not clean (its A/A interval leaves [0.95, 1.05]): no verdict, however far
    for wide in (Interval(1.0, 0.94, 1.03, 6), Interval(1.0, 0.97, 1.06, 6),
                 Interval(0.82, 0.70, 1.10, 3)):
        assert not timing.clean(wide)
        assert verdict(Interval(3.0, 2.9, 3.1, 6), wide) == timing.NOT_CLEAN
    assert not timing.clean(None)
    # one pair: a ratio, no interval, no verdict; an A/A of one pair is not clean
    one = paired_ratio([([0.2], [0.1])])
    assert (one.mean, one.pairs, one.has_interval) == (2.0, 1, False)
    assert verdict(one, floor) == timing.ONE_PAIR
    assert verdict(Interval(3.0, 2.9, 3.1, 6), one) == timing.NOT_CLEAN


def test_a_ratio_is_of_means_over_whole_periods_never_of_medians():
    """A method that pays a refresh every 4th epoch (0.11 s) and 0.03 s otherwise: its mean is
    0.05 s, its median 0.03 s. Against exact at 0.1 s it is 2x, not the median's 3.3x."""
    method, exact = [0.03, 0.03, 0.03, 0.11] * 2, [0.1] * 8
    assert paired_ratio([(exact, method)] * 3).mean == pytest.approx(2.0)


def test_the_bootstrap_resamples_rounds_not_epochs():
    """Wildly varying epochs inside each run but the same mean in every round: no spread."""
    rng = np.random.default_rng(3)
    pairs = []
    for _ in range(3):
        e = rng.permutation([0.1, 0.3, 0.2, 0.4])  # mean 0.25 in every round, any order
        pairs.append((e, e / 2))
    iv = paired_ratio(pairs)
    assert (iv.mean, iv.lo, iv.hi) == pytest.approx((2.0, 2.0, 2.0))


def test_time_to_accuracy_is_on_the_training_clock():
    m = pd.DataFrame({"epoch": [0, 1, 2, 3], "epoch_time": [0.5, 0.25, 0.25, 0.25],
                      "val_acc": [0.2, 0.5, 0.8, 0.9], "eval_time": [1.0, 1.0, 1.0, 1.0]})
    hit = timing.time_to_target(m, 0.75)
    assert hit == {"time": 1.0, "eval": 3.0, "epochs": 3}  # 0.5 + 0.25 + 0.25; evaluation apart
    assert timing.time_to_target(m, 0.95) is None


def test_metrics_wall_time_is_the_training_clock():
    """metrics.csv's wall_time (what tables.time_to_accuracy reads) is the running sum of the
    epoch times: evaluation, recorded apart as eval_time, is not in it."""
    from digest.training import records
    rows = []
    for e, (t, ev) in enumerate([(0.5, 1.0), (0.25, 1.0), (0.25, 1.0)]):
        row = {"epoch": e, "epoch_time": t, "bytes_total": 0, "eval_time": ev}
        rows.append(records.accumulate(row, rows[-1] if rows else None))
    assert [r["wall_time"] for r in rows] == list(timing.train_clock(pd.DataFrame(rows))) == [
        0.5, 0.75, 1.0]


# -- a hand-made suite with rounds and an A/A label ---------------------------------------------
SUITE = {"name": "tq", "datasets": ["synthetic"], "workers": [4], "seeds": [0], "epochs": 6,
         "rounds": 3, "aa": True, "warmup": 2, "model": {"hidden": 8},
         "methods": [{"label": "exact", "method": "exact"},
                     {"label": "partition", "method": "partition"},
                     {"label": "digest-I4", "method": "digest", "flags": {"sync_interval": 4}}]}
FEW = "; 3 pairs: below the 6 the protocol asks"  # what a cell of three pairs says
SLOW = {0: 1.0, 1: 3.0, 2: 1.5}  # round r's machine: every method's epochs x SLOW[r]
WOBBLE = {"exact": (1.0, 1.0, 1.0), "exact-aa": (1.0, 1.02, 0.98), "partition": (1.0, 0.99, 1.01)}


def times(label: str, r: int) -> list:
    """Hand-made epoch times: two warm-up epochs (huge, left out), then four timed ones: exact's
    0.1 s, the A/A twin and partition within 2% of it, and DIGEST (I = 4) 0.03 s but 0.11 s at
    its refresh (a mean of 0.05 s: exactly 2x faster than exact, though its median is 0.03 s)."""
    base = [0.03, 0.03, 0.03, 0.11] if label == "digest-I4" else [0.1 * WOBBLE[label][r]] * 4
    return [5.0, 2.0] + [b * SLOW[r] for b in base]


def write(root, run, epoch_times, vals, summary_extra=None):
    d = run.directory(root)
    d.mkdir(parents=True)
    rows = [{"epoch": e, "epoch_time": t, "val_acc": v, "test_acc": v, "eval_time": 0.05,
             "bytes_total": 0, "cum_bytes": 0} for e, (t, v) in enumerate(zip(epoch_times, vals))]
    m = pd.DataFrame(rows)
    m["wall_time"] = m["epoch_time"].cumsum()
    m.to_csv(d / "metrics.csv", index=False)
    summary = {"status": "complete", "best_val": max(vals), "test_at_best_val": max(vals),
               "config": dict(run.flags),
               "machine": {"cores": 2, "workers": 4, "workers_per_node": 4,
                           "pinning": "worker 0 on core 0 (w mod 2)"},
               **(summary_extra or {})}
    (d / "summary.json").write_text(json.dumps(summary))
    (d / "run.json").write_text(json.dumps({"label": run.label, "dataset": run.dataset,
                                            "method": run.spec.method, "workers": run.workers,
                                            "seed": run.seed, "round": run.round,
                                            "hash": run.hash}))


@pytest.fixture
def suite(tmp_path):
    path = tmp_path / "tq.yaml"
    path.write_text(yaml.safe_dump(SUITE))
    vals = [0.1, 0.2, 0.5, 0.8, 0.9, 0.95]
    for run in expand(load_suite(str(path))):
        write(tmp_path / "runs", run, times(run.label, run.round), vals)
    return str(path), tmp_path / "runs"


def test_rounds_are_read_apart_from_the_per_seed_tables(suite):
    path, root = suite
    loaded = load(root, load_suite(path))
    assert [r.label for r in loaded.records] == ["exact", "exact-aa", "partition", "digest-I4"]
    assert {r.round for r in loaded.records} == {0} and {r.round for r in loaded.later} == {1, 2}
    assert loaded.warmup == 2 and loaded.expected == 12 and timing.applies(loaded)


def test_the_hand_made_suite_s_speedups(suite):
    path, root = suite
    t = timing.epoch_speedups(load(root, load_suite(path))).set_index("method")
    assert list(t.index) == ["exact", "exact-aa", "partition", "digest-I4"]
    assert set(t["pairs"]) == {0, 3} and set(t["warmup"]) == {2}
    assert t.loc["exact", "timed_epochs"] == "4" and t.loc["digest-I4", "timed_epochs"] == "4 (1 x 4)"
    # exact's per-epoch time: the mean over its rounds of each run's mean, 0.1 x (1.0, 3.0, 1.5)
    assert t.loc["exact", "epoch_ms"] == pytest.approx(1e3 * 0.1 * 5.5 / 3)
    assert t.loc["exact", "verdict"] == "reference" and t.loc["exact", "speedup"] == 1.0
    # digest-I4 is twice as fast over its whole period in every round, slow rounds included
    d = t.loc["digest-I4"]
    assert (d.speedup, d.speedup_lo, d.speedup_hi) == pytest.approx((2.0, 2.0, 2.0))
    # the A/A ratios 1 / (1, 1.02, 0.98): their mean a little above 1
    assert d.verdict == "faster" and d.aa == pytest.approx((1 + 1 / 1.02 + 1 / 0.98) / 3)
    aa = t.loc["exact-aa"]
    assert aa.verdict == "A/A (noise floor)" and aa.speedup_lo < 1.0 < aa.speedup_hi
    # partition's epochs wobble like the A/A's: inside the noise floor
    p = t.loc["partition"]
    assert p.verdict == NO_DIFFERENCE and p.floor == "A/A"
    assert (p.aa_lo, p.aa_hi) == (aa.speedup_lo, aa.speedup_hi)


def test_the_hand_made_suite_s_time_to_accuracy(suite):
    path, root = suite
    t = timing.tta_speedups(load(root, load_suite(path)), (0.9,)).set_index("method")
    # target 0.9 x 0.95 = 0.855: epoch 4 (val 0.9); warm-up counted, evaluation left out
    e = t.loc["exact"]
    assert e.target_val == pytest.approx(0.855) and e.reached == "3/3"
    assert e.train_s == pytest.approx(5.0 + 2.0 + 0.3 * 1.5)  # median of the rounds' clocks
    assert e.eval_s_excluded == pytest.approx(0.25)
    d = t.loc["digest-I4"]  # the same warm-up, three cheap epochs before the target: paired
    ratios = sorted((7.0 + 0.3 * s) / (7.0 + 0.09 * s) for s in SLOW.values())
    assert d.speedup == pytest.approx(sum(ratios) / 3)  # their mean; three pairs: the extremes
    assert (d.speedup_lo, d.speedup_hi, d.pairs) == (pytest.approx(ratios[0]),
                                                    pytest.approx(ratios[2]), 3)


def test_a_suite_without_rounds_or_a_a_gets_no_timing_tables(tmp_path):
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump({**SUITE, "name": "plain", "rounds": 1, "aa": False}))
    vals = [0.1, 0.2, 0.5, 0.8, 0.9, 0.95]
    for run in expand(load_suite(str(path))):
        write(tmp_path / "runs", run, times(run.label, 0), vals)
    loaded = load(tmp_path / "runs", load_suite(path))
    assert not loaded.later and not timing.applies(loaded) and timing.build(loaded, (0.98,)) == {}


def test_contention_line_says_cores_pinning_and_quota(suite):
    path, root = suite
    assert contention.contention(load(root, load_suite(path))) == [
        "Contention: 4 worker(s) shared 2 core(s), pinned (worker w on core w mod C), no CPU "
        "quota (not emulated) (12 runs)"]
    emulated = {"emulation": {"cpu_quota": "0.5 cores per worker (2 cores / 4 workers, cgroup v2)"}}
    none = {"emulation": {"cpu_quota": "none: no cgroup cpu controller on this machine"}}
    assert contention._quota(emulated) == "CPU quota of 0.5 cores per worker (2 cores / 4 workers, cgroup v2)"
    assert contention._quota(none) == "no CPU quota (no cgroup cpu controller on this machine)"
    assert contention._pinning("not needed: 2 workers on 2 cores").startswith("not pinned")


def test_tables_md_prints_paired_speedups_beside_the_noise_floor(suite, tmp_path):
    from experiments import tables
    path, root = suite
    out = tmp_path / "out"
    written = tables.write(load(root, load_suite(path)), out, None, (0.9,), "cmd")
    assert {"timing.csv", "timing_tta.csv"} <= set(written)
    md = (out / "tables.md").read_text()
    assert "| exact | 183.3 | 1.00x (reference) | 3 (1 seed(s) x 3 round(s)) |" in md
    # three pairs, fewer than the protocol asks: every cell with an interval says so
    assert (f"| digest-I4 | 91.7 | 2.00x [2.00, 2.00], faster{FEW} | 3 (1 seed(s) x 3 round(s)) |"
            in md)
    assert f"| partition | 182.8 | no measurable difference (1.00x [0.99, 1.01]){FEW} |" in md
    assert f"| exact-aa | 184.3 | 1.00x [0.98, 1.02] (A/A: noise floor){FEW} |" in md
    assert "1 of 1 point(s) are clean" in md
    assert "Warm-up: the first 2 epoch(s) of each run (of 6) are left out" in md
    aa = timing.epoch_speedups(load(root, load_suite(path))).set_index("method").loc["exact-aa"]
    half = 50 * (aa.speedup_hi - aa.speedup_lo)  # the noise floor's half-width, in percent
    assert 0 < half < 5 and "### The noise floor at each point" in md
    assert (f"| synthetic | exact-aa | 4 | 1.00x | [{aa.speedup_lo:.2f}, {aa.speedup_hi:.2f}] | "
            f"3 | {half:.1f}% | clean (3 pairs: below the 6 the protocol asks) |") in md
    assert "Contention: 4 worker(s) shared 2 core(s), pinned" in md
    assert "Runs: 12 complete of 12" in md
    from experiments.render import runlog  # its count too: every round's runs, not round 0's 4
    assert "Runs: 12 complete of 12 planned" in runlog.render(load_suite(path), root, None, out, "cmd")
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 12 and sorted(set(runs["round"])) == [0, 1, 2]
    acc = pd.read_csv(out / "accuracy.csv")  # the per-seed tables: round 0, one run per seed
    assert set(acc["seeds"]) == {1}


def test_a_speed_suite_evaluated_once_gets_speedups_but_no_time_to_accuracy(tmp_path):
    from experiments import tables
    from experiments.render import report
    path = tmp_path / "speed.yaml"
    path.write_text(yaml.safe_dump({**SUITE, "name": "speed"}))
    once = [float("nan")] * 5 + [0.9]  # evaluated at the last epoch only
    for run in expand(load_suite(str(path))):
        write(tmp_path / "runs", run, times(run.label, run.round), once)
    loaded = load(tmp_path / "runs", load_suite(path))
    assert timing.evaluated_once(loaded)
    assert set(timing.build(loaded, (0.98,))) == {"timing", "timing_rule_change"}
    tables.write(loaded, tmp_path / "out", None, (0.98,), "cmd")
    md = (tmp_path / "out" / "tables.md").read_text()
    assert report.EVALUATED_ONCE in md
    assert f"| digest-I4 | 91.7 | 2.00x [2.00, 2.00], faster{FEW} |" in md
    assert report.SHORT_RUNS in md and "Time to accuracy on the training clock" not in md


def test_the_a_a_floor_at_each_seed_apart(tmp_path):
    """Two seeds: at seed 1 the twin repeats exact's epochs exactly (a zero-width floor), at seed 0
    it wobbles; the pooled floor of timing.csv holds both, timing_floor_seeds.csv each apart."""
    from experiments import tables
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump({**SUITE, "name": "two", "seeds": [0, 1]}))
    vals = [0.1, 0.2, 0.5, 0.8, 0.9, 0.95]
    for run in expand(load_suite(str(path))):
        label = "exact" if run.label == "exact-aa" and run.seed == 1 else run.label
        write(tmp_path / "runs", run, times(label, run.round), vals)
    loaded = load(tmp_path / "runs", load_suite(path))
    seeds = timing.seed_floors(loaded).set_index("seed")
    assert list(seeds.index) == [0, 1] and set(seeds["method"]) == {"exact-aa"}
    assert set(seeds["pairs"]) == {3}
    one = seeds.loc[1]
    assert (one.aa, one.aa_lo, one.aa_hi, one.half_width_pct) == (1.0, 1.0, 1.0, 0.0)
    zero = seeds.loc[0]
    assert zero.aa_lo < 1.0 < zero.aa_hi and zero.half_width_pct > 0
    pooled = timing.epoch_speedups(loaded).set_index("method").loc["exact-aa"]
    assert pooled.pairs == 6  # pooling with seed 1's exact repeats narrows seed 0's floor
    assert zero.aa_lo < pooled.speedup_lo <= pooled.speedup_hi < zero.aa_hi
    written = tables.write(loaded, tmp_path / "out", None, (0.9,), "cmd")
    assert "timing_floor_seeds.csv" in written
    md = (tmp_path / "out" / "tables.md").read_text()
    assert "| synthetic | exact-aa | 4 | 1 | 3 | [1.00, 1.00] | 0.0% |" in md
    # six pairs (two seeds x three rounds), as the protocol asks: the cell carries no warning
    assert "| 2.00x [2.00, 2.00], faster | 6 (2 seed(s) x 3 round(s)) |" in md


def test_one_seed_gets_no_per_seed_floor(suite):
    path, root = suite
    loaded = load(root, load_suite(path))
    assert timing.seed_floors(loaded).empty and "timing_floor_seeds" not in timing.build(loaded, (0.9,))


def test_the_rule_change_table_shows_the_former_median_rule_beside_today_s(suite):
    """digest-I4's median epoch is its cheap one (0.03 s): the former rule read 3.33x where the
    mean over its whole period gives 2x; the A/A and partition rows barely move."""
    from experiments.analysis import rule_change
    path, root = suite
    built = timing.build(load(root, load_suite(path)), (0.9,))
    change = built["timing_rule_change"].set_index("method")
    assert list(change.index) == ["partition", "digest-I4"]
    d = change.loc["digest-I4"]
    assert d.former == pytest.approx(0.1 / 0.03) and d.speedup == pytest.approx(2.0)
    assert d.change_pct == pytest.approx(100 * (2.0 / (0.1 / 0.03) - 1))
    assert (d.former_verdict, d.verdict) == ("faster", "faster")
    assert list(rule_change.notable(built["timing_rule_change"]).method) == ["digest-I4"]
