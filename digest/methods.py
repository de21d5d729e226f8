"""The method registry. A method = a halo policy + a parameter-sync policy, built per worker.

``digest/`` registers exact and DIGEST here; ``baselines/`` registers its own on import. Only the
command-line entry point imports ``baselines`` (nothing else in ``digest/`` may).
"""
from __future__ import annotations

from typing import Callable

from .config import TrainConfig
from .halo import ExactHalo, HaloPlan, HaloPolicy
from .part import LocalPart
from .sync import ParamSync, make_param_sync

Builder = Callable[[TrainConfig, LocalPart, HaloPlan, object], tuple[HaloPolicy, ParamSync]]
METHODS: dict[str, Builder] = {}
DESCRIPTIONS: dict[str, str] = {}
TRAINERS: dict[str, type] = {}  # the few methods whose outer loop is not Trainer.fit (DIGEST-A)


def register(name: str, description: str, trainer: type | None = None):
    def wrap(builder: Builder) -> Builder:
        METHODS[name] = builder
        DESCRIPTIONS[name] = description
        if trainer is not None:
            TRAINERS[name] = trainer
        return builder
    return wrap


def build(cfg: TrainConfig, part: LocalPart, plan: HaloPlan, model) -> tuple[HaloPolicy, ParamSync]:
    if cfg.method not in METHODS:
        raise ValueError(f"unknown method {cfg.method!r}; choose from {', '.join(sorted(METHODS))}")
    return METHODS[cfg.method](cfg, part, plan, model)


@register("exact", "propagation-based: fresh halos forward and backward (full communication)")
def exact(cfg, part, plan, model):
    return ExactHalo(part, plan), make_param_sync(cfg.local_steps)


@register("digest", "DIGEST: stale halo representations synced every --sync-interval steps")
def digest(cfg, part, plan, model):
    from .store import StaleHalo  # local import: store.py imports the compressor machinery
    return StaleHalo(part, plan, model, cfg), make_param_sync(cfg.local_steps)
