"""Draw docs/img/architecture.png: digest/'s layers (the table tests/test_layering.py enforces),
with the modules of each, and above them baselines/ and experiments/: the harness's core layers,
its studies (one package each) and the core's commands.

    python scripts/draw_architecture.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from test_layering import HARNESS_LAYERS, LAYERS, STUDIES, project_modules  # noqa: E402

ROLE = {"digest.errors": "errors, options (leaves)", "digest.methods": "registry",
        "digest.config": "config", "digest.data": "data / runtime", "digest.models": "models",
        "digest.policies": "policies", "digest.training": "training",
        "digest.asynchronous": "asynchronous (DIGEST-A)", "digest.advise": "advise",
        "digest.__main__": "entry point",
        "digest": "public API (digest/__init__.py)"}


def members(layer: set[str], modules: list[str]) -> str:
    """'pkg: a, b; pkg2: c' for subpackages, 'a, b' for top-level modules."""
    if layer == {"digest"}:
        return "from digest import Trainer, TrainConfig, register, the policies, load_dataset, ..."
    parts = []
    for top in sorted(layer):
        subs = sorted(m[len(top) + 1:] for m in modules if m.startswith(top + "."))
        parts.append(f"{top.split('.')[-1]}: {', '.join(subs)}" if subs else top.split(".")[-1])
    return "; ".join(parts)


def main() -> None:
    paths = project_modules()
    modules = sorted(paths)
    rows = [(ROLE.get(sorted(layer)[0], ", ".join(sorted(layer))), members(layer, modules))
            for layer in LAYERS]
    rows.append(("baselines/", "one file a method: " + ", ".join(
        sorted(m.split(".")[1] for m in modules if m.startswith("baselines.")))))
    for layer in HARNESS_LAYERS:
        inside = sorted({m[len(layer) + 1:].split(".")[0] for m in modules if m.startswith(layer + ".")})
        if layer == STUDIES:
            rows.append(("experiments/studies/", "one package a study (its analysis, pages, "
                         "command), never importing another: " + ", ".join(inside)))
        else:
            rows.append((f"experiments/{layer.split('.')[-1]}/", ", ".join(inside)))
    rows.append(("experiments/ commands", ", ".join(sorted(
        m.split(".")[1] for m in modules if m.count(".") == 1 and m.startswith("experiments.")
        and paths[m].name != "__init__.py"))))
    fig, ax = plt.subplots(figsize=(11, 0.62 * len(rows) + 0.6))
    ax.set_axis_off()
    n = len(rows)
    for i, (role, mods) in enumerate(rows):
        y = i
        outside = role.startswith(("baselines", "experiments"))
        ax.add_patch(plt.Rectangle((0, y + 0.08), 10.6, 0.84, facecolor="#fde9c9" if outside else "#dbe8f6",
                                   edgecolor="#555555", linewidth=0.8))
        ax.text(0.15, y + 0.5, role, va="center", fontsize=9, weight="bold")
        ax.text(3.3, y + 0.5, mods, va="center", fontsize=7.5, wrap=True)
    ax.annotate("", xy=(10.85, 0.3), xytext=(10.85, n - 0.3),
                arrowprops=dict(arrowstyle="->", color="#333333"))
    ax.text(11.0, n / 2, "imports point down only", rotation=90, va="center", fontsize=8)
    ax.set_xlim(0, 11.4)
    ax.set_ylim(0, n)
    ax.set_title("digest-suite: layers (bottom: leaves; tests/test_layering.py checks every import)",
                 fontsize=10)
    out = ROOT / "docs" / "img" / "architecture.png"
    fig.savefig(out, dpi=110, bbox_inches="tight")
    print(out)


if __name__ == "__main__":
    main()
