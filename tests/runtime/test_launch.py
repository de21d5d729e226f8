"""The same `python -m digest train` command runs under the local launcher and under torchrun;
the local launcher's workers see the launcher as it is at launch time. The torchrun runs start
processes from scratch (slow tier)."""
from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

from digest.runtime import launch
from helpers import ROOT, cli, rows

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
TRAIN = ["-m", "digest", "train", "--dataset", "synthetic:nodes=400", "--hidden", "16",
         "--epochs", "3", "--no-progress"]


def losses(out: Path) -> list[float]:
    return [float(r["train_loss"]) for r in rows(out / "metrics.csv")]


@pytest.mark.slow
def test_torchrun_two_processes(tmp_path):
    out = tmp_path / "run"
    done = cli([*TRAIN, "--out", out], tmp_path / "data", tmp_path,
               program=[TORCHRUN, "--nproc-per-node", "2"])
    assert done.rc == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["status"] == "complete"
    assert summary["bytes_by_category"]["bytes_halo_fwd"] > 0  # two processes really exchanged
    assert len(summary["startup_memory"]) == 2  # each worker's, gathered


@pytest.mark.slow
def test_local_launcher_matches_torchrun(tmp_path):
    """--workers 2 (spawned by us) and torchrun give the same losses: same code path."""
    for how, program in (("local", [sys.executable]),
                         ("torchrun", [TORCHRUN, "--nproc-per-node", "2"])):
        extra = ["--workers", "2"] if how == "local" else []
        done = cli([*TRAIN, "--dropout", "0", "--out", tmp_path / how, *extra], tmp_path / "data",
                   tmp_path, program=program)
        assert done.rc == 0, done.stderr[-2000:]
    assert losses(tmp_path / "local") == losses(tmp_path / "torchrun")


@pytest.mark.slow
@pytest.mark.parametrize("method", ["digest", "digest-async"])
def test_two_nodes_of_one_worker_each_run_the_same_command(method, tmp_path):
    """README's multi-node command, two torchrun agents (two "nodes", one worker each) meeting at
    one c10d rendezvous: RANK differs from LOCAL_RANK, every node builds or reuses the partition
    cache (its file lock), DIGEST-A's server starts on rank 0's node. Same losses as --workers 2
    (up to threads: each node here gives its one worker both cores)."""
    port = launch.free_port()
    train = ["-m", "digest", "train", "--dataset", "synthetic:nodes=400", "--hidden", "16",
             "--epochs", "4", "--dropout", "0", "--method", method, "--sync-interval", "2",
             "--no-progress"]
    node = [TORCHRUN, "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", tmp_path.name]
    done = [None, None]

    def run(n):  # each node in a session of its own, killed with all it started on timeout
        done[n] = cli([*train[1:], "--out", tmp_path / "nodes"], tmp_path / "data",
                      tmp_path / f"node{n}", program=[*node, "-m"])
    nodes = [threading.Thread(target=run, args=(n,)) for n in range(2)]
    for t in nodes:
        t.start()
    for t in nodes:
        t.join()
    assert [d.rc for d in done] == [0, 0], "\n".join(d.stderr for d in done)[-3000:]
    summary = json.loads((tmp_path / "nodes" / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["status"] == "complete"
    assert summary["machine"]["workers_per_node"] == 1  # LOCAL_WORLD_SIZE, not WORLD_SIZE
    if method == "digest-async":  # no barrier: the 2 x 4 gradients came from either node
        assert sum(summary["steps_by_worker"]) == 8
        return
    local = cli([*train[1:], "--workers", "2", "--out", tmp_path / "local"], tmp_path / "data",
                tmp_path, program=[sys.executable, "-m"])
    assert local.rc == 0, local.stderr[-2000:]
    assert losses(tmp_path / "nodes") == pytest.approx(losses(tmp_path / "local"), rel=1e-5)


def _where_am_i(word):
    print(f"worker {os.environ['RANK']} says {word}", flush=True)
    return (os.environ.get("DIGEST_TEST_MARK"), os.getcwd(), os.environ["RANK"], os.getppid())


@pytest.mark.parametrize("method", ["forkserver", pytest.param("spawn", marks=pytest.mark.slow)])
def test_workers_get_the_launchers_environment_directory_and_output_at_launch_time(
        method, tmp_path, monkeypatch, capfd):
    import psutil
    monkeypatch.setenv("DIGEST_START_METHOD", method)
    launch.prestart()  # a forkserver starts (or started earlier) with the state of then
    monkeypatch.setenv("DIGEST_TEST_MARK", "set later")
    monkeypatch.chdir(tmp_path)
    capfd.readouterr()
    out = launch.launch_all(_where_am_i, ("hello",), 2)
    assert {r: v[:3] for r, v in out.items()} == {r: ("set later", str(tmp_path), str(r))
                                                  for r in range(2)}
    # forked by the forkserver (which imported torch once), or spawned by the launcher itself

    def parent(pid):
        if pid == os.getpid():
            return "launcher"
        return "forkserver" if "forkserver" in " ".join(psutil.Process(pid).cmdline()) else pid
    assert {parent(v[3]) for v in out.values()} == {"launcher" if method == "spawn" else
                                                    "forkserver"}
    printed = capfd.readouterr().out
    assert "worker 0 says hello" in printed and "worker 1 says hello" in printed


@pytest.mark.slow  # a new interpreter that imports torch
def test_a_process_that_exits_right_after_prestart_leaves_no_forkserver(tmp_path):
    # the CLI pre-starts the forkserver before it checks --workers against the graph; refused
    # there, it exits while the server still imports torch, which took longer than the 5 s the
    # command-line tests give survivors on a loaded machine
    import subprocess
    import psutil
    code = ("from multiprocessing import forkserver; from digest.runtime import launch; "
            "launch.prestart(); print(forkserver._forkserver._forkserver_pid, flush=True)")
    # output to files: a pipe would wait for the forkserver too, which inherits it
    with open(tmp_path / "out", "w") as out, open(tmp_path / "err", "w") as err:
        rc = subprocess.call([sys.executable, "-c", code], stdout=out, stderr=err, timeout=60,
                             cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert rc == 0, (tmp_path / "err").read_text()
    pid = int((tmp_path / "out").read_text().split()[-1])
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_unknown_start_method_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("DIGEST_START_METHOD", "threads")
    with pytest.raises(ValueError, match="DIGEST_START_METHOD='threads': choose from forkserver, spawn"):
        launch.start_method()


def _raised(inner: BaseException | None, outer: Exception) -> Exception:
    """``outer`` as raised while handling ``inner`` (None: raised on its own)."""
    try:
        try:
            if inner is not None:
                raise inner
        finally:
            raise outer
    except Exception as e:  # noqa: BLE001
        return e


def test_an_error_raised_while_ctrl_c_unwinds_counts_as_interrupted():
    # torch.save's zip writer raises this from its cleanup when a SIGINT lands mid-write
    zip_error = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos")
    assert launch._interrupted(_raised(KeyboardInterrupt(), zip_error))
    assert not launch._interrupted(_raised(None, RuntimeError("own failure")))
    assert not launch._interrupted(_raised(ValueError("first"), RuntimeError("second")))
    # two levels down: an error raised while handling an error raised while Ctrl-C unwound
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            try:
                raise OSError("flush")
            except OSError:
                raise zip_error
    except RuntimeError as e:
        assert launch._interrupted(e)
