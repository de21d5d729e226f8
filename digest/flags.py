"""The ``train`` command line, generated from the config dataclasses: one ``--flag`` per field,
grouped in ``--help`` by concern and, for method options, by the methods that take them, every
default shown. Flags not given stay out of the parsed namespace, so ``TrainConfig.of`` can tell a
flag given for the wrong method (an error) from a default (ignored)."""
from __future__ import annotations

import argparse
import dataclasses

from . import methods
from .config import SECTIONS, TOP, TrainConfig, all_flags

_KINDS = {"int": int, "float": float, "float | None": float, "int | None": int}


def _add(group, name: str, default, help: str, type_: str, choices=None) -> None:
    flag = "--" + name.replace("_", "-")
    shown = help if "default" in help else f"{help} (default: {default!r})"
    if type_ in ("bool", bool, "bool | None"):
        group.add_argument(flag, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS,
                           help=shown)
        return
    kind = type_ if type_ in (int, float, str) else _KINDS.get(str(type_), str)  # type or its name
    group.add_argument(flag, type=kind, default=argparse.SUPPRESS,
                       help=shown, choices=choices, metavar=None if choices else name.upper())


def _add_fields(group, cls) -> None:
    for f in dataclasses.fields(cls):
        _add(group, f.name, f.default, f.metadata["help"], f.type, f.metadata.get("choices"))


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """Every flag of ``train``: the common sections, then each option group of the registered
    methods (register them first: ``methods.load_all()``)."""
    top = parser.add_argument_group("method")
    _add(top, "method", TOP["method"][0],
         f"{TOP['method'][1]}: {', '.join(sorted(methods.METHODS))}", "str")
    _add(top, "seed", TOP["seed"][0], TOP["seed"][1], "int")
    for name, cls in SECTIONS.items():
        _add_fields(parser.add_argument_group(f"{name}: {cls.__doc__.strip().rstrip('.')}"), cls)
    for group, users in methods.option_groups().items():
        doc = (group.__doc__ or group.__name__).strip().rstrip(".")
        title = f"{doc} [--method {', '.join(users)}]"
        _add_fields(parser.add_argument_group(title), group)


def given(ns: argparse.Namespace) -> dict:
    """The train flags set on the command line, by field name."""
    flags = all_flags()
    return {k: v for k, v in vars(ns).items() if k in flags}


def _names(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def config_from(ns: argparse.Namespace) -> TrainConfig:
    return TrainConfig.of(**given(ns))
