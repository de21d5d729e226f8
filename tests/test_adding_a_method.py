"""docs/adding-a-method.md's example, run exactly as written there: its code block becomes a
plugin (DIGEST_PLUGINS), its flag shows in --help, a wrong value or another method's use of it is
one line with exit status 2, refresh-every 1 gives the exact method's losses, and refresh-every 2
sends halo rows only on refresh steps. Its suite entry parses."""
from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "adding-a-method.md").read_text()
COMMON = ["--dataset", "synthetic:nodes=400,classes=3,avg_degree=6,features=12,seed=2", "--workers",
          "2", "--epochs", "4", "--hidden", "8", "--dropout", "0", "--no-progress"]


def block(lang: str, index: int = 0) -> str:
    return re.findall(rf"```{lang}\n(.*?)```", DOC, re.S)[index]


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    path = tmp_path_factory.mktemp("plugin") / "lazy.py"
    path.write_text(block("python"))
    return path


def digest(args, plugin, data_root, cwd):
    env = {**os.environ, "DIGEST_PLUGINS": str(plugin), "DIGEST_DATA": str(data_root),
           "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "digest", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def rows(out: Path) -> list[dict]:
    with open(out / "metrics.csv") as f:
        return list(csv.DictReader(f))


def test_the_documented_method_runs(plugin, data_root, tmp_path):
    helptext = digest(["train", "--help"], plugin, data_root, tmp_path).stdout
    assert "Lazy halos [--method lazy-halo" in helptext and "--refresh-every" in helptext
    bad = digest(["train", "--method", "lazy-halo", "--refresh-every", 0], plugin, data_root, tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: --refresh-every must be >= 1"
    other = digest(["train", "--method", "exact", "--refresh-every", 2], plugin, data_root, tmp_path)
    assert other.returncode == 2 and "an option of lazy-halo" in other.stderr

    runs = {}
    for name, args in {"exact": ["--method", "exact"],
                       "lazy1": ["--method", "lazy-halo", "--refresh-every", 1],
                       "lazy2": ["--method", "lazy-halo", "--refresh-every", 2]}.items():
        done = digest(["train", *COMMON, *args, "--out", tmp_path / name], plugin, data_root, tmp_path)
        assert done.returncode == 0, done.stderr
        runs[name] = rows(tmp_path / name)
    assert [r["train_loss"] for r in runs["lazy1"]] == [r["train_loss"] for r in runs["exact"]]
    fwd = [int(r["bytes_halo_fwd"]) for r in runs["lazy2"]]
    exact = [int(r["bytes_halo_fwd"]) for r in runs["exact"]]
    # refresh steps move what exact moves (step 0: plus the input features, fetched once)
    assert fwd[0] == exact[0] and fwd[2] == exact[2] > 0 and fwd[1] == fwd[3] == 0
    assert [float(r["halo_age"]) for r in runs["lazy2"]] == [0, 1, 0, 1]  # mean over workers


def test_the_documented_suite_entry_parses(plugin, monkeypatch):
    from experiments.config import suite_from_dict
    monkeypatch.setenv("DIGEST_PLUGINS", str(plugin))
    entry = yaml.safe_load(block("yaml"))
    suite = suite_from_dict({"name": "doc", "datasets": ["synthetic"], "workers": [4], "seeds": [0],
                             "epochs": 5, "model": {}, "methods": entry})
    assert suite.methods[0].flags == {"refresh_every": 4}
