"""digest/advise/epochs.py: epochs to target from the nearest graph's convergence runs, scaled to
the anchor's exact, and exact's figure assumed beyond FAR. A hand-made table, no training."""
from __future__ import annotations

import pytest

from digest.advise.epochs import FAR, distance, lookup

STATS = {"near": {"edge_cut": 0.10, "halo": 0.20, "homophily": 0.80, "features": 100},
         "far": {"edge_cut": 0.30, "halo": 0.90, "homophily": 0.50, "features": 100}}


def row(dataset, method, epochs, test=0.9, exact_test=0.9):
    return {"suite": f"s_{dataset}", "dataset": dataset, "workers": 4, "model": "gcn",
            "hidden": 128, "layers": 3, "dropout": 0.5, "lr": 0.01, "budget": 200,
            "method": method, "label": method, "default": True, "seeds": [0, 1],
            "epochs": {"0.99": epochs}, "test": [test, test], "exact_test": [exact_test] * 2}


@pytest.fixture
def table():
    return {"targets": [0.99], "graphs": {f"{g}|4": s for g, s in STATS.items()},
            "rows": [row("near", "exact", [20, 20]), row("near", "digest", [30, 30], 0.89),
                     row("far", "exact", [10, 10]), row("far", "partition", [None, 40], 0.8)]}


def ask(table, method, where="near"):
    return lookup(table, method, {**STATS[where], "workers": 4}, 0.99, "gcn", 128, 3, 0.5)


def test_distance_is_zero_to_itself_and_scaled():
    assert distance(STATS["near"], STATS["near"]) == 0
    # (0.2 / 0.1)^2 + (0.7 / 0.5)^2 + (0.3 / 0.1)^2 = 4 + 1.96 + 9
    assert distance(STATS["near"], STATS["far"]) == pytest.approx(14.96 ** 0.5)


def test_the_nearest_graph_gives_the_figure(table):
    e = ask(table, "digest")
    assert (e.epochs, e.dataset, e.distance, e.scale, e.assumed) == (30, "near", 0, 1.0, "")
    assert e.accuracy_gap == pytest.approx(-1.0)


def test_a_far_method_takes_exact_s_figure_and_says_so(table):
    assert distance(STATS["near"], STATS["far"]) > FAR
    e = ask(table, "partition")  # its only runs are on "far", where one seed missed the target
    assert (e.epochs, e.dataset, e.assumed != "") == (20, "near", True)
    assert e.accuracy_gap == pytest.approx(-10.0)  # measured where it ran
    assert e.source().startswith("exact's, assumed (its nearest runs, s_far: far, are at distance 3.87")


def test_within_far_another_graph_s_figure_is_scaled_to_the_anchor(table):
    table["graphs"]["mid|4"] = {**STATS["near"], "edge_cut": 0.15}  # distance 0.5 from near
    table["rows"] = [r for r in table["rows"] if r["method"] != "digest"]
    table["rows"] += [row("mid", "exact", [10, 10]), row("mid", "digest", [15, 15])]
    e = ask(table, "digest")  # x 20 / 10: exact's epochs on the anchor (near) over mid's
    assert (e.epochs, e.dataset, e.scale, e.assumed) == (30, "mid", 2.0, "")
