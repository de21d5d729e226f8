"""Run ``python -m digest ...`` as a user would (experiments/watch.py: a real subprocess in its own
session, every process it starts watched), so a test can assert how it ended and that nothing
outlived it."""
from __future__ import annotations

import csv
import os
import sys
from pathlib import Path

from experiments.watch import Watched, alive, run, terminal_signals

ROOT = Path(__file__).resolve().parents[1]
FAULTS = ("DIGEST_TEST_KILL_RANK", "DIGEST_TEST_KILL_EPOCH", "DIGEST_TEST_RAISE_RANK",
          "DIGEST_TEST_KILL_AFTER", "DIGEST_TEST_STOP_RANK", "DIGEST_EPOCH_HOOK")
HOOK = f"{ROOT / 'tests' / 'faults.py'}:inject"  # the trainer's epoch hook that injects them


_alive, _terminal_signals = alive, terminal_signals  # the names other tests import


def cli(args, data_root, cwd, env: dict | None = None, timeout: float = 180,
        interrupt_after: float | None = None, interrupt_when: Path | None = None) -> Watched:
    """``python -m digest *args``; ``env`` adds variables (the fault-injection hooks);
    ``interrupt_after`` / ``interrupt_when``: Ctrl-C then (experiments/watch.py)."""
    full = {k: v for k, v in os.environ.items() if k not in FAULTS and k != "DIGEST_DEBUG"}
    full.update(DIGEST_DATA=str(data_root), PYTHONPATH=str(ROOT), **(env or {}))
    if set(env or ()) & set(FAULTS):
        full["DIGEST_EPOCH_HOOK"] = HOOK
    # the one warning pytest.ini also ignores (torch's, from digest/models/sparse.py's CSR tensors)
    full["PYTHONWARNINGS"] = "ignore:Sparse invariant checks are implicitly disabled:UserWarning"
    return run([sys.executable, "-m", "digest", *args], cwd, full, timeout, interrupt_after,
               interrupt_when)


def here(args, capsys) -> tuple[int, list[str]]:
    """``python -m digest *args`` without a new interpreter: exit status, stderr lines."""
    from digest.cli import main
    capsys.readouterr()
    rc = main([str(a) for a in args])
    return rc, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def rows(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


METRICS = ("epoch", "train_loss", "train_acc", "val_acc", "test_acc")


def metrics_of(path) -> list[tuple]:
    """The columns that must be reproducible (times and memory are not), as written."""
    return [tuple(r.get(k) for k in METRICS) for r in rows(path)]


def leftovers(directory) -> list[str]:
    """Temp files a killed writer could leave (atomic writes use *.tmp)."""
    return [str(p) for p in Path(directory).rglob("*.tmp")]


def assert_resumes_identically(common: list, data_root, tmp_path) -> None:
    """``common`` (a ``train`` command without --epochs/--out) run for 6 epochs directly, and for 4
    with a checkpoint every 2 then resumed to 6: the same metrics.csv rows. The direct run and the
    first part are independent: they run side by side (most of each is interpreter start-up)."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(2) as pool:
        direct = pool.submit(cli, [*common, "--epochs", 6, "--out", tmp_path / "direct"],
                             data_root, tmp_path)
        first = pool.submit(cli, [*common, "--epochs", 4, "--checkpoint-every", 2, "--out",
                                  tmp_path / "run"], data_root, tmp_path)
        direct, first = direct.result(), first.result()
    assert direct.rc == 0, direct.stderr[-3000:]
    assert first.rc == 0, first.stderr[-3000:]
    resumed = cli(["train", "--resume", tmp_path / "run", "--epochs", 6, "--no-progress"],
                  data_root, tmp_path)
    assert resumed.rc == 0, resumed.stderr[-3000:]
    assert metrics_of(tmp_path / "run" / "metrics.csv") == metrics_of(tmp_path / "direct" /
                                                                       "metrics.csv")
