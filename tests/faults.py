"""Fault injection for the reliability tests, as an epoch hook of the trainer:
``DIGEST_EPOCH_HOOK=tests/faults.py:inject`` (helpers.HOOK) makes every worker call
``inject(epoch, rank)`` at the start of each step, which is inert unless these are set:
DIGEST_TEST_KILL_EPOCH=e and DIGEST_TEST_KILL_RANK=r (SIGKILL rank r at the start of epoch e,
while its peers enter the epoch's collectives; r=group: rank 0 SIGKILLs its process group,
launcher included), DIGEST_TEST_RAISE_RANK=r (rank r raises there) or DIGEST_TEST_STOP_RANK=r
(rank r SIGSTOPs itself there: alive, but it answers no one). Instead of an epoch,
DIGEST_TEST_KILL_AFTER=FILE kills rank r at the first step that starts once FILE exists (DIGEST-A:
a worker's step count says nothing of the server's epoch, so "after the first checkpoint" is the
committed checkpoint's config.json appearing)."""
from __future__ import annotations

import os
import signal


def inject(epoch: int, rank: int) -> None:
    env = os.environ
    after = env.get("DIGEST_TEST_KILL_AFTER")
    if after is not None:
        if env.get("DIGEST_TEST_KILL_RANK") == str(rank) and os.path.exists(after):
            os.kill(os.getpid(), signal.SIGKILL)
        return
    if env.get("DIGEST_TEST_KILL_EPOCH") != str(epoch):
        return
    if env.get("DIGEST_TEST_KILL_RANK") == str(rank):
        os.kill(os.getpid(), signal.SIGKILL)
    if env.get("DIGEST_TEST_KILL_RANK") == "group" and rank == 0:
        os.killpg(0, signal.SIGKILL)
    if env.get("DIGEST_TEST_STOP_RANK") == str(rank):
        os.kill(os.getpid(), signal.SIGSTOP)
    if env.get("DIGEST_TEST_RAISE_RANK") == str(rank):
        raise RuntimeError(f"injected failure in rank {rank} at epoch {epoch}")
