"""The time model of one training step on M workers (docs/methods.md section 13).

    compute_r = share x (work_r . seconds per unit + codec_r x codec + bytes_r x byte_cpu + step)
    a collective's time = max over workers of max(sent, received) / (bandwidth x efficiency)
                          + overhead + its messages x latency
    step time = max_r compute_r + blocking collectives + overlapped collectives
                - overlap x min(max_r compute_r, overlapped collectives)

``share``: workers per core where they share a machine's cores (each then computes at that
fraction of a core; the emulated cluster's runs), 1 on a cluster of one device per worker.
Only pipelined methods have overlapped collectives (their exchanges are started without
blocking); ``overlap`` (0..1) is how much of the shorter of compute and that communication the
other hides. A per-epoch time is the MEAN over a window of whole epochs (section 11).

``Rates`` holds the constants: measured (fitted on the benchmark's emulated runs, see
``calibration.json``) or stated by the user (``--compute-rate``, which scales every compute
constant by the ratio of the stated dense rate to the fitted one: a prediction).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path

from ..policies.counting import Step
from .work import KINDS, Work


@dataclass(frozen=True)
class Rates:
    """Seconds per unit of work of one worker at one core (or one device), and the link.

    Args:
        dense, sparse, sparse_x, elem: seconds per unit of ``Work`` (work.py).
        codec: seconds per value quantised and dequantised.
        byte_cpu: compute seconds per byte a worker sends or receives (copies, TCP).
        step: compute seconds per step that no count explains.
        efficiency: fraction of the nominal bandwidth a collective achieves (TCP/IP framing,
            the collective's own pattern).
        overhead: seconds per collective beyond its bytes (software, synchronisation).
        overlap: fraction of min(compute, overlapped communication) a pipelined step hides.
    """

    dense: float
    sparse: float
    sparse_x: float
    elem: float
    codec: float = 0.0
    byte_cpu: float = 0.0
    step: float = 0.0
    efficiency: float = 1.0
    overhead: float = 0.0
    overlap: float = 1.0

    def gflops(self) -> float:
        """The dense rate these constants stand for, in GFLOP/s."""
        return 1e-9 / self.dense if self.dense > 0 else float("inf")

    def at_gflops(self, gflops: float) -> "Rates":
        """The same machine made ``gflops`` / ``gflops()`` times faster: every compute constant
        scaled by the inverse ratio; the link constants kept."""
        k = self.gflops() / gflops
        return replace(self, **{f: getattr(self, f) * k for f in
                                (*KINDS, "codec", "byte_cpu", "step")})

    @classmethod
    def of(cls, d: dict) -> "Rates":
        names = {f.name for f in fields(cls)}
        return cls(**{k: float(v) for k, v in d.items() if k in names})


CALIBRATION = Path(__file__).with_name("calibration.json")


def calibrated(path: Path | None = None) -> Rates:
    """The constants fitted on the benchmark's emulated runs (``python -m experiments.studies.advise fit
    --write``): one core of the machine the committed runs ran on, per worker."""
    return Rates.of(json.loads(Path(path or CALIBRATION).read_text())["rates"])


@dataclass(frozen=True)
class Network:
    """A link: ``bandwidth`` bytes per second each way per worker, ``latency`` seconds per
    message. ``bandwidth`` inf: communication costs nothing but its latency. The one network of
    the project: advise's, and the harness's cost model (experiments/analysis/costmodel.py).

    Args:
        label: how it is printed, e.g. "10 Gbit/s, 5 us" (digest/runtime/units.py); "" where
            nothing prints it.
    """

    bandwidth: float
    latency: float = 0.0
    label: str = ""

    @property
    def column(self) -> str:
        """The name of a time modeled on this network, set apart from every measured one."""
        return f"modeled @{self.label}"


def compute_seconds(work: Work, rates: Rates) -> float:
    return sum(getattr(work, k) * getattr(rates, k) for k in KINDS)


def collective_seconds(c, net: Network, rates: Rates) -> float:
    """One collective's time: its slowest worker's larger direction over the link, the fixed
    overhead, and its messages' latency."""
    if not any(c.messages):
        return 0.0
    wire = max(max(s, r) for s, r in zip(c.sent, c.received))
    return wire / (net.bandwidth * rates.efficiency) + rates.overhead + max(c.messages) * net.latency


def step_seconds(step: Step, work: list[Work], fill: list[Work], net: Network, rates: Rates,
                 share: float = 1.0) -> dict:
    """One step's time and its parts.

    Args:
        step: the method's step count. work: each worker's step work for ``step.halo``;
            fill: each worker's forward-pass work (used ``step.forwards`` times).
        share: workers per core (1: a core or device per worker).
    Returns ``{"time", "compute", "comm", "hidden"}`` in seconds (``hidden``: communication
    overlapped with compute)."""
    M = len(work)
    moved = [0] * M
    for c in step.collectives:
        for r in range(M):
            moved[r] += c.sent[r] + c.received[r]
    coded = step.coded or (0,) * M
    compute = max(share * (compute_seconds(work[r] + fill[r].scaled(step.forwards), rates)
                           + coded[r] * rates.codec + moved[r] * rates.byte_cpu + rates.step)
                  for r in range(M))
    blocking = sum(collective_seconds(c, net, rates) for c in step.collectives if not c.overlapped)
    overlapped = sum(collective_seconds(c, net, rates) for c in step.collectives if c.overlapped)
    hidden = rates.overlap * min(compute, overlapped)
    return {"time": compute + blocking + overlapped - hidden, "compute": compute,
            "comm": blocking + overlapped, "hidden": hidden}
