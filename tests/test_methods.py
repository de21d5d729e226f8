"""digest/methods.py: the registry's facts about each method, which the harness asks instead of
keeping lists of method names: its period (from its option groups), whether it is asynchronous,
and what its bytes follow."""
from __future__ import annotations

import pytest

from digest import methods


def test_load_all_registers_the_built_in_methods_once():
    before = dict(methods.load_all().METHODS)
    assert {"exact", "digest", "digest-async", "partition", "varco", "sancus"} <= set(before)
    assert methods.load_all().METHODS == before  # a second call registers nothing new


@pytest.mark.parametrize("config, want", [
    ({"method": "exact"}, 1),
    ({"method": "partition", "local_steps": 4}, 4),
    ({"method": "digest", "sync_interval": 10, "local_steps": 3}, 30),
    ({"method": "digest-async", "sync_interval": 5}, 5),
    ({"method": "sylvie", "sync_every": 4, "local_steps": 6}, 12),
    ({"method": "adaqp", "quant_assign": "adaptive", "quant_adapt_every": 20}, 20),
    ({"method": "adaqp", "quant_assign": "uniform", "quant_adapt_every": 20}, 1),
    ({"method": "digest-vanishing", "sync_interval": 10, "sync_schedule": "drift"}, None),
    ({"method": "digest-vanishing", "sync_interval": 10}, None),  # its default: decreasing
    ({"method": "digest-vanishing", "sync_interval": 10, "sync_schedule": "fixed"}, 10),
])
def test_a_method_period_comes_from_its_option_groups(config, want):
    assert methods.get(config["method"]).period(config) == want


def test_only_the_methods_with_their_own_outer_loop_are_asynchronous():
    asynchronous = {n for n, m in methods.METHODS.items() if m.asynchronous}
    assert asynchronous == {"digest-async", "digest-async-vanishing"}
    assert all(methods.get(n).trainer is not None for n in asynchronous)


@pytest.mark.parametrize("config, want", [
    ({"method": "exact"}, "data"),
    ({"method": "digest", "sync_interval": 10}, "data"),
    ({"method": "sancus"}, "values"),
    ({"method": "adaqp", "quant_assign": "adaptive"}, "values"),
    ({"method": "adaqp", "quant_assign": "uniform"}, "data"),
    ({"method": "digest-vanishing", "sync_schedule": "drift"}, "values"),
    ({"method": "digest-vanishing", "sync_schedule": "decreasing"}, "data"),
    ({"method": "digest-async"}, "timing"),
])
def test_what_a_method_bytes_follow(config, want):
    assert methods.get(config["method"]).bytes_follow(config) == want
