"""Transitional: the command-line runners moved to tests/helpers.py (``from helpers import cli,
here, ...``); this name stays until no test file imports it."""
from experiments.watch import alive as _alive, terminal_signals as _terminal_signals  # noqa: F401
from helpers import (FAULTS, HOOK, METRICS, ROOT, cli, here, leftovers, metrics_of,  # noqa: F401
                     rows)


def assert_resumes_identically(common: list, data_root, tmp_path) -> None:
    """``common`` (a ``train`` command without --epochs/--out) run for 6 epochs directly, and for 4
    with a checkpoint every 2 then resumed to 6: the same metrics.csv rows."""
    direct = cli([*common, "--epochs", 6, "--out", tmp_path / "direct"], data_root, tmp_path)
    assert direct.rc == 0, direct.stderr[-3000:]
    first = cli([*common, "--epochs", 4, "--checkpoint-every", 2, "--out", tmp_path / "run"],
                data_root, tmp_path)
    assert first.rc == 0, first.stderr[-3000:]
    resumed = cli(["train", "--resume", tmp_path / "run", "--epochs", 6, "--no-progress"],
                  data_root, tmp_path)
    assert resumed.rc == 0, resumed.stderr[-3000:]
    assert metrics_of(tmp_path / "run" / "metrics.csv") == metrics_of(tmp_path / "direct" /
                                                                       "metrics.csv")
