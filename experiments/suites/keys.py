"""A suite file's top-level keys beyond its runs, each read and checked (one-line ValueError
naming the suite): the timing protocol's (rounds, aa, warmup), checkpoint_every, fit_epochs,
budgets and seeds_by_workers."""
from __future__ import annotations

from digest.advise.protocol import WARMUP


def protocol(d: dict) -> dict:
    """The timing protocol's settings: rounds >= 1, aa a boolean, 0 <= warmup < epochs (when set)."""
    rounds, aa, warmup = d.get("rounds", 1), d.get("aa", False), d.get("warmup", WARMUP)
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise ValueError(f"suite {d['name']}: rounds must be an integer >= 1, not {rounds!r}")
    if not isinstance(aa, bool):
        raise ValueError(f"suite {d['name']}: aa must be true or false, not {aa!r}")
    if "warmup" in d and (not isinstance(warmup, int) or isinstance(warmup, bool)
                          or not 0 <= warmup < int(d["epochs"])):
        raise ValueError(f"suite {d['name']}: warmup must be an integer in [0, epochs), "
                         f"not {warmup!r}")
    return {"rounds": rounds, "aa": aa, "warmup": warmup}


def checkpoint_every(d: dict) -> int:
    every = d.get("checkpoint_every", 0)
    if not isinstance(every, int) or isinstance(every, bool) or every < 0:
        raise ValueError(f"suite {d['name']}: checkpoint_every must be an integer >= 0, "
                         f"not {every!r}")
    return every


def fit_epochs(d: dict) -> tuple:
    """``fit_epochs``: epoch numbers (0-based, as metrics.csv has them) below ``epochs``."""
    got = d.get("fit_epochs") or []
    if not all(isinstance(e, int) and not isinstance(e, bool) and 0 <= e < int(d["epochs"])
               for e in got):
        raise ValueError(f"suite {d['name']}: fit_epochs must be epoch numbers in [0, epochs), "
                         f"not {got!r}")
    return tuple(got)


def budgets(d: dict) -> tuple:
    """``budgets``: epoch counts in [1, epochs], each a shorter run read off the long one
    (experiments/analysis/budget.py); only meaningful with a constant learning rate."""
    got = d.get("budgets") or []
    if not all(isinstance(b, int) and not isinstance(b, bool) and 1 <= b <= int(d["epochs"])
               for b in got):
        raise ValueError(f"suite {d['name']}: budgets must be epoch counts in [1, epochs], "
                         f"not {got!r}")
    return tuple(sorted(set(got)))


def seeds_by_workers(d: dict) -> dict:
    return {int(k): tuple(v) for k, v in (d.get("seeds_by_workers") or {}).items()}
