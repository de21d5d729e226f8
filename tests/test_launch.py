"""The same `python -m digest train` command runs under the local launcher and under torchrun;
the local launcher's workers see the launcher as it is at launch time."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from digest.runtime import launch

ROOT = Path(__file__).resolve().parents[1]


def _run(argv, data_root, timeout=240):
    env = {**os.environ, "DIGEST_DATA": str(data_root), "PYTHONPATH": str(ROOT)}
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_torchrun_two_processes(tmp_path):
    torchrun = Path(sys.executable).with_name("torchrun")
    out = tmp_path / "run"
    proc = _run([str(torchrun), "--nproc-per-node", "2", "-m", "digest", "train", "--dataset",
                 "synthetic:nodes=400", "--hidden", "16", "--epochs", "3", "--out", str(out),
                 "--no-progress"], tmp_path / "data")
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["status"] == "complete"
    assert summary["bytes_by_category"]["bytes_halo_fwd"] > 0  # two processes really exchanged


def test_local_launcher_matches_torchrun(tmp_path):
    """--workers 2 (spawned by us) and torchrun give the same losses: same code path."""
    runs = {}
    for how in ("local", "torchrun"):
        out = tmp_path / how
        args = ["-m", "digest", "train", "--dataset", "synthetic:nodes=400", "--hidden", "16",
                "--epochs", "3", "--dropout", "0", "--out", str(out), "--no-progress"]
        if how == "local":
            argv = [sys.executable, *args, "--workers", "2"]
        else:
            argv = [str(Path(sys.executable).with_name("torchrun")), "--nproc-per-node", "2", *args]
        proc = _run(argv, tmp_path / "data")
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs[how] = [line.split(",")[1] for line in (out / "metrics.csv").read_text().splitlines()[1:]]
    assert runs["local"] == runs["torchrun"]


@pytest.mark.parametrize("method", ["digest", "digest-async"])
def test_two_nodes_of_one_worker_each_run_the_same_command(method, tmp_path):
    """README's multi-node command, two torchrun agents (two "nodes", one worker each) meeting at
    one c10d rendezvous: RANK differs from LOCAL_RANK, every node builds or reuses the partition
    cache (its file lock), DIGEST-A's server starts on rank 0's node. Same losses as --workers 2
    (up to threads: each node here gives its one worker both cores)."""
    torchrun, port, out = Path(sys.executable).with_name("torchrun"), launch.free_port(), {}
    train = ["-m", "digest", "train", "--dataset", "synthetic:nodes=400", "--hidden", "16",
             "--epochs", "4", "--dropout", "0", "--method", method, "--sync-interval", "2",
             "--no-progress"]
    env = {**os.environ, "DIGEST_DATA": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)}
    logs = [tmp_path / f"node{n}.log" for n in range(2)]  # files: no pipe to fill while we wait
    files = [log.open("w") for log in logs]
    nodes = [subprocess.Popen(
        [str(torchrun), "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
         "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", tmp_path.name, *train,
         "--out", str(tmp_path / "nodes")], cwd=ROOT, env=env, stdout=f,
        stderr=subprocess.STDOUT) for f in files]
    try:
        codes = [node.wait(timeout=240) for node in nodes]
    finally:
        for node, f in zip(nodes, files):
            node.kill()
            f.close()
    assert codes == [0, 0], "\n".join(log.read_text() for log in logs)[-3000:]
    summary = json.loads((tmp_path / "nodes" / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["status"] == "complete"
    assert summary["machine"]["workers_per_node"] == 1  # LOCAL_WORLD_SIZE, not WORLD_SIZE
    if method == "digest-async":  # no barrier: the 2 x 4 gradients came from either node
        assert sum(summary["steps_by_worker"]) == 8
        return
    proc = _run([sys.executable, *train, "--workers", "2", "--out", str(tmp_path / "local")],
                tmp_path / "data")
    assert proc.returncode == 0, proc.stderr[-2000:]
    for run in ("nodes", "local"):
        out[run] = [float(line.split(",")[1]) for line in
                    (tmp_path / run / "metrics.csv").read_text().splitlines()[1:]]
    assert out["nodes"] == pytest.approx(out["local"], rel=1e-5)


def _where_am_i(word):
    print(f"worker {os.environ['RANK']} says {word}", flush=True)
    return (os.environ.get("DIGEST_TEST_MARK"), os.getcwd(), os.environ["RANK"],
            "torch_geometric" in sys.modules)  # imported before this call: by the forkserver


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_workers_get_the_launchers_environment_directory_and_output_at_launch_time(
        method, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("DIGEST_START_METHOD", method)
    launch.prestart()  # a forkserver starts (or started earlier) with the state of then
    monkeypatch.setenv("DIGEST_TEST_MARK", "set later")
    monkeypatch.chdir(tmp_path)
    capfd.readouterr()
    out = launch.launch_all(_where_am_i, ("hello",), 2)
    preloaded = method == "forkserver"  # a spawned worker imported only what it unpickled
    assert out == {r: ("set later", str(tmp_path), str(r), preloaded) for r in range(2)}
    printed = capfd.readouterr().out
    assert "worker 0 says hello" in printed and "worker 1 says hello" in printed


def test_unknown_start_method_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("DIGEST_START_METHOD", "threads")
    with pytest.raises(ValueError, match="DIGEST_START_METHOD='threads': choose from forkserver, spawn"):
        launch.start_method()
