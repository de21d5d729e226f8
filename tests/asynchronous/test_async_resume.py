"""DIGEST-A checkpoint and resume (digest/asynchronous/, digest/asynchronous/server.py): the server's hold and
its state round trip without processes; through the command line a user types, a 2-worker run
whose rank 1 is SIGKILLed after the first checkpoint resumes to the whole budget, with complete
results and the accuracy of an uninterrupted run; a damaged checkpoint is refused in one line.

Asynchrony makes a resumed run a valid continuation, not a replay (the arrival order of
gradients after the checkpoint is the scheduler's), so the resumed run is compared with the
uninterrupted one within run-to-run noise, not row for row."""
from __future__ import annotations

import io
import json
import shutil

import pytest
import torch

from digest.asynchronous.server import ParameterServer
from experiments.studies.faults.campaign import damage as damaged
from helpers import DATASET, cli, here, leftovers, rows
EPOCHS, EVERY, M = 60, 20, 2
# Resumed against uninterrupted (same seed, flags and checkpoints; 60 validation and 60 test
# nodes, so one node is 0.017): accuracies may differ by at most ACC_TOL, the last epoch's train
# loss by LOSS_TOL. Measured on 2 loaded cores: uninterrupted runs ended at test 0.80, 0.82,
# 0.82 (best val 0.83 - 0.85, train loss 0.32 - 0.36); runs killed after server epoch 20 and
# resumed at test 0.83, 0.85, 0.85 (best val 0.85, train loss 0.31 - 0.33).
ACC_TOL, LOSS_TOL = 0.1, 0.1


# -- the server's state, no processes -------------------------------------------------------------
def _server(seed: int, hold_every: int = 0) -> ParameterServer:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    return ParameterServer(model.parameters(), lr=0.1, weight_decay=1e-3, world=2, budget=20,
                           snapshot_versions=[2, 6], hold_every=hold_every)


def _grad(version: int, n: int) -> torch.Tensor:
    return torch.linspace(-1, 1, n) * (version + 1)  # a different gradient at every version


def test_the_server_holds_at_every_checkpoint_version_until_released(monkeypatch):
    from types import SimpleNamespace

    import digest.asynchronous.server as server_module
    clock = [100.0]  # the server's clock, moved by hand: 1 s per gradient, 50 s of checkpoint
    monkeypatch.setattr(server_module, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    srv = _server(0, hold_every=4)
    n = sum(p.numel() for p in srv.params)
    for v in range(3):
        clock[0] += 1.0
        assert srv.push_grads(v % 2, v, _grad(v, n))[4] is False
    clock[0] += 1.0
    flat, version, _, _, stop = srv.push_grads(1, 3, _grad(3, n))  # reaches the hold: applied
    assert flat is not None and (version, stop) == (4, True)
    flat, version, steps, _, stop = srv.push_grads(0, 4, _grad(4, n))  # held: dropped
    assert flat is None and (version, steps, stop) == (4, [2, 2], True) and len(srv.times) == 4
    clock[0] += 50.0  # the checkpoint's pause: not training time
    srv.release()
    clock[0] += 1.0
    assert srv.push_grads(0, 4, _grad(4, n))[1] == 5
    assert srv.times == pytest.approx([1.0, 2.0, 3.0, 4.0, 5.0]), srv.times  # went on where it stopped
    assert srv.hold_at == 8


def test_server_state_round_trips_exactly():
    """The state a checkpoint keeps, through torch.save / torch.load as a checkpoint file does,
    loaded into a server built from OTHER initial parameters: the same parameters, Adam state,
    budget consumed, clock record, store and snapshots; and from there both apply the next
    gradients identically and hold at the same next version."""
    a = _server(0, hold_every=4)
    n = sum(p.numel() for p in a.params)
    for v in range(4):
        a.push_grads(v % 2, max(0, v - 1), _grad(v, n))
    a.push_rows(0, 3, torch.arange(12.).view(3, 4), [0, 3])
    a.push_rows(1, 2, torch.ones(1, 4), [1, 0])
    a.push_rows(0, 4, torch.arange(12.).view(3, 4) + 1, [0, 3])
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=False)

    b = _server(1, hold_every=4)
    assert not torch.equal(b.params[0], a.params[0])
    b.load_state(state)
    for x, y in zip(a.params, b.params):
        assert torch.equal(x, y)
    for k in ("version", "steps", "times", "pushes"):
        assert getattr(a, k) == getattr(b, k), k
    assert a.blocks.keys() == b.blocks.keys() == {(0, 1), (1, 0)}
    for key, (rows_, tag, seq) in a.blocks.items():
        assert torch.equal(b.blocks[key][0], rows_) and b.blocks[key][1:] == (tag, seq)
    (got_a, none_a), (got_b, none_b) = a.pull_rows(1, [1, 0]), b.pull_rows(1, [1, 0])
    assert none_a is none_b is None and got_a[1:] == got_b[1:] == (4, 2)  # a worker's pull
    assert torch.equal(got_a[0], got_b[0])
    assert a.snapshots.keys() == b.snapshots.keys() == {2}
    assert torch.equal(a.snapshot(2)[1], b.snapshot(2)[1])
    sa, sb = a.opt.state_dict(), b.opt.state_dict()
    for i in sa["state"]:
        for k in sa["state"][i]:
            assert torch.equal(sa["state"][i][k], sb["state"][i][k]), (i, k)
    # the saved server holds until released; the resumed one goes on to the next hold
    assert a.hold_at == 4 and b.hold_at == 8

    a.release()
    for v in range(4, 9):  # Adam's moments and step counts restored: identical updates
        ra, rb = a.push_grads(v % 2, v, _grad(v, n)), b.push_grads(v % 2, v, _grad(v, n))
        assert (ra[0] is None) == (rb[0] is None) and ra[1:] == rb[1:], v
        if ra[0] is not None:
            assert torch.equal(ra[0], rb[0]), v
    assert a.version == b.version == 8 and 6 in b.snapshots  # held at 8, snapshot 6 taken
    # the state is a copy: the server going on did not change what was saved
    assert state["version"] == 4 and len(state["times"]) == 4


# -- through the command line: killed after a checkpoint, resumed ---------------------------------
def train(out, *extra):
    return ["train", "--dataset", DATASET, "--method", "digest-async", "--workers", M,
            "--hidden", 16, "--dropout", 0, "--epochs", EPOCHS, "--eval-every", 5,
            "--checkpoint-every", EVERY, "--sync-interval", 3, "--timeout", 30, "--no-progress",
            "--out", out, *extra]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """An uninterrupted run; the same command with rank 1 SIGKILLed at its first step after the
    first checkpoint (then a newer, damaged, uncommitted set is planted, as a kill while writing
    one would leave it); its --resume."""
    tmp = tmp_path_factory.mktemp("async_resume")
    data, direct, run = tmp / "data", tmp / "direct", tmp / "run"
    done = cli(train(direct), data, tmp)
    assert done.rc == 0, done.stderr[-3000:]
    first_set = run / "checkpoint" / "config.json"  # committed: rank 1 dies at its next step
    hit = cli(train(run), data, tmp, env={"DIGEST_FAULT": f"kill,rank=1,after={first_set}"})
    killed = {"hit": hit, "files": sorted(p.name for p in run.iterdir()),
              "progress": rows(run / "progress.csv") if (run / "progress.csv").exists() else None,
              "config": json.loads((run / "checkpoint" / "config.json").read_text())}
    partial = run / "checkpoint" / f"epoch{2 * EVERY}"
    partial.mkdir(exist_ok=True)
    (partial / "rank0.pt").write_bytes(b"PK\x03\x04 truncated")
    resumed = cli(["train", "--resume", run, "--no-progress"], data, tmp)
    return {"direct": direct, "run": run, "killed": killed, "resumed": resumed, "tmp": tmp}


@pytest.mark.slow
def test_killed_run_resumes_to_the_whole_budget(runs):
    hit, killed, run = runs["killed"]["hit"], runs["killed"], runs["run"]
    # (not hit.survivors == []: on 2 cores at load 8, one run in three still had a process 5 s
    # after the launcher ended; traced, the launcher's forkserver and resource tracker (nice 19)
    # exited 14 and 23 s after rank 0 and the server. That the server goes with its rank 0 is
    # test_server.py's)
    assert hit.rc == 1, (hit.rc, hit.stderr[-3000:])
    # rank 1 named as killed; rank 0, training on alone up to the next checkpoint, then fails
    # there as a lost peer, and a launcher slow to poll (2 loaded cores) may name it as well
    assert hit.lines[-1].startswith("error: lost worker ") and \
        "rank 1 (killed by signal SIGKILL)" in hit.lines[-1], hit.stderr[-3000:]
    # that one line only: no survivor's TensorPipe warning ("pipe closed") above it (the fault
    # campaign found one in 9 DIGEST-A trials of 10; launch.prestart now keeps C++ logs to errors)
    assert len(hit.lines) == 1, hit.stderr[-3000:]
    # killed: no result, the checkpoint of server epoch EVERY committed, its progress visible
    assert "summary.json" not in killed["files"] and "metrics.csv" not in killed["files"]
    assert killed["config"]["epoch"] == EVERY
    progress = killed["progress"]
    assert [int(r["epoch"]) for r in progress] == list(range(EVERY))

    resumed = runs["resumed"]
    assert resumed.rc == 0, resumed.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    got = rows(run / "metrics.csv")
    # the whole budget: EPOCHS server epochs of M gradients each, no more, no fewer
    assert summary["status"] == "complete" and summary["epochs"] == EPOCHS
    assert [int(r["epoch"]) for r in got] == list(range(EPOCHS))
    assert summary["server_versions"] == M * EPOCHS
    assert sum(summary["steps_by_worker"]) == M * EPOCHS, summary["steps_by_worker"]
    assert all(sum(int(r[f"steps_w{w}"]) for w in range(M)) == M for r in got)
    assert [int(got[-1][f"steps_done_w{w}"]) for w in range(M)] == summary["steps_by_worker"]
    # the rows before the checkpoint are the killed run's own records (the same losses, steps,
    # clock readings as its progress showed); the clock went on from there
    keep = ("train_loss", "wall_time", "steps_w0", "steps_w1", "bytes_total")
    assert [[r[k] for k in keep] for r in got[:EVERY]] == [[r[k] for k in keep] for r in progress]
    walls = [float(r["wall_time"]) for r in got]
    assert walls == sorted(walls) and summary["total_train_time"] == pytest.approx(walls[-1])
    # every kept snapshot evaluated, those before the checkpoint included
    assert [int(r["epoch"]) for r in got if r["val_acc"]] == list(range(4, EPOCHS, 5))
    # the whole run, resumed, is as good as the uninterrupted one (ACC_TOL: measured noise)
    ref = json.loads((runs["direct"] / "summary.json").read_text())
    for key in ("test_acc", "val_acc"):
        assert abs(summary["final"][key] - ref["final"][key]) <= ACC_TOL, (key, summary, ref)
    assert abs(summary["best_val"] - ref["best_val"]) <= ACC_TOL, (summary, ref)
    assert abs(summary["final"]["train_loss"] - ref["final"]["train_loss"]) <= LOSS_TOL
    # finished cleanly: no progress file or temp file left, the final set replaced the others
    # (the damaged, uncommitted one too: the committed set was the one resumed)
    assert not (run / "progress.csv").exists() and leftovers(run) == []
    assert sorted(p.name for p in (run / "checkpoint").iterdir()) == ["config.json",
                                                                      f"epoch{EPOCHS}"]


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["corrupt", "truncated"])
def test_a_damaged_checkpoint_is_refused_in_one_line(runs, damage, capsys, tmp_path):
    """A byte flipped inside a tensor (torch.load would read it without complaint) or a file cut
    short: --resume stops in the launcher, before any worker starts, with one line."""
    run = tmp_path / "run"
    shutil.copytree(runs["run"], run)
    victim = run / "checkpoint" / f"epoch{EPOCHS}" / "rank1.pt"
    damaged(victim, damage)  # a byte flipped inside the largest tensor, or the file cut in half
    rc, err = here(["train", "--resume", run, "--no-progress"], capsys)
    assert rc == 1 and len(err) == 1, err
    assert err[0].startswith(f"error: checkpoint {victim} is unreadable ({damage}"), err
