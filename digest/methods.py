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
    # asynchronous: timed end to end only (no per-epoch time pairs with exact's), and its bytes
    # and accuracy follow the timing (how far workers drift apart), not the data alone
    asynchronous: bool = False

    def period(self, config: dict) -> int | None:
        """The period in steps of a run of this method from its flat config (summary.json's
        ``config``; flags missing take their defaults): ``Options.period``."""
        return self.options_of(config).period()

    def bytes_follow(self, config: dict) -> str:
        """What a run's bytes follow: "timing" (asynchronous), "values" (``Options.follows_values``)
        or "data" (the graph and the schedule: equal between runs of one config)."""
        if self.asynchronous:
            return "timing"
        return "values" if self.options_of(config).follows_values() else "data"

    def options_of(self, config: dict):
        """This method's options from a flat config (flags it does not take are left out)."""
        names = {f.name for f in dataclasses.fields(self.options)}
        return self.options(**{k: v for k, v in config.items() if k in names})


METHODS: dict[str, Method] = {}


def register(name: str, description: str, options: tuple = (), trainer: type | None = None,
             traffic: Callable | str | None = None, asynchronous: bool = False):
    """Register ``builder(cfg, part, plan, model) -> (halo policy, parameter-sync policy)``.
    ``options``: the option groups (``Options`` dataclasses) whose flags the method takes.
    ``traffic``: the method's step count for ``python -m digest advise`` (policies/counting.py),
    or a one-line reason why its traffic cannot be counted in advance. ``asynchronous``: workers
    do not step together (``Method.asynchronous``). A period comes with the option groups
    (``Options.group_period``)."""
    def wrap(builder: Builder) -> Builder:
        cls = dataclasses.make_dataclass(f"{name.title().replace('-', '')}Options", [],
                                         bases=tuple(reversed(options)) or (Options,))
        METHODS[name] = Method(name, description, builder, cls, tuple(options), trainer, traffic,
                               asynchronous)
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


# Modules that register methods on import, by name: the library's own modules never import them
# (baselines/ sits above digest/, DIGEST-A above the trainer); whoever needs every method calls
# ``load_all``.
BUILT_IN = ("digest.asynchronous", "baselines")


def load_all():
    """Register every method: the built-in modules (``BUILT_IN``), then the plugins of
    ``DIGEST_PLUGINS`` (``import_plugins``). Returns this registry module."""
    import importlib
    for name in BUILT_IN:
        importlib.import_module(name)
    import_plugins()
    return sys.modules[__name__]


def import_plugins() -> None:
    """Import the modules named in ``DIGEST_PLUGINS`` (comma-separated module names or ``.py``
    paths), which register methods of your own (docs/adding-a-method.md); nothing when unset.
    Workers inherit the variable."""
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
