"""``--emulate-network BANDWIDTH``: an emulated cluster on one machine (docs/emulated-cluster.md;
docs/methods.md section 9).

Every worker process runs in a network namespace of its own, ``dg-<run>-w<r>``, whose one
interface ``eth0`` (MTU 1500, address 10.a.b.(r+1)/24) is a veth link to a Linux bridge ``br0``
that lives in a namespace of the run too, ``dg-<run>-br`` (the switch). Each link is shaped to
BANDWIDTH in both directions: a tbf qdisc on the worker's end (its upload) and one on the
bridge's end (its download). The addresses exist only inside these namespaces; nothing is routed
to or from the host, and the host's own interfaces are untouched.

How the workers get there: the launcher (digest/runtime/launch.py) starts them as usual; each worker,
first thing, enters its namespace (``setns`` on /run/netns/<name>, ``enter_from_env``), before it
opens any socket. It then meets the others through a store that rank 0 opens in its own
namespace (MASTER_ADDR = rank 0's address, a fixed port: the namespace is the run's, every port
is free there), not the launcher's store on the host's loopback, which a namespace cannot reach.
gloo and TensorPipe bind ``eth0`` (GLOO_SOCKET_IFNAME / TP_SOCKET_IFNAME), and TensorPipe is
limited to its TCP transport and basic channel, so every byte between workers crosses the shaped
links (its shared-memory transport and cross-memory-attach channel would bypass them). DIGEST-A's
server, a child of rank 0, inherits rank 0's namespace: it sits on rank 0's "node". A worker also
gets a private /etc/hosts naming the run's addresses (a mount namespace of its own, as
``ip netns exec`` does), and TCP in the workers' namespaces keeps its window across idle gaps
(``SYSCTLS``).

Clean-up: a record of the run (owner pid and start time, namespaces) is written before anything
is created; the namespaces are deleted, and whatever process is still inside them killed, on every
exit of the launcher (normal, error, Ctrl-C); a watchdog process (its own session) does the same
when the launcher dies without cleaning up (SIGKILL); and a later run deletes the namespaces of
any recorded run whose owner is gone. Without root, the run re-executes itself in an unprivileged
user + mount namespace where the kernel allows it (there all of it vanishes with the run).

Not emulated: CPU. The workers still share the host's cores (stated beside every number).
"""
from __future__ import annotations

import ctypes
import ipaddress
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

from . import listen, netns, placement
from .netns import NETNS_DIR, USERNS_ENV, EmulationError
from .units import TC, Bandwidth, read_latency

MTU = 1500
PORT = 29500  # rank 0's store, inside rank 0's own namespace: always free there
DEV = "eth0"  # the worker's end of its link, inside its namespace
SPEC_ENV, RECORD_ENV = "DIGEST_NETEM", "DIGEST_EMULATION"
_NAME = re.compile(r"dg-([0-9a-f]{6})-(br|w\d+)$")
CLONE_NEWNET, CLONE_NEWNS = 0x40000000, 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
# In the workers' namespaces only: TCP keeps its congestion window across the idle gaps between
# collectives (by default it restarts slow start after each, and the RTT slow start climbs
# through is inflated by the other direction's queue in the shaped link: a 1 MB all-to-all at
# 20mbit took up to 2x bytes / bandwidth)
SYSCTLS = {"net/ipv4/tcp_slow_start_after_idle": 0}


def parse_rate(text: str, what: str = "--emulate-network") -> tuple[float, str]:
    """'20mbit' -> (2e7 bit/s, '20mbit'): in tc's units only (k = 1000), and without an exponent,
    as the label is handed to tc (digest/runtime/units.py)."""
    try:
        rate = Bandwidth.read(text, units=TC)
    except ValueError:
        rate = None
    if rate is None or "e" in rate.number:
        raise EmulationError(f"{what} {text!r}: give a rate like 10gbit, 1gbit, 100mbit, 500kbit")
    return rate.bits_per_s, rate.tc


def parse_delay(text: str) -> float:
    """'100us' -> 1e-4 seconds."""
    try:
        return read_latency(text)[0]
    except ValueError:
        raise EmulationError(f"--emulate-latency {text!r}: give a delay like 100us or 1ms") from None


def check(bandwidth: str, latency: str, world: int, under_torchrun: bool, argv=None) -> None:
    """Everything the emulation needs, before anything starts; raises EmulationError (one line).
    Not root: re-executes this command (``argv``) in a user + mount namespace where allowed."""
    if not bandwidth:
        raise EmulationError("--emulate-latency needs --emulate-network BANDWIDTH too")
    parse_rate(bandwidth)
    if under_torchrun:
        raise EmulationError("--emulate-network emulates a cluster on this machine (--workers M); "
                             "under torchrun the network is a real one: drop the flag")
    if world < 2:
        raise EmulationError("--emulate-network needs --workers 2 or more (one worker sends "
                             "nothing)")
    missing = [t for t in ("ip", "tc") if shutil.which(t) is None]
    if missing:
        raise EmulationError(f"--emulate-network needs the `{'` and `'.join(missing)}` "
                             "command(s) (iproute2)")
    # DIGEST_TEST_USERNS=1 (tests only): take the unprivileged path even as root
    if os.geteuid() != 0 or (os.environ.get("DIGEST_TEST_USERNS") and not os.environ.get(USERNS_ENV)):
        if os.environ.get(USERNS_ENV) or not netns.userns_ok():
            raise EmulationError("--emulate-network needs root, or unprivileged user namespaces "
                                 "(sysctl user.max_user_namespaces > 0, and "
                                 "kernel.unprivileged_userns_clone = 1 where it exists); run it "
                                 "as root (sudo) or enable them")
        if argv is not None:
            netns.reexec_in_userns(argv)
    if latency:
        parse_delay(latency)
        if not netns.has_netem():
            raise EmulationError("--emulate-latency needs the netem qdisc (kernel module "
                                 "sch_netem), which this kernel does not have; drop the flag "
                                 "(bandwidth alone is emulated with tbf)")


# -- the record of a run, and clean-up ------------------------------------------------------------
# -- the cluster ----------------------------------------------------------------------------------
def _subnet() -> ipaddress.IPv4Network:
    """A 10.a.b.0/24 that overlaps no address or route of the host."""
    used = []
    for args in (("ip", "-4", "-o", "addr"), ("ip", "-4", "route", "show", "table", "all")):
        for word in netns.ip(*args, check=False).stdout.split():
            try:
                used.append(ipaddress.ip_network(word, strict=False))
            except ValueError:
                pass
    used = [n for n in used if n.prefixlen > 0]
    while True:
        net = ipaddress.ip_network(f"10.{random.randint(64, 254)}.{random.randint(0, 254)}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net


class EmulatedCluster:
    """``with EmulatedCluster(world, "20mbit") as c: launch(..., env=c.worker_env())``."""

    def __init__(self, world: int, bandwidth: str, latency: str = "", run_id: str | None = None,
                 cpu_quota: bool = True):
        self.world, self.latency = world, latency
        self.rate, self.bandwidth = parse_rate(bandwidth)
        self.run = run_id or os.urandom(3).hex()
        self.bridge_ns = f"dg-{self.run}-br"
        self.worker_ns = [f"dg-{self.run}-w{r}" for r in range(world)]
        self.net = _subnet()
        self.addrs = [str(self.net.network_address + r + 1) for r in range(world)]
        self.burst = max(16 * 1024, int(self.rate / 8 * 2e-3))  # > MTU; 2 ms of tokens
        self.record_path = netns.state_dir() / f"{self.run}.json"
        self.hosts_path = self.record_path.with_suffix(".hosts")
        self.watchdog: subprocess.Popen | None = None
        self.quota = placement.CpuQuota(self.run, world, enabled=cpu_quota)

    @property
    def namespaces(self) -> list[str]:
        return [*self.worker_ns, self.bridge_ns]

    def qdisc(self) -> list[str]:
        tbf = ["tbf", "rate", self.bandwidth, "burst", str(self.burst), "latency", "50ms"]
        if not self.latency:
            return tbf
        half = f"{parse_delay(self.latency) / 2 * 1e6:.0f}us"  # each packet crosses two ends
        return ["netem", "delay", half, "|", *tbf]

    def _shape(self, ns: str, dev: str) -> None:
        q = self.qdisc()
        if "|" not in q:
            netns.ip("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", *q)
            return
        i = q.index("|")
        netns.ip("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", *q[:i])
        netns.ip("tc", "-n", ns, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", *q[i + 1:])

    def __enter__(self) -> "EmulatedCluster":
        netns.reap_stale()
        self.record_path.write_text(json.dumps({
            "run": self.run, "owner": os.getpid(), "owner_start": netns.start_time(os.getpid()),
            "namespaces": self.namespaces, "cgroups": self.quota.paths}))
        root = str(Path(__file__).resolve().parents[2])  # the directory holding digest/
        self.watchdog = subprocess.Popen(
            [sys.executable, "-c", "from digest.runtime.netns import watch_main; watch_main()",
             str(self.record_path)], stdin=subprocess.PIPE, start_new_session=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(
                 p for p in (root, os.environ.get("PYTHONPATH")) if p)}, stdout=subprocess.DEVNULL)
        try:
            self.quota.__enter__()
            base = Path("/etc/hosts").read_text() if Path("/etc/hosts").exists() else ""
            self.hosts_path.write_text(base + "".join(
                f"{a} {n}\n::ffff:{a} {n}\n" for a, n in zip(self.addrs, self.worker_ns)))
            self._create()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _create(self) -> None:
        br = self.bridge_ns
        for ns in self.namespaces:
            netns.ip("ip", "netns", "add", ns)
        netns.ip("ip", "-n", br, "link", "add", "br0", "type", "bridge")
        netns.ip("ip", "-n", br, "link", "set", "br0", "up")
        for r, (ns, addr) in enumerate(zip(self.worker_ns, self.addrs)):
            port = f"v{r}"
            netns.ip("ip", "-n", br, "link", "add", port, "mtu", str(MTU), "type", "veth", "peer",
                "name", DEV, "mtu", str(MTU), "netns", ns)
            netns.ip("ip", "-n", br, "link", "set", port, "master", "br0", "up")
            netns.ip("ip", "-n", ns, "addr", "add", f"{addr}/{self.net.prefixlen}", "dev", DEV)
            netns.ip("ip", "-n", ns, "link", "set", DEV, "up")
            netns.ip("ip", "-n", ns, "link", "set", "lo", "up")
            for key, value in SYSCTLS.items():
                netns.ip("ip", "netns", "exec", ns, "sh", "-c", f"echo {value} > /proc/sys/{key}")
            self._shape(br, port)  # the worker's download
            self._shape(ns, DEV)   # its upload

    def __exit__(self, *exc) -> None:
        netns.teardown(self.namespaces)
        self.quota.__exit__(*exc)
        self.hosts_path.unlink(missing_ok=True)
        self.record_path.unlink(missing_ok=True)
        if self.watchdog is not None:
            self.watchdog.stdin.close()  # it finds nothing left to do and exits
            try:
                self.watchdog.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.watchdog.kill()
            self.watchdog = None

    def describe(self) -> dict:
        """What summary.json records under "emulation"."""
        return {"kind": "emulated", "label": f"emulated @ {self.bandwidth}",
                "bandwidth": self.bandwidth, "bandwidth_bit_s": self.rate,
                "each_way": "both directions: tbf on the worker's end (upload) and on the "
                            "bridge's end (download) of each link",
                "latency": self.latency or None, "mtu": MTU,
                "qdisc": " ".join(self.qdisc()).replace(" | ", " + "),
                "bridge": f"br0 in namespace {self.bridge_ns}",
                "namespaces": self.worker_ns, "addresses": self.addrs, "subnet": str(self.net),
                "userns": bool(os.environ.get(USERNS_ENV)),
                "sysctls": {k.replace("/", "."): v for k, v in SYSCTLS.items()},
                **self.quota.describe()}

    def worker_env(self) -> dict:
        """What the launcher passes to the workers (enter_from_env reads it)."""
        spec = {"namespaces": self.worker_ns, "addrs": self.addrs, "port": PORT,
                "hosts": str(self.hosts_path)}
        return {SPEC_ENV: json.dumps(spec), RECORD_ENV: json.dumps(self.describe()),
                "GLOO_SOCKET_IFNAME": DEV, "TP_SOCKET_IFNAME": DEV, listen.WIRE_ENV: "1",
                **self.quota.worker_env()}

    def links_down(self) -> list[int]:
        """Ranks whose link is not up (either end), e.g. taken down by a test or an operator."""
        down = []
        for r, ns in enumerate(self.worker_ns):
            mine = netns.ip("ip", "-n", ns, "-o", "link", "show", DEV, check=False).stdout
            theirs = netns.ip("ip", "-n", self.bridge_ns, "-o", "link", "show", f"v{r}",
                         check=False).stdout
            if "state UP" not in mine or "state UP" not in theirs:
                down.append(r)
        return down


# -- the worker side ------------------------------------------------------------------------------
def enter_from_env() -> None:
    """In a launched worker, before it opens any socket: enter this rank's namespace and point
    the process group at rank 0's store there. A no-op outside an emulated run."""
    spec = os.environ.get(SPEC_ENV)
    if not spec:
        return
    spec, rank = json.loads(spec), int(os.environ["RANK"])
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(NETNS_DIR / spec["namespaces"][rank], os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {spec['namespaces'][rank]}: {os.strerror(err)}")
    finally:
        os.close(fd)
    _private_hosts(libc, spec["hosts"])
    os.environ.update(MASTER_ADDR=spec["addrs"][0], MASTER_PORT=str(spec["port"]),
                      TORCHELASTIC_USE_AGENT_STORE="False", DIGEST_BIND_ADDR=spec["addrs"][rank])


def _private_hosts(libc, hosts: str) -> None:
    """This process sees ``hosts`` (the host's /etc/hosts plus the run's addresses) as /etc/hosts,
    in a mount namespace of its own, as ``ip netns exec`` does: c10d names its peers in its log
    lines, and inside the namespaces (no DNS) each lookup failed with a warning. Best effort: a
    process with threads already (DIGEST_START_METHOD=spawn) cannot, and keeps the warnings."""
    if libc.unshare(CLONE_NEWNS) != 0:
        return
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0:  # nothing leaks out
        libc.mount(hosts.encode(), b"/etc/hosts", None, MS_BIND, None)


def summary_extra() -> dict:
    """{"emulation": ...} for summary.json in an emulated run, else {}."""
    record = os.environ.get(RECORD_ENV)
    return {"emulation": json.loads(record)} if record else {}


