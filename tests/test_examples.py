"""The scripts in examples/ run as a user runs them: a new interpreter, started in another folder,
writing only into the folder given to them, leaving no process behind."""
from __future__ import annotations

import json
import sys

import pytest

from helpers import ROOT, cli, rows

EXAMPLES = ROOT / "examples"


@pytest.mark.slow  # the example's own interpreter and workers, from scratch
def test_train_your_graph(tmp_path):
    """Builds a PyG graph, saves it, trains DIGEST on it with two workers through
    ``digest.train``: the run's files are in OUT/run and its summary names the file."""
    out, elsewhere = tmp_path / "out", tmp_path / "cwd"
    elsewhere.mkdir()
    result = cli([out], tmp_path / "unused-data-root", elsewhere, timeout=120,
                 program=[sys.executable, EXAMPLES / "train_your_graph.py"])
    assert result.rc == 0, result.stderr[-3000:]
    assert result.survivors == []
    assert result.stdout.startswith(f"digest on {out / 'graph.pt'}, 2 workers: test accuracy ")
    summary = json.loads((out / "run" / "summary.json").read_text())
    assert summary["config"]["method"] == "digest" and summary["world_size"] == 2
    assert summary["dataset"]["meta"]["file"] == str(out / "graph.pt")
    assert summary["best_val"] > 0.5  # the classes follow the edges: the GNN learns them
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "out"]  # nothing elsewhere
    assert list(elsewhere.iterdir()) == []


@pytest.mark.slow  # the example's own interpreter and workers, from scratch
def test_your_own_method(tmp_path):
    """Registers a halo policy and a parameter policy of its own and trains them with two workers
    (which see the method through DIGEST_PLUGINS) beside exact: the same forward halo bytes, half
    the backward ones at --grad-every 2, and the policies' own metrics.csv columns."""
    out, elsewhere = tmp_path / "out", tmp_path / "cwd"
    elsewhere.mkdir()
    result = cli([out], tmp_path / "unused-data-root", elsewhere, timeout=120,
                 program=[sys.executable, EXAMPLES / "your_own_method.py"])
    assert result.rc == 0, result.stderr[-3000:]
    assert result.survivors == []
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[-3:]] == ["exact", "one-way-halo",
                                                           f"files in {out}"]
    exact, mine = (json.loads((out / m / "summary.json").read_text())
                   for m in ("exact", "one-way-halo"))
    assert mine["config"]["method"] == "one-way-halo" and mine["world_size"] == 2
    assert mine["config"]["grad_every"] == 2 and mine["config"]["clip_norm"] == 1.0
    ours, theirs = mine["bytes_by_category"], exact["bytes_by_category"]
    assert ours["bytes_halo_fwd"] == theirs["bytes_halo_fwd"] > 0
    assert 2 * ours["bytes_halo_bwd"] == theirs["bytes_halo_bwd"] > 0  # 20 steps, 10 send back
    metrics = rows(out / "one-way-halo" / "metrics.csv")
    assert [float(r["halo_grads_sent"]) for r in metrics[:4]] == [1, 0, 1, 0]
    assert all(float(r["grad_norm"]) > 0 for r in metrics)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "out"]  # nothing elsewhere
    assert list(elsewhere.iterdir()) == []


def test_examples_use_only_the_public_api():
    """Every project name an example imports is a name of ``digest.__all__`` (from digest)."""
    import ast

    import digest
    for path in sorted(EXAMPLES.glob("*.py")):
        found = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ImportFrom)
                 and (n.module or "").split(".")[0] in ("digest", "baselines", "experiments")]
        assert found and all(n.module == "digest" for n in found), path.name
        assert all(a.name in digest.__all__ for n in found for a in n.names), path.name
