"""The local launcher: ``--workers M`` starts M worker processes through torch.distributed's own
elastic launcher (the machinery behind torchrun), on a free port, with failures surfaced.

Workers are forked from a *forkserver* (multiprocessing's) that imported torch, torch_geometric
and the trainer once: a worker started from a fresh interpreter re-imports them all (seconds of CPU
each, which dominated short runs with more workers than cores). The forkserver is a fresh process
(fork + exec) that only imports: it holds no data and never initialises CUDA, so workers inherit
none of the launcher's memory and NCCL workers are safe. Each worker still gets the launcher's
environment, working directory and stdout/stderr as they are at launch time (``_Inherit``), as a
spawned worker would. ``DIGEST_START_METHOD=spawn`` starts every worker from a fresh interpreter.

Under ``torchrun`` this module is bypassed: torchrun already started the workers and set
RANK / LOCAL_RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT.
"""
from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import sys
import time
import traceback
import uuid

from . import listen, netem, placement, unresponsive

# Exit status of a worker whose collective failed because a PEER was lost (connection reset,
# collective timeout): a consequence, not the cause, so the launcher blames the other rank.
PEER_LOST = 75
# A worker that lost a peer waits this long before exiting, so that the agent (polling every
# monitor_interval) sees the rank that died first and names it, not one of its survivors.
GRACE_S = 2.0
# What every worker imports; the forkserver imports them once (see prestart for more).
PRELOAD = ("torch", "torch.distributed", "torch_geometric", "digest")
START_METHODS = ("forkserver", "spawn")
_QUIET = ("torch.distributed.elastic", "torch.distributed.launcher", "torch.multiprocessing",
          "torchelastic")


class WorkerFailed(RuntimeError):
    """One or more workers exited non-zero; the message names the ranks."""


def _peer_lost(e: BaseException) -> bool:
    """Is ``e`` a collective that failed because another process went away or stopped answering
    (rather than an error of this worker's own)?"""
    import torch.distributed as dist
    if isinstance(e, (getattr(dist, "DistNetworkError", ()), getattr(dist, "DistStoreError", ()))):
        return True
    text = str(e)
    return isinstance(e, RuntimeError) and any(s in text for s in (
        "gloo/transport", "Connection reset", "Connection closed", "Broken pipe", "Timed out",
        "timed out", "remote process exited", "communicator was aborted"))


def _interrupted(e: BaseException) -> bool:
    """Was ``e`` raised while a Ctrl-C unwound (a KeyboardInterrupt in its context chain)? A
    SIGINT that lands inside ``torch.save`` makes the zip writer's cleanup raise a RuntimeError of
    its own, which would otherwise be reported as this worker's failure."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def start_method() -> str:
    """``DIGEST_START_METHOD`` (forkserver by default; spawn where the OS has no forkserver)."""
    import multiprocessing as mp
    method = os.environ.get("DIGEST_START_METHOD", "forkserver")
    if method not in START_METHODS:
        raise ValueError(f"DIGEST_START_METHOD={method!r}: choose from {', '.join(START_METHODS)}")
    return method if method in mp.get_all_start_methods() else "spawn"


def prestart(modules: tuple = ()) -> None:
    """Start the forkserver now, importing ``PRELOAD`` and ``modules`` in the background while the
    caller does its own work (on 2 cores the two overlap). A no-op once it runs, or under spawn.

    Also sets the workers' C++ log level (read when torch loads, so before the forkserver starts):
    errors only, unless the user set ``TORCH_CPP_LOG_LEVEL`` or ``DIGEST_DEBUG``. A peer's death
    is otherwise echoed by every survivor's TensorPipe / c10d warnings ("pipe closed") above the
    launcher's one line that names the lost rank."""
    if not os.environ.get("DIGEST_DEBUG"):
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    if start_method() != "forkserver":
        return
    import multiprocessing as mp
    from multiprocessing import forkserver
    mp.set_forkserver_preload([*PRELOAD, *modules])  # only read when the server starts
    forkserver.ensure_running()
    atexit.unregister(_stop_forkserver)  # once, however often prestart is called
    atexit.register(_stop_forkserver)


def _stop_forkserver() -> None:
    """At exit: end the forkserver now. It would exit on its own once this process is gone, but
    only after its imports finish (seconds on a loaded machine), so a command refused right after
    ``prestart`` (a bad --workers) would leave a process importing torch behind it."""
    from multiprocessing import forkserver
    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass  # already gone (or reaped by multiprocessing)


class _Inherit:
    """The launcher's environment, working directory and stdout/stderr, taken when a worker is
    launched and installed in it when unpickled (before the agent adds RANK etc.): a forked
    worker would otherwise keep those of the moment the forkserver started. The two descriptors
    travel with the process (multiprocessing's DupFd)."""

    def __reduce__(self):
        from multiprocessing import reduction
        return _install, (dict(os.environ), os.getcwd(), [reduction.DupFd(fd) for fd in (1, 2)])


def _install(env: dict, cwd: str, stdio: list) -> None:
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    for target, dup in zip((1, 2), stdio):
        fd = dup.detach()
        if fd != target:
            os.dup2(fd, target)
            os.close(fd)


def _interrupt_once(signum, frame):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def interrupt_once() -> None:
    """In a worker process: the first SIGINT interrupts, later ones are ignored. Ctrl-C reaches a
    worker twice, from the terminal (the whole process group) and from the launcher, which
    forwards it to stop its workers; the copy that lands while the first unwinds would interrupt
    a finaliser (tqdm's ``__del__``) and print an "Exception ignored ... KeyboardInterrupt"
    traceback. Left alone where SIGINT is already ignored (a background job)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt_once)


def _guarded(inherited, fn, args: tuple):
    """Worker-side wrapper (every launched process runs ``fn(*args)`` through it; ``inherited``
    took effect when it was unpickled, before ``fn`` and ``args``, see ``_Inherit``): a worker's own exception prints its
    traceback ONCE (here) and exits 1; a collective broken by a lost peer exits PEER_LOST quietly
    after GRACE_S, so the launcher's single line names the rank that really failed."""
    interrupt_once()
    unresponsive.register()  # pid by rank, for the launcher's watch on workers that stop answering
    try:
        netem.enter_from_env()  # --emulate-network: this rank's network namespace, before any socket
        placement.enter_from_env()  # and its cgroup: a node of C/M cores
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - classified and reported below
        rank = os.environ.get("RANK", "?")
        if _interrupted(e):
            raise KeyboardInterrupt from None  # stopped by Ctrl-C, not failed
        if _peer_lost(e):
            if os.environ.get("DIGEST_DEBUG"):
                traceback.print_exc()
            time.sleep(GRACE_S)
            raise SystemExit(PEER_LOST) from None
        print(f"worker rank {rank} failed:\n{traceback.format_exc()}", end="", file=sys.stderr,
              flush=True)
        raise SystemExit(1) from None


def _describe(rank: int, failure, watch: unresponsive.Watch) -> str:
    if rank in watch.ended:
        return (f"rank {rank} (stopped answering: its process stayed stopped for "
                f"{watch.ended[rank]:.0f} s, not running; {unresponsive.GRACE_ENV}=off lets a "
                "paused worker be)")
    if rank in watch.stopped:
        return f"rank {rank} (stopped answering: its process was stopped, not running)"
    if failure.exitcode < 0:
        return f"rank {rank} (killed by signal {failure.signal_name()})"
    if failure.exitcode == PEER_LOST:
        return f"rank {rank} (a collective failed: a peer stopped answering)"
    if failure.exitcode == 1:
        return f"rank {rank} (exit code 1, traceback above)"
    return f"rank {rank} (exit code {failure.exitcode})"


def quiet_torch_logs() -> None:
    """torch.distributed.elastic and torch.multiprocessing log every failure as a big error table
    (plus warnings on each SIGTERM); we report a failure ourselves, once."""
    names = [*_QUIET, *(n for n in list(logging.root.manager.loggerDict) if n.startswith(_QUIET))]
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def under_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ and "MASTER_ADDR" in os.environ


def free_port() -> int:
    """A port the OS says is free right now (never a hard-coded one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(fn, args: tuple, nprocs: int, monitor_interval: float = 0.5, env: dict | None = None):
    """Run ``fn(*args)`` in ``nprocs`` processes on this machine; returns rank 0's return value."""
    return launch_all(fn, args, nprocs, monitor_interval, env).get(0)


def launch_all(fn, args: tuple, nprocs: int, monitor_interval: float = 0.5,
               env: dict | None = None) -> dict:
    """Run ``fn(*args)`` in ``nprocs`` processes; returns {rank: return value}. ``env``: more
    variables for the workers (on top of the loopback-only ones, digest/runtime/listen.py).

    When any worker dies (signal, exception, exit code) the agent stops the others and we raise
    ``WorkerFailed`` naming the lost ranks.
    """
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    quiet_torch_logs()
    method = start_method()
    prestart()  # no-op if the caller (the CLI) already started it
    # every listener of a single-node run on loopback: the rendezvous stores (digest/runtime/listen.py),
    # gloo's and TensorPipe's sockets (the workers' environment)
    config = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=nprocs, run_id=uuid.uuid4().hex,
        rdzv_backend=listen.register_loopback_rendezvous(), rdzv_endpoint=f"{listen.LOOPBACK}:0",
        local_addr=listen.LOOPBACK, max_restarts=0, monitor_interval=monitor_interval,
        start_method=method,
    )
    lost = None
    watch = unresponsive.Watch()
    try:
        with watch, listen.worker_env({**listen.loopback_env(), **watch.env, **(env or {})}):
            results = elastic_launch(config, _guarded)(_Inherit(), fn, args)
    except ChildFailedError as e:
        failures = dict(e.failures)
        # the peers' timeouts may be all the agent saw: the stopped ranks caused them
        failures.update({r: None for r in watch.stopped if r not in failures})
        order = sorted(failures, key=lambda r: (r not in watch.stopped, r))  # the cause first
        lost = "lost worker " + ", ".join(_describe(r, failures[r], watch) for r in order)
    except SignalException as e:  # the launcher itself got a signal: workers are stopped
        if e.sigval == signal.SIGINT:
            raise KeyboardInterrupt from None  # Ctrl-C: "interrupted", status 130
        lost = f"interrupted by {e.sigval.name}; workers stopped"
    if lost is not None:  # raised outside the except: no chained torch traceback to keep alive
        raise WorkerFailed(lost)
    return results


def launch_emulated(fn, args: tuple, world: int, bandwidth: str, latency: str = "",
                    cpu_quota: bool = True):
    """``launch(fn, args, world)`` with every worker in its namespace of an emulated cluster
    (digest/runtime/netem.py), capped at C/M cores where ``cpu_quota`` and the machine allow
    (digest/runtime/placement.py); a failure says which links were down when it happened."""
    with netem.EmulatedCluster(world, bandwidth, latency, cpu_quota=cpu_quota) as cluster:
        try:
            return launch(fn, args, world, env=cluster.worker_env())
        except WorkerFailed as e:
            down = cluster.links_down()
            if down:
                links = ", ".join(f"rank {r}" for r in down)
                raise WorkerFailed(f"{e}; the emulated link of {links} was down") from None
            raise
