"""The emulated cluster (``--emulate-network``, digest/runtime/netem.py): every worker in a
network namespace of its own behind a shaped link (both ends shaped to the bandwidth asked for),
for every method; nothing of a run is left behind, however it ends. (How well the emulated times
match bytes / bandwidth is a measurement: the cluster suite's cluster_model table.)

The runs need root (or user namespaces) and iproute2; they skip with the reason elsewhere (the
``clean`` fixture, tests/runtime/conftest.py), and start processes from scratch (slow tier).
Faults on the wire: test_netem_faults.py."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

import pytest

from digest.cli import main
from digest.methods import load_all
from digest.runtime import netem, netns
from helpers import DATASET as SMALL, cli


def train(out, method="exact", bandwidth="1gbit", *extra, dataset=SMALL, workers=2, epochs=3):
    from digest.methods import methods_with_option
    load_all()
    stale = ["--sync-interval", 2] if method in methods_with_option("sync_interval") else []
    return ["train", "--dataset", dataset, "--method", method, "--workers", workers,
            "--hidden", 16, "--epochs", epochs, *stale, "--timeout", 30,
            "--no-progress", "--out", out, "--emulate-network", bandwidth, *extra]


# -- what is checked before anything starts: one line, exit status 2 -------------------------------
def _one_line(capsys, args) -> tuple[int, list[str]]:
    capsys.readouterr()
    rc = main([str(a) for a in args])
    return rc, [x for x in capsys.readouterr().err.splitlines() if x.strip()]


def test_bad_requests_are_one_line_usage_errors(tmp_path, capsys, data_root):
    for args, words in [(train(tmp_path, bandwidth="fast"), "give a rate like"),
                        (train(tmp_path, workers=1), "needs --workers 2 or more"),
                        (["train", "--emulate-latency", "1ms"], "needs --emulate-network")]:
        rc, err = _one_line(capsys, args)
        assert rc == 2 and len(err) == 1 and words in err[0], err


def test_without_root_or_user_namespaces_the_error_says_what_is_missing(tmp_path, capsys,
                                                                         monkeypatch, data_root):
    monkeypatch.setattr(netem.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(netns, "userns_ok", lambda: False)
    rc, err = _one_line(capsys, train(tmp_path))
    assert rc == 2 and len(err) == 1 and "needs root, or unprivileged user namespaces" in err[0]


@pytest.mark.slow
def test_latency_needs_netem_which_this_kernel_lacks(tmp_path, capsys, data_root, clean):
    if netns.has_netem():
        pytest.skip("this kernel has netem: --emulate-latency is available here")
    rc, err = _one_line(capsys, train(tmp_path, "exact", "1gbit", "--emulate-latency", "1ms"))
    assert rc == 2 and len(err) == 1 and "needs the netem qdisc" in err[0], err


def test_rates_in_tc_units():
    assert netem.parse_rate("20mbit") == (20e6, "20mbit")
    assert netem.parse_rate("1.5Gbit") == (1.5e9, "1.5gbit")
    for bad in ("20", "20mb", "-1gbit", "0mbit"):
        with pytest.raises(netem.EmulationError):
            netem.parse_rate(bad)


# -- runs ------------------------------------------------------------------------------------------
def _qdiscs(runs, seen: dict):
    """Once this test's run has its namespaces, read the qdisc of both ends of every worker's
    link (the worker's eth0: its upload; the bridge's port: its download) while the run lives."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (len(seen) == 4 and all("tbf" in q for q in
                                                                    seen.values())):
        for r in list(runs.records.values()):
            bridge = [n for n in r["namespaces"] if n.endswith("-br")]
            workers = [n for n in r["namespaces"] if not n.endswith("-br")]
            for rank, ns in enumerate(workers):
                for where, dev in ((ns, "eth0"), (bridge[0], f"v{rank}")):
                    out = subprocess.run(["tc", "-n", where, "qdisc", "show", "dev", dev],
                                         capture_output=True, text=True).stdout
                    if out:
                        seen[(rank, dev)] = out
        time.sleep(0.05)


@pytest.mark.slow
def test_every_link_is_shaped_both_ways_at_the_bandwidth_asked_for(tmp_path, clean):
    """2 workers, exact, 20 Mbit/s: while the run trains, each worker's link carries a tbf of
    rate 20 Mbit/s at both ends (upload in its namespace, download at the switch), and the run
    records that emulation; no warning from inside the namespaces, nothing left running."""
    out, seen = tmp_path / "run", {}
    sampler = threading.Thread(target=_qdiscs, args=(clean, seen), daemon=True)
    sampler.start()
    done = cli(["train", "--dataset", "synthetic:preset=classic", "--hidden", 128, "--workers", 2,
                "--epochs", 6, "--eval-every", 100, "--no-progress", "--out", out,
                "--emulate-network", "20mbit"], tmp_path / "data", tmp_path, timeout=300)
    sampler.join(timeout=10)
    assert done.rc == 0 and done.survivors == [], done.stderr[-3000:]
    assert [x for x in done.lines if not x.startswith("building partition cache")] == [], \
        done.stderr  # no warnings from inside the namespaces
    assert "(emulated @ 20mbit)" in done.stdout
    assert sorted(seen) == [(0, "eth0"), (0, "v0"), (1, "eth0"), (1, "v1")], seen
    assert all("tbf" in q and "rate 20Mbit" in q for q in seen.values()), seen
    summary = json.loads((out / "summary.json").read_text())
    e = summary["emulation"]
    assert e["label"] == "emulated @ 20mbit" and e["bandwidth_bit_s"] == 20e6 and e["mtu"] == 1500
    assert e["qdisc"].startswith("tbf rate 20mbit") and len(e["namespaces"]) == 2
    assert e["bridge"].startswith("br0 in namespace dg-")
    assert sorted(e["namespaces"]) == sorted(n for r in clean.records.values()
                                             for n in r["namespaces"] if not n.endswith("-br"))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["partition", "digest", "digest-async", "varco"])
def test_every_method_runs_the_same_command(method, tmp_path, clean):
    """exact is above; DIGEST-A's server joins from rank 0's namespace."""
    out = tmp_path / "run"
    done = cli(train(out, method, "1gbit"), tmp_path / "data", tmp_path, timeout=300)
    assert done.rc == 0 and done.survivors == [], done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["emulation"]["bandwidth"] == "1gbit"
    if method != "partition":
        assert summary["total_bytes"] > 0


@pytest.mark.slow
def test_a_killed_worker_leaves_nothing(tmp_path, clean):
    done = cli(train(tmp_path / "run", epochs=20), tmp_path / "data", tmp_path,
               env={"DIGEST_FAULT": "kill,rank=1,epoch=3"}, timeout=300)
    assert done.rc == 1 and done.survivors == []
    assert done.lines[-1] == "error: lost worker rank 1 (killed by signal SIGKILL)", done.stderr


@pytest.mark.slow
def test_the_whole_run_killed_leaves_nothing(tmp_path, clean):
    """SIGKILL to the launcher's process group (launcher and workers at once): the watchdog
    deletes the namespaces the launcher could not."""
    done = cli(train(tmp_path / "run", epochs=20), tmp_path / "data", tmp_path,
               env={"DIGEST_FAULT": "kill,rank=group,epoch=3"}, timeout=300)
    assert done.rc == -9 and done.survivors == []


def _ctrl_c_once_training(out):
    """Ctrl-C (SIGINT to the run's process group, as a terminal sends it) once the run shows
    progress: a fixed delay could land while the workers still import torch on a loaded machine."""
    import psutil

    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (out / "progress.csv").exists():
        time.sleep(0.2)
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info["cmdline"] or []
        if str(out) in cmd and "digest" in cmd and os.getpgid(p.pid) == p.pid:
            os.killpg(p.pid, signal.SIGINT)
            return


@pytest.mark.slow
def test_ctrl_c_leaves_nothing(tmp_path, clean):
    out = tmp_path / "run"
    threading.Thread(target=_ctrl_c_once_training, args=(out,), daemon=True).start()
    done = cli(train(out, epochs=100000, dataset="synthetic:nodes=300,seed=1"), tmp_path / "data",
               tmp_path, timeout=300)
    assert done.rc == 130 and done.survivors == [] and done.lines[-1] == "interrupted", \
        (done.rc, done.survivors, done.lines[-5:])
    assert not (out / "summary.json").exists()


@pytest.mark.slow
def test_a_later_run_removes_what_a_dead_run_left(tmp_path, clean):
    """A record whose owner is gone (here: a process that exited) and its namespace: the next
    cluster deletes them; a namespace without a record (no proof it is dead) is left alone."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    run, orphan = os.urandom(3).hex(), f"dg-{os.urandom(3).hex()}-w0"
    record = netns.state_dir() / f"{run}.json"
    record.write_text(json.dumps({"run": run, "owner": dead.pid, "owner_start": "1",
                                  "namespaces": [f"dg-{run}-w0"]}))
    subprocess.run(["ip", "netns", "add", f"dg-{run}-w0"], check=True)
    subprocess.run(["ip", "netns", "add", orphan], check=True)
    try:
        with netem.EmulatedCluster(2, "1gbit") as c:
            clean.add(c)
            assert not (netem.NETNS_DIR / f"dg-{run}-w0").exists() and not record.exists()
            assert (netem.NETNS_DIR / orphan).exists()
            assert all((netem.NETNS_DIR / n).exists() for n in c.namespaces)
        assert not any((netem.NETNS_DIR / n).exists() for n in c.namespaces)
    finally:
        subprocess.run(["ip", "netns", "del", orphan], capture_output=True)
        subprocess.run(["ip", "netns", "del", f"dg-{run}-w0"], capture_output=True)
        record.unlink(missing_ok=True)


@pytest.mark.slow
def test_a_failed_start_leaves_nothing(tmp_path, clean, monkeypatch):
    """A step of the set-up fails (here: the tbf qdisc is refused): one clear error, nothing left."""
    monkeypatch.setattr(netem.EmulatedCluster, "qdisc", lambda self: ["tbf", "rate", "nonsense"])
    cluster = netem.EmulatedCluster(2, "1gbit")
    clean.add(cluster)  # (the fixture checks that none of it is left)
    with pytest.raises(netem.EmulationError, match="emulated cluster: `tc -n dg-"):
        with cluster:
            pass


@pytest.mark.slow
@pytest.mark.skipif(not netns.userns_ok(), reason="unprivileged user namespaces are not allowed")
def test_the_unprivileged_path_runs_in_a_user_namespace(tmp_path, clean):
    """What a user without root gets where the kernel allows user namespaces: the run
    re-executes itself as root of a user + mount + network namespace of its own (forced here,
    as root, by the test hook DIGEST_TEST_USERNS); its namespaces vanish with it."""
    out = tmp_path / "run"
    done = cli(train(out, "digest-async", "100mbit"), tmp_path / "data", tmp_path,
               env={"DIGEST_TEST_USERNS": "1"}, timeout=300)
    assert done.rc == 0 and done.survivors == [], done.stderr[-3000:]
    assert json.loads((out / "summary.json").read_text())["emulation"]["userns"] is True
