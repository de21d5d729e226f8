"""A run's per-epoch time (docs/methods.md section 11): the mean epoch time over a timed window of
whole periods, never a median.

A method whose work comes in periods pays it on some epochs only: DIGEST's store refresh every I
steps, model averaging every K local steps, Sylvie's synchronous step every K, AdaQP's bit
re-assignment every N steps, SAT's predictor update at each sync. A median drops those epochs; a
mean over a window that is not a whole number of periods over- or under-counts them. So:

- ``period(config)``: the run's period in epochs, the least common multiple of its periodic flags
  as the method registers them (1 for a method with none; None for a schedule that is not
  periodic, e.g. DIGEST's decreasing interval, which is timed over the whole run).
- ``window(epochs, warmup, period)``: the timed epochs: after the warm-up, the longest stretch of
  whole periods that fits; where not even one period fits after the warm-up, the whole run
  (``whole=True``; tables say so).

Pairs of runs (``timing.py``) time both runs of a pair over the window of the one with the longer
period (exact's is 1), so that every ratio compares the same epochs and covers whole periods of
both.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..suites.registry import register_methods

def period(config: dict) -> int | None:
    """The run's period in epochs (summary.json's ``config``); None if its schedule has none. The
    method says which of its flags set a period (``digest.methods.Method.period``).

    Example: ``{"method": "digest", "sync_interval": 10, "local_steps": 3}`` -> 30; exact -> 1;
    a method not registered here (a plugin's run read without ``DIGEST_PLUGINS``) -> 1."""
    method = register_methods().METHODS.get(config.get("method", "exact"))
    return 1 if method is None else method.period(config)


@dataclass(frozen=True)
class Window:
    """Timed epochs ``[start, stop)`` of a run; ``whole``: the periods did not fit, whole run."""
    start: int
    stop: int
    whole: bool = False

    @property
    def epochs(self) -> int:
        return self.stop - self.start


def window(epochs: int, warmup: int, period: int | None) -> Window:
    """The timed window of a run of ``epochs`` epochs.

    Example: 23 epochs, warm-up 3, period 10 -> epochs 3..22 (2 periods); 18 epochs, period 10
    -> 3..12 (1 period); period 30 -> the whole run, ``whole=True``."""
    if period is None or epochs - warmup < period:
        return Window(0, epochs, whole=True)
    return Window(warmup, warmup + (epochs - warmup) // period * period)


def joint(a: int | None, b: int | None) -> int | None:
    """The period a pair of runs is timed over: both runs' (None if either has none)."""
    return None if a is None or b is None else math.lcm(a, b)


def times(metrics: pd.DataFrame, win: Window) -> np.ndarray:
    """The epoch times (s) of ``win``."""
    return metrics["epoch_time"].to_numpy(dtype=float)[win.start:win.stop]


def timed_rows(metrics: pd.DataFrame, config: dict, warmup: int) -> pd.DataFrame:
    """The rows of metrics.csv in the run's own window (its per-epoch means are taken over them)."""
    win = window(len(metrics), warmup, period(config))
    return metrics.iloc[win.start:win.stop]


def epoch_time(metrics: pd.DataFrame, config: dict, warmup: int) -> float:
    """A run's per-epoch time (s): the mean over its own window."""
    t = timed_rows(metrics, config, warmup)["epoch_time"]
    return float(t.mean()) if len(t) else float("nan")


def describe(win: Window, period_: int | None) -> str:
    """How a window was chosen, for a table column: "20 (2 x 10)", "whole run (18, period 30)"."""
    if win.whole:
        return f"whole run ({win.epochs}, " + (
            "no fixed period)" if period_ is None else f"period {period_})")
    return f"{win.epochs}" + (f" ({win.epochs // period_} x {period_})" if period_ > 1 else "")
