"""Fault injection: the one epoch hook the reliability tests and the fault campaign use.

``DIGEST_EPOCH_HOOK=digest.runtime.faults:inject`` makes every worker call ``inject(epoch, rank)``
at the start of each training step; it is inert unless ``DIGEST_FAULT`` names a fault::

    DIGEST_FAULT=ACTION,rank=R[,epoch=E | ,from=E][,delay=F][,seconds=S][,after=FILE]

- ``ACTION``: ``kill`` (SIGKILL), ``stop`` (SIGSTOP: alive, answering no one), ``raise`` (a
  RuntimeError in the training loop) or ``cut`` (behind ``--emulate-network`` only: the rank takes
  its own link down, its end of the veth in its namespace, as a failing cable or an operator
  would; for good, or for ``seconds=S`` and then up again).
- ``rank=R``: the rank that acts; ``rank=group`` with ``kill``: rank 0 SIGKILLs its whole process
  group, the launcher included.
- ``epoch=E``: at the start of step E; ``from=E``: at the first step from E on (default 0).
- ``after=FILE``: only once FILE exists (e.g. a committed checkpoint's config.json; DIGEST-A: a
  worker's step count says nothing of the server's epoch). It takes the rest of the value, so it
  comes last and its path may hold commas.
- ``delay=F``: act F x the previous step's duration later, on a timer, so that the kill lands
  anywhere inside a step (a collective, an evaluation, a checkpoint being written).

A fault fires once per process. This module imports nothing heavy: it is loaded in every worker.
"""
from __future__ import annotations

import os
import signal
import threading
import time

ENV = "DIGEST_FAULT"
HOOK = "digest.runtime.faults:inject"
ACTIONS = ("kill", "stop", "raise", "cut")
_last: list[float] = []  # the previous step's start, for delay=


def parse(spec: str) -> dict:
    """``'kill,rank=1,epoch=3'`` -> ``{'action': 'kill', 'rank': '1', 'epoch': 3}``.
    Raises ValueError on a malformed spec (an unknown action or key, no rank, a bad value)."""
    head, _, after = spec.partition(",after=")
    action, *pairs = head.split(",")
    if action not in ACTIONS:
        raise ValueError(f"{ENV}: unknown action {action!r} (one of {', '.join(ACTIONS)})")
    out: dict = {"action": action}
    for pair in pairs:
        key, _, value = pair.partition("=")
        if key not in ("rank", "epoch", "from", "delay", "seconds"):
            raise ValueError(f"{ENV}: unknown key {key!r} in {spec!r}")
        out[key] = value if key == "rank" else float(value) if key in ("delay", "seconds") \
            else int(value)
    if after:
        out["after"] = after
    if "delay" in out and action == "raise":
        raise ValueError(f"{ENV}: delay= needs kill or stop (a timer cannot raise in the loop)")
    if "rank" not in out:
        raise ValueError(f"{ENV}: {spec!r} names no rank= (a rank, or group)")
    if out["rank"] == "group" and action != "kill":
        raise ValueError(f"{ENV}: rank=group needs kill")
    if "seconds" in out and (action != "cut" or not out["seconds"] > 0):
        raise ValueError(f"{ENV}: seconds= goes with cut, and is > 0")
    return out


def due(fault: dict, epoch: int, rank: int) -> bool:
    """Whether ``fault`` acts at the start of step ``epoch`` on ``rank``."""
    who = fault["rank"]
    if who != str(rank) and not (who == "group" and rank == 0):
        return False
    if "epoch" in fault and epoch != fault["epoch"]:
        return False
    if epoch < fault.get("from", 0):
        return False
    return "after" not in fault or os.path.exists(fault["after"])


def _cut(seconds: float | None) -> None:
    """Take this rank's emulated link down (for ``seconds``, or for good) from inside its network
    namespace: a detached shell, so that the link comes back up on time whatever this process is
    doing (blocked in a collective that the cut holds up)."""
    import subprocess
    from .netem import DEV, SPEC_ENV
    if not os.environ.get(SPEC_ENV):
        raise RuntimeError(f"{ENV}=cut needs an emulated link (--emulate-network)")
    script = f"ip link set {DEV} down" + (f"; sleep {seconds}; ip link set {DEV} up"
                                          if seconds else "")
    subprocess.Popen(["sh", "-c", script], start_new_session=True, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _act(action: str, group: bool, epoch: int, rank: int, seconds: float | None = None) -> None:
    if action == "raise":
        raise RuntimeError(f"injected failure in rank {rank} at epoch {epoch}")
    if action == "cut":
        return _cut(seconds)
    if group:
        os.killpg(0, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL if action == "kill" else signal.SIGSTOP)


def inject(epoch: int, rank: int) -> None:
    """The epoch hook the workers run."""
    now = time.perf_counter()
    step_s = now - _last[0] if _last else 0.05
    _last[:] = [now]
    spec = os.environ.get(ENV)
    if not spec:
        return
    fault = parse(spec)
    if not due(fault, epoch, rank):
        return
    os.environ.pop(ENV)  # once
    group = fault["rank"] == "group"
    act = (fault["action"], group, epoch, rank, fault.get("seconds"))
    if "delay" not in fault:
        return _act(*act)
    timer = threading.Timer(fault["delay"] * step_s, _act, act)
    timer.daemon = True
    timer.start()
