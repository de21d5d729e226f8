"""The fault the campaign (experiments/running/campaign.py) injects, as the trainer's epoch hook
``DIGEST_EPOCH_HOOK=experiments.running.faults:inject``: at the start of step ``epoch`` or later on rank
``rank``, once a checkpoint is committed, a timer SIGKILLs that process a random fraction of the
previous step's duration later, so the kill lands anywhere inside a step (a collective, an
evaluation, a checkpoint being written). Inert unless ``DIGEST_FAULT`` is set. It imports nothing
heavy: it is loaded inside every worker."""
from __future__ import annotations

import os
import signal
import threading
import time

_FAULT = "DIGEST_FAULT"  # "rank:epoch:fraction:checkpoint_config_path", set by the campaign
_last: list[float] = []


def inject(epoch: int, rank: int) -> None:
    """The epoch hook the workers run (imports nothing heavy: it loads inside every worker)."""
    spec = os.environ.get(_FAULT)
    now = time.perf_counter()
    step_s = now - _last[0] if _last else 0.05
    _last[:] = [now]
    if not spec:
        return
    r, e, fraction, committed = spec.split(":", 3)
    if int(r) != rank or epoch < int(e) or not os.path.exists(committed):
        return
    os.environ.pop(_FAULT)  # once
    timer = threading.Timer(float(fraction) * step_s, os.kill, (os.getpid(), signal.SIGKILL))
    timer.daemon = True
    timer.start()

