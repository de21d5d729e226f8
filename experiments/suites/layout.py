"""Where a suite's files live in the repository, as run_all.sh lays them out: its tables, plots,
command, run files, load samples, run log and page. Paths are relative to the repository root
(the commands that use them run there), so that what is generated from them names the same
files on every machine."""
from __future__ import annotations

from pathlib import Path

from .suite import CONFIGS

ALIASES = {"full": "repro"}  # repro is a subset of full: same runs, same folders
REPO = CONFIGS.parents[1]


def folders(suite_name: str) -> tuple[str, str, str]:
    """(results folder, plots folder, the run_all.sh command) of a suite, as run_all.sh has them."""
    if suite_name == "quick":
        return "results/quick", "plots/quick", "./run_all.sh --quick"
    if suite_name in ("full", "repro"):  # repro is a subset of full: same runs, same folders
        command = "./run_all.sh" + ("" if suite_name == "full" else " --suite repro")
        return "results/repro", "plots/repro", command
    return f"results/{suite_name}", f"plots/{suite_name}", f"./run_all.sh --suite {suite_name}"


def runs_folder(suite_name: str) -> Path:
    return Path(folders(suite_name)[0]) / "runs"


def loadavg_path(suite_name: str) -> Path:
    """The suite's committed load-average samples (experiments/running/loadavg.py): loadavg.csv in
    its results folder (results/<suite>/loadavg.csv; full's are repro's)."""
    return Path(folders(ALIASES.get(suite_name, suite_name))[0]) / "loadavg.csv"


def runlog_path(suite_name: str) -> Path:
    return Path(folders(suite_name)[0]) / "RUNLOG.md"


def page_path(suite_name: str) -> Path:
    """The suite's page: its results folder's README.md (full's is repro's, results/repro/README.md;
    results/README.md is the index of every suite)."""
    return Path(folders(suite_name)[0]) / "README.md"


def committed_suites(root: Path = Path(".")) -> list[str]:
    """Every suite of experiments/configs whose runs folder holds a run (full counts as repro,
    whose runs it shares), in name order, repro first."""
    names = sorted({ALIASES.get(p.stem, p.stem) for p in CONFIGS.glob("*.yaml")},
                   key=lambda n: (n != "repro", n))
    return [n for n in names if any((root / runs_folder(n)).glob("*/*/run.json"))]


def load_file(runs: Path, suite_name: str) -> Path:
    """Where the runner samples the machine's load beside a suite's runs: the committed samples
    (``loadavg_path``: results/<suite>/loadavg.csv) when ``runs`` is the suite's committed runs
    folder, else loadavg.csv beside the runs folder (a user's runs/<suite>/loadavg.csv, say)."""
    name = ALIASES.get(suite_name, suite_name)
    if Path(runs).resolve() == (REPO / runs_folder(name)).resolve():
        return REPO / loadavg_path(name)
    return Path(runs).parent / "loadavg.csv"
