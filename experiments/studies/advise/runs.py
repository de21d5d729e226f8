"""The committed runs ``python -m digest advise`` learns from and is checked against
(docs/methods.md section 13): convergence runs (curves of validation accuracy, for epochs to a
target) and emulated-cluster runs (per-epoch times at a bandwidth).

Run folders are read as they are committed (summary.json, metrics.csv, run.json); a label's
network suffix ``@BANDWIDTH`` and round suffix are the runner's. A run's configuration is rebuilt
as a ``TrainConfig`` from its summary, so a method's defaults are those registered now.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from digest import methods
from digest.config import TrainConfig

from experiments.suites.load import RunRecord, read_record
from experiments.suites.registry import register_methods
from experiments.suites.suite import WARMUP, base_label

ROOT = Path(__file__).resolve().parents[3] / "results"
# labels that repeat another label's configuration under other conditions
TWINS = re.compile(r"-(aa|noquota)$")


def suite_of(directory: Path, root: Path = ROOT) -> str:
    """``results/repro/runs/CS/exact_w4_s0`` -> "repro"; ``results/field_methods/runs/...`` -> "field_methods"."""
    first = directory.relative_to(root).parts[0]
    return first


def run_dirs(root: Path = ROOT):
    """Every committed run folder, sorted."""
    return sorted(p.parent for p in root.glob("**/runs/*/*/summary.json"))


def config_of(record: RunRecord) -> TrainConfig:
    """The run's configuration; flags of other methods, which older runs recorded at their
    defaults, are left out, and flags added since take their defaults."""
    import dataclasses
    saved = record.summary["config"]
    method = saved.get("method", "exact")
    others = {f for m in methods.METHODS.values() for f in
              (x.name for x in dataclasses.fields(m.options))}
    mine = {f.name for f in dataclasses.fields(methods.options_class(method))}
    flags = {k: v for k, v in saved.items()
             if k not in ("out", "resume") and (k in mine or k not in others)}
    return TrainConfig.of(**flags)


def is_default(cfg: TrainConfig) -> bool:
    """Whether the run used its method's default options."""
    register_methods()
    return cfg.options == methods.options_class(cfg.method)()


def records(root: Path = ROOT):
    """(suite, RunRecord, TrainConfig) of every complete committed run."""
    register_methods()
    for d in run_dirs(root):  # noqa: B007
        r = read_record(d)
        if r is not None:
            yield suite_of(d, root), r, config_of(r)


@dataclass
class Timed:
    """One emulated run's per-epoch time: the MEAN epoch time over its epochs after the warm-up
    (docs/methods.md section 11). ``share``: workers per core on its node."""

    suite: str
    dataset: str
    workers: int
    bandwidth: str
    bit_s: float
    label: str
    cfg: TrainConfig
    share: float
    epochs: int
    seconds: float


# the emulated suites: the cluster* suites, and the verdict's bench_speed_* (measured after the
# epochs' distance rule, digest/advise/epochs.py FAR, was fixed: the "fresh" points)
EMULATED = ("cluster", "bench_speed")
FRESH = ("bench_speed",)


def timed_runs(root: Path = ROOT, warmup: int = WARMUP, prefix: tuple = EMULATED) -> list[Timed]:
    """Every emulated run of the suites whose name starts with one of ``prefix`` but the twins
    (A/A, no quota)."""
    out = []
    for suite, r, cfg in records(root):
        e = r.summary.get("emulation")
        if not e or not suite.startswith(prefix):
            continue
        label = base_label(r.label)
        if TWINS.search(label):
            continue
        t = list(r.metrics["epoch_time"])
        m = r.summary.get("machine", {})
        share = max(1.0, (m.get("workers_per_node") or 1) * (m.get("threads_per_worker") or 1)
                    / (m.get("cores") or 1))
        out.append(Timed(suite, r.dataset, r.workers, e["bandwidth"],
                         float(e["bandwidth_bit_s"]), label, cfg, share, len(t),
                         sum(t[warmup:]) / len(t[warmup:])))
    return out
