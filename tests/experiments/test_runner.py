"""Suites and the runner (no training): experiments/suites/suite.py's expansion of a suite into runs,
the config hash and argv, seeds, networks; experiments/runner.py's resume logic with the
subprocess launch mocked (a complete run of the same config hash is skipped, another reruns)."""
import json

import pytest

from experiments import runner
from experiments.analysis import runlog
from experiments.running import suite_runs
from experiments.suites.suite import (config_hash, expand, labels, load_suite, suite_from_dict, to_argv)


def test_a_suite_with_networks_runs_every_method_at_each():
    suite = suite_from_dict({**SUITE, "seeds": [0], "networks": ["1gbit", "100mbit"]})
    runs = expand(suite)
    assert [r.name for r in runs] == ["exact@1gbit_w2_s0", "exact@100mbit_w2_s0",
                                      "varco-fixed-8@1gbit_w2_s0", "varco-fixed-8@100mbit_w2_s0"]
    assert runs[1].flags["emulate_network"] == "100mbit" and "--emulate-network" in runs[1].argv("d")
    assert len(expand(load_suite("cluster"))) == 40 + 12 + 8 + 6 + 20  # second wave; authors' settings; third wave; 8 workers
    with pytest.raises(ValueError, match="unknown key.s. network"):
        suite_from_dict({**SUITE, "network": ["1gbit"]})


def test_a_method_can_join_a_sweep_at_some_of_its_datasets_and_networks():
    suite = suite_from_dict({**SUITE, "seeds": [0], "datasets": ["synthetic", "CS"],
                             "networks": ["1gbit", "100mbit"], "methods": [
                                 {"label": "exact", "method": "exact"},
                                 {"label": "pipegcn", "method": "pipegcn", "datasets": ["CS"],
                                  "networks": ["100mbit"]}]})
    assert [(r.dataset, r.name) for r in expand(suite)] == [
        ("synthetic", "exact@1gbit_w2_s0"), ("synthetic", "exact@100mbit_w2_s0"),
        ("CS", "exact@1gbit_w2_s0"), ("CS", "exact@100mbit_w2_s0"), ("CS", "pipegcn@100mbit_w2_s0")]
    assert labels(suite) == ["exact@1gbit", "exact@100mbit", "pipegcn@100mbit"]
    for key, bad in [("datasets", ["Physics"]), ("networks", ["10mbit"])]:
        with pytest.raises(ValueError, match=f"method pipegcn: {key} {bad[0]} not among the suite's"):
            suite_from_dict({**SUITE, "networks": ["1gbit"], "methods": [
                {"label": "pipegcn", "method": "pipegcn", key: bad}]})


def test_a_method_can_come_back_at_more_workers_on_one_dataset():
    suite = suite_from_dict({**SUITE, "seeds": [0], "datasets": ["synthetic", "CS"],
                             "networks": ["1gbit", "100mbit"], "methods": [
                                 {"label": "exact", "method": "exact"},
                                 {"label": "exact", "method": "exact", "workers": [8],
                                  "datasets": ["CS"], "networks": ["100mbit"]}]})
    assert [(r.dataset, r.name) for r in expand(suite)][-3:] == [
        ("CS", "exact@1gbit_w2_s0"), ("CS", "exact@100mbit_w2_s0"), ("CS", "exact@100mbit_w8_s0")]
    assert labels(suite) == ["exact@1gbit", "exact@100mbit"]
    with pytest.raises(ValueError, match="label exact names two different methods"):
        suite_from_dict({**SUITE, "methods": [{"label": "exact", "method": "exact"},
                                              {"label": "exact", "method": "partition"}]})
    with pytest.raises(ValueError, match=r"run\(s\) listed twice: synthetic/exact_w2_s0"):
        suite_from_dict({**SUITE, "methods": [{"label": "exact", "method": "exact"},
                                              {"label": "exact", "method": "exact",
                                               "seeds_by_workers": {2: [0]}}]})


SUITE = {"name": "t", "datasets": ["synthetic"], "workers": [2], "seeds": [0, 1], "epochs": 3,
         "model": {"hidden": 8}, "methods": [{"label": "exact", "method": "exact"},
                                             {"label": "varco-fixed-8", "method": "varco",
                                              "flags": {"comp_schedule": "fixed", "comp_ratio": 8}}]}


def test_config_hash_argv_and_suites():
    a, b = expand(suite_from_dict(SUITE))[2], expand(suite_from_dict({**SUITE, "epochs": 4}))[2]
    assert a.label == "varco-fixed-8" and a.name == b.name and a.hash != b.hash
    assert a.hash == config_hash(dict(reversed(list(a.flags.items()))))  # canonical: key order free
    assert "--comp-ratio 8 --comp-schedule fixed" in " ".join(a.argv("d"))
    assert to_argv({"batch_norm": False, "x": 1}) == ["--no-batch-norm", "--x", "1"]
    with pytest.raises(ValueError):
        suite_from_dict({**SUITE, "model": {"hiden": 8}})
    for name in ("quick", "full"):
        assert len(expand(load_suite(name))) > 10


def test_seeds_per_method_then_per_worker_count_then_the_suites():
    suite = suite_from_dict({**SUITE, "workers": [2, 4], "seeds": [0], "seeds_by_workers": {2: [5]},
                             "methods": [{"label": "exact", "method": "exact",
                                          "seeds_by_workers": {4: [0, 1, 2]}},
                                         {"label": "digest", "method": "digest"}]})
    assert [r.name for r in expand(suite)] == [
        "exact_w2_s5", "exact_w4_s0", "exact_w4_s1", "exact_w4_s2", "digest_w2_s5", "digest_w4_s0"]
    with pytest.raises(ValueError, match="method exact: unknown key.s. seed_by_workers"):
        suite_from_dict({**SUITE, "methods": [{"label": "exact", "method": "exact",
                                               "seed_by_workers": {4: [1]}}]})


def fake_launcher(calls, fail=()):
    def launch(run, directory):
        calls.append(run.name)
        if run.name in fail:
            (directory / "log.txt").write_text("error: boom\n")
            return 1
        write = {"status": "complete", "best_val": 1.0}
        (directory / "summary.json").write_text(json.dumps(write))
        return 0
    return launch


def test_a_checkpointed_run_interrupted_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    """A suite with ``checkpoint_every`` passes --checkpoint-every (outside the hash); a run of
    the same hash that stopped with a checkpoint is continued with --resume, its earlier
    sittings' seconds kept; without a checkpoint, or at another hash, it starts over."""
    monkeypatch.setattr(suite_runs, "unavailable_datasets", lambda names: {})
    suite = suite_from_dict({**SUITE, "seeds": [0], "checkpoint_every": 5})
    plain = suite_from_dict({**SUITE, "seeds": [0]})
    run, root = expand(suite)[0], tmp_path / "runs"
    assert run.hash == expand(plain)[0].hash  # a checkpointed run is the same run
    assert "--checkpoint-every 5" in " ".join(run.argv("d"))
    folder = run.directory(root)
    folder.mkdir(parents=True)
    (folder / "checkpoint").mkdir()
    (folder / "checkpoint" / "config.json").write_text("{}")
    (folder / "run.json").write_text(json.dumps({"hash": run.hash, "status": "interrupted",
                                                 "seconds": 100.0, "started": "then"}))
    argvs = []

    def launch(r, directory):
        argvs.append(r.argv(directory))
        (directory / "summary.json").write_text(json.dumps({"status": "complete"}))
        return 0
    assert suite_runs.run_suite(suite, root, {"exact"}, launch, labels={"exact"})["ran"] == 1
    assert argvs == [["-m", "digest", "train", "--resume", str(folder), "--no-progress"]]
    record = json.loads((folder / "run.json").read_text())
    assert record["status"] == "complete" and record["started"] == "then"
    assert record["seconds"] >= 100.0 and len(record["resumed"]) == 1
    (folder / "summary.json").unlink()  # at another hash: cleared, started over
    other = suite_from_dict({**SUITE, "seeds": [0], "epochs": 5, "checkpoint_every": 5})
    argvs.clear()
    suite_runs.run_suite(other, root, {"exact"}, launch, labels={"exact"})
    assert "--resume" not in argvs[0] and not (folder / "checkpoint").exists()
    with pytest.raises(ValueError, match="checkpoint_every"):
        suite_from_dict({**SUITE, "checkpoint_every": -1})


def test_resume_skips_complete_same_hash_reruns_otherwise(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(suite_runs, "unavailable_datasets", lambda names: {})
    suite, root, calls = suite_from_dict(SUITE), tmp_path / "runs", []
    methods = {"exact"}  # varco "not registered": skipped with a note
    counts = suite_runs.run_suite(suite, root, methods, fake_launcher(calls))
    assert calls == ["exact_w2_s0", "exact_w2_s1"] and counts["ran"] == 2
    assert "skipping varco-fixed-8" in capsys.readouterr().out
    calls.clear()
    assert suite_runs.run_suite(suite, root, methods, fake_launcher(calls))["skipped"] == 2 and calls == []
    (root / "synthetic" / "exact_w2_s1" / "summary.json").unlink()  # incomplete: rerun
    suite_runs.run_suite(suite, root, methods, fake_launcher(calls))
    assert calls == ["exact_w2_s1"]
    calls.clear()  # a different config hash (epochs changed): both rerun, old results cleared
    changed = suite_from_dict({**SUITE, "epochs": 5})
    counts = suite_runs.run_suite(changed, root, methods, fake_launcher(calls, fail={"exact_w2_s0"}))
    assert calls == ["exact_w2_s0", "exact_w2_s1"] and counts["failed"] == ["exact_w2_s0"]
    assert "FAILED synthetic exact_w2_s0: error: boom" in capsys.readouterr().out
    record = json.loads((root / "synthetic" / "exact_w2_s0" / "run.json").read_text())
    assert record["status"] == "failed" and record["hash"] == expand(changed)[0].hash
    assert not (root / "synthetic" / "exact_w2_s0" / "summary.json").exists()


def test_seeds_run_a_suite_in_parts_and_unknown_seeds_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(suite_runs, "unavailable_datasets", lambda names: {})
    suite, root, calls = suite_from_dict(SUITE), tmp_path / "runs", []
    suite_runs.run_suite(suite, root, {"exact"}, fake_launcher(calls), seeds={1})
    assert calls == ["exact_w2_s1"]
    plan = json.loads((root / "plan_t.json").read_text())
    assert plan["seeds"] == [1]  # the sitting's seeds; the plan still names every run
    assert plan["runs"] == ["synthetic/exact_w2_s0", "synthetic/exact_w2_s1"]
    counts = suite_runs.run_suite(suite, root, {"exact"}, fake_launcher(calls))  # the rest, later
    assert calls == ["exact_w2_s1", "exact_w2_s0"] and counts["skipped"] == 1
    assert runner.parse_seeds(None, suite) is None and runner.parse_seeds("1,0", suite) == {0, 1}
    with pytest.raises(ValueError, match="runs seeds 0, 1; --seeds 0,5 names others"):
        runner.parse_seeds("0,5", suite)
    with pytest.raises(ValueError, match="comma-separated integers"):
        runner.parse_seeds("one", suite)


def test_networks_run_an_emulated_suite_in_parts_and_unknown_ones_are_refused(tmp_path,
                                                                             monkeypatch):
    monkeypatch.setattr(suite_runs, "unavailable_datasets", lambda names: {})
    suite = suite_from_dict({**SUITE, "seeds": [0], "networks": ["1gbit", "100mbit"]})
    root, calls = tmp_path / "runs", []
    suite_runs.run_suite(suite, root, {"exact"}, fake_launcher(calls), networks={"100mbit"})
    assert calls == ["exact@100mbit_w2_s0"]
    plan = json.loads((root / "plan_t.json").read_text())
    assert plan["networks"] == ["100mbit"] and plan["seeds"] is None
    assert len(plan["runs"]) == 2  # the plan still names every run
    assert runner.parse_networks(None, suite) is None
    assert runner.parse_networks("100mbit,1gbit", suite) == {"1gbit", "100mbit"}
    with pytest.raises(ValueError, match="emulates 1gbit, 100mbit; --networks 10gbit names others"):
        runner.parse_networks("10gbit", suite)
    with pytest.raises(ValueError, match="emulates no network"):
        runner.parse_networks("1gbit", suite_from_dict(SUITE))
    lines = runlog.irregular([], suite, plan)  # the run log says the last part was restricted
    assert lines[0] == ("plan_t.json: the last run of the suite was restricted to the bandwidths "
                        "100mbit (--networks)")


def test_rounds_run_a_timed_bandwidth_in_parts_and_unknown_ones_are_refused(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setattr(suite_runs, "unavailable_datasets", lambda names: {})
    suite = suite_from_dict({**SUITE, "seeds": [0], "networks": ["1gbit"], "rounds": 3})
    root, calls = tmp_path / "runs", []
    suite_runs.run_suite(suite, root, {"exact"}, fake_launcher(calls), rounds={2})
    assert calls == ["exact@1gbit_w2_s0_r2"]
    plan = json.loads((root / "plan_t.json").read_text())
    assert plan["rounds"] == [2] and len(plan["runs"]) == 3  # the plan still names every run
    suite_runs.run_suite(suite, root, {"exact"}, fake_launcher(calls), rounds={0, 1})
    assert sorted(calls) == ["exact@1gbit_w2_s0", "exact@1gbit_w2_s0_r1", "exact@1gbit_w2_s0_r2"]
    assert runner.parse_rounds(None, suite) is None and runner.parse_rounds("1,0", suite) == {0, 1}
    with pytest.raises(ValueError, match="runs rounds 0 to 2; --rounds 3 names others"):
        runner.parse_rounds("3", suite)
    with pytest.raises(ValueError, match="comma-separated integers"):
        runner.parse_rounds("last", suite)
    assert runlog.irregular([], suite, {**plan, "rounds": [0, 1]})[0] == (
        "plan_t.json: the last run of the suite was restricted to the rounds 0, 1 (--rounds)")


@pytest.mark.slow
def test_the_runners_skip_by_hash_is_unchanged_by_the_clis_refusal(tmp_path, monkeypatch):
    """`train --out DIR` refuses a complete run of another configuration there
    (tests/cli/test_cli.py), but the runner clears the folder of a run whose config hash changed
    before it starts it: with the real launcher (`python -m digest train` in a new interpreter),
    a complete run of the same hash is skipped, a changed one reruns into the same folder."""
    monkeypatch.setattr(suite_runs, "unavailable_datasets", lambda names: {})
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    base = {"name": "t", "datasets": ["synthetic:nodes=200"], "workers": [1], "seeds": [0],
            "epochs": 2, "model": {"hidden": 8}, "methods": [{"label": "exact", "method": "exact"}]}
    root = tmp_path / "runs"
    assert suite_runs.run_suite(suite_from_dict(base), root, {"exact"})["ran"] == 1
    assert suite_runs.run_suite(suite_from_dict(base), root, {"exact"})["skipped"] == 1
    changed = suite_from_dict({**base, "epochs": 3})
    counts = suite_runs.run_suite(changed, root, {"exact"})
    assert counts["ran"] == 1 and counts["failed"] == [], counts
    folder = expand(changed)[0].directory(root)
    assert json.loads((folder / "summary.json").read_text())["epochs"] == 3
    assert json.loads((folder / "run.json").read_text())["hash"] == expand(changed)[0].hash


def test_a_run_of_a_recalibrated_preset_reruns(tmp_path, monkeypatch, capsys):
    """The hash is of the flags, which name a preset, not its options: a run whose summary.json
    recorded other generator options than the spec resolves to now (a preset recalibrated since)
    is not complete; one that recorded the same options is."""
    from digest.data.registry import parse_spec
    monkeypatch.setattr(suite_runs, "unavailable_datasets", lambda names: {})
    spec = "synthetic:nodes=200,signal=0.2"
    suite = suite_from_dict({**SUITE, "datasets": [spec], "seeds": [0]})
    root, calls, now = tmp_path / "runs", [], parse_spec(spec)[1]

    def launch(run, directory):  # records the options the spec resolves to, as the trainer does
        calls.append(run.name)
        (directory / "summary.json").write_text(json.dumps(
            {"status": "complete", "dataset": {"meta": {"options": {**now, "seed": 0}}}}))
        return 0
    assert suite_runs.run_suite(suite, root, {"exact"}, launch)["ran"] == 1
    assert suite_runs.run_suite(suite, root, {"exact"}, launch)["skipped"] == 1 and len(calls) == 1
    summary = next(root.rglob("summary.json"))
    recorded = json.loads(summary.read_text())
    recorded["dataset"]["meta"]["options"]["signal"] = 0.5  # drawn at a former signal
    summary.write_text(json.dumps(recorded))
    run = expand(suite)[0]
    assert suite_runs.graph_changed(run, recorded) == f"signal 0.5 -> {now['signal']}"
    assert suite_runs.run_suite(suite, root, {"exact"}, launch)["ran"] == 1 and len(calls) == 2
    assert f"its graph changed since (signal 0.5 -> {now['signal']})" in capsys.readouterr().out
    assert suite_runs.graph_changed(run, {"dataset": {"name": "Cora"}}) == ""  # nothing recorded


def test_a_graph_drawn_at_a_default_the_generator_did_not_record_is_changed_when_the_spec_moves_it():
    """make_synthetic leaves split (random) and aligned (0) out of meta['options']: a preset that
    now sets them draws another graph than the one such a run recorded."""
    from digest.data.registry import parse_spec
    spec = "synthetic:nodes=200,communities=4,split=popularity,aligned=0.5"
    run = expand(suite_from_dict({**SUITE, "datasets": [spec], "seeds": [0]}))[0]
    now = parse_spec(spec)[1]
    was = {k: v for k, v in now.items() if k not in ("split", "aligned")}
    summary = {"dataset": {"meta": {"options": {**was, "seed": 0}}}}
    assert suite_runs.graph_changed(run, summary) == "aligned 0.0 -> 0.5, split random -> popularity"
    summary["dataset"]["meta"]["options"].update(split="popularity", aligned=0.5)
    assert suite_runs.graph_changed(run, summary) == ""


def test_a_run_on_a_former_graph_is_missing_from_the_tables_not_averaged(tmp_path):
    """A seed rerun on the recalibrated graph must not be averaged with seeds still on the old
    one: load() lists the old runs as missing, with what changed."""
    from digest.data.registry import parse_spec
    from experiments.suites import load as load_mod
    spec = "synthetic:nodes=200,signal=0.2"
    suite = suite_from_dict({**SUITE, "datasets": [spec]})
    now, root = parse_spec(spec)[1], tmp_path / "runs"
    for run in expand(suite):
        d = run.directory(root)
        d.mkdir(parents=True)
        options = {**now, "signal": 0.5 if run.seed == 1 else now["signal"]}
        (d / "summary.json").write_text(json.dumps(
            {"status": "complete", "dataset": {"meta": {"options": options}}}))
        (d / "run.json").write_text(json.dumps(
            {"hash": run.hash, "dataset": run.dataset, "label": run.label, "seed": run.seed,
             "workers": run.workers}))
        (d / "metrics.csv").write_text("epoch,val_acc\n0,0.5\n")
    loaded = load_mod.load(root, suite)
    assert [(r.label, r.seed) for r in loaded.records] == [("exact", 0), ("varco-fixed-8", 0)]
    assert loaded.missing == [f"{spec} {name}_w2_s1 (graph changed: signal 0.5 -> 0.2)"
                              for name in ("exact", "varco-fixed-8")]


def test_labels_run_a_suite_in_parts_by_method_and_unknown_ones_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(suite_runs, "unavailable_datasets", lambda names: {})
    suite = suite_from_dict({**SUITE, "seeds": [0], "networks": ["1gbit"]})
    root, calls = tmp_path / "runs", []
    suite_runs.run_suite(suite, root, {"exact", "varco"}, fake_launcher(calls), labels={"exact"})
    assert calls == ["exact@1gbit_w2_s0"]
    plan = json.loads((root / "plan_t.json").read_text())
    assert plan["labels"] == ["exact"] and len(plan["runs"]) == 2
    assert runner.parse_labels("exact,varco-fixed-8", suite) == {"exact", "varco-fixed-8"}
    with pytest.raises(ValueError, match="names the labels exact, varco-fixed-8; --labels sat names"):
        runner.parse_labels("sat", suite)
    assert runlog.irregular([], suite, plan)[0] == (
        "plan_t.json: the last run of the suite was restricted to the labels exact (--labels)")
