"""The figures' shared helpers: one style per method for every plot of the project, small
multiples, figure grids and saving, legends of curves that are means over seeds.

Style: a run label maps to its method family (``family``: "digest-I10@1gbit" -> "digest",
"sage-partition-pa5" -> "partition-pa", "varco-fixed-8" -> "varco"), and the family to one colour
and one marker (``METHOD_STYLE``, the Okabe-Ito palette, which stays distinct under the common
colour-vision deficiencies), the same in every plot. A figure draws at most ``MAX_SERIES`` methods
per panel (``panels``: small multiples by ``GROUPS``, each panel's methods of distinct families,
so of distinct colours and markers); several labels of one family in a panel (a parameter sweep:
digest-I5, digest-I10, ...) share its colour and differ in marker, line style and fill.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from ..suites.load import Loaded
from ..suites.suite import MODEL_PREFIXES, base_label, network_of

# -- method styles ------------------------------------------------------------------------------
OKABE_ITO = {"black": "#000000", "orange": "#E69F00", "sky blue": "#56B4E9",
             "bluish green": "#009E73", "blue": "#0072B2", "vermillion": "#D55E00",
             "reddish purple": "#CC79A7"}  # its yellow is left out: too faint on white
OTHER = ("#777777", "o")  # a label of no known family
_C = OKABE_ITO
# family -> (colour, marker). Colours repeat across GROUPS, never within one (with its
# references): a panel's families always differ in colour; (colour, marker) never repeats.
METHOD_STYLE = {
    "exact": (_C["black"], "o"),
    "partition": (_C["orange"], "v"),
    "partition-pa": (_C["vermillion"], "^"),
    "digest": (_C["blue"], "s"),
    "digest-async": (_C["reddish purple"], "D"),
    "varco": (_C["bluish green"], "P"),
    "pipegcn": (_C["sky blue"], "X"),
    "bnsgcn": (_C["orange"], "<"),
    "sancus": (_C["bluish green"], ">"),
    "adaqp": (_C["reddish purple"], "h"),
    "digest-vanishing": (_C["sky blue"], "*"),
    "digest-async-vanishing": (_C["vermillion"], "p"),
    "minibatch": (_C["orange"], "d"),
    "sat": (_C["sky blue"], "H"),
    "sylvie": (_C["bluish green"], "8"),
}
# (title, member families, reference families drawn in each of its panels too)
GROUPS = (("seed methods",
           ("exact", "partition", "partition-pa", "digest", "digest-async", "varco"), ()),
          ("peers", ("pipegcn", "bnsgcn", "sancus", "adaqp"), ("exact",)),
          ("ours", ("digest-vanishing", "digest-async-vanishing"), ("exact", "digest")),
          ("third wave", ("minibatch", "sat", "sylvie"), ("exact",)),
          ("other labels", (None,), ("exact",)))
MAX_SERIES = 6  # methods (labels) per panel
# a family's k-th label in a panel: (line style, marker filled); from the second on, its marker
# the k-th of VARIANT_MARKERS other than the family's (the colour still names the family)
VARIANTS = (("-", True), ("--", False), (":", True), ("-.", False), ("-", False), ("--", True))
VARIANT_MARKERS = ("o", "^", "D", "v", "s", "P", "X")


def _model_and_rest(label: str) -> tuple[str, str]:
    """("sage", "digest-I10") for "sage-digest-I10@1gbit"; ("", label) without a model prefix."""
    base = base_label(label)
    head, _, rest = base.partition("-")
    return (head, rest) if rest and head in MODEL_PREFIXES else ("", base)


def family(label: str, method: str | None = None) -> str | None:
    """The method family a run label names (a key of METHOD_STYLE): the longest family the label,
    without network suffix and model prefix, equals or starts with (then "-"); "partition-pa<k>"
    (PSGD-PA, local steps) is "partition-pa". Else the run's method, if a family; else None."""
    rest = _model_and_rest(label)[1]
    if re.fullmatch(r"partition-pa\d+(-.*)?", rest):
        return "partition-pa"
    for name in sorted(METHOD_STYLE, key=len, reverse=True):
        if rest == name or rest.startswith(name + "-"):
            return name
    return method if method in METHOD_STYLE else None


@dataclass(frozen=True)
class Panel:
    title: str
    labels: tuple


def _chunks(items: list, size: int) -> list[list]:
    """``items`` in ceil(n / size) consecutive chunks of sizes differing by at most one."""
    n = max(1, math.ceil(len(items) / size))
    cut = [round(i * len(items) / n) for i in range(n + 1)]
    return [items[a:b] for a, b in zip(cut, cut[1:])]


def panels(labels, methods: dict | None = None, size: int = MAX_SERIES) -> list[Panel]:
    """Small multiples: ``labels`` (suite order) in panels of at most ``size`` labels. Per model
    prefix and network, per group of GROUPS: its labels and references in one panel if they fit;
    else the first label of each family (with the references) in one, and the families with
    several labels whole (split evenly if too many) in "variants" panels beside the group's
    exact run, packed first-fit, after every main panel. A panel whose labels another panel
    shows too is dropped."""
    methods = methods or {}
    fam = {x: family(x, methods.get(x)) for x in labels}
    keys = list(dict.fromkeys((_model_and_rest(x)[0], network_of(x)) for x in labels))
    out: list[Panel] = []
    variants: list[Panel] = []  # after every group's main panel
    for model, net in keys:
        mine = [x for x in labels if (_model_and_rest(x)[0], network_of(x)) == (model, net)]
        prefix = " ".join(p for p in (model, f"@{net}" if net else "") if p)
        base = next((x for x in mine if fam[x] == "exact"), None)  # variants' reference
        for title, members, ref_families in GROUPS:
            title = f"{prefix}: {title}" if prefix else title
            refs = [next(x for x in mine if fam[x] == f) for f in ref_families
                    if any(fam[x] == f for x in mine)][:max(0, size - 1)]
            group = [x for x in mine if fam[x] in members and x not in refs]
            if not group:
                continue
            if len(refs) + len(group) <= size:
                out.append(Panel(title, tuple(refs + group)))
                continue
            firsts = [x for i, x in enumerate(group) if fam[x] not in {fam[y] for y in group[:i]}]
            out += [Panel(title, tuple(refs + c)) for c in _chunks(firsts, size - len(refs))]
            vrefs = [base] if base else []
            bins: list[list] = []
            for f in dict.fromkeys(fam[x] for x in group):
                same = [x for x in group if fam[x] == f and x != base]
                if len(same) < (1 if f == "exact" else 2):
                    continue
                for block in _chunks(same, size - len(vrefs)):
                    room = next((b for b in bins if len(b) + len(block) <= size - len(vrefs)), None)
                    if room is None:
                        bins.append(list(block))
                    else:
                        room.extend(block)
            variants += [Panel(f"{title}: variants", tuple(vrefs + b)) for b in bins]
    out += variants
    return [p for i, p in enumerate(out) if not any(
        set(p.labels) <= set(q.labels) and (len(q.labels) > len(p.labels) or j < i)
        for j, q in enumerate(out) if j != i)]


def style(label: str, panel_labels=(), methods: dict | None = None) -> dict:
    """matplotlib keywords of ``label`` in a panel showing ``panel_labels``: its family's colour
    and marker; the family's k-th label of the panel VARIANTS[k]'s line style and fill, and for
    k >= 1 a marker of VARIANT_MARKERS."""
    methods = methods or {}
    f = family(label, methods.get(label))
    color, marker = METHOD_STYLE.get(f, OTHER)
    same = [x for x in panel_labels if family(x, methods.get(x)) == f]
    k = same.index(label) if label in same else 0
    ls, filled = VARIANTS[k % len(VARIANTS)]
    if k:
        others = [m for m in VARIANT_MARKERS if m != marker]
        marker = others[(k - 1) % len(others)]
    return {"color": color, "marker": marker, "ls": ls, "mec": color,
            "mfc": color if filled else "white"}


def markevery(n: int, slot: int, of: int, count: int = 8):
    """About ``count`` markers along a line of ``n`` points, shifted by its ``slot`` of ``of``
    series, so that markers of overlapping lines do not hide each other."""
    step = max(1, n // count)
    return (min(n - 1, slot * step // max(1, of)) if n else 0, step)


# -- figures ------------------------------------------------------------------------------------
def pyplot():
    """matplotlib.pyplot on the Agg backend, imported on first use (tables need no matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def grid(rows: int, cols: int, width: float, height: float, **kw):
    """A figure of rows x cols panels of width x height inches each (axes as a 2-D array), laid
    out by matplotlib's constrained layout (a suptitle never covers the panels' titles)."""
    return pyplot().subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False,
                             layout="constrained", **kw)


def panel_grid(n: int, width: float = 6.6, height: float = 4.5, cols: int = 2, share: bool = False):
    """A figure for ``n`` panels, ``cols`` a row (one row below that): (fig, the n axes); the
    unused cells of the last row are hidden; ``share``: one x and one y scale for all, each
    panel keeping its tick labels."""
    cols = max(1, min(cols, n))
    fig, axes = grid(math.ceil(n / cols), cols, width, height,
                     **({"sharex": True, "sharey": True} if share else {}))
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    for ax in flat[:n]:
        ax.tick_params(labelbottom=True, labelleft=True)
    return fig, flat[:n]


def titles(fig, axes: list, groups: list, text: str) -> None:
    """One panel: ``text`` as its title; several: ``text`` above them all and each panel's group
    as its own title."""
    if len(groups) == 1:
        axes[0].set_title(text)
        return
    fig.suptitle(text)
    for ax, panel in zip(axes, groups):
        ax.set_title(panel.title, fontsize=10)


def save(fig, path: Path, written: list) -> None:
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    written.append(path)


# -- legends ------------------------------------------------------------------------------------
def seed_labels(loaded: Loaded, dataset: str, workers: int, labels: list) -> tuple[dict, str]:
    """Legend names and the title's phrase for curves that are means over seeds. A suite may give
    the main methods more seeds than the rest (repro: 3 at M=4); then each label says its own."""
    seeds = {label: len({r.seed for r in loaded.records if r.dataset == dataset and
                         r.label == label and r.workers == workers}) for label in labels}
    counts = sorted(set(seeds.values()))
    if len(counts) <= 1:
        return {label: label for label in labels}, f"mean of {counts[0] if counts else 0} seed(s)"
    return ({label: f"{label} ({n} seed{'s' if n > 1 else ''})" for label, n in seeds.items()},
            "mean over each method's seeds")


def methods_of(loaded: Loaded) -> dict:
    """{label: the run's method} (``family``'s fallback for a label that names none)."""
    return {r.label: r.method for r in loaded.records}
