"""Typed run configuration, nested by concern: what to train on (``data``), the ``model``, the
optimisation (``optim``), where and how it runs (``runtime``), and the method's own ``options``.

Every field is one ``--flag`` of ``python -m digest train`` (flags stay flat: ``--hidden``, not
``--model.hidden``), written once here with its default and help text. A method declares its
options in its own file as small dataclasses (option groups, see ``methods.register``), so adding a
method adds its flags without touching this file. ``TrainConfig.of(**flags)`` builds a config from
flat flags and refuses a flag that belongs to another method; ``cfg.flat()`` is the inverse (what
summary.json and checkpoints record, and what a pickled config carries to a worker).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from . import methods
from .options import option

PARTITIONERS = ("metis", "metis-edges", "random")  # see digest/data/partition.py assign_parts


class ConfigError(ValueError):
    """A flag that does not exist, does not apply to the chosen method, or has a bad value."""


@dataclass
class DataConfig:
    """What to train on and how it is split."""
    dataset: str = option("synthetic", "dataset spec, e.g. synthetic, Cora, CS, ogbn-arxiv, "
                          "synthetic:nodes=100000,avg_degree=20, file:graph.pt (a graph you "
                          "saved; docs/datasets.md)")
    data_root: str | None = option(None, "data root (default: $DIGEST_DATA or ./data)")
    sparse: str = option("auto", "keep low-density features sparse",
                         choices=("auto", "always", "never"))
    # raw bag-of-words rows (Photo, Computers) have L1 norms in the hundreds: at lr 0.01 SAGE's
    # first Adam step blows up its logits and kills its first-layer ReLUs (docs/deviations.md).
    # Unset (None): the model's default (``GNN.normalize_by_default``) where every input feature
    # is >= 0 (bag-of-words), off otherwise; summary.json says what was done (features_normalized)
    normalize_features: bool | None = option(None, "divide each node's input features by their L1 "
                                             "norm (at least 1), as PyG's NormalizeFeatures (default: "
                                             "on for SAGE and GAT when every feature is >= 0, i.e. "
                                             "bag-of-words such as Photo's; off for GCN and for "
                                             "signed features)")
    partitioner: str = option("metis", "graph partitioner (metis: balanced nodes, metis-edges: "
                              "balanced edges, random)", choices=PARTITIONERS)
    partition_file: str | None = option(None, "a node-to-part assignment made elsewhere, in place "
                                        "of --partitioner's: METIS's output (one part id a line), "
                                        "or a 1-D integer array (.npy) or tensor (.pt)")


@dataclass
class ModelConfig:
    """The GNN."""
    model: str = option("gcn", "architecture", choices=("gcn", "sage", "gat"))
    layers: int = option(3, "number of GNN layers L")
    hidden: int = option(256, "hidden width")
    dropout: float = option(0.5, "dropout probability")
    batch_norm: bool = option(False, "batch norm on hidden layers (worker-local statistics)")


@dataclass
class OptimConfig:
    """Optimisation and evaluation."""
    lr: float = option(0.01, "Adam learning rate")
    weight_decay: float = option(0.0, "Adam weight decay")
    epochs: int = option(100, "full-graph steps")
    eval_every: int = option(1, "exact full-graph evaluation every N epochs")
    stop_at_val: float = option(0.0, "stop after the first evaluation whose validation accuracy "
                                "reaches this (0: never); --epochs still sets every schedule "
                                "scaled to the budget (VARCO's ratio, a vanishing sync schedule), "
                                "so the run is the budget's up to there")


@dataclass
class RuntimeConfig:
    """Where and how the run executes (a resumed run may change most of these)."""
    workers: int = option(1, "worker processes (ignored under torchrun, which sets WORLD_SIZE)")
    slow_workers: str = option("", "RANK:FACTOR[,RANK:FACTOR] stragglers (any method): the rank "
                               "sleeps (FACTOR-1) x its compute time after every step")
    out: str | None = option(None, "output directory (default: runs/<dataset>_<method>_w<M>_s<seed>)")
    timeout: float = option(300.0, "collective timeout in seconds (a dead peer becomes an error)")
    checkpoint_every: int = option(0, "write a checkpoint every N epochs (0 = never)")
    resume: str | None = option(None, "resume the run in this output directory")
    overwrite: bool = option(False, "replace a complete run of another configuration in the "
                             "output directory (without it, train refuses; the same "
                             "configuration complete there is not run again)")
    device: str = option("auto", "cpu, cuda or auto", choices=("auto", "cpu", "cuda"))
    progress: bool = option(True, "show a progress bar")
    profile: str | None = option(None, "write torch.profiler reports of training steps 5-14 (each "
                                 "rank's operator table and timeline) into this directory")
    emulate_network: str = option("", "emulate a cluster on this machine: each worker in a network "
                                  "namespace of its own, its link to a virtual switch shaped to "
                                  "this bandwidth each way, e.g. 1gbit, 100mbit (root or user "
                                  "namespaces; digest/runtime/netem.py)")
    pin_workers: str = option("auto", "with more workers on a node than cores, pin worker w to core "
                              "w mod C (auto), or leave placement to the OS (off)",
                              choices=("auto", "off"))
    cpu_quota: str = option("auto", "with --emulate-network: cap each worker at C/M cores with a "
                            "cgroup cpu quota, so an emulated worker is a node of C/M cores "
                            "(auto: where the machine allows), or not (off)",
                            choices=("auto", "off"))
    emulate_latency: str = option("", "with --emulate-network: one-way latency between two "
                                  "workers, e.g. 100us (needs the kernel's netem qdisc)")
    heap_reuse: str = option("on", "keep freed large blocks in each worker's heap for the next "
                             "step to reuse (on: faster steps, a higher peak memory), or glibc's "
                             "defaults (off: memory-bound runs; so does DIGEST_MALLOC_TUNE=0)",
                             choices=("on", "off"))


SECTIONS = {"data": DataConfig, "model": ModelConfig, "optim": OptimConfig, "runtime": RuntimeConfig}
TOP = {"method": ("exact", "training method (see `python -m digest methods`)"),
       "seed": (0, "seed of initialisation, dropout, random splits and partitioner")}


@dataclass
class TrainConfig:
    method: str = TOP["method"][0]
    seed: int = TOP["seed"][0]
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    options: Any = None  # the method's options: an instance of methods.options_class(method)

    @classmethod
    def of(cls, **flags) -> "TrainConfig":
        """From flat flags (``hidden=64, sync_interval=5``); the rest take their defaults.
        Raises ConfigError for an unknown flag or one that belongs to another method."""
        flags = dict(flags)
        top = {k: flags.pop(k) for k in TOP if k in flags}
        sections = {name: section(**{k: flags.pop(k) for k in _names(section) if k in flags})
                    for name, section in SECTIONS.items()}
        options_cls = methods.options_class(top.get("method", TOP["method"][0]))
        options = options_cls(**{k: flags.pop(k) for k in _names(options_cls) if k in flags})
        if flags:
            raise ConfigError(_misplaced(sorted(flags), top.get("method", "exact")))
        return cls(**top, **sections, options=options)

    def flat(self) -> dict:
        """Every flag of this config by name (the inverse of ``of``)."""
        out = {"method": self.method, "seed": self.seed}
        for name in SECTIONS:
            out.update(dataclasses.asdict(getattr(self, name)))
        out.update(dataclasses.asdict(self.options) if self.options is not None else {})
        return out

    def replace(self, **flags) -> "TrainConfig":
        """A copy with some flat flags changed (another method starts from its own defaults)."""
        base = self.flat()
        if flags.get("method", self.method) != self.method and self.options is not None:
            base = {k: v for k, v in base.items() if k not in _names(type(self.options))}
        return TrainConfig.of(**{**base, **flags})

    def __reduce__(self):
        # a worker process receives the config itself; pickle carries it as its flags, because the
        # method's option class is made at run time (methods.register) and is rebuilt there
        return _rebuild, (self.flat(),)

    def run_dir(self, world: int) -> str:
        name = self.data.dataset.replace(":", "_").replace(",", "_").replace("=", "")
        name = name.replace("/", "_")  # file:PATH: one folder, not PATH's
        return self.runtime.out or f"runs/{name}_{self.method}_w{world}_s{self.seed}"


def _rebuild(flags: dict) -> TrainConfig:
    """A config unpickled in a worker: every method registered first (``methods.load_all``: a
    spawned worker starts with an empty registry)."""
    methods.load_all()
    return TrainConfig.of(**flags)


# Flags a caller sets around a run (where it goes, how it is watched): never part of a suite's
# config (experiments/suites/suite.py).
AROUND_THE_RUN = frozenset({"out", "resume", "progress"})
# Settings that do not change a run's results: a complete run differing only in these is the same
# run (how it is checkpointed, profiled, timed out, where its data lives; the world size is
# compared on its own).
NOT_THE_RUN = AROUND_THE_RUN | {"overwrite", "timeout", "data_root", "checkpoint_every",
                                "profile", "workers"}


def all_flags() -> set[str]:
    """Every train flag's field name (sections and every registered method's options)."""
    out = set(TOP) | {f for cls in SECTIONS.values() for f in _names(cls)}
    return out | {f for g in methods.option_groups() for f in _names(g)}


def _names(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _misplaced(names: list[str], method: str) -> str:
    flags = ", ".join("--" + n.replace("_", "-") for n in names)
    owners = sorted({m for n in names for m in methods.methods_with_option(n)})
    if owners:
        return f"{flags} does not apply to --method {method} (an option of {', '.join(owners)})"
    return f"unknown option {flags}"


def validate(cfg: TrainConfig) -> None:
    """Ranges argparse cannot express. Raises ValueError with a one-line message."""
    checks = [
        (cfg.runtime.workers >= 1, "--workers must be >= 1"),
        (cfg.model.layers >= 1, "--layers must be >= 1"),
        (cfg.model.hidden >= 1, "--hidden must be >= 1"),
        (0 <= cfg.model.dropout < 1, "--dropout must be in [0, 1)"),
        (cfg.optim.lr > 0, "--lr must be > 0"),
        (cfg.optim.weight_decay >= 0, "--weight-decay must be >= 0"),
        (cfg.optim.epochs >= 1, "--epochs must be >= 1"),
        (cfg.optim.eval_every >= 1, "--eval-every must be >= 1"),
        (0 <= cfg.optim.stop_at_val <= 1, "--stop-at-val must be in [0, 1]"),
        (cfg.runtime.timeout > 0, "--timeout must be > 0"),
        (cfg.runtime.checkpoint_every >= 0, "--checkpoint-every must be >= 0"),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)
    cfg.options.check(cfg)
    # --slow-workers: format, factors, ranks (torchrun: its world;
    world = os.environ.get("WORLD_SIZE") or (cfg.runtime.workers if not cfg.runtime.resume else 1 << 30)
    parse_slow_workers(cfg.runtime.slow_workers, int(world))  # --resume: the saved world, checked later)


def parse_slow_workers(spec: str, world: int) -> dict[int, float]:
    """``'1:3,2:1.5'`` -> {1: 3.0, 2: 1.5}. Raises ValueError on a malformed entry, a rank outside
    the world or a factor below 1."""
    out: dict[int, float] = {}
    for item in filter(None, (s.strip() for s in (spec or "").split(","))):
        try:
            r, f = item.split(":")
            rank, factor = int(r), float(f)
        except ValueError:
            raise ValueError(f"--slow-workers: {item!r} is not RANK:FACTOR") from None
        if not 0 <= rank < world:
            raise ValueError(f"--slow-workers: rank {rank} is outside 0..{world - 1}")
        if factor < 1:
            raise ValueError(f"--slow-workers: factor {factor} of rank {rank} must be >= 1")
        out[rank] = factor
    return out
