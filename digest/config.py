"""Typed run configuration. The command line is generated from these fields, so a flag, its
default and its help text are written once."""
from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass, field


PARTITIONERS = ("metis", "metis-edges", "random")  # see digest/partition.py assign_parts


def _f(default, help: str, **kw):
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class TrainConfig:
    # what to train on
    dataset: str = _f("synthetic", "dataset spec, e.g. synthetic, Cora, CS, ogbn-arxiv, "
                      "synthetic:nodes=100000,avg_degree=20")
    data_root: str | None = _f(None, "data root (default: $DIGEST_DATA or ./data)")
    sparse: str = _f("auto", "keep low-density features sparse", choices=("auto", "always", "never"))
    # Row-normalised inputs (data.normalize_rows; PyG's NormalizeFeatures for non-negative
    # features): raw bag-of-words rows (Photo, Computers) have L1 norms in the hundreds, and at
    # lr 0.01 SAGE's first Adam step blows up its logits and kills its first-layer ReLUs (issue 16
    # item 10). Off by default, so runs without it are unchanged; recorded in every run's config.
    normalize_features: bool = _f(False, "divide each node's input features by their L1 norm (at "
                                  "least 1), as PyG's NormalizeFeatures; SAGE needs it (or a lower "
                                  "--lr) on raw bag-of-words features such as Photo's")
    # how to split it
    workers: int = _f(1, "worker processes (ignored under torchrun, which sets WORLD_SIZE)")
    partitioner: str = _f("metis", "graph partitioner (metis: balanced nodes, metis-edges: "
                           "balanced edges, random)", choices=PARTITIONERS)
    # the model
    model: str = _f("gcn", "architecture", choices=("gcn", "sage", "gat"))
    layers: int = _f(3, "number of GNN layers L")
    hidden: int = _f(256, "hidden width")
    dropout: float = _f(0.5, "dropout probability")
    batch_norm: bool = _f(False, "batch norm on hidden layers (worker-local statistics)")
    lr: float = _f(0.01, "Adam learning rate")
    weight_decay: float = _f(0.0, "Adam weight decay")
    epochs: int = _f(100, "full-graph steps")
    eval_every: int = _f(1, "exact full-graph evaluation every N epochs")
    seed: int = _f(0, "seed of initialisation, dropout, random splits and partitioner")
    # the method
    method: str = _f("exact", "training method (see `python -m digest methods`)")
    local_steps: int = _f(1, "parameter averaging every K local steps (1 = gradient all-reduce)")
    sync_interval: int = _f(10, "DIGEST: stale-representation sync interval I")
    slow_workers: str = _f("", "RANK:FACTOR[,RANK:FACTOR] stragglers (any method): the rank "
                           "sleeps (FACTOR-1) x its compute time after every step")
    compressor: str = _f("auto", "compressor of exchanged rows (auto: slice for varco, none = "
                         "exact store sync for digest)",
                         choices=("auto", "slice", "random", "learned", "none"))
    comp_schedule: str = _f("variable", "VARCO compression schedule",
                            choices=("variable", "fixed", "none"))
    comp_max: float = _f(32.0, "VARCO: initial compression ratio r_max")
    comp_min: float = _f(1.0, "VARCO: final compression ratio r_min")
    comp_slope: float = _f(1.0, "VARCO: slope s of the linear schedule")
    comp_ratio: float = _f(1.0, "compression ratio of the fixed schedule")
    comp_layers: str = _f("", "layers whose halo is compressed, e.g. 1,2 (default: all but the "
                          "last layer's input)")
    # running
    out: str | None = _f(None, "output directory (default: runs/<dataset>_<method>_w<M>_s<seed>)")
    timeout: float = _f(300.0, "collective timeout in seconds (a dead peer becomes an error)")
    checkpoint_every: int = _f(0, "write a checkpoint every N epochs (0 = never)")
    resume: str | None = _f(None, "resume the run in this output directory")
    device: str = _f("auto", "cpu, cuda or auto", choices=("auto", "cpu", "cuda"))
    progress: bool = _f(True, "show a progress bar")
    profile: str | None = _f(None, "write torch.profiler reports of training steps 5-14 (each "
                             "rank's operator table and timeline) into this directory")

    def run_dir(self, world: int) -> str:
        name = self.dataset.replace(":", "_").replace(",", "_").replace("=", "")
        return self.out or f"runs/{name}_{self.method}_w{world}_s{self.seed}"


def add_arguments(parser: argparse.ArgumentParser, cls=TrainConfig) -> None:
    """One ``--flag`` per dataclass field (``--no-flag`` for booleans)."""
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        meta = dict(f.metadata)
        if f.type in ("bool", bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default,
                                help=meta["help"])
            continue
        kind = {"int": int, "float": float}.get(str(f.type), str)
        parser.add_argument(flag, type=kind, default=f.default, help=meta["help"],
                            choices=meta.get("choices"))


def from_namespace(ns: argparse.Namespace, cls=TrainConfig) -> TrainConfig:
    return cls(**{f.name: getattr(ns, f.name) for f in dataclasses.fields(cls)})


def validate(cfg: TrainConfig) -> None:
    """Ranges argparse cannot express. Raises ValueError with a one-line message."""
    checks = [
        (cfg.workers >= 1, "--workers must be >= 1"),
        (cfg.layers >= 1, "--layers must be >= 1"),
        (cfg.hidden >= 1, "--hidden must be >= 1"),
        (0 <= cfg.dropout < 1, "--dropout must be in [0, 1)"),
        (cfg.lr > 0, "--lr must be > 0"),
        (cfg.epochs >= 1, "--epochs must be >= 1"),
        (cfg.eval_every >= 1, "--eval-every must be >= 1"),
        (cfg.local_steps >= 1, "--local-steps must be >= 1"),
        (cfg.sync_interval >= 1, "--sync-interval must be >= 1"),
        (cfg.comp_min >= 1 and cfg.comp_max >= cfg.comp_min, "need 1 <= --comp-min <= --comp-max"),
        (cfg.comp_ratio >= 1, "--comp-ratio must be >= 1"),
        (cfg.timeout > 0, "--timeout must be > 0"),
        (cfg.checkpoint_every >= 0, "--checkpoint-every must be >= 0"),
        (not (cfg.method.startswith("digest") and cfg.compressor == "learned"),
         "--compressor learned cannot train under DIGEST (store rows are constants, no gradient "
         "reaches the codec); use slice or random"),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)
    from .straggler import parse_slow_workers  # format, factors, ranks (torchrun: its world;
    world = os.environ.get("WORLD_SIZE") or (cfg.workers if not cfg.resume else 1 << 30)
    parse_slow_workers(cfg.slow_workers, int(world))  # --resume: the saved world, checked later)
