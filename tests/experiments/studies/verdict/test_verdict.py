"""experiments/studies/verdict/analysis.py and render.py (docs/methods.md section 12): epochs to target
from convergence runs x per-epoch time at a bandwidth from speed rounds, the speedup to accuracy,
its interval, pairs and verdict against the A/A interval, "not reached", the ceiling, the fastest
close method (only at a clean point, where its interval clears the A/A interval), the
decomposition against end-to-end runs, asynchronous methods end to end. No training."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.studies.verdict import analysis as verdict
from experiments.studies.verdict import render as verdict_render
from experiments.render.figures import family, style
from experiments.suites.load import Loaded, RunRecord


def run(label, seed, vals, times, method=None, rnd=0, config=None, test=None):
    m = pd.DataFrame({"epoch": range(len(times)), "epoch_time": times, "val_acc": vals,
                      "bytes_total": [2**20] * len(times)})
    v = np.asarray(vals, dtype=float)
    best = int(np.nanargmax(v)) if np.isfinite(v).any() else len(v) - 1
    summary = {"best_val": float(vals[best]), "test_at_best_val": test if test is not None
               else float(vals[best]), "best_epoch": best, "config": config or {}}
    return RunRecord("toy", label, method or label.split("@")[0].split("-")[0], 4, seed, Path("."),
                     summary, m, round=rnd)


def curve(hit_at: int, n: int = 40, top: float = 0.80) -> list:
    """Validation accuracy 0.5 until epoch ``hit_at`` (1-based), then ``top``."""
    return [0.5] * (hit_at - 1) + [top] * (n - hit_at + 1)


@pytest.fixture
def conv():
    recs = [run("exact", s, curve(e), [1.0] * 40, test=0.80) for s, e in ((0, 10), (1, 12), (2, 14))]
    recs += [run("digest-I10", s, curve(20), [1.0] * 40, "digest", test=0.79) for s in (0, 1, 2)]
    recs += [run("partition", s, curve(5) if s < 2 else [0.5] * 40, [1.0] * 40, test=0.70)
             for s in (0, 1, 2)]
    return verdict.convergence(Loaded(recs, ["toy"], ["exact", "digest-I10", "partition"]))


def speed_runs(wobble=(1, 1.02, 0.98)):
    """Three rounds at 50mbit; the A/A twin's epochs are exact's x ``wobble`` (by round)."""
    recs = []
    for r in range(3):
        slow = (1.0, 2.0, 1.5)[r]  # a slow round hits every method alike
        recs += [run("exact@50mbit", 0, [np.nan] * 23, [slow] * 23, "exact", r),
                 run("exact-aa@50mbit", 0, [np.nan] * 23, [slow * wobble[r]] * 23,
                     "exact", r),
                 run("digest-I10@50mbit", 0, [np.nan] * 23, [0.25 * slow] * 23, "digest", r,
                     {"sync_interval": 10}),
                 run("partition@50mbit", 0, [np.nan] * 23, [0.1 * slow] * 23, "partition", r)]
    return Loaded([x for x in recs if not x.round], ["toy"], [], later=[x for x in recs if x.round])


def test_epochs_to_target_and_the_target(conv):
    assert verdict.target_of_conv(conv) == pytest.approx(0.99 * 0.80)
    assert conv["exact"].epochs == {0: 10, 1: 12, 2: 14}
    assert conv["partition"].epochs == {0: 5, 1: 5, 2: None}
    assert verdict.converged(conv["exact"]) and conv["exact"].budget == 40
    assert conv["exact"].mib == pytest.approx(1.0)


def test_speedup_to_accuracy_is_epochs_ratio_times_per_epoch_ratio(conv):
    times = verdict.round_times(speed_runs(), 3)
    sp = verdict.speedups(conv, times, ["50mbit"]).set_index("method")
    d = sp.loc["digest-I10"]  # (12 / 20) x 4 = 2.4; the rounds agree (4x each), the seeds do not:
    # three of each: the widened tails reach the draws of one seed three times, (10 or 14) / 20 x 4
    assert (d.speedup, d.lo, d.hi) == pytest.approx((2.4, 2.0, 2.8))
    assert d.per_epoch == pytest.approx(4.0) and d.ceiling == pytest.approx(10.0)
    assert d.of_ceiling == pytest.approx(0.4) and d.clean and d.note == ""
    # three rounds at one seed, clear of the A/A interval; exact is the reference
    assert (d.pairs, d.verdict, sp.loc["exact", "verdict"]) == (3, "faster", "reference")
    # the A/A twin over exact, by round 1, 1 / 1.02, 1 / 0.98: inside [0.95, 1.05]
    assert d.aa == pytest.approx((1 + 1 / 1.02 + 1 / 0.98) / 3) and d.aa_pairs == 3
    assert sp.loc["partition", "note"] == verdict.NOT_REACHED  # seed 2 never reaches the target
    assert np.isnan(sp.loc["partition", "speedup"])


def test_a_row_s_interval_does_not_move_when_another_method_is_added(monkeypatch):
    seeds = range(8)  # enough seeds that an interval's ends depend on the draws
    recs = [run("exact", s, curve(10 + s), [1.0] * 40, test=0.80 + 0.003 * s) for s in seeds]
    recs += [run("digest-I10", s, curve(12 + (5 * s) % 7), [1.0] * 40, "digest",
                 test=0.79 + 0.004 * ((3 * s) % 5)) for s in seeds]
    recs += [run("aaa-first", s, curve(9 + s), [1.0] * 40, "digest", test=0.78) for s in seeds]
    everyone = verdict.convergence(Loaded(recs, ["toy"], []))
    alone = {k: v for k, v in everyone.items() if k != "aaa-first"}
    added = {"aaa-first": everyone["aaa-first"], **alone}  # the new row comes first
    times = verdict.round_times(speed_runs(), 3)

    def ends(conv, shared=False):
        if shared:  # one generator for all rows of a table, as before: a new row moves the ends
            gen = np.random.default_rng(0)
            monkeypatch.setattr(verdict, "_rng", lambda *key: gen)
        sp = verdict.speedups(conv, times, ["50mbit"]).set_index("method").loc["digest-I10"]
        if shared:
            gen = np.random.default_rng(0)
        acc = verdict.accuracy(conv).set_index("method").loc["digest-I10"]
        return [sp.lo, sp.hi, acc.delta_lo, acc.delta_hi]

    assert ends(added) == ends(alone)
    assert ends(added, shared=True) != ends(alone, shared=True)


def test_accuracy_table_fastest_and_sentence(conv):
    acc = verdict.accuracy(conv).set_index("method")
    assert acc.loc["digest-I10", "delta"] == pytest.approx(-1.0)
    assert acc.loc["partition", "reached"] == "2/3" and np.isnan(acc.loc["partition", "epochs"])
    sp = verdict.speedups(conv, verdict.round_times(speed_runs(), 3), ["50mbit"])
    acc = acc.reset_index()
    assert verdict.fastest(acc, sp, "50mbit") is None  # digest is 1 point below exact: not close
    acc.loc[acc.method == "digest-I10", "delta"] = -0.3
    assert verdict.fastest(acc, sp, "50mbit") == "digest-I10"
    text = verdict_render.sentence("toy", acc, sp, ["50mbit"])
    assert text.endswith("at 50mbit, digest-I10 (2.40x [2.00, 2.80]). The intervals named rest "
                         "on 3 pairs, below the 6 the protocol asks.")
    # an interval that overlaps the A/A interval: no winner; the fastest point estimate is
    # named, and said not to be a gain
    held = sp.copy()
    held.loc[held.method == "digest-I10", ["lo", "verdict"]] = [0.95, "no measurable difference"]
    assert verdict_render.sentence("toy", acc, held, ["50mbit"]).endswith(
        "at 50mbit, none measurably faster than exact (the fastest, digest-I10, 2.40x [0.95, "
        "2.80], does not clear the A/A interval).")
    md = verdict_render.table(acc, sp, ["50mbit"])
    assert "| digest-I10 | 79.00 ± 0.00 | -0.30 [" in md
    assert "| 2.40x [2.00, 2.80], faster; 3 pairs (< 6) |" in md
    assert "| exact | 80.00 ± 0.00 | reference | 12.0 (3/3) | 1.00 | reference |" in md
    assert "| partition |" in md and "| not reached |" in md


def frame(rows: dict) -> pd.DataFrame:
    """A clean point's speed frame at 50mbit as ``speedups`` gives it: exact's reference row (A/A
    [0.98, 1.02], 6 pairs) and ``rows``, each verdict from its interval against the A/A's."""
    body = pd.DataFrame({"bandwidth": "50mbit", **rows})
    body["verdict"] = ["faster" if lo > 1.02 else "no measurable difference" for lo in body.lo]
    ref = pd.DataFrame({"method": ["exact"], "bandwidth": "50mbit", "verdict": "reference"})
    return pd.concat([ref, body], ignore_index=True).assign(
        clean=True, pairs=6, aa=1.0, aa_lo=0.98, aa_hi=1.02, aa_pairs=6)


def test_the_sentence_names_the_close_methods_the_intervals_do_not_rank_below_the_fastest():
    acc = pd.DataFrame({"method": ["exact", "a", "b", "c", "far"],
                        "delta": [0.0, -0.1, -0.2, +0.1, -2.0]})
    rows = {"method": ["a", "b", "c", "far"], "speedup": [2.3, 2.2, 1.5, 3.0],
            "lo": [1.6, 2.0, 1.4, 2.9], "hi": [3.0, 2.4, 1.55, 3.1]}
    speed = frame(rows)
    # "far" is faster but 2 points below exact; "c" ends below a's lower end: ranked below it
    assert verdict.fastest(acc, speed, "50mbit") == "a"
    assert list(verdict.rivals(acc, speed, "50mbit", "a").method) == ["b"]
    assert verdict_render.sentence("toy", acc, speed, ["50mbit"]).endswith(
        "at 50mbit, a (2.30x [1.60, 3.00]; not measurably ahead of b (2.20x)).")
    # beyond RIVALS close rivals the rest are counted, fastest named first
    many = pd.DataFrame({"method": ["exact", *"abcde"], "delta": 0.0})
    wide = frame({"method": list("abcde"), "speedup": [2.5, 2.1, 2.4, 2.2, 2.3], "lo": 1.5,
                  "hi": 3.0})
    assert verdict_render.sentence("toy", many, wide, ["50mbit"]).endswith(
        "not measurably ahead of c (2.40x), e (2.30x), d (2.20x) and 1 more).")
    # the fastest point estimate overlaps the A/A interval: the fastest that clears it is named
    held = frame({**rows, "lo": [0.9, 2.0, 1.4, 2.9]})
    assert (verdict.winner(acc, held, "50mbit"), verdict.fastest(acc, held, "50mbit")) == ("b", "a")
    assert verdict_render.sentence("toy", acc, held, ["50mbit"]).endswith(
        "at 50mbit, b (2.20x [2.00, 2.40]; not measurably ahead of a (2.30x)).")
    # none close clears it: the fastest point estimate is named, and said not to be a gain
    none = frame({**rows, "lo": [0.9, 0.95, 0.9, 2.9]})
    assert verdict.winner(acc, none, "50mbit") is None
    assert verdict_render.sentence("toy", acc, none, ["50mbit"]).endswith(
        "at 50mbit, none measurably faster than exact (the fastest, a, 2.30x [0.90, 3.00], does "
        "not clear the A/A interval).")


def test_a_point_that_is_not_clean_names_no_winner_and_says_so_in_every_cell(conv):
    # the twin's rounds 1.0, 1.2, 0.85 of exact's: its interval [0.83, 1.18] leaves [0.95, 1.05]
    sp = verdict.speedups(conv, verdict.round_times(speed_runs((1.0, 1.2, 0.85)), 3), ["50mbit"])
    acc, d = verdict.accuracy(conv), sp.set_index("method").loc["digest-I10"]
    acc.loc[acc.method == "digest-I10", "delta"] = -0.3  # close to exact: it would be named
    assert not d.clean and d.aa_lo < 0.95 and d.aa_hi > 1.05
    assert d.verdict == "A/A not clean: no verdict" and d.lo > d.aa_hi  # however far it clears
    assert verdict.winner(acc, sp, "50mbit") is None
    assert verdict_render.sentence("toy", acc, sp, ["50mbit"]).endswith(
        f"at 50mbit, no winner named (A/A interval [{d.aa_lo:.2f}, {d.aa_hi:.2f}] not inside "
        "[0.95, 1.05]).")
    md = verdict_render.table(acc, sp, ["50mbit"])
    assert "| 2.40x [2.00, 2.80], A/A not clean: no verdict; 3 pairs (< 6) |" in md
    assert "| not reached (A/A not clean) |" in md  # partition's cell says it too
    assert "| exact | 80.00 ± 0.00 | reference | 12.0 (3/3) | 1.00 | reference |" in md  # no flag
    assert "clean (the interval inside [0.95, 1.05]) at 0 of 1 bandwidths; at 50mbit" in \
        verdict_render.aa_line(sp, ["50mbit"])


def test_a_graph_without_speed_runs_shows_its_accuracy_and_what_it_waits_for(conv):
    count = "bench_speed_toy: 0 of 9 runs"
    lines = verdict_render.partial_section("toy", verdict.accuracy(conv), count)
    text = "\n".join(lines)
    assert lines[0] == "## toy" and f"(complete speed runs so far: {count})" in text
    assert "budget at every seed): yes." in text
    assert "| method | test acc. % | Δ vs exact [95%] | epochs to 0.99 (reached) | MiB/epoch |" in text
    assert "| exact | 80.00 ± 0.00 | reference | 12.0 (3/3) | 1.00 |" in text
    assert "| partition | 70.00 ± 0.00 | -10.00 [-10.00, -10.00] | not reached (2/3) | 1.00 |" in text


def test_where_exact_itself_misses_the_target_at_a_seed_the_graph_is_read_at_the_fallback():
    # exact's best validation accuracies 0.81, 0.80, 0.79 (mean 0.80): seed 2 misses 0.99 x 0.80
    # = 0.792 but reaches 0.98 x 0.80 = 0.784, at epoch 14
    recs = [run("exact", s, curve(e, top=t), [1.0] * 40, test=0.80)
            for s, e, t in ((0, 10, 0.81), (1, 12, 0.80), (2, 14, 0.79))]
    recs += [run("digest-I10", s, curve(20, top=0.80), [1.0] * 40, "digest") for s in (0, 1, 2)]
    conv = verdict.convergence(Loaded(recs, ["toy"], []))
    assert conv["exact"].q == 0.98 and conv["exact"].epochs == {0: 10, 1: 12, 2: 14}
    assert verdict.target_of_conv(conv) == pytest.approx(0.98 * 0.80)
    assert verdict.convergence(Loaded(recs, ["toy"], []), 0.99)["exact"].epochs[2] is None
    acc = verdict.accuracy(conv)
    sp = verdict.speedups(conv, verdict.round_times(speed_runs(), 3), ["50mbit"])
    assert sp.set_index("method").loc["digest-I10", "speedup"] == pytest.approx(12 / 20 * 4)
    text = "\n".join(verdict_render.partial_section("toy", acc, "0 of 9 runs"))
    assert "| method | test acc. % | Δ vs exact [95%] | epochs to 0.98 (reached) |" in text
    assert ("The target here is 0.98, not 0.99, x exact's mean best validation accuracy: exact "
            "itself misses 0.99 x 80.00 = 79.20% at a seed (its best validation accuracy by seed: "
            "81.00, 80.00, 79.00%)") in text
    assert verdict_render.sentence("toy", acc, sp, ["50mbit"]).startswith(
        "On toy, the first to 0.98 of exact's")
    # where exact misses every target at a seed, no speedup can be divided by its time
    recs[2] = run("exact", 2, curve(14, top=0.70), [1.0] * 40, test=0.80)
    conv = verdict.convergence(Loaded(recs, ["toy"], []))
    assert conv["exact"].q == 0.99 and conv["exact"].epochs[2] is None
    sp = verdict.speedups(conv, verdict.round_times(speed_runs(), 3), ["50mbit"])
    assert set(sp.note) == {"exact not reached"} and sp.speedup.isna().all()


def test_the_decomposition_against_an_end_to_end_run(conv):
    times = verdict.round_times(speed_runs(), 3)
    e2e = Loaded([run("digest-I10@50mbit", 0, curve(20), [0.375] * 40, "digest")], ["toy"], [])
    err = verdict.decomposition_error(conv, times, e2e)
    # predicted: 20 epochs x the rounds' mean 0.25 x 1.5 = 7.5 s; measured 20 x 0.375 = 7.5 s
    assert len(err) == 1 and err.error_pct.iloc[0] == pytest.approx(0.0)
    assert err.measured_s.iloc[0] == pytest.approx(7.5)
    text = "\n".join(verdict_render.decomposition(err, "bench_e2e_toy"))
    assert "largest error 0.0% over 1 runs at 1 bandwidth(s)" in text
    assert "| digest-I10 | 50mbit | 0 | 20 / 20 | 7.5 | 7.5 | +0.0% |" in text


def test_an_asynchronous_method_is_timed_end_to_end_not_decomposed():
    recs = [run("exact", s, curve(e), [1.0] * 40, test=0.80) for s, e in ((0, 10), (1, 12), (2, 14))]
    recs += [run("digest-async-I10", s, curve(25), [1.0] * 40, "digest-async") for s in (0, 1, 2)]
    conv = verdict.convergence(Loaded(recs, ["toy"], ["exact", "digest-async-I10"]))
    times = verdict.round_times(speed_runs(), 3)  # exact@50mbit: rounds 1.0, 2.0, 1.5 s an epoch
    # end to end behind the link: seed 0 reaches the target at epoch 30 at 0.2 s an epoch, seed 1
    # at 30 at 0.3 s; seed 2 never
    e2e = Loaded([run("digest-async-I10@50mbit", 0, curve(30), [0.2] * 40, "digest-async"),
                  run("digest-async-I10@50mbit", 1, curve(30), [0.3] * 40, "digest-async")],
                 ["toy"], [])
    measured = verdict.end_to_end(conv, e2e)
    assert measured == {("digest-async-I10", "50mbit"): {0: (pytest.approx(6.0), True),
                                                        1: (pytest.approx(9.0), True)}}
    sp = verdict.speedups(conv, times, ["50mbit"], measured).set_index("method")
    a = sp.loc["digest-async-I10"]  # exact at seeds 0, 1: mean 11 epochs x median 1.5 s / 7.5 s
    assert a.speedup == pytest.approx(2.2) and a.lo <= a.speedup <= a.hi and a.note == "end to end"
    assert a.pairs == 2  # its seeds measured end to end
    cell = verdict_render._iv(sp.reset_index().query("method == 'digest-async-I10'").iloc[0])
    assert cell.startswith("2.20x [")
    assert cell.endswith(f"] (end to end), {a.verdict}; 2 pairs (< 6)")
    assert verdict.decomposition_error(conv, times, e2e).empty  # not a check of the decomposition
    # seed 2 never reaches it in its 40 epochs of 0.2 s: its 8 s are a lower bound on its time,
    # so the speedup is at most exact's (mean 12 epochs x 1.5 s) / the mean of 6, 9 and 8 s
    e2e.records.append(run("digest-async-I10@50mbit", 2, [0.5] * 40, [0.2] * 40, "digest-async"))
    sp = verdict.speedups(conv, times, ["50mbit"], verdict.end_to_end(conv, e2e)).set_index("method")
    assert sp.loc["digest-async-I10", "note"] == "< 2.35x: not reached at 1 of 3 seeds (end to end)"
    assert np.isnan(sp.loc["digest-async-I10", "speedup"])
    sp = verdict.speedups(conv, times, ["50mbit"]).set_index("method")
    assert sp.loc["digest-async-I10", "note"] == "end to end only (asynchronous)"
    # without runs behind the link, a miss on loopback is what was measured
    conv["digest-async-I10"].epochs[1] = None
    sp = verdict.speedups(conv, times, ["50mbit"]).set_index("method")
    assert sp.loc["digest-async-I10", "note"] == ("not reached on loopback at 1 of 3 seeds (not "
                                                  "run end to end)")


def test_the_a_a_line_counts_the_bandwidths_whose_noise_floor_passes(conv):
    sp = verdict.speedups(conv, verdict.round_times(speed_runs(), 3), ["50mbit"])
    line = verdict_render.aa_line(sp, ["50mbit"])
    assert line.startswith("A/A check (exact's twin over exact per epoch, mean over 3 pairs "
                           "[95%]): 50mbit 1.00x [0.98, 1.02]; clean (the interval inside [0.95, "
                           "1.05]) at 1 of 1 bandwidths. Fewer than the 6 pairs the protocol asks")
    sp.loc[sp.method == "exact", ["aa_hi", "clean"]] = [1.08, False]
    line = verdict_render.aa_line(sp, ["50mbit"])
    assert "at 0 of 1 bandwidths; at 50mbit the two identical runs are not shown equivalent" in line


def test_the_figure_is_written(conv, tmp_path):
    sp, written = verdict.speedups(conv, verdict.round_times(speed_runs(), 3), ["50mbit"]), []
    verdict_render.figure("toy", sp, pd.DataFrame({"bandwidth": ["50mbit"],
                                                    "exact_comm_share": [0.9]}), tmp_path, written)
    assert written == [tmp_path / "toy_speedup_to_accuracy.png"] and written[0].stat().st_size > 0


def test_the_figure_never_gives_two_families_of_a_panel_one_colour():
    # in the order the benchmark lists them, the first six hold varco and sancus (one colour)
    labels = ["exact", "digest-I10", "varco-variable", "pipegcn", "pipegcn-smooth0.95",
              "bnsgcn-p0.1", "sancus", "adaqp-8", "adaqp-adaptive-4", "sat-I10", "sylvie"]
    groups = verdict_render.figure_panels(labels)
    shown = [m for g in groups for m in g.labels]
    assert sorted(shown) == sorted(labels[1:])  # every method once, exact left out
    for g in groups:
        assert len(g.labels) <= 6
        colours = {}
        for m in g.labels:
            colours.setdefault(style(m, g.labels)["color"], set()).add(family(m))
        assert all(len(f) == 1 for f in colours.values()), (g.title, colours)


def test_the_committed_verdict_page_is_what_the_committed_runs_give():
    from experiments.studies.verdict import command as verdict_page
    committed = (verdict_page.REPO / verdict_page.OUT / "README.md").read_text()
    assert verdict_page.page(verdict_page.REPO, [], draw=False) == committed


def test_a_bandwidth_whose_part_is_not_run_is_left_out_and_named():
    from experiments.studies.verdict import command as verdict_page
    speed = speed_runs()
    speed.later += [run("exact@1gbit", 0, [np.nan] * 23, [0.5] * 23, "exact", 1)]
    speed.missing = ["toy exact@1gbit_w4_s0", "toy digest-I10@100mbit_w4_s0_r2"]
    assert verdict_page._complete_bandwidths(speed) == (["50mbit"], ["1gbit", "100mbit"])


def test_a_section_says_which_bandwidths_wait(conv):
    sp = verdict.speedups(conv, verdict.round_times(speed_runs(), 3), ["50mbit"])
    v = verdict.GraphVerdict(verdict.accuracy(conv), sp, ["50mbit"])
    lines = verdict_render.graph_section("toy", v, None, ["1gbit"])
    assert lines[2] == ("Speed runs not complete yet at 1gbit: those bandwidths are left out until "
                        "their part is run.")
    assert "speedup to accuracy @ 50mbit [95%]" in "\n".join(lines)
    assert "@ 1gbit" not in "\n".join(lines)


def test_the_lead_block_links_from_the_page_it_leads(conv):
    from experiments.studies.verdict import command as verdict_page
    sp = verdict.speedups(conv, verdict.round_times(speed_runs(), 3), ["50mbit"])
    toy = verdict.GraphVerdict(verdict.accuracy(conv), sp, ["50mbit"])
    graphs = {"toy": ("verdict", toy, ["1gbit"]), "other": ("missing", ["a: 0 of 3 runs"]),
              "third": ("missing", ["c: 0 of 3 runs"])}
    top, index = verdict_page.lead(Path("."), graphs), verdict_page.lead(Path("results"), graphs)
    assert top.startswith("| graph | target (x exact's best val.) | 50mbit |\n")
    assert "| toy | 0.99 | " in top and verdict_page.ADVISE in top
    assert "[toy](plots/verdict/toy_speedup_to_accuracy.png)" in top and \
        "[toy](../plots/verdict/toy_speedup_to_accuracy.png)" in index
    assert "[verdict.csv](verdict/verdict.csv)" in index
    assert ("**other**, **third**: speedups to accuracy not measured yet ([the verdict]"
            "(verdict/README.md)") in index
