"""The scripts in examples/ run as a user runs them: a new interpreter, started in another folder,
writing only into the folder given to them, leaving no process behind."""
from __future__ import annotations

import json
import sys

from helpers import ROOT, cli

EXAMPLES = ROOT / "examples"


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
