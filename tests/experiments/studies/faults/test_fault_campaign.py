"""The fault campaign's parts (experiments/studies/faults/command.py, experiments/studies/faults/campaign.py) on
hand-made files; the campaign itself is a committed run (results/reliability/README.md), too long
for the tests. Its fault, digest/runtime/faults.py: tests/runtime/test_faults.py."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from digest.training import checkpoint
from experiments.studies.faults.render import report
from experiments.studies.faults import campaign as fc


def _saved(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"w": torch.arange(4096.0), "b": torch.zeros(3)}, path)
    return path


@pytest.mark.parametrize("how", ["corrupt", "truncated"])
def test_damage_is_what_checkpoint_verify_refuses(tmp_path, how):
    path = _saved(tmp_path / "rank0.pt")
    checkpoint.verify(path)  # intact
    fc.damage(path, how)
    with pytest.raises(ValueError, match=f"is unreadable \\({how}"):
        checkpoint.verify(path)
    if how == "corrupt":  # the bytes changed, not the length: torch.load alone reads it
        assert torch.load(path)["w"].numel() == 4096


def _run(path: Path, rows: list[tuple], summary: dict | None = None) -> Path:
    path.mkdir(parents=True)
    lines = ["epoch,train_loss,train_acc,val_acc,test_acc,wall_time"]
    lines += [",".join(map(str, r)) + f",{time.monotonic()}" for r in rows]
    (path / "metrics.csv").write_text("\n".join(lines) + "\n")
    if summary:
        (path / "summary.json").write_text(json.dumps(summary))
    return path


def test_compare_synchronous_rows_must_be_identical_times_aside(tmp_path):
    ref = _run(tmp_path / "ref", [(0, 1.2, 0.5, 0.4, 0.4), (1, 0.9, 0.6, 0.5, 0.5)])
    same = _run(tmp_path / "same", [(0, 1.2, 0.5, 0.4, 0.4), (1, 0.9, 0.6, 0.5, 0.5)])
    off = _run(tmp_path / "off", [(0, 1.2, 0.5, 0.4, 0.4), (1, 0.91, 0.6, 0.5, 0.5)])
    short = _run(tmp_path / "short", [(0, 1.2, 0.5, 0.4, 0.4)])
    assert fc.compare("exact", same, ref) == ""
    assert fc.compare("exact", off, ref).startswith("epoch 1 differs")
    assert fc.compare("exact", short, ref) == "1 rows, not 2"


def test_compare_asynchronous_budget_and_tolerance(tmp_path):
    def summary(test, versions=fc.WORKERS * fc.EPOCHS):
        return {"epochs": fc.EPOCHS, "server_versions": versions, "best_val": 0.8,
                "final": {"test_acc": test, "val_acc": 0.8}}
    ref = _run(tmp_path / "ref", [], summary(0.80))
    assert fc.compare("digest-async", _run(tmp_path / "near", [], summary(0.85)), ref) == ""
    assert fc.compare("digest-async", _run(tmp_path / "far", [], summary(0.65)), ref) == \
        f"test accuracy off by more than {fc.ACC_TOL}"
    assert fc.compare("digest-async", _run(tmp_path / "short", [], summary(0.8, 79)), ref) == \
        f"budget: {fc.EPOCHS} epochs, 79 gradients"


GOOD = {"method": "exact", "trial": 0, "rank": 1, "epoch": 9, "verdict": "identical",
        "killed_rc": 1, "killed_lines": 1, "names_rank": True, "checkpoint_epoch": 8,
        "error": "error: lost worker rank 1 (killed by signal SIGKILL)", "result_left": False,
        "damaged_refused": True, "resume_rc": 0, "survivors": 0, "namespaces_left": 0,
        "temp_left": 0}


@pytest.mark.parametrize("change", [{}, {"verdict": "epoch 3 differs"}, {"killed_lines": 2},
                                    {"survivors": 1}, {"damaged_refused": False},
                                    {"temp_left": 1}, {"result_left": True}])
def test_a_trial_passes_only_when_every_check_does(change):
    assert fc.passed({**GOOD, **change}) is (change == {})


def test_report_counts_each_check_per_method_and_lists_failures():
    missed = {**GOOD, "trial": 1, "killed_rc": 0, "killed_lines": 0, "error": "",
              "names_rank": False, "verdict": "fault missed: the run ended first"}
    for key in ("checkpoint_epoch", "damaged_refused", "resume_rc", "namespaces_left",
                "temp_left"):
        missed.pop(key)
    text = report([GOOD, missed, {**GOOD, "method": "digest"}], "python -m x", 60.0)
    table = {line.split(" | ")[0]: line.split(" | ")[1:] for line in text.splitlines()
             if line.startswith("| ") and "---" not in line}
    assert table["| exact"][:4] == ["kill", "2", "1", "1"]  # trials, faults hit, one-line error
    assert table["| exact"][-1] == "1 |" and table["| digest"][-1] == "1 |"
    assert "2 of 3 trials passed every check." in text
    assert "- exact trial 1 (kill, rank 1, step 9): fault missed: the run ended first" in text
    assert "Behind emulated links" not in text  # kills alone: no word of links


FLAP = {"method": "exact", "fault": "flap", "trial": 2, "rank": 0, "epoch": 20,
        "verdict": "identical", "killed_rc": 0, "killed_lines": 0, "names_rank": False,
        "error": "", "result_left": True, "survivors": 0, "namespaces_left": 0, "temp_left": 0}


@pytest.mark.parametrize("change", [{}, {"verdict": "epoch 3 differs"}, {"killed_rc": 1},
                                    {"survivors": 1}, {"namespaces_left": 1}, {"temp_left": 1}])
def test_a_link_cut_for_seconds_passes_when_the_run_rides_it_out_identically(change):
    assert fc.passed({**FLAP, **change}) is (change == {})


def test_a_lost_rank_trial_fails_when_its_line_does_not_name_the_rank():
    cut = {**GOOD, "fault": "cut", "error": "error: lost worker rank 0 (a collective failed: a "
           "peer stopped answering); the emulated link of rank 1 was down"}
    assert fc.passed({**cut, "names_rank": True}) and not fc.passed({**cut, "names_rank": False})


def test_report_groups_trials_by_method_and_fault_and_says_what_the_link_faults_are():
    text = report([GOOD, {**GOOD, "fault": "cut"}, FLAP], "python -m x", 60.0, "t.csv", "50mbit")
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| exact")]
    assert [r[:3] for r in rows] == [["| exact", "kill", "1"], ["| exact", "cut", "1"],
                                     ["| exact", "flap", "1"]]
    assert rows[2][3:] == ["1", "n/a", "n/a", "n/a", "n/a", "n/a", "1", "0", "0", "0", "1 |"]
    assert "Behind emulated links (50mbit" in text and "3 of 3 trials passed every check." in text


def test_the_campaign_refuses_a_link_fault_without_a_link(capsys):
    from experiments.studies.faults.command import main
    assert main(["--methods", "exact", "--faults", "kill,cut"]) == 2
    assert capsys.readouterr().err.strip() == \
        "error: cut and flap need --network (an emulated link to cut)"
    assert main(["--methods", "exact", "--faults", "explode"]) == 2
    assert "unknown fault explode" in capsys.readouterr().err
