"""Behaviour pinned across refactors: the same short command for every method gives the committed
per-epoch losses and bytes. ``tests/cli/regression.json`` was written by this file's
``python tests/cli/test_regression.py --write`` on main before an earlier restructure (commit
4dd74b8); a change that alters any method's arithmetic or byte count fails here and has to say so
by re-writing the file in a commit of its own. Bytes and message counts must match exactly; losses
within a relative 1e-5 (float32 sums differ in the last bit between CPUs, as a CI machine showed:
1.2647813558578491 against 1.264781415462494; any change of a method's arithmetic moves them far more).

DIGEST-A runs with one worker: with M = 1 it is step for step synchronous DIGEST, and
deterministic (with more workers the order in which gradients arrive is not).

Each case is the command's own path without a new interpreter: its flags parsed by the CLI's
parser, its partition prepared as ``train`` prepares it, then ``digest.training.run.worker`` on every rank
through the launcher ``--workers M`` uses (the warm one: workers forked from a forkserver that
imported torch once; one worker too, as a process of its own)."""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).with_name("regression.json")
DATASET = "synthetic:nodes=600,classes=4,avg_degree=8,features=24,seed=1"
COMMON = ["--dataset", DATASET, "--epochs", "6", "--hidden", "16", "--layers", "3",
          "--eval-every", "3", "--no-progress"]
CASES = {
    "exact": ["--method", "exact", "--workers", "2"],
    "partition": ["--method", "partition", "--workers", "2"],
    "partition-K3": ["--method", "partition", "--workers", "2", "--local-steps", "3"],
    "digest": ["--method", "digest", "--workers", "2", "--sync-interval", "2"],
    "digest-async-M1": ["--method", "digest-async", "--workers", "1", "--sync-interval", "2"],
    "varco": ["--method", "varco", "--workers", "2", "--comp-max", "4"],
}
LOSS_RTOL = 1e-5
COLUMNS = ("train_loss", "bytes_halo_fwd", "bytes_halo_bwd", "bytes_store", "bytes_params",
           "messages")


def run_case(name: str, out: Path, data_root: Path) -> dict:
    from digest import cli, flags
    from digest.training import run
    from digest.config import TrainConfig, validate
    from digest.runtime.launch import launch_all
    args = cli.parser().parse_args(["train", *COMMON, *CASES[name], "--data-root", str(data_root),
                                    "--out", str(out)])
    cfg = TrainConfig.of(**flags.given(args))
    validate(cfg)
    world = cfg.runtime.workers
    launch_all(run.worker, (cfg, str(run.prepare(cfg, world)), str(out)), world)
    with open(out / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    return {c: [float(r[c]) for r in rows] for c in COLUMNS}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_losses_and_bytes(name, tmp_path, data_root):
    expected = json.loads(EXPECTED.read_text())[name]
    got = run_case(name, tmp_path / name, data_root)
    for column in COLUMNS:
        want = expected[column]
        if column == "train_loss":
            want = pytest.approx(want, rel=LOSS_RTOL, abs=0)
        assert got[column] == want, f"{name}: {column} changed"


if __name__ == "__main__":  # python tests/cli/test_regression.py --write
    import tempfile
    sys.path.insert(0, str(ROOT))
    assert sys.argv[1:] == ["--write"], "usage: python tests/cli/test_regression.py --write"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "data").mkdir()
        result = {n: run_case(n, Path(tmp) / n, Path(tmp) / "data") for n in sorted(CASES)}
    EXPECTED.parent.mkdir(exist_ok=True)
    EXPECTED.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {EXPECTED}")
