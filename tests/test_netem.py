"""The emulated cluster (``--emulate-network``, digest/runtime/netem.py; issue 18): every worker in a
network namespace of its own behind a shaped link, for every method; the communication time it
measures is what the bytes cost at that bandwidth; nothing is left behind, however the run ends.

The runs need root (or user namespaces) and iproute2; they skip with the reason elsewhere."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time

import pandas as pd
import pytest

from digest.runtime import netem, netns
from digest.cli import import_methods, main
from reliability_util import cli

SMALL = "synthetic:nodes=300,avg_degree=5,features=16,classes=4,seed=1"


def _why_not() -> str | None:
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "iproute2 (ip, tc) is not installed"
    if os.geteuid() != 0:
        return "needs root (the runs create network namespaces, veths, a bridge, tbf qdiscs)"
    probe = f"dg-{os.urandom(3).hex()}-w0"
    if subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode != 0:
        return "`ip netns add` is not permitted here"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


WHY_NOT = _why_not()
needs_netns = pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))


def ours() -> set[str]:
    """Namespaces and host interfaces an emulated run could leave behind."""
    spaces = {line.split()[0] for line in subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines()
        if line.startswith("dg-")}
    links = {line.split(":")[1].strip() for line in subprocess.run(
        ["ip", "-o", "link"], capture_output=True, text=True).stdout.splitlines()}
    records = {p.name for p in netns.state_dir().glob("*")}
    return spaces | {f"link:{x}" for x in links} | {f"record:{x}" for x in records}


@pytest.fixture
def clean():
    """What the test started with; afterwards nothing more than that (namespaces, links, records)."""
    before = ours()
    yield
    left = ours() - before
    assert not left, f"left behind: {sorted(left)}"


def train(out, method="exact", bandwidth="1gbit", *extra, dataset=SMALL, workers=2, epochs=3):
    from digest.methods import methods_with_option
    import_methods()
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


@needs_netns
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
@needs_netns
def test_comm_time_is_bytes_over_bandwidth_at_20mbit(tmp_path, clean):
    """2 workers, exact, 20 Mbit/s each way: the communication time per epoch (the slowest
    worker's time inside collectives, mean over the epochs after the first) is within 30% of its
    bytes / bandwidth (a worker sends its bytes over its own link while it receives the other's
    over the same link's other direction), every epoch within 50% (the workers share the host's
    cores, whose load reaches their waits). On the 3,000-node synthetic graph (preset classic,
    the default before issue 17) with 128 hidden columns a worker sends 1.8 MB per epoch (0.74 s
    at 20 Mbit/s)."""
    out = tmp_path / "run"
    done = cli(["train", "--dataset", "synthetic:preset=classic", "--hidden", 128, "--workers", 2, "--epochs", 6,
                "--eval-every", 100, "--no-progress", "--out", out, "--emulate-network", "20mbit"],
               tmp_path / "data", tmp_path, timeout=300)
    assert done.rc == 0 and done.survivors == [], done.stderr[-3000:]
    assert [x for x in done.lines if not x.startswith("building partition cache")] == [], \
        done.stderr  # no warnings from inside the namespaces
    assert "(emulated @ 20mbit)" in done.stdout
    m = pd.read_csv(out / "metrics.csv")
    predicted = m[["bytes_w0", "bytes_w1"]].max(axis=1) / (20e6 / 8)
    comm, predicted = m["comm_time"].iloc[1:], predicted.iloc[1:]  # epoch 0: TCP's first ramp-up
    assert 0.7 < comm.mean() / predicted.mean() < 1.3, list(comm / predicted)
    assert (comm / predicted).between(0.5, 1.5).all(), list(comm / predicted)
    summary = json.loads((out / "summary.json").read_text())
    e = summary["emulation"]
    assert e["label"] == "emulated @ 20mbit" and e["bandwidth_bit_s"] == 20e6 and e["mtu"] == 1500
    assert e["qdisc"].startswith("tbf rate 20mbit") and len(e["namespaces"]) == 2
    assert e["bridge"].startswith("br0 in namespace dg-")


@needs_netns
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


@needs_netns
def test_a_killed_worker_leaves_nothing(tmp_path, clean):
    done = cli(train(tmp_path / "run", epochs=20), tmp_path / "data", tmp_path,
               env={"DIGEST_TEST_KILL_EPOCH": "3", "DIGEST_TEST_KILL_RANK": "1"}, timeout=300)
    assert done.rc == 1 and done.survivors == []
    assert done.lines[-1] == "error: lost worker rank 1 (killed by signal SIGKILL)", done.stderr


@needs_netns
def test_the_whole_run_killed_leaves_nothing(tmp_path, clean):
    """SIGKILL to the launcher's process group (launcher and workers at once): the watchdog
    deletes the namespaces the launcher could not."""
    done = cli(train(tmp_path / "run", epochs=20), tmp_path / "data", tmp_path,
               env={"DIGEST_TEST_KILL_EPOCH": "3", "DIGEST_TEST_KILL_RANK": "group"}, timeout=300)
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


@needs_netns
def test_ctrl_c_leaves_nothing(tmp_path, clean):
    import threading

    out = tmp_path / "run"
    threading.Thread(target=_ctrl_c_once_training, args=(out,), daemon=True).start()
    done = cli(train(out, epochs=100000, dataset="synthetic:nodes=300,seed=1"), tmp_path / "data",
               tmp_path, timeout=300)
    assert done.rc == 130 and done.survivors == [] and done.lines[-1] == "interrupted", \
        (done.rc, done.survivors, done.lines[-5:])
    assert not (out / "summary.json").exists()


@needs_netns
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
            assert not (netem.NETNS_DIR / f"dg-{run}-w0").exists() and not record.exists()
            assert (netem.NETNS_DIR / orphan).exists()
            assert all((netem.NETNS_DIR / n).exists() for n in c.namespaces)
        assert not any((netem.NETNS_DIR / n).exists() for n in c.namespaces)
    finally:
        subprocess.run(["ip", "netns", "del", orphan], capture_output=True)
        subprocess.run(["ip", "netns", "del", f"dg-{run}-w0"], capture_output=True)
        record.unlink(missing_ok=True)


@needs_netns
def test_a_failed_start_leaves_nothing(tmp_path, clean, monkeypatch):
    """A step of the set-up fails (here: the tbf qdisc is refused): one clear error, nothing left."""
    monkeypatch.setattr(netem.EmulatedCluster, "qdisc", lambda self: ["tbf", "rate", "nonsense"])
    with pytest.raises(netem.EmulationError, match="emulated cluster: `tc -n dg-"):
        with netem.EmulatedCluster(2, "1gbit"):
            pass
    time.sleep(0.5)  # the watchdog exits once the launcher's side closed


@needs_netns
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


# -- faults on the wire (issue 21) -----------------------------------------------------------------
def _take_link_down(out, before: set, seconds_down: float | None, when: dict):
    """Once the run has progress (progress.csv) take rank 1's link down inside its namespace
    (`ip link set eth0 down`, as an operator or a failing cable would), for good or for
    ``seconds_down``. Records "down" / "up" only when the command worked: a run that ended
    first (its namespace gone) leaves them unset, so the test fails by its assertion, not by an
    exception in this thread."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        spaces = set(subprocess.run(["ip", "netns", "list"], capture_output=True,
                                    text=True).stdout.split())
        ns = [n for n in spaces - before if n.startswith("dg-") and n.endswith("-w1")]
        if ns and (out / "progress.csv").exists():
            break
        time.sleep(0.1)
    else:
        return
    link = ["ip", "-n", ns[0], "link", "set", "eth0"]
    if subprocess.run([*link, "down"], capture_output=True).returncode == 0:
        when["down"] = time.monotonic()
    if seconds_down is not None and "down" in when:
        time.sleep(seconds_down)
        if subprocess.run([*link, "up"], capture_output=True).returncode == 0:
            when["up"] = time.monotonic()


def _run_with_link_fault(tmp_path, seconds_down, epochs):
    import threading

    out, when, timeout = tmp_path / "run", {}, 10
    before = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
    fault = threading.Thread(target=_take_link_down, args=(out, before, seconds_down, when),
                             daemon=True)
    fault.start()
    start = time.monotonic()
    done = cli(["train", "--dataset", "synthetic:nodes=300,seed=1", "--workers", 2, "--hidden", 16,
                "--epochs", epochs, "--timeout", timeout, "--no-progress", "--out", out,
                "--emulate-network", "100mbit"], tmp_path / "data", tmp_path, timeout=300)
    fault.join(timeout=10)
    assert "down" in when, "the run ended before its link went down: " + done.stderr[-2000:]
    # the launcher's exit - link down; `when` says whether the link came back while the run lived
    return done, out, start + done.seconds - when["down"], timeout, when


@needs_netns
def test_a_link_taken_down_ends_the_run_with_one_line_naming_it(tmp_path, clean):
    """Rank 1's link goes down mid-run for good: no reset reaches anyone, so the collective
    in flight times out (--timeout 10); the run ends with one line that names the lost rank and
    the cause, within the timeout plus the launcher's grace and clean-up; no result, nothing
    half-written, no namespace or process left."""
    done, out, after, timeout, _ = _run_with_link_fault(tmp_path, None, 100000)
    assert done.rc == 1 and done.survivors == [], done.stderr[-2000:]
    line = done.lines[-1]
    assert line.startswith("error: lost worker rank ") and "peer stopped answering" in line, line
    assert line.endswith("; the emulated link of rank 1 was down"), line
    assert timeout - 1 < after < timeout + 15, after  # timed out, not reset: ~timeout + grace
    assert not (out / "summary.json").exists() and not (out / "metrics.csv").exists()
    assert list(out.rglob("*.tmp")) == []


@needs_netns
def test_a_link_back_within_the_timeout_lets_the_run_continue(tmp_path, clean):
    """Down for 3 s, then up (--timeout 10): TCP retransmits, gloo never notices; the run
    completes. 1,000 epochs (about 11 ms each here) so that the run is still going when the link
    comes back up: 60 could end in the second after the first progress.csv."""
    done, out, _, _, when = _run_with_link_fault(tmp_path, 3.0, 1000)
    assert done.rc == 0 and done.survivors == [], done.stderr[-2000:]
    assert "up" in when, "the run ended before the link came back up"
    assert json.loads((out / "summary.json").read_text())["epochs"] == 1000
