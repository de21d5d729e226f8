"""What decides a verdict point (docs/methods.md section 12): exact's share of its epoch in
collectives, communication over compute, the share the link alone needs, whether the point is
compute-bound; and the cluster it stands for (section 13: devices k times a worker here on links
k times as fast). From exact's speed runs; pure analysis, no files."""
from __future__ import annotations

import pandas as pd

from digest.runtime.netem import parse_rate
from digest.training import record

from experiments.suites.load import Loaded
from experiments.suites.suite import base_label, network_of

COMPUTE_BOUND = 0.1  # the link alone carries exact's bytes in under this share of its epoch
# A worker here is half a core (4 workers share 2 cores); the cluster a point stands for is
# devices k times as fast on links k times as fast (docs/methods.md section 13). The named
# classes: a core of this machine, and a device of DEVICE_GFLOPS dense GFLOP/s against advise's
# fitted dense rate of a core (digest/advise/calibration.json).
WORKER_CORES = 0.5
DEVICE_GFLOPS = 2000.0


def device_k(dense_s_per_flop: float, gflops: float = DEVICE_GFLOPS) -> float:
    """k of a device of ``gflops`` dense GFLOP/s against a worker here (half a core at advise's
    fitted ``dense_s_per_flop``)."""
    return gflops * 1e9 * dense_s_per_flop / WORKER_CORES


def points(speed: Loaded, bandwidths: list) -> pd.DataFrame:
    """What decides each point (docs/methods.md section 12): exact's per-epoch time, its measured
    share of the epoch in collectives (``comm_time`` over ``epoch_time``, means over the timed
    epochs of its speed runs, every round), communication over compute, and the share the link
    alone needs (the busiest worker's bytes at the bandwidth); ``compute_bound`` where that share
    is under COMPUTE_BOUND (the link does not limit exact; its collectives' time is waiting on
    the other workers' compute)."""
    rows = []
    for bw in bandwidths:
        runs = [r for r in speed.records + speed.later
                if base_label(r.label) == "exact" and network_of(r.label) == bw]
        timed = [r.metrics[r.metrics["epoch"] >= speed.warmup] for r in runs]
        if not timed:
            continue
        m = pd.concat(timed)
        epoch = float(m["epoch_time"].mean())
        comm = float(m["comm_time"].mean()) if "comm_time" in m else float("nan")
        per_worker = [record.per_worker(record.BYTES, r)
                      for r in record.worker_ranks(m.columns, record.BYTES)]
        busiest = float(m[per_worker].mean().max()) if per_worker else float("nan")
        wire = busiest * 8 / parse_rate(bw)[0] / epoch
        rows.append({"bandwidth": bw, "exact_epoch_s": epoch, "exact_comm_share": comm / epoch,
                     "comm_compute_ratio": comm / max(epoch - comm, 1e-12), "wire_share": wire,
                     "compute_bound": bool(wire < COMPUTE_BOUND)})
    return pd.DataFrame(rows)
