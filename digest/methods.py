"""The method registry. A method = a halo policy + a parameter-sync policy, built per worker, plus
the option groups whose flags it takes.

This module is only the registry (it imports nothing of the project but ``options``): exact
registers itself beside its policy in ``policies/halo.py``, DIGEST in ``policies/store.py``,
DIGEST-A in ``asynchronous/``, and ``baselines/`` registers its own on import. Only the
command-line entry point imports ``baselines`` (nothing else in ``digest/`` may).

    @register("mine", "one line for `python -m digest methods`", options=(MyOptions, ParamOptions))
    def mine(cfg, part, plan, model):
        return MyHalo(part, plan, cfg.options), make_param_policy(cfg)
"""
from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .options import Options

if TYPE_CHECKING:
    from .config import TrainConfig
    from .data.local_graph import LocalPart
    from .policies.halo import HaloPlan, HaloPolicy
    from .policies.params import ParamPolicy

Builder = Callable[["TrainConfig", "LocalPart", "HaloPlan", object], "tuple[HaloPolicy, ParamPolicy]"]


@dataclass
class Method:
    name: str
    description: str
    build: Builder
    options: type              # a dataclass composed of the method's option groups
    groups: tuple              # those groups, in the order --help lists them
    trainer: type | None       # the few methods whose outer loop is not Trainer's (DIGEST-A)
    # what a step sends, counted without running it (policies/counting.py): ``fn(sizes, step)
    # -> Step``, or the reason it cannot be counted in advance; None: not declared
    traffic: Callable | str | None = None


METHODS: dict[str, Method] = {}


def register(name: str, description: str, options: tuple = (), trainer: type | None = None,
             traffic: Callable | str | None = None):
    """Register ``builder(cfg, part, plan, model) -> (halo policy, parameter-sync policy)``.
    ``options``: the option groups (``Options`` dataclasses) whose flags the method takes.
    ``traffic``: the method's step count for ``python -m digest advise`` (policies/counting.py),
    or a one-line reason why its traffic cannot be counted in advance."""
    def wrap(builder: Builder) -> Builder:
        cls = dataclasses.make_dataclass(f"{name.title().replace('-', '')}Options", [],
                                         bases=tuple(reversed(options)) or (Options,))
        METHODS[name] = Method(name, description, builder, cls, tuple(options), trainer, traffic)
        return builder
    return wrap


def get(name: str) -> Method:
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose from {', '.join(sorted(METHODS))}")
    return METHODS[name]


def options_class(name: str) -> type:
    return get(name).options


def option_groups() -> dict[type, list[str]]:
    """Every registered option group -> the methods that take it (for ``--help``)."""
    out: dict[type, list[str]] = {}
    for m in METHODS.values():
        for g in m.groups:
            out.setdefault(g, []).append(m.name)
    return out


def methods_with_option(flag: str) -> list[str]:
    return [m.name for m in METHODS.values()
            if flag in {f.name for f in dataclasses.fields(m.options)}]


def build(cfg: "TrainConfig", part: "LocalPart", plan: "HaloPlan", model) -> "tuple[HaloPolicy, ParamPolicy]":
    return get(cfg.method).build(cfg, part, plan, model)


def import_plugins() -> None:
    """Import the modules named in ``DIGEST_PLUGINS`` (comma-separated module names or ``.py``
    paths), which register methods of your own (docs/adding-a-method.md); nothing when unset.
    Whoever registers every method imports ``baselines`` and then calls this: the CLI, and the
    experiment harness."""
    for spec in filter(None, os.environ.get("DIGEST_PLUGINS", "").split(",")):
        load_module(spec.strip())


def load_module(spec: str):
    """A module by name, or a ``.py`` file by path (imported once per process)."""
    import importlib
    import importlib.util
    if not spec.endswith(".py"):
        return importlib.import_module(spec)
    name = "digest_plugin_" + Path(spec).stem
    if name in sys.modules:
        return sys.modules[name]
    if not Path(spec).is_file():
        raise FileNotFoundError(f"{spec} does not exist")
    found = importlib.util.spec_from_file_location(name, spec)
    module = sys.modules[name] = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module
