"""The two pieces every option declaration needs, in a leaf module (it imports nothing of the
project), so that a method's file can declare its flags without importing the config layer.

``option(default, help)`` is one dataclass field = one ``--flag`` of ``python -m digest train``;
``Options`` is the base of the option groups a method declares (see ``methods.register``).
"""
from __future__ import annotations

from dataclasses import field


def option(default, help: str, **kw):
    """A config field: its default, its ``--help`` line and argparse extras (``choices``)."""
    return field(default=default, metadata={"help": help, **kw})


class Options:
    """Base of the option groups a method declares. ``check(cfg)`` raises ValueError (one line)
    for values argparse cannot reject; each group checks only its own fields."""

    def check(self, cfg) -> None:
        for group in type(self).__mro__:
            own = group.__dict__.get("check_group")
            if own is not None:
                own(self, cfg)
