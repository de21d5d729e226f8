"""docs/adding-a-method.md's example, run exactly as written there: its code block becomes a
plugin (DIGEST_PLUGINS), its flag shows in --help, a wrong value or another method's use of it is
one line with exit status 2, refresh-every 1 gives the exact method's losses, and refresh-every 2
sends halo rows only on refresh steps. Its suite entry parses.

The commands run through ``digest.cli.main`` in this process (its workers from the warm launcher,
which inherit DIGEST_PLUGINS and import the plugin too); the plugin's method is unregistered after
each test, so that no other test sees it."""
from __future__ import annotations

import re

import pytest
import yaml

from helpers import ROOT, here, rows

DOC = (ROOT / "docs" / "adding-a-method.md").read_text()
COMMON = ["--dataset", "synthetic:nodes=400,classes=3,avg_degree=6,features=12,seed=2", "--workers",
          "2", "--epochs", "4", "--hidden", "8", "--dropout", "0", "--no-progress"]


def block(lang: str, index: int = 0) -> str:
    return re.findall(rf"```{lang}\n(.*?)```", DOC, re.S)[index]


@pytest.fixture
def plugin(tmp_path, monkeypatch, data_root):
    """The documented code block as a plugin in DIGEST_PLUGINS; afterwards the registry is as it
    was (the method, its option group and the imported module gone)."""
    import sys

    from digest import methods
    path = tmp_path / "lazy.py"
    path.write_text(block("python"))
    monkeypatch.setenv("DIGEST_PLUGINS", str(path))
    monkeypatch.chdir(tmp_path)
    before = dict(methods.METHODS)
    yield path
    methods.METHODS.clear()
    methods.METHODS.update(before)
    sys.modules.pop("digest_plugin_lazy", None)


def test_the_documented_method_runs(plugin, tmp_path, capsys):
    from digest.cli import main
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    helptext = capsys.readouterr().out
    assert "Lazy halos [--method lazy-halo" in helptext and "--refresh-every" in helptext
    assert here(["train", "--method", "lazy-halo", "--refresh-every", 0], capsys) == \
        (2, ["error: --refresh-every must be >= 1"])
    rc, err = here(["train", "--method", "exact", "--refresh-every", 2], capsys)
    assert rc == 2 and len(err) == 1 and "an option of lazy-halo" in err[0]
    from digest import methods  # its period, declared with its option group, is the harness's
    assert methods.get("lazy-halo").period({"refresh_every": 4, "local_steps": 3}) == 12

    runs = {}
    for name, args in {"exact": ["--method", "exact"],
                       "lazy1": ["--method", "lazy-halo", "--refresh-every", 1],
                       "lazy2": ["--method", "lazy-halo", "--refresh-every", 2]}.items():
        rc, err = here(["train", *COMMON, *args, "--out", tmp_path / name], capsys)
        assert rc == 0, err
        runs[name] = rows(tmp_path / name / "metrics.csv")
    assert [r["train_loss"] for r in runs["lazy1"]] == [r["train_loss"] for r in runs["exact"]]
    fwd = [int(r["bytes_halo_fwd"]) for r in runs["lazy2"]]
    exact = [int(r["bytes_halo_fwd"]) for r in runs["exact"]]
    # refresh steps move what exact moves (step 0: plus the input features, fetched once)
    assert fwd[0] == exact[0] and fwd[2] == exact[2] > 0 and fwd[1] == fwd[3] == 0
    assert [float(r["halo_age"]) for r in runs["lazy2"]] == [0, 1, 0, 1]  # mean over workers


def test_the_documented_suite_entry_parses(plugin):
    from experiments.suites.suite import suite_from_dict
    entry = yaml.safe_load(block("yaml"))
    suite = suite_from_dict({"name": "doc", "datasets": ["synthetic"], "workers": [4], "seeds": [0],
                             "epochs": 5, "model": {}, "methods": entry})
    assert suite.methods[0].flags == {"refresh_every": 4}
