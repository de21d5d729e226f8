"""Network namespaces for the emulated cluster (digest/runtime/netem.py): the ``ip`` / ``tc`` calls,
the checks of what this machine allows (root, user namespaces, the netem qdisc), and clean-up.

Clean-up: a record of the run (owner pid and start time, namespaces) is written before anything
is created; ``teardown`` deletes the namespaces and kills whatever process is still inside them;
a watchdog process (``watch_main``, its own session) does the same when the launcher dies without
cleaning up (SIGKILL); and ``reap_stale`` deletes the namespaces of any recorded run whose owner
is gone.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import UsageError
from . import placement

NETNS_DIR = Path("/run/netns")
USERNS_ENV = "DIGEST_NETEM_USERNS"  # set once the run re-executed itself in a user namespace


class EmulationError(UsageError):
    """The emulation cannot run here (what is missing is in the message): exit status 2."""


def ip(*args, check=True) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise EmulationError(f"emulated cluster: `{' '.join(args)}` failed: "
                             f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return proc


def has_netem() -> bool:
    """Can this kernel attach a netem qdisc? Tried on the loopback of a throwaway namespace."""
    name = f"dg-{os.urandom(3).hex()}-w0"
    if ip("ip", "netns", "add", name, check=False).returncode != 0:
        return False
    try:
        return ip("tc", "-n", name, "qdisc", "add", "dev", "lo", "root", "netem", "delay",
                   "1ms", check=False).returncode == 0
    finally:
        ip("ip", "netns", "del", name, check=False)


def userns_ok() -> bool:
    unshare = shutil.which("unshare")
    return bool(unshare) and subprocess.run(
        [unshare, "--user", "--map-root-user", "--mount", "--net", "true"],
        capture_output=True).returncode == 0


def reexec_in_userns(argv) -> None:
    """Become root of a fresh user namespace (with a private mount namespace, where /run/netns
    is a tmpfs of our own) and run the same command there; never returns."""
    script = ("if [ -d /run/netns ]; then mount -t tmpfs digest /run/netns; "
              "else mount -t tmpfs digest /run && mkdir /run/netns; fi && "
              "ip link set lo up && exec \"$@\"")
    os.environ[USERNS_ENV] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    # --net: `ip netns` switches back to the namespace it started in, which must be ours too (the
    # launcher's stores then listen on a loopback of the run's own)
    os.execvp("unshare", ["unshare", "--user", "--map-root-user", "--mount", "--net",
                          "--propagation", "private", "sh", "-c", script, "sh", sys.executable,
                          "-m", "digest", *argv])


def state_dir() -> Path:
    d = Path("/run/digest-netem")
    try:
        d.mkdir(mode=0o700, exist_ok=True)
        if os.access(d, os.W_OK):
            return d
    except OSError:
        pass
    d = Path(tempfile.gettempdir()) / f"digest-netem-{os.getuid()}"  # a user namespace: /run
    d.mkdir(mode=0o700, exist_ok=True)                                 # is not ours
    return d


def start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def alive(record: dict) -> bool:
    return start_time(record["owner"]) == record["owner_start"]


def teardown(names) -> None:
    """Kill what is left inside ``names`` (processes of this run only), delete them."""
    for name in names:
        if (NETNS_DIR / name).exists():
            pids = ip("ip", "netns", "pids", name, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
    for name in names:  # the workers' first: their links' other ends go with the bridge's
        if (NETNS_DIR / name).exists():
            ip("ip", "netns", "del", name, check=False)


def reap(record_path: Path) -> None:
    try:
        record = json.loads(record_path.read_text())
    except (OSError, ValueError):
        return
    teardown(record["namespaces"])
    if placement.remove(record.get("cgroups", [])):
        return  # the record stays, so that the next run's reap_stale tries again
    record_path.with_suffix(".hosts").unlink(missing_ok=True)
    record_path.unlink(missing_ok=True)


def reap_stale() -> list[str]:
    """Delete the namespaces of recorded runs whose owner process is gone; returns their ids."""
    gone = []
    for path in state_dir().glob("*.json"):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not alive(record):
            reap(path)
            gone.append(record["run"])
    return gone


def watch_main() -> None:
    """The watchdog's main (``python -c``): when the launcher's end of our stdin closes (it
    exited, however), delete what its record still lists."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the launcher's to handle
    sys.stdin.buffer.read()
    reap(Path(sys.argv[1]))
