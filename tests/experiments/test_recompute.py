"""experiments/recompute.py: a suite's tables are recomputed from its committed
run files (summary.json, metrics.csv, run.json) and any difference with the committed tables is
one line and exit status 1: on a tiny fake suite in tmp (three runs, no training), and on every
committed suite of the repository (tables only; plots are not compared). ``./run_all.sh`` refuses
a wrong suite or seed list in one line, from a copy of the repository, so that a broken check could
never start a real suite here."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from experiments import recompute
from experiments.suites.suite import CONFIGS, load_suite
from fake_runs import fake_suite, recompute_args as args
from helpers import ROOT, cli


def test_recompute_reproduces_then_reports_each_difference(tmp_path, capsys):
    path, runs = fake_suite(tmp_path)
    assert recompute.main(args(path, tmp_path, "--write")) == 0
    results = tmp_path / "results"
    assert {"tables.md", "accuracy.csv", "time_to_accuracy.csv", "runs.csv"} <= {
        p.name for p in results.iterdir()}
    assert list((tmp_path / "plots").glob("toy_*.png"))
    assert "Command: `./run_all.sh --suite fake`" in (results / "tables.md").read_text()
    capsys.readouterr()
    assert recompute.main(args(path, tmp_path)) == 0  # nothing changed: reproduced exactly
    out = capsys.readouterr()
    assert out.out == "" and "reproduced exactly" in out.err

    # a committed run file changes (its epoch times), and a committed table is gone
    m = pd.read_csv(runs / "toy" / "digest-I10_w2_s0" / "metrics.csv")
    m["epoch_time"] = 0.2
    m.to_csv(runs / "toy" / "digest-I10_w2_s0" / "metrics.csv", index=False)
    (results / "bytes.csv").unlink()
    assert recompute.main(args(path, tmp_path)) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith(str(results)) for line in lines), lines
    assert [line for line in lines if "bytes.csv" in line] == [
        f"{results / 'bytes.csv'}: missing (the runs give it: 3 lines)"]  # header, exact, digest
    changed = {line.split(":")[0] for line in lines}
    assert changed == {str(results / n) for n in ("bytes.csv", "epoch_time.csv", "runs.csv",
                                                  "tables.md")}, lines
    digest = [line for line in lines if "epoch_time.csv:" in line and "digest" in line]
    assert digest and "100" in digest[0].split("!=")[0] and "200" in digest[0].split("!=")[1]


# -- every committed suite -----------------------------------------------------------------------
def committed_suites() -> list[str]:
    """The suites of experiments/configs whose tables are committed: their tables.md (where
    run_all.sh writes it) names the suite's own command (results/repro/ holds repro's, not full's)."""
    out = []
    for path in sorted(CONFIGS.glob("*.yaml")):
        name = load_suite(str(path)).name
        results, _, command = recompute.folders(name)
        tables = ROOT / results / "tables.md"
        if tables.exists() and re.search(rf"`{re.escape(command)}`(?! --)", tables.read_text()):
            out.append(name)
    return out


COMMITTED = committed_suites()


def test_the_committed_suites_are_found():
    assert "repro" in COMMITTED and "full" not in COMMITTED and "quick" in COMMITTED  # committed too


@pytest.mark.slow  # every committed suite's run files re-read (about 3 minutes in all): ./run_all.sh --check
@pytest.mark.parametrize("suite", COMMITTED)
def test_a_committed_suite_recomputes_to_its_committed_tables(suite, capsys):
    """Every table of the suite rebuilt from its committed run files, exactly as run_all.sh
    writes it (the same command as ./run_all.sh --check SUITE): no line differs."""
    rc = recompute.main(["--suite", suite])
    out = capsys.readouterr()
    assert rc == 0, out.out[-3000:] + out.err[-1000:]
    assert out.out == "" and "reproduced exactly" in out.err


# -- run_all.sh's refusals -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def repository_copy(tmp_path_factory) -> Path:
    """The code, the suite configs and run_all.sh in a folder of their own, with this checkout's
    packages (.venv, linked): whatever run_all.sh there would start, it starts there, on its own
    empty results/ and data, never on this checkout's."""
    copy = tmp_path_factory.mktemp("repository")
    for name in ("digest", "baselines", "experiments", "scripts"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("run_all.sh", "requirements.txt"):
        shutil.copy2(ROOT / name, copy / name)
    (copy / ".venv").symlink_to(ROOT / ".venv")
    return copy


def run_all(copy: Path, *argv, timeout=120):
    """``./run_all.sh *argv`` in the copy (its process group killed past ``timeout``)."""
    return cli(argv, copy / "data", copy, program=[str(copy / "run_all.sh")], timeout=timeout)


@pytest.mark.slow  # run_all.sh in a copy of the repository
def test_run_all_check_runs_the_recompute(repository_copy, tmp_path):
    """./run_all.sh --check SUITE is this command (exit 2 when there is no such suite)."""
    done = run_all(repository_copy, "--check", tmp_path / "none.yaml")
    assert done.rc == 2 and "no suite" in done.stderr


@pytest.mark.parametrize("argv,said", [
    (["--bogus"], "unknown option '--bogus'"),
    (["--quick", "--workers", "0"], "after --quick only --out DIR or --into-results, got '--workers 0'"),
    (["--quick", "--seeds", "0"], "--seeds goes after --suite NAME"),
    (["--quick", "--out"], "--out needs a folder"),
    (["--quick", "--out", "x", "--into-results"], "--out DIR and --into-results exclude each other"),
    (["--suite"], "--suite needs a name"),
    (["--suite", "quick", "--workers", "0"], "after --suite NAME only --seeds LIST, --out DIR or "
                                             "--into-results, got '--workers 0'"),
    (["--suite", "quick", "--seeds"], "--seeds needs a list"),
    (["--suite", "quick", "--seeds", "0", "1"], "only --seeds LIST, --out DIR or --into-results, got '1'"),
    (["--out", "x", "--bogus"], "after ./run_all.sh only --out DIR or --into-results, got '--bogus'"),
    (["--check", "quick", "repro"], "--check takes one suite"),
])
def test_run_all_refuses_an_argument_it_does_not_take_in_one_line(repository_copy, argv, said):
    """A flag run_all.sh does not take is refused before anything runs, never passed over."""
    done = run_all(repository_copy, *argv)
    assert done.rc == 2 and len(done.lines) == 1, done.stderr
    assert done.lines[0].startswith("error: ") and said in done.lines[0], done.stderr
    assert not (repository_copy / "results").exists() and \
        not (repository_copy / "plots").exists() and not (repository_copy / "runs").exists()


@pytest.mark.slow
def test_run_all_refuses_a_wrong_suite_or_seed_list_in_one_line(repository_copy, tmp_path):
    """A wrong suite or --seeds stops run_all.sh with the runner's one line: no run, no tables,
    no plots (nothing under the copy's results/ or plots/)."""
    for argv, said in ((["--suite", tmp_path / "none.yaml"], "no suite"),
                       (["--suite", "arxiv", "--seeds", "9"], "runs seeds 0, 1, 2")):
        done = run_all(repository_copy, *argv)
        assert done.rc == 2 and said in done.stderr and "tables:" not in done.stdout, done.stderr
        assert len(done.lines) == 1, done.stderr
        assert not (repository_copy / "results").exists() and \
            not (repository_copy / "plots").exists()
