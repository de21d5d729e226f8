"""Experiment tables, cost model and plots (no training): hand-made metrics.csv / summary.json
fixtures (helpers.write_run) fed to experiments/tables.py, costmodel.py, report.py and plots.py.
(Suites and the runner: test_runner.py.)"""
import json
import math

import pandas as pd
import pytest

from digest.advise.protocol import TARGETS
from experiments.analysis import costmodel
from experiments import plots, tables
from experiments.analysis import tables as frames
from experiments.render import figures, report
from experiments.suites.suite import expand, load_suite
from experiments.suites.load import load
from fake_runs import write_run

NET = costmodel.parse_network("10gbit,5us")


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "runs"
    write_run(root, "exact", 1, 0, [0.4, 0.4, 0.4], [0.5, 0.9, 1.0], bytes_w=0, messages_w=0)
    write_run(root, "exact", 2, 0, [0.1, 0.1, 0.1], [0.5, 0.9, 1.0])
    write_run(root, "exact", 2, 1, [0.1, 0.1, 0.1], [0.5, 0.9, 1.0])
    write_run(root, "digest", 2, 0, [0.05, 0.05, 0.05], [0.5, 0.99, 0.99])
    write_run(root, "digest", 2, 1, [0.05, 0.05, 0.05], [0.5, 0.99, 0.9])
    write_run(root, "partition", 2, 0, [0.02, 0.02, 0.02], [0.5, 0.6, 0.7], tests=[0.5, 0.6, 0.8])
    write_run(root, "partition", 2, 1, [0.02, 0.02, 0.02], [0.5, 0.6, 0.99], tests=[0.5, 0.6, 1.0])
    return root


def test_per_epoch_speedup_is_exact_time_over_method_time(runs):
    et = frames.epoch_time(frames.run_frame(load(runs)))
    row = et[(et.method == "digest") & (et.workers == 2)].iloc[0]
    assert row.epoch_ms == pytest.approx(50.0) and row.speedup_vs_exact == pytest.approx(2.0)
    assert et[(et.method == "partition")].speedup_vs_exact.iloc[0] == pytest.approx(5.0)
    assert et[(et.method == "exact") & (et.workers == 1)].speedup_vs_exact.iloc[0] == 1.0


def test_time_to_accuracy_speedup_and_not_reached(runs):
    tta = frames.time_to_accuracy(load(runs), 0.98)
    exact = tta[(tta.method == "exact") & (tta.workers == 2)].iloc[0]
    assert exact.target_val == pytest.approx(0.98) and exact.time_s == pytest.approx(0.3)
    digest = tta[tta.method == "digest"].iloc[0]  # both seeds reach 0.99 at epoch 1: 0.1 s
    assert digest.time_s == pytest.approx(0.1) and digest.speedup_vs_exact == pytest.approx(3.0)
    assert digest.epochs == 2 and digest.MiB == pytest.approx(2 * 2000 / 2**20)
    part = tta[tta.method == "partition"].iloc[0]  # seed 0 never reaches 0.98: never a number
    assert part.seeds_reached == "1/2"
    for col in ("time_s", "speedup_vs_exact", "epochs", "MiB"):
        assert part[col] == "not reached"


def test_a_models_rows_are_compared_with_that_models_exact_run(runs):
    """sage-* rows against sage-exact (time and accuracy target), gat-digest with no gat-exact
    against nothing, never against the suite's default model's exact run."""
    write_run(runs, "sage-exact", 2, 0, [0.8, 0.8, 0.8], [0.4, 0.6, 0.8], method="exact")
    write_run(runs, "sage-partition", 2, 0, [0.2, 0.2, 0.2], [0.4, 0.79, 0.9], method="partition")
    write_run(runs, "gat-digest", 2, 0, [0.2, 0.2, 0.2], [0.4, 0.6, 0.9], method="digest")
    et = frames.epoch_time(frames.run_frame(load(runs))).set_index(["method", "workers"])
    assert et.loc[("sage-partition", 2), "speedup_vs_exact"] == pytest.approx(4.0)
    assert et.loc[("sage-exact", 2), "speedup_vs_exact"] == 1.0
    assert math.isnan(et.loc[("gat-digest", 2), "speedup_vs_exact"])
    assert et.loc[("digest", 2), "speedup_vs_exact"] == pytest.approx(2.0)  # unchanged
    tta = frames.time_to_accuracy(load(runs), 0.98)
    sage = tta[tta.method == "sage-partition"].iloc[0]  # 0.98 x 0.8 = 0.784: reached at epoch 1
    assert sage.target_val == pytest.approx(0.784) and sage.time_s == pytest.approx(0.4)
    assert sage.speedup_vs_exact == pytest.approx(2.4 / 0.4)
    assert "gat-digest" not in set(tta.method)
    assert tables.main(["--runs", str(runs), "--out", str(runs.parent / "t")]) == 0
    assert "compared with that model's exact run" in (runs.parent / "t" / "tables.md").read_text()
    from digest.models import MODELS
    from experiments.suites.suite import MODEL_PREFIXES
    assert set(MODEL_PREFIXES) == set(MODELS)  # a model added to digest is named here too


def test_stricter_targets_and_the_evaluation_spacing(runs, tmp_path):
    """0.99 and 0.995 of exact's best val beside 0.98, and how often the runs
    were evaluated (the granularity of every time to accuracy)."""
    tta = frames.build(load(runs))["time_to_accuracy"]
    assert TARGETS == (0.98, 0.99, 0.995)
    assert sorted(set(tta.target)) == [0.98, 0.99, 0.995]
    digest = tta[tta.method == "digest"].set_index("target")
    assert digest.loc[0.99, "time_s"] == pytest.approx(0.1)  # both seeds reach 0.99 at epoch 1
    assert digest.loc[0.995, "time_s"] == "not reached" and digest.loc[0.995, "seeds_reached"] == "0/2"
    assert (tta.eval_every == 1).all()
    m = pd.DataFrame({"epoch": range(6), "val_acc": [None, 0.5, None, 0.7, None, 0.8]})
    assert frames.eval_gap(m) == 2
    assert frames.eval_gap(m.assign(val_acc=[None, None, None, 0.7, 0.8, 0.9])) == 4
    assert tables.main(["--runs", str(runs), "--out", str(tmp_path / "t")]) == 0
    csv = pd.read_csv(tmp_path / "t" / "time_to_accuracy.csv")
    assert {"target", "eval_every"} <= set(csv.columns) and len(csv) == 4 * 3  # exact at M=1 and 2, 2 more at 2
    md = (tmp_path / "t" / "tables.md").read_text()
    assert "targets 0.98, 0.99 and 0.995 x exact's best val" in md
    assert "same model" not in md  # no label names a model: the committed tables' text
    assert "| 0.995 | digest | 2 | 0.9950 | 0/2 | 1 | not reached |" in md
    with pytest.raises(ValueError):
        tables.parse_targets("0.98,1.5")


def test_suites_with_time_to_accuracy_evaluate_every_epoch():
    """A suite that compares methods with an exact run has a time-to-accuracy table: its runs
    evaluate every epoch (a suite of exact runs alone, such as calibration, compares none; a speed
    suite evaluates each run once, at its last epoch, and has no such table: test_timing.py)."""
    from experiments.suites.suite import CONFIGS
    for path in sorted(CONFIGS.glob("*.yaml")):
        suite = load_suite(str(path))
        labels = {m.label for m in suite.methods}
        if "exact" in labels and len(labels) > 1:
            for run in expand(suite):
                every = run.flags.get("eval_every", 1)
                speed = every >= run.flags["epochs"] and suite.rounds > 1
                assert every == 1 or speed, (suite.name, run.name)


def test_mean_std_over_seeds(runs):
    assert frames.mean_std([0.9, 1.0]) == "95.00 ± 7.07"
    assert frames.mean_std([0.9]) == "90.00"
    acc = frames.accuracy(frames.run_frame(load(runs)))
    part = acc[acc.method == "partition"].iloc[0]  # test at best val: 0.8 and 1.0
    assert part.seeds == 2 and part.test_mean == pytest.approx(0.9)
    assert part.test_std == pytest.approx(math.sqrt(0.02)) and part.test_at_best_val == "90.00 ± 14.14"


def test_bandwidth_and_latency_parsing():
    assert costmodel.parse_bandwidth("10gbit") == (1.25e9, "10 Gbit/s")
    assert costmodel.parse_bandwidth("100mbit")[0] == pytest.approx(12.5e6)
    assert costmodel.parse_bandwidth("2gbyte") == (2e9, "2 GB/s")
    assert costmodel.parse_bandwidth("1Gbit/s")[0] == 1.25e8
    assert costmodel.parse_latency("5us") == (pytest.approx(5e-6), "5 us")
    assert costmodel.parse_latency("0.1ms")[0] == pytest.approx(1e-4)
    assert NET.column == "modeled @10 Gbit/s, 5 us"
    for bad in ("10", "10furlongs,5us", "10gbit", "10gbit,5 parsecs", "-1gbit,5us"):
        with pytest.raises(ValueError):
            costmodel.parse_network(bad)


def test_cost_model_arithmetic():
    """Compute = each worker's CPU seconds (cpu_time_w*), not wall time minus collective time."""
    m = pd.DataFrame({"cpu_time_w0": [0.010, 0.030], "bytes_w0": [1.25e6, 0], "messages_w0": [4, 0],
                      "cpu_time_w1": [0.020, 0.001], "bytes_w1": [0, 1.25e7], "messages_w1": [2, 10],
                      "compute_time_w0": [9.0, 9.0], "compute_time_w1": [9.0, 9.0]})
    # row 0: w0 = 0.010 + 1.25e6 / 1.25e9 + 4 x 5e-6 = 0.01102; w1 = 0.020 + 0 + 1e-5 = 0.02001
    # row 1: w0 = 0.030; w1 = 0.001 + 0.01 + 5e-5 = 0.01105
    assert list(costmodel.modeled_epoch_times(m, NET)) == pytest.approx([0.02001, 0.030])
    assert list(costmodel.modeled_epoch_times(m, NET, compute="wall")) == pytest.approx([9.00102, 9.01005])
    # workers sharing cores (share = workers per core): only the compute seconds scale
    # row 0: w0 = 0.020 + 0.001 + 2e-5 = 0.02102; w1 = 0.040 + 1e-5; row 1: w0 = 0.060
    assert list(costmodel.modeled_epoch_times(m, NET, share=2)) == pytest.approx([0.04001, 0.060])
    old = m.drop(columns=["cpu_time_w0", "cpu_time_w1"])  # a run that recorded no CPU seconds
    assert costmodel.modeled_epoch_times(old, NET).isna().all()


def test_modeled_columns_are_separate_and_labelled(runs):
    built = frames.build(load(runs), NET)
    assert "straggler" not in built  # only when some run has --slow-workers
    et = built["epoch_time"]
    assert {"epoch_ms", "modeled @10 Gbit/s, 5 us epoch_ms"} <= set(et.columns)
    # fixture: compute = t/2, 1000 B at 1.25e9 B/s = 0.8 us, 4 messages = 20 us
    exact2 = et[(et.method == "exact") & (et.workers == 2)].iloc[0]
    assert exact2["modeled @10 Gbit/s, 5 us epoch_ms"] == pytest.approx(50.0208)
    md = report.markdown(load(runs), built, NET, 0.98, "./run_all.sh --quick")
    assert "modeled @10 Gbit/s, 5 us (not measured)" in md and "not reached" in md
    assert "| method | M | seeds | toy |" in md and "| partition | 2 | 2 | 90.00 ± 14.14 |" in md
    assert "box (x86_64), 2 cores, 8.0 GiB RAM, GPU: none" in md and "abc123" in md
    assert "`./run_all.sh --quick`" in md


def test_plots_write_six_pngs(runs, tmp_path):
    assert plots.main(["--runs", str(runs), "--out", str(tmp_path / "p"), "--network", "10gbit,5us"]) == 0
    assert len(list((tmp_path / "p").glob("toy_*.png"))) == 6  # + _pareto.png


def test_stale_error_plot_only_for_methods_that_record_it(runs, tmp_path):
    d = write_run(runs, "digest-I2", 2, 0, [0.05] * 4, [0.5, 0.9, 0.95, 0.99], method="digest")
    m = pd.read_csv(d / "metrics.csv")
    m["stale_err_l1"] = [None, 0.2, None, 0.1]  # a sync every 2nd step
    m["stale_err_l2"] = [None, 0.4, None, 0.3]
    m.to_csv(d / "metrics.csv", index=False)
    assert plots.main(["--runs", str(runs), "--out", str(tmp_path / "p")]) == 0
    assert (tmp_path / "p" / "toy_stale_error.png").exists()
    assert len(list((tmp_path / "p").glob("toy_*.png"))) == 7


def test_runs_csv_has_each_runs_own_results(runs):
    idx = frames.runs_index(load(runs)).set_index(["method", "workers", "seed"])
    part = idx.loc[("partition", 2, 1)]  # fixture: test 1.0 at its best val 0.99, 0.02 s epochs
    assert (part.best_val, part.test_at_best_val) == (0.99, 1.0)
    assert part.mean_epoch_time == pytest.approx(0.02) and part.command.endswith("--workers 2")


def test_legend_says_each_methods_seeds_only_when_they_differ(runs):
    assert figures.seed_labels(load(runs), "toy", 2, ["exact", "digest"]) == (
        {"exact": "exact", "digest": "digest"}, "mean of 2 seed(s)")
    write_run(runs, "varco", 2, 0, [0.1] * 3, [0.5, 0.9, 1.0])
    assert figures.seed_labels(load(runs), "toy", 2, ["exact", "varco"]) == (
        {"exact": "exact (2 seeds)", "varco": "varco (1 seed)"}, "mean over each method's seeds")


def test_straggler_table_without_exact(tmp_path):
    """Synchronous digest and DIGEST-A, each with and without a 3x slower rank 3 (as the
    straggler suite); no exact run, so time to accuracy is empty but every table is written."""
    root = tmp_path / "runs"
    specs = [("sync", "digest", "", [0.1] * 4, None),
             ("sync-slow", "digest", "3:3", [0.3] * 4, None),
             ("async", "digest-async", "", [0.1] * 4,
              {"steps_per_s_fast": 12.0, "steps_per_s_slow": None, "steps_by_worker": [4, 4, 4, 4],
               "staleness_param_mean": 1.5, "staleness_param_max": 4,
               "staleness_repr_mean": 3.0, "staleness_repr_max": 9}),
             ("async-slow", "digest-async", "3:3", [0.15] * 4,
              {"steps_per_s_fast": 20.0, "steps_per_s_slow": 7.0, "steps_by_worker": [5, 5, 5, 1],
               "slow_factor_by_worker": [1.0, 1.0, 1.0, 3.0], "staleness_param_mean": 2.5,
               "staleness_param_max": 9, "staleness_repr_mean": 4.0, "staleness_repr_max": 20})]
    for label, method, slow, times, extra in specs:
        d = write_run(root, label, 4, 0, times, [0.5, 0.6, 0.7, 0.8], method=method)
        summary = json.loads((d / "summary.json").read_text())
        summary["config"]["slow_workers"] = slow
        summary["total_train_time"] = sum(times)
        summary["final"] = {"test_acc": 0.8}
        summary.update(extra or {})
        (d / "summary.json").write_text(json.dumps(summary))
        if method == "digest":  # synchronous DIGEST's metrics column: age 0, 1, 2, 3
            m = pd.read_csv(d / "metrics.csv")
            m["staleness_repr"] = [0, 1, 2, 3]
            m.to_csv(d / "metrics.csv", index=False)
    built = frames.build(load(root))
    st = built["straggler"].set_index("method")
    assert st.loc["sync", "fast_steps_per_s"] == pytest.approx(10.0)  # 4 epochs / 0.4 s
    assert st.loc["sync", "slow_steps_per_s"] is None or math.isnan(st.loc["sync", "slow_steps_per_s"])
    assert st.loc["sync-slow", "fast_steps_per_s"] == st.loc["sync-slow", "slow_steps_per_s"] \
        == pytest.approx(4 / 1.2)
    assert st.loc["sync-slow", "staleness_param_max"] == 0 and st.loc["sync", "staleness_repr_max"] == 3
    assert st.loc["sync", "staleness_repr_mean"] == pytest.approx(1.5)
    assert st.loc["async-slow", "fast_steps_per_s"] == 20.0 and st.loc["async-slow", "slow_steps_per_s"] == 7.0
    assert st.loc["async-slow", "fast_vs_sync"] == pytest.approx(20.0 / (4 / 1.2))
    assert st.loc["async", "fast_vs_sync"] == pytest.approx(1.2)
    assert st.loc["async-slow", "steps_by_worker"] == "5/5/5/1"
    assert st.loc["async-slow", "staleness_repr_max"] == 20
    assert len(built["time_to_accuracy"]) == 0
    assert tables.main(["--runs", str(root), "--out", str(tmp_path / "t")]) == 0
    md = (tmp_path / "t" / "tables.md").read_text()
    assert st.loc["async-slow", "grad_share_by_worker"] == "0.31/0.31/0.31/0.06"  # from steps
    assert st.loc["sync-slow", "grad_share_by_worker"] == "0.25/0.25/0.25/0.25"
    assert "## 5. Stragglers" in md
    assert "| async-slow | 4 | 3:3 | 5/5/5/1 | 0.31/0.31/0.31/0.06 | 20.0 | 7.0 | 6.00x" in md
    assert (tmp_path / "t" / "straggler.csv").exists()


@pytest.fixture
def sweep(tmp_path):
    """An emulated sweep: exact and digest at 1 Gbit/s and 8 Mbit/s (1 MB/s), 2 workers; each
    worker sends 1 MB per exact epoch, 0.1 MB per DIGEST epoch; CPU s = epoch time / 2."""
    root = tmp_path / "sweep"
    for bw, times in [(("1gbit", 1e9), (0.2, 0.05)), (("8mbit", 8e6), (1.2, 0.2))]:
        write_run(root, f"exact@{bw[0]}", 2, 0, [times[0]] * 3, [0.5, 0.9, 1.0], bytes_w=1e6,
                  method="exact", bandwidth=bw)
        write_run(root, f"digest@{bw[0]}", 2, 0, [times[1]] * 3, [0.5, 0.99, 0.99], bytes_w=1e5,
                  method="digest", bandwidth=bw)
    return root


def test_a_sweep_compares_each_method_with_exact_at_the_same_bandwidth(sweep, tmp_path):
    built = frames.build(load(sweep))
    et = built["epoch_time"].set_index("method")
    assert et.loc["digest@8mbit", "speedup_vs_exact"] == pytest.approx(6.0)  # 1.2 / 0.2
    assert et.loc["digest@1gbit", "speedup_vs_exact"] == pytest.approx(4.0)
    ce = built["cluster_epoch_time"].set_index(["method", "bandwidth"])
    assert ce.loc[("digest", "8mbit"), "speedup_vs_exact"] == pytest.approx(6.0)
    cm = built["cluster_model"].set_index(["method", "bandwidth"])
    # exact @ 8mbit: CPU 0.6 s + 1e6 B / 1e6 B/s = 1.6 s modeled vs 1.2 s emulated: +33%
    assert cm.loc[("exact", "8mbit"), "modeled_ms"] == pytest.approx(1600)
    assert cm.loc[("exact", "8mbit"), "error_pct"] == pytest.approx(100 / 3)
    tta = built["cluster_time_to_accuracy"]
    tta = tta[tta.target == 0.98].set_index(["method", "bandwidth"])  # one row per target
    # exact reaches 0.98 in its 3rd epoch (3.6 s), digest in its 2nd (0.4 s)
    assert tta.loc[("digest", "8mbit"), "speedup_vs_exact"] == pytest.approx(3 * 1.2 / 0.4)
    md = report.markdown(load(sweep), built, None, 0.98, "x")
    assert "### toy: emulated @ the bandwidth after each label's @" in md
    assert "| method | emulated @ 1gbit | emulated @ 8mbit |" in md
    assert "| digest | 50 (4.00x) | 200 (6.00x) |" in md and "EMULATED" in md
    assert plots.main(["--runs", str(sweep), "--out", str(tmp_path / "p")]) == 0
    names = sorted(p.name for p in (tmp_path / "p").glob("*.png"))
    # no loopback-time plots for emulated runs; the Pareto fronts use their emulated times
    assert names == ["toy_bytes_per_epoch.png", "toy_pareto.png", "toy_speedup_vs_bandwidth.png",
                     "toy_val_vs_emulated_time.png"]
