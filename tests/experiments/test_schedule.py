"""The runner's interleaving (experiments/suites/schedule.py, docs/methods.md section 11): round by
round, point by point, the methods of a point in a seeded random order that differs between
rounds; rounds and A/A labels
in the suite (experiments/suites/suite.py); run.json's round and start time. The launch is mocked: no
training."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import runner
from experiments.running import suite_runs
from experiments.suites.suite import (CONFIGS, RENAMED, config_hash, expand, is_aa, labels, load_suite,
                                      suite_from_dict)
from experiments.suites.schedule import interleave, order

SUITE = {"name": "t", "datasets": ["synthetic"], "workers": [2], "seeds": [0, 1], "epochs": 5,
         "model": {"hidden": 8}, "rounds": 3, "aa": True,
         "methods": [{"label": "exact", "method": "exact"},
                     {"label": "partition", "method": "partition"}]}


def names(runs):
    return [r.name for r in runs]


def test_rounds_and_the_a_a_twin_expand_in_the_tables_order():
    suite = suite_from_dict(SUITE)
    assert labels(suite) == ["exact", "exact-aa", "partition"] and is_aa("exact-aa")
    runs = expand(suite)
    assert names(runs)[:6] == ["exact_w2_s0", "exact_w2_s0_r1", "exact_w2_s0_r2",
                               "exact_w2_s1", "exact_w2_s1_r1", "exact_w2_s1_r2"]
    assert len(runs) == 3 * 2 * 3
    a, b = runs[0], runs[1]  # round 0 and round 1 of one run: the hash differs by the round only
    assert a.flags == b.flags and a.argv("d") == b.argv("d")
    assert a.hash == config_hash(a.flags) and b.hash == config_hash({**a.flags, "round": 1})
    aa = next(r for r in runs if r.label == "exact-aa")
    assert aa.flags == a.flags and aa.spec.method == "exact"  # the same run under a second label


def test_interleave_runs_round_by_round_each_point_in_a_shuffled_order():
    runs = interleave(expand(suite_from_dict(SUITE)))
    # round by round, then point by point (seed 0, seed 1), each point's three methods together
    assert [r.round for r in runs] == [0] * 6 + [1] * 6 + [2] * 6
    assert [r.seed for r in runs] == [0, 0, 0, 1, 1, 1] * 3
    for k in range(0, 18, 3):
        block = runs[k:k + 3]
        assert sorted(r.label for r in block) == ["exact", "exact-aa", "partition"]
        assert [r.position for r in block] == [0, 1, 2]
    # the same suite gives the same order (seeded), and the order is the schedule's
    assert names(interleave(expand(suite_from_dict(SUITE)))) == names(runs)
    point = ("synthetic", None, 2, 0)
    assert [r.label for r in runs[:3]] == order(["exact", "exact-aa", "partition"], 0, point)


def test_round_orders_are_permutations_that_differ_from_round_to_round():
    labels_ = ["exact", "exact-aa", "a", "b", "c"]
    for at in [("synthetic", None, 4, s) for s in range(5)]:
        orders = [order(labels_, r, at) for r in range(6)]
        assert all(sorted(o) == sorted(labels_) for o in orders)
        assert all(orders[r] != orders[r - 1] for r in range(1, 6))
    # every label leads some round somewhere: no fixed first or last position
    firsts = {order(labels_, r, ("g", None, 4, s))[0] for r in range(3) for s in range(10)}
    assert firsts == set(labels_)
    two = [order(["exact", "exact-aa"], r, ("g", None, 4, 0)) for r in range(4)]
    assert all(two[r] != two[r - 1] for r in range(1, 4))  # two methods: they alternate
    assert order([], 0, ("g", None, 4, 0)) == [] and order(["x"], 3, ("g", None, 4, 0)) == ["x"]


def test_methods_at_some_points_only_and_networks_make_points_of_their_own():
    suite = suite_from_dict({**SUITE, "seeds": [0], "rounds": 2, "aa": False, "workers": [2, 4],
                             "methods": [{"label": "exact", "method": "exact"},
                                         {"label": "partition", "method": "partition",
                                          "workers": [4]}]})
    runs = interleave(expand(suite))
    # (M=2) and (M=4) are two points; partition runs at M=4 only
    assert [(r.round, r.workers) for r in runs] == [(0, 2), (0, 4), (0, 4), (1, 2), (1, 4), (1, 4)]
    assert {r.name for r in runs} == {"exact_w2_s0", "exact_w4_s0", "partition_w4_s0",
                                      "exact_w2_s0_r1", "partition_w4_s0_r1", "exact_w4_s0_r1"}
    m4 = [[r.label for r in runs if r.workers == 4 and r.round == k] for k in (0, 1)]
    assert m4[0] != m4[1]  # two methods at a point: the second round swaps them


def test_a_suite_without_rounds_runs_point_by_point_with_its_names_and_hashes():
    suite = suite_from_dict({**SUITE, "rounds": 1, "aa": False})
    runs = interleave(expand(suite))
    assert names(runs) == ["exact_w2_s0", "partition_w2_s0", "exact_w2_s1", "partition_w2_s1"]
    assert all(r.round == 0 and r.hash == config_hash(r.flags) for r in runs)


@pytest.mark.parametrize("name", ["repro", "field_methods", "knobs", "models", "arxiv", "straggler",
                                  "cluster", "synthetic_default"])
def test_committed_suites_keep_one_round_their_names_and_hashes(name):
    suite = load_suite(name)
    assert (suite.rounds, suite.aa) == (1, False)
    runs = expand(suite)
    assert all(r.round == 0 and not r.name.endswith(("_r1", "_r2")) for r in runs)
    assert all(r.hash == config_hash(r.flags) for r in runs)
    assert sorted(names(interleave(runs))) == sorted(names(runs))


def test_protocol_settings_are_checked():
    with pytest.raises(ValueError, match="rounds must be an integer >= 1"):
        suite_from_dict({**SUITE, "rounds": 0})
    with pytest.raises(ValueError, match="aa must be true or false"):
        suite_from_dict({**SUITE, "aa": "yes"})
    with pytest.raises(ValueError, match=r"warmup must be an integer in \[0, epochs\)"):
        suite_from_dict({**SUITE, "warmup": 5})
    with pytest.raises(ValueError, match="exact-aa is an A/A label, so it must run what exact runs"):
        suite_from_dict({**SUITE, "aa": False, "methods": [
            {"label": "exact", "method": "exact"},
            {"label": "exact-aa", "method": "exact", "flags": {"dropout": 0.1}}]})
    # written out by hand instead of aa: true, the same twin
    hand = suite_from_dict({**SUITE, "aa": False, "methods": [
        {"label": "exact", "method": "exact"}, {"label": "exact-aa", "method": "exact"}]})
    assert labels(hand) == ["exact", "exact-aa"]


def test_the_runner_starts_runs_interleaved_and_records_round_and_start(tmp_path, monkeypatch):
    monkeypatch.setattr(suite_runs, "unavailable_datasets", lambda names: {})
    calls = []

    def launch(run, directory):
        calls.append(run.name)
        (Path(directory) / "summary.json").write_text(json.dumps({"status": "complete"}))
        return 0

    suite = suite_from_dict(SUITE)
    counts = suite_runs.run_suite(suite, tmp_path, {"exact", "partition"}, launch)
    assert counts["ran"] == 18 and calls == names(interleave(expand(suite)))
    plan = json.loads((tmp_path / "plan_t.json").read_text())
    assert plan["runs"] == [f"synthetic/{n}" for n in calls]
    record = json.loads((tmp_path / "synthetic" / "partition_w2_s1_r2" / "run.json").read_text())
    assert record["round"] == 2 and record["label"] == "partition" and record["status"] == "complete"
    assert record["position"] in (0, 1, 2)
    assert record["started"] and record["hash"] == config_hash({**record["flags"], "round": 2})
    calls.clear()  # complete with the same hashes: nothing reruns
    assert suite_runs.run_suite(suite, tmp_path, {"exact", "partition"}, launch)["skipped"] == 18
    assert calls == []


@pytest.mark.parametrize("old,new", sorted(RENAMED.items()))
def test_an_old_suite_name_says_the_new_one(old, new):
    assert (CONFIGS / f"{new}.yaml").is_file() and not (CONFIGS / f"{old}.yaml").exists()
    with pytest.raises(ValueError, match=f"suite '{old}' is now '{new}'"):
        load_suite(old)
