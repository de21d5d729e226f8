"""The two pieces every option declaration needs, in a leaf module (it imports nothing of the
project), so that a method's file can declare its flags without importing the config layer.

``option(default, help)`` is one dataclass field = one ``--flag`` of ``python -m digest train``;
``Options`` is the base of the option groups a method declares (see ``methods.register``).
"""
from __future__ import annotations

import math
from dataclasses import field


def option(default, help: str, **kw):
    """A config field: its default, its ``--help`` line and argparse extras (``choices``)."""
    return field(default=default, metadata={"help": help, **kw})


class Options:
    """Base of the option groups a method declares. ``check(cfg)`` raises ValueError (one line)
    for values argparse cannot reject; each group checks only its own fields. A group whose work
    comes in periods (a sync every I steps) defines ``group_period(self) -> int | None``: its
    period in steps, or None for a schedule with no fixed period; a group whose bytes follow the
    values sent (a re-send when rows drifted) defines ``group_follows_values(self) -> bool``."""

    def follows_values(self) -> bool:
        """Whether the method's bytes follow the values it sends (equal between two runs only
        where their training is identical), not the graph and the schedule alone."""
        return any(own(self) for group in type(self).__mro__
                   if (own := group.__dict__.get("group_follows_values")) is not None)

    def period(self) -> int | None:
        """The method's period in steps (docs/methods.md section 11: a run is timed over whole
        periods): the least common multiple of its groups' periods, 1 for none, None when one
        group's schedule has no fixed period."""
        out = 1
        for group in type(self).__mro__:
            own = group.__dict__.get("group_period")
            if own is not None:
                steps = own(self)
                if steps is None:
                    return None
                out = math.lcm(out, max(1, int(steps)))
        return out

    def check(self, cfg) -> None:
        for group in type(self).__mro__:
            own = group.__dict__.get("check_group")
            if own is not None:
                own(self, cfg)
