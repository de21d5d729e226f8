"""Reliability through the command line a user types: a lost worker fails the run fast
with one line and leaves no process behind; a killed run leaves no result (only progress.csv and
its checkpoint) and ``--resume`` continues it to the same per-epoch losses and accuracies as an
uninterrupted run; the same command twice gives the same metrics (train loss, accuracies).

Faults come from the test-only hooks of digest/training/trainer.py (``_fault_injection``). Multi-worker
runs and every kill are real ``python -m digest`` processes; to keep the suite short, the other
single-worker legs call the same ``digest.cli.main`` in this process (one worker runs in-process
under the CLI anyway). Every test here starts processes from scratch and kills or interrupts them
(slow tier; resume for every method without a kill: test_resume.py)."""
from __future__ import annotations

import json

import pytest

from digest.runtime import faults
from helpers import DATASET, cli, here, leftovers, metrics_of

pytestmark = pytest.mark.slow
EPOCHS, EVERY, FAULT_EPOCH = 10, 4, 6


def train(method, workers, out, *extra):
    store = ["--sync-interval", 3] if method.startswith("digest") else []
    return ["train", "--dataset", DATASET, "--method", method, "--workers", workers,
            "--hidden", 16, "--dropout", 0, "--epochs", EPOCHS, "--checkpoint-every", EVERY,
            *store, "--timeout", 30, "--no-progress", "--out", out, *extra]


def assert_no_result(run):
    assert not (run / "summary.json").exists() and not (run / "metrics.csv").exists()
    assert leftovers(run) == []


def assert_resumed(run, expected, data, tmp_path, capsys, workers):
    if workers == 1:
        rc, err = here(["train", "--resume", run, "--no-progress"], capsys)
        assert rc == 0, err
    else:
        resumed = cli(["train", "--resume", run, "--no-progress"], data, tmp_path)
        assert resumed.rc == 0, resumed.stderr[-3000:]
    assert metrics_of(run / "metrics.csv") == expected  # epochs before the kill included
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["epochs"] == EPOCHS
    assert not (run / "progress.csv").exists() and leftovers(run) == []


def assert_progress_prefix(run, expected):
    progress = metrics_of(run / "progress.csv")  # visible progress, a prefix of the run
    assert 1 <= len(progress) <= FAULT_EPOCH and progress == expected[:len(progress)]


def reference(method, workers, ref, data, tmp_path, capsys, subprocess: bool):
    if subprocess:
        done = cli(train(method, workers, ref), data, tmp_path)
        assert done.rc == 0, done.stderr[-3000:]
    else:
        rc, err = here(train(method, workers, ref), capsys)
        assert rc == 0, err
    expected = metrics_of(ref / "metrics.csv")
    assert [int(r[0]) for r in expected] == list(range(EPOCHS))
    assert not (ref / "progress.csv").exists()  # superseded by metrics.csv
    return expected


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def test_one_worker_exact_deterministic_and_resumes_after_a_failure(tmp_path, data, capsys,
                                                                   monkeypatch):
    ref, run = tmp_path / "ref", tmp_path / "run"
    expected = reference("exact", 1, ref, data, tmp_path, capsys, subprocess=True)
    rc, err = here(train("exact", 1, tmp_path / "again"), capsys)  # the same command again
    assert rc == 0 and metrics_of(tmp_path / "again" / "metrics.csv") == expected
    monkeypatch.setenv("DIGEST_EPOCH_HOOK", faults.HOOK)
    monkeypatch.setenv("DIGEST_FAULT", f"raise,rank=0,epoch={FAULT_EPOCH}")
    rc, err = here(train("exact", 1, run), capsys)
    assert rc == 1 and err == [f"error: RuntimeError: injected failure in rank 0 at epoch "
                               f"{FAULT_EPOCH} (set DIGEST_DEBUG=1 for the traceback)"]
    monkeypatch.delenv("DIGEST_FAULT", raising=False)  # the hook pops it once it fired
    assert_no_result(run)
    # the newest complete checkpoint set is committed in config.json; older sets are gone
    assert json.loads((run / "checkpoint" / "config.json").read_text())["epoch"] == EVERY
    assert sorted(p.name for p in (run / "checkpoint").iterdir()) == ["config.json", f"epoch{EVERY}"]
    assert_progress_prefix(run, expected)
    assert_resumed(run, expected, data, tmp_path, capsys, 1)


def test_one_worker_digest_killed_process_group_resumes(tmp_path, data, capsys):
    ref, run = tmp_path / "ref", tmp_path / "run"
    expected = reference("digest", 1, ref, data, tmp_path, capsys, subprocess=False)
    hit = cli(train("digest", 1, run), data, tmp_path,
              env={"DIGEST_FAULT": f"kill,rank=group,epoch={FAULT_EPOCH}"})
    assert hit.rc == -9 and hit.survivors == []
    assert_no_result(run)
    assert_progress_prefix(run, expected)
    assert_resumed(run, expected, data, tmp_path, capsys, 1)


def test_two_workers_exact_sigkilled_worker_fails_fast_then_resumes(tmp_path, data, capsys):
    ref, run = tmp_path / "ref", tmp_path / "run"
    expected = reference("exact", 2, ref, data, tmp_path, capsys, subprocess=True)
    # The same command again (the fault hook is inert before FAULT_EPOCH): its progress rows are
    # the reference's, and after --resume all of its rows are (determinism with 2 workers; a
    # third full run would cost another launch).
    hit = cli(train("exact", 2, run), data, tmp_path,
              env={"DIGEST_FAULT": f"kill,rank=1,epoch={FAULT_EPOCH}"})
    assert hit.rc == 1 and hit.survivors == [], (hit.rc, hit.survivors)
    assert hit.lines == ["error: lost worker rank 1 (killed by signal SIGKILL)"], hit.stderr
    assert_no_result(run)
    assert_progress_prefix(run, expected)
    assert_resumed(run, expected, data, tmp_path, capsys, 2)

    # a resumed run keeps its key settings: another method or width is refused, in one line
    rc, err = here(["train", "--resume", run, "--method", "digest", "--hidden", 32], capsys)
    assert rc == 2 and len(err) == 1 and err[0].startswith(f"error: --resume {run}: the run was "
                                                           "started with other settings")
    assert "--method exact -> digest" in err[0] and "--hidden 16 -> 32" in err[0]
    rc, err = here(["train", "--resume", run, "--workers", 1], capsys)
    assert rc == 2 and "--workers 2 -> 1" in err[0]


def test_two_workers_digest_exception_in_one_worker_then_resumes(tmp_path, data, capsys):
    ref, run = tmp_path / "ref", tmp_path / "run"
    expected = reference("digest", 2, ref, data, tmp_path, capsys, subprocess=True)
    hit = cli(train("digest", 2, run), data, tmp_path,
              env={"DIGEST_FAULT": f"raise,rank=1,epoch={FAULT_EPOCH}"})
    assert hit.rc == 1 and hit.survivors == []
    assert hit.stderr.count("Traceback") == 1, hit.stderr  # the failing worker's, once
    assert f"RuntimeError: injected failure in rank 1 at epoch {FAULT_EPOCH}" in hit.stderr
    assert hit.lines[-1] == "error: lost worker rank 1 (exit code 1, traceback above)"
    # nothing from torch's own loggers (elastic error tables, events, SIGTERM warnings)
    noise = [l for l in hit.lines if (l[:1] in "EWI" and l[1:5].isdigit()) or "elastic" in l]
    assert noise == [], noise
    assert_no_result(run)
    assert_progress_prefix(run, expected)
    assert_resumed(run, expected, data, tmp_path, capsys, 2)


@pytest.mark.parametrize("method", ["digest", "digest-async"])
def test_ctrl_c_stops_every_process_at_once(tmp_path, data, method):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) during a 2-worker run, once
    it trains (its first progress.csv: the synchronous loop writes it with its first evaluation,
    DIGEST-A at its first checkpoint): exit 130 with "interrupted", no traceback, nothing left
    running (workers, forkserver, DIGEST-A's server), no result."""
    run = tmp_path / "run"
    args = ["train", "--dataset", DATASET, "--method", method, "--workers", 2, "--hidden", 16,
            "--epochs", 100000, "--sync-interval", 3, "--checkpoint-every", 5, "--no-progress",
            "--out", run]
    done = cli(args, data, tmp_path, interrupt_when=run / "progress.csv")
    assert done.rc == 130, done.stderr[-3000:]
    assert done.lines[-1] == "interrupted" and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.survivors == [], done.survivors
    assert not (run / "summary.json").exists()


def test_a_worker_that_stops_answering_ends_the_run_naming_it(tmp_path, data):
    """Rank 1 SIGSTOPped (alive, answering no one): rank 0's collective times out after
    --timeout, and the launcher names rank 1 as the cause (digest/runtime/unresponsive.py) and SIGKILLs
    it, instead of naming only rank 0 and waiting 30 s for a SIGTERM it cannot receive."""
    run = tmp_path / "run"
    args = ["train", "--dataset", DATASET, "--method", "exact", "--workers", 2, "--hidden", 16,
            "--epochs", EPOCHS, "--timeout", 5, "--no-progress", "--out", run]
    hit = cli(args, data, tmp_path, env={"DIGEST_FAULT": f"stop,rank=1,epoch={FAULT_EPOCH}"})
    assert hit.rc == 1 and hit.survivors == [], (hit.rc, hit.survivors, hit.stderr[-3000:])
    assert "Traceback" not in hit.stderr and hit.lines[-1] == (  # before it: the cache built
        "error: lost worker rank 1 (stopped answering: its process was stopped, not running), "
        "rank 0 (a collective failed: a peer stopped answering)"), hit.stderr[-3000:]
    assert_no_result(run)


def test_a_worker_stopped_past_the_grace_ends_the_run_before_the_timeout(tmp_path, data):
    """Rank 1 SIGSTOPped with --timeout 60 and a grace of 3 s (DIGEST_STOPPED_GRACE_S): the
    launcher ends the run once rank 1 has been stopped for 3 s, naming it and how long, well
    before any collective timed out; nothing is left running, no result."""
    run = tmp_path / "run"
    args = ["train", "--dataset", DATASET, "--method", "exact", "--workers", 2, "--hidden", 16,
            "--epochs", EPOCHS, "--timeout", 60, "--no-progress", "--out", run]
    hit = cli(args, data, tmp_path, env={"DIGEST_FAULT": f"stop,rank=1,epoch={FAULT_EPOCH}",
                                         "DIGEST_STOPPED_GRACE_S": "3"})
    assert hit.rc == 1 and hit.survivors == [], (hit.rc, hit.survivors, hit.stderr[-3000:])
    assert "Traceback" not in hit.stderr and hit.lines[-1].startswith(
        "error: lost worker rank 1 (stopped answering: its process stayed stopped for 3 s"), \
        hit.stderr[-3000:]
    assert hit.seconds < 50, hit.seconds  # the grace, not the 60 s timeout, ended it
    assert_no_result(run)
