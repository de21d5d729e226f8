"""experiments/render/figures.py: one colour and marker per method family in every plot, at most six
methods a panel, small multiples by group; and the plots drawn from hand-made runs keep to it.
Exact expected values, no training."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex

from experiments import plots
from experiments.render import cluster, figures as render, markdown, pareto as pareto_render
from experiments.render import plots as render_plots
from experiments.suites.suite import CONFIGS, labels, load_suite
from experiments.suites.load import load
from experiments.render.figures import GROUPS, MAX_SERIES, METHOD_STYLE, Panel, family, panels, style
from fake_runs import write_run

QUICK = ["exact", "partition", "partition-pa5", "digest-I10", "digest-async-I10", "varco-variable",
         "varco-fixed-8", "pipegcn", "bnsgcn-p0.1", "sancus", "adaqp-2", "digest-vanishing"]
METHOD = {"partition-pa5": "partition", "digest-I10": "digest", "digest-async-I10": "digest-async",
          "varco-variable": "varco", "varco-fixed-8": "varco", "bnsgcn-p0.1": "bnsgcn",
          "adaqp-2": "adaqp", "adaqp-8": "adaqp"}


def test_a_label_names_its_family():
    assert [family(x) for x in [
        "exact", "exact@1gbit", "sage-exact", "gat-partition", "partition-pa5", "partition-pa10",
        "digest-I10", "digest-sync-I10-rank3-3x-slower", "digest-I10-store-varco@50mbit",
        "digest-async-I10", "digest-vanishing-drift0.5", "digest-async-vanishing-decreasing",
        "varco-fixed-32", "bnsgcn-p0.01", "adaqp-8", "pipegcn-smooth0.95", "sancus", "minibatch",
        "sat-k2", "sylvie", "sage-raw", "partitioned"]] == [
        "exact", "exact", "exact", "partition", "partition-pa", "partition-pa",
        "digest", "digest", "digest",
        "digest-async", "digest-vanishing", "digest-async-vanishing",
        "varco", "bnsgcn", "adaqp", "pipegcn", "sancus", "minibatch",
        "sat", "sylvie", None, None]
    assert family("sage-raw", "exact") == "exact" and family("sage-raw", "nope") is None


def test_one_style_per_family_and_groups_never_repeat_a_colour():
    pairs = list(METHOD_STYLE.values())
    assert len(set(pairs)) == len(pairs)  # (colour, marker) names one family
    assert len({m for _, m in pairs}) == len(pairs)  # so does the marker alone
    colours = {c for c, _ in pairs}
    assert colours <= set(render.OKABE_ITO.values())
    for _, members, refs in GROUPS:
        fams = [f for f in (*refs, *members) if f is not None]
        assert len({METHOD_STYLE[f][0] for f in fams}) == len(fams), fams
    assert set(METHOD_STYLE) == {f for _, members, _ in GROUPS for f in members if f}


def test_the_quick_suite_in_four_panels():
    assert panels(QUICK) == [
        Panel("seed methods", ("exact", "partition", "partition-pa5", "digest-I10",
                               "digest-async-I10", "varco-variable")),
        Panel("peers", ("exact", "pipegcn", "bnsgcn-p0.1", "sancus", "adaqp-2")),
        Panel("ours", ("exact", "digest-I10", "digest-vanishing")),
        Panel("seed methods: variants", ("exact", "varco-variable", "varco-fixed-8"))]
    assert panels(QUICK + ["minibatch", "sat", "sylvie"])[-2:] == [
        Panel("third wave", ("exact", "minibatch", "sat", "sylvie")),
        Panel("seed methods: variants", ("exact", "varco-variable", "varco-fixed-8"))]


def test_a_sweep_is_split_evenly_and_models_and_networks_never_mix():
    sweep = ["exact", *(f"digest-I{i}" for i in (1, 5, 10, 20, 50)), "digest-I10-K3"]
    assert panels(sweep) == [  # the main panel (exact, digest-I1) is in the first: dropped
        Panel("seed methods: variants", ("exact", "digest-I1", "digest-I5", "digest-I10")),
        Panel("seed methods: variants", ("exact", "digest-I20", "digest-I50", "digest-I10-K3"))]
    assert panels(["sage-exact", "sage-digest-I10", "gat-exact", "gat-digest-I10"]) == [
        Panel("sage: seed methods", ("sage-exact", "sage-digest-I10")),
        Panel("gat: seed methods", ("gat-exact", "gat-digest-I10"))]
    assert panels(["exact@1gbit", "pipegcn@1gbit", "exact@20mbit", "pipegcn@20mbit"]) == [
        Panel("@1gbit: peers", ("exact@1gbit", "pipegcn@1gbit")),
        Panel("@20mbit: peers", ("exact@20mbit", "pipegcn@20mbit"))]


@pytest.mark.parametrize("name", sorted(p.stem for p in CONFIGS.glob("*.yaml")))
def test_every_suite_fits_in_panels_of_six_distinct_methods(name):
    """Every label in some panel; a panel at most six labels, each drawn differently from the
    others (colour, marker, line style, fill), in its family's colour."""
    assert MAX_SERIES == 6
    ls = labels(load_suite(name))
    ps = panels(ls)
    assert {x for p in ps for x in p.labels} == set(ls)
    for p in ps:
        assert 1 <= len(p.labels) <= 6
        looks = [style(x, p.labels) for x in p.labels]
        assert len({(s["color"], s["marker"], s["ls"], s["mfc"]) for s in looks}) == len(looks)
        for x, s in zip(p.labels, looks):
            assert s["color"] == METHOD_STYLE.get(family(x), render.OTHER)[0]
        by_family = {}
        for x, s in zip(p.labels, looks):
            by_family.setdefault(family(x), set()).add(s["color"])
        assert all(len(c) == 1 for c in by_family.values())  # a family: one colour
        colours = [c for cs in by_family.values() for c in cs]
        assert len(colours) == len(set(colours))  # two families: two colours


def test_markdown_cells():
    assert [markdown.cell(x) for x in ("s", None, float("nan"), 1.23456)] == ["s", "n/a", "n/a", "1.235"]
    assert [markdown.times(x) for x in (2, "not reached", None)] == ["2.00x", "not reached", "n/a"]
    assert markdown.md_table(["a", "b"], [[1, 2]]) == "| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert render.markevery(40, 2, 4) == (2, 5) and render.markevery(3, 0, 1) == (0, 1)


@pytest.fixture
def drawn(tmp_path, monkeypatch):
    """Every figure plots.main draws from the quick suite's 12 methods (and an emulated sweep):
    [(file name, axes)] as they are when saved."""
    root = tmp_path / "runs"
    for i, label in enumerate(QUICK):
        d = write_run(root, label, 4, 0, [0.1] * 4, [0.3, 0.5 + i / 100, 0.7, 0.8],
                      method=METHOD.get(label, label), bytes_w=100 * (i + 1))
        if family(label) in ("digest", "digest-async", "digest-vanishing"):
            m = pd.read_csv(d / "metrics.csv")
            m["stale_err_l1"], m["stale_err_l2"] = [np.nan, 0.2, np.nan, 0.1], [np.nan, 0.3, np.nan, 0.2]
            m.to_csv(d / "metrics.csv", index=False)
    for label in ["exact", "pipegcn", "bnsgcn-p0.1", "sancus", "adaqp-2", "adaqp-8", "varco-variable"]:
        for bw in [("1gbit", 1e9), ("50mbit", 5e7)]:
            write_run(root, f"{label}@{bw[0]}", 4, 0, [0.1] * 3, [0.4, 0.6, 0.7], dataset="emu",
                      method=METHOD.get(label, label), bandwidth=bw)
    seen = []

    def keep(fig, path, written):
        seen.append((path.name, [ax for ax in fig.axes if ax.get_visible()]))
        render.pyplot().close(fig)
        written.append(path)

    for module in (render_plots, cluster, pareto_render):
        monkeypatch.setattr(module, "save", keep)
    assert plots.main(["--runs", str(root), "--out", str(tmp_path / "p"), "--network", "10gbit,5us"]) == 0
    return seen


def test_every_plotted_panel_has_at_most_six_methods_in_their_colours(drawn):
    names = sorted(n for n, _ in drawn)
    common = ["bytes_per_epoch", "pareto", "speedup_vs_workers", "val_vs_bytes", "val_vs_epoch",
              "val_vs_time"]  # the sweep's too: not every run of the root is emulated
    assert names == sorted([*(f"{d}_{n}.png" for d in ("emu", "toy") for n in common),
                            "emu_speedup_vs_bandwidth.png", "emu_val_vs_emulated_time.png",
                            "toy_stale_error.png"])
    colour_of: dict = {}
    for name, axes in drawn:
        if name.endswith("bytes_per_epoch.png"):  # bars coloured by byte category, not by method
            continue
        assert any(ax.get_legend() for ax in axes), name
        for ax in axes:
            legend = ax.get_legend()
            if legend is None:  # the speedup plot's right column: the left one's methods
                continue
            entries = [(h, t.get_text()) for h, t in zip(legend.legend_handles, legend.get_texts())
                       if not t.get_text().startswith("front (")]
            assert 1 <= len(entries) <= 6, (name, [t for _, t in entries])
            looks = set()
            for handle, text in entries:
                label = text.split(" (")[0]
                colour = to_hex(handle.get_color())
                assert colour == to_hex(METHOD_STYLE[family(label)][0]), (name, label)
                assert colour_of.setdefault(label.split("@")[0], colour) == colour
                looks.add((colour, handle.get_marker(), handle.get_linestyle(),
                           to_hex(handle.get_markerfacecolor())))
            assert len(looks) == len(entries), name
    assert len(colour_of) == len(QUICK) + 1  # adaqp-8 from the sweep
