"""DIGEST-A's parameter server and representation store, in a process of their own.

docs/methods.md allows a server process or rank 0. Rank 0 is unfair: its own pushes are function
calls, while every other worker's rpc waits for rank 0's process, busy training, to be scheduled
and to take its GIL. With 4 workers on 2 cores rank 0 supplied about 3x the gradients of each
other worker, without any straggler, so the model leaned towards partition 0. In a process of its
own, which only waits on its sockets, every worker pays the same round trip.

Rank 0 starts it (``ServerProcess.start``, a fresh interpreter that imports torch and this module
only); it joins the rpc group as its last member, named ``server``; rank 0 seeds it (``setup``);
it serves until every worker has shut rpc down, then exits. It also exits when rank 0's process is
gone, so a killed run leaves nothing behind.

Checkpoints (``--checkpoint-every N``): the server HOLDS at every version M x N x k: the gradient
that reaches it is applied and its reply says stop, like the one that spends the budget, and every
later one is dropped until rank 0 calls ``release``. While it holds, its state (``state_dict``) is
the state at exactly that version, whatever the workers are doing; rank 0 saves it in its
checkpoint file, and a resumed run seeds a fresh server with it (``load_state``).
"""
from __future__ import annotations

import copy
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch
from torch import Tensor

from ..policies.params import flatten, unflatten
from ..runtime import comm

NAME = "server"


class ParameterServer:
    """Parameters + Adam + the representation store, behind one lock (rpc handlers are threads).

    Store: ``(owner, dest) -> (rows [n, sum of hidden widths], tag, seq)``; ``tag`` = the owner's
    completed steps when its forward computed the rows (for the staleness reported), ``seq`` = the
    number of the owner's push that brought them (1 = its start-up seed). A worker asks for blocks
    by ``seq``, not by ``tag``: the seed and the push after step 0 both carry tag 0 (both computed
    with 0 steps completed), so "tag greater than the one held" never served the latter (with
    ``--sync-interval 1``, the rows step 1 should read). ``budget``: gradients to apply in all
    (M x epochs); once it is spent, a pushed gradient is dropped and the reply says done.
    ``lr``: per arrival (the trainer passes lr / M, asynchronous.py's docstring). ``hold_every``:
    hold at every multiple of this version, for a checkpoint (0 = never; module docstring)."""

    def __init__(self, params, lr: float, weight_decay: float, world: int, budget: int,
                 snapshot_versions=(), hold_every: int = 0):
        self.params = [p.detach().clone().cpu().requires_grad_(True) for p in params]
        self.opt = torch.optim.Adam(self.params, lr=lr, weight_decay=weight_decay)
        self.world = world
        self.version = 0
        self.steps = [0] * world  # gradients applied, per worker (= its completed steps)
        self.budget = budget
        self.times: list[float] = []  # times[v - 1] = wall s (since start_clock) of version v
        self.lock = threading.Lock()
        self.blocks: dict[tuple[int, int], tuple[Tensor, int, int]] = {}
        self.pushes = [0] * world  # per owner: its row pushes so far (the seq of its latest)
        self.snapshot_versions = set(snapshot_versions)
        self.snapshots: dict[int, tuple[float, Tensor]] = {}  # version -> (wall s, flat params)
        self.hold_every = hold_every
        self.hold_at = self._next_hold()
        self.t0 = time.perf_counter()

    def _next_hold(self) -> float:
        """The next version (after the current one) to hold at; infinity without checkpoints."""
        every = self.hold_every
        return (self.version // every + 1) * every if every else math.inf

    def _stopped(self) -> bool:
        """Whether a gradient arriving now is dropped: the budget is spent, or it holds."""
        return self.version >= self.budget or self.version >= self.hold_at

    def start_clock(self) -> None:
        """Start the clock, or restart it where it stopped: at the time of the last version
        applied, so that neither a checkpoint's pause nor a kill and --resume counts as training
        time (``times`` goes on from the last recorded value)."""
        self.t0 = time.perf_counter() - (self.times[-1] if self.times else 0.0)

    def release(self) -> None:
        """End a hold (the checkpoint is written): apply gradients again up to the next hold."""
        with self.lock:
            self.hold_at = self._next_hold()
            self.start_clock()

    def push_grads(self, rank: int, version: int, flat_grad: Tensor):
        """Apply one worker's gradient now. Returns (latest flat parameters, new version, every
        worker's step count, this gradient's version lag, whether to stop: the budget is now
        spent or the server now holds for a checkpoint). Once it has stopped, the gradient is
        dropped: parameters None (nothing to send back)."""
        with self.lock:
            lag = self.version - version
            if self._stopped():
                return None, self.version, list(self.steps), lag, True
            for p, g in zip(self.params, unflatten(flat_grad, self.params)):
                p.grad = g
            self.opt.step()
            self.version += 1
            self.steps[rank] += 1
            self.times.append(time.perf_counter() - self.t0)
            flat = flatten([p.detach() for p in self.params])  # a fresh copy
            if self.version in self.snapshot_versions:
                self.snapshots[self.version] = (self.times[-1], flat.clone())
            return flat, self.version, list(self.steps), lag, self._stopped()

    def push_rows(self, owner: int, tag: int, rows: Tensor, counts: list[int]) -> None:
        """Owner's boundary rows, in its send order (peer 0's block, peer 1's, ...)."""
        with self.lock:
            self.pushes[owner] += 1
            for dest, block in enumerate(rows.split(counts)):
                if counts[dest] and dest != owner:  # compact, owned here
                    self.blocks[(owner, dest)] = (block.clone(), tag, self.pushes[owner])

    def pull_rows(self, dest: int, known: list[int]) -> list:
        """Blocks for ``dest``'s halo, per owner: (rows, tag, seq) if the block's push ``seq`` is
        greater than ``known[owner]`` (the seq of the block ``dest`` holds), else None (nothing
        new to send)."""
        with self.lock:
            out = []
            for owner in range(self.world):
                b = self.blocks.get((owner, dest))
                out.append(b if b is not None and b[2] > known[owner] else None)
            return out

    def snapshot(self, version: int) -> tuple[float, Tensor]:
        with self.lock:
            return self.snapshots[version]

    def kept(self) -> list[int]:
        """Versions whose snapshot is kept (a resumed run may have changed --eval-every)."""
        with self.lock:
            return sorted(self.snapshots)

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything a resumed run needs (copies: the caller may keep them while this goes on):
        parameters, Adam's state, the budget consumed (version, per-worker steps), the clock's
        record, the store with its tags and push numbers, the snapshots kept. Not the budget,
        lr, snapshot versions or holds: those come from the resumed run's settings."""
        with self.lock:
            return copy.deepcopy({
                "params": [p.detach() for p in self.params], "opt": self.opt.state_dict(),
                "version": self.version, "steps": self.steps, "times": self.times,
                "blocks": self.blocks, "pushes": self.pushes, "snapshots": self.snapshots})

    def load_state(self, state: dict) -> None:
        """The state ``state_dict`` returned, in place (parameters and optimiser of this
        server, which ``setup`` built with the same shapes and settings)."""
        with self.lock:
            with torch.no_grad():
                for p, v in zip(self.params, state["params"]):
                    p.copy_(v)
            self.opt.load_state_dict(state["opt"])
            self.version, self.steps = state["version"], list(state["steps"])
            self.times, self.pushes = list(state["times"]), list(state["pushes"])
            self.blocks, self.snapshots = dict(state["blocks"]), dict(state["snapshots"])
            self.hold_at = self._next_hold()


# rpc entry points: module-level so that rpc can name them; they run in the server process.
_SERVER: ParameterServer | None = None


def setup(params: list[Tensor], lr, weight_decay, world, budget, snapshot_versions, hold_every=0):
    global _SERVER
    _SERVER = ParameterServer(params, lr, weight_decay, world, budget, snapshot_versions,
                              hold_every)


def start_clock():
    _SERVER.start_clock()


def push_grads(rank, version, flat_grad):
    return _SERVER.push_grads(rank, version, flat_grad)


def push_rows(owner, tag, rows, counts):
    return _SERVER.push_rows(owner, tag, rows, counts)


def pull_rows(dest, known):
    return _SERVER.pull_rows(dest, known)


def times():
    return list(_SERVER.times)


def snapshot(version):
    return _SERVER.snapshot(version)


def kept():
    return _SERVER.kept()


def state_dict():
    return _SERVER.state_dict()


def load_state(state):
    _SERVER.load_state(state)


def release():
    _SERVER.release()


# -- the process ----------------------------------------------------------------------------------
class ServerProcess:
    """Rank 0's handle on the server process: ``start`` (as rpc_init's ``start_extra``), ``stop``."""

    def __init__(self, members: int, timeout_s: float, on_early_exit=None):
        self.members, self.timeout = members, timeout_s
        self.proc: subprocess.Popen | None = None
        self.joined = threading.Event()  # set by rank 0 once rpc_init returned (everyone joined)
        self.stopping = False  # rank 0 is stopping it: its exit is no early exit to report
        self.on_early_exit = on_early_exit or _end_run

    def start(self, host: str, port: int) -> None:
        root = str(Path(__file__).resolve().parents[2])  # the directory holding digest/
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        # c10d's own log lines carry C++ stacks; the server's error is the one line serve() prints
        env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1",
               "TORCH_CPP_LOG_LEVEL": "FATAL"}
        args = [host, str(port), str(self.members), str(self.timeout), str(os.getpid())]
        self.proc = subprocess.Popen(
            # SIGINT ignored from the first line: a Ctrl-C while it still imports torch must not
            # print a KeyboardInterrupt traceback (serve() ignores it too, for a direct caller)
            [sys.executable, "-c", "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
             "from digest.asynchronous.server import serve; serve()", *args],
            env=env, stdin=subprocess.DEVNULL)
        # rpc_init waits for every member: a server that dies before joining must end the run
        # now, not after the rpc timeout
        threading.Thread(target=self._watch_start, daemon=True).start()

    def _watch_start(self) -> None:
        code = self.proc.wait()
        if code != 0 and not self.joined.is_set() and not self.stopping:
            self.on_early_exit(code)

    def stop(self, graceful: bool) -> None:
        """Graceful: the server exits by itself once every worker shut rpc down; otherwise (or if
        it does not within the timeout) it is killed."""
        if self.proc is None:
            return
        self.stopping = True  # (rank 0 interrupted in rpc_init, before everyone joined)
        try:
            self.proc.wait(timeout=self.timeout if graceful else 0.01)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _end_run(code: int) -> None:
    print(f"error: DIGEST-A's server process exited with code {code} before joining (its error "
          "is above)", file=sys.stderr, flush=True)
    os._exit(1)  # rank 0 is stuck in rpc_init, waiting for it; the launcher reports the rest


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)  # rank 0 is gone: so is the run


def serve(argv: list[str] | None = None) -> None:
    """The server process's main: join the rpc group as its last member, serve until every worker
    has shut rpc down."""
    host, port, members, timeout_s, parent = argv or sys.argv[1:]
    # Ctrl-C reaches the whole process group: the workers stop, rank 0 then stops this process
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    threading.Thread(target=_watch_parent, args=(int(parent),), daemon=True).start()
    try:
        comm.rpc_join(NAME, int(members) - 1, int(members), host, int(port), float(timeout_s))
        comm.rpc_shutdown(graceful=True, timeout_s=float(timeout_s))
    except Exception as e:  # noqa: BLE001 - the workers report the run's error; this is one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(f"error: DIGEST-A's server process: {type(e).__name__}: {first}", file=sys.stderr)
        sys.exit(1)
