"""Bad input through ``python -m digest``: one line on stderr, exit status 2 (usage) or 1
(data / runtime), no traceback, nothing half-written: every case through ``digest.cli.main`` in
this process, and three through the real entry point in a new interpreter (slow tier). A second
command never loses what a first one wrote; --resume through the command line. (Every method
option's bad values: test_options.py.)"""
from __future__ import annotations

import json
import pickle
from contextlib import nullcontext
import shutil
import warnings

import numpy as np
import pytest
import torch

from digest.data import cache
from digest.cli import main
from digest.config import TrainConfig
from digest.data import DatasetError, validate
from digest.data.graph import Graph, canonical_edges
from digest.data.synthetic import make_synthetic
from digest.training.trainer import Trainer
from helpers import SHARED_DATASETS, cli, files_under, here, metrics_of, rows, run_workers

SYNTH = "synthetic:nodes=200,avg_degree=4,features=8,classes=3"


def one_line(result, status):
    assert result.rc == status, (result.rc, result.stderr)
    assert len(result.lines) == 1 and result.lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    return result.lines[0]


def nothing_written(tmp_path):
    """No run folder, no partition cache entry (a lock file holds no data), no temp file."""
    made = [p for p in tmp_path.rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    assert made == [], made


BAD_INPUT = [
    (["train", "--dataset", "nope"], 2, "unknown dataset 'nope'; known: synthetic, Cora"),
    (["train", "--dataset", "synthetic:nodes=abc"], 2, "bad value 'nodes=abc'"),
    (["train", "--method", "nope"], 2, "unknown method 'nope'; choose from"),
    (["train", "--model", "nope"], 2, "argument --model: invalid choice: 'nope'"),
    (["train", "--epochs", "abc"], 2, "argument --epochs: invalid int value: 'abc'"),
    (["train", "--lr", "-1"], 2, "--lr must be > 0"),
    (["train", "--dropout", "nan"], 2, "--dropout must be in [0, 1)"),
    (["partition", "--dataset", "synthetic:nodes=10", "--parts", "20"], 2,
     "--parts must be between 1 and the number of nodes (10), got 20"),
    (["train", "--dataset", "synthetic:nodes=10", "--workers", "11"], 2,
     "--workers must be between 1 and the number of nodes (10), got 11"),
    (["train", "--dataset", "synthetic:nodes=2000000000"], 1,
     "synthetic:nodes=2000000000 (hidden 256, 3 layers) needs about 13 TiB of memory, this "
     "machine has "),
    (["partition", "--dataset", "synthetic:nodes=2000000000", "--parts", "2"], 1,
     "synthetic:nodes=2000000000 needs about 1.4 TiB of memory, this machine has "),
    (["train", "--resume", "nowhere"], 1, "no checkpoint to resume from: nowhere/checkpoint"),
]
# the real entry point in a new interpreter (each costs an interpreter and torch's import): one
# refused by argparse, one after the worker pool was pre-started (--workers > 1: nothing may
# survive it), one refused while loading; every case calls the same main() in this process too
IN_A_NEW_INTERPRETER = {"argument --epochs", "--workers must be", "no checkpoint to resume"}


def _with_out(args, tmp_path):
    return [*args, "--out" if args[0] == "train" else "--seed",
            tmp_path / "run" if args[0] == "train" else 0]


@pytest.mark.slow
@pytest.mark.parametrize("args,status,needle", [
    case for case in BAD_INPUT if any(case[2].startswith(k) for k in IN_A_NEW_INTERPRETER)])
def test_bad_input_is_one_line(tmp_path, args, status, needle):
    result = cli(_with_out(args, tmp_path), tmp_path / "data", tmp_path)
    assert needle in one_line(result, status)
    assert result.survivors == []  # (--workers 2: the pre-started worker pool went too)
    nothing_written(tmp_path)  # refused before anything is generated or read


@pytest.mark.parametrize("args,status,needle", BAD_INPUT)
def test_bad_input_is_one_line_in_process(tmp_path, capsys, monkeypatch, args, status, needle):
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    with pytest.raises(SystemExit) if needle.startswith("argument ") else nullcontext():
        rc = main([str(a) for a in _with_out(args, tmp_path)])
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    if needle.startswith("argument "):  # argparse: usage line + error line, exit 2 via SystemExit
        assert needle in err[-1] and "Traceback" not in "\n".join(err)
    else:
        assert rc == status and len(err) == 1 and err[0].startswith("error: "), err
        assert needle in err[0] and "Traceback" not in err[0]
    nothing_written(tmp_path)


def test_an_out_that_cannot_be_written_is_one_line_before_anything_runs(tmp_path, capsys,
                                                                          monkeypatch):
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    (tmp_path / "taken").write_text("a file, not a folder")
    capsys.readouterr()
    rc = main(["train", "--dataset", SYNTH, "--epochs", "1",
               "--out", str(tmp_path / "taken" / "run")])
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert rc == 2 and err == [f"error: cannot write the run's files to {tmp_path}/taken/run: "
                               "Not a directory"], err
    assert [p.name for p in tmp_path.rglob("*")] == ["taken"]  # no partition cache was built


def _cora(tmp_path):
    if not (SHARED_DATASETS / "Cora" / "raw").is_dir():
        pytest.skip(f"{SHARED_DATASETS / 'Cora'} is absent (real-data test)")
    raw = tmp_path / "data" / "Cora" / "raw"
    shutil.copytree(SHARED_DATASETS / "Cora" / "raw", raw, copy_function=shutil.copyfile)
    for p in [raw, *raw.iterdir()]:
        p.chmod(p.stat().st_mode | 0o200)
    return raw


@pytest.mark.slow
def test_truncated_dataset_file(tmp_path):
    raw = _cora(tmp_path)
    x = raw / "ind.cora.x"
    x.write_bytes(x.read_bytes()[: x.stat().st_size // 2])
    result = cli(["partition", "--dataset", "Cora", "--parts", "2"], tmp_path / "data", tmp_path)
    line = one_line(result, 1)
    assert "ind.cora.x" in line and "corrupt or truncated" in line, line
    assert not (tmp_path / "data" / "Cora" / "processed").exists()  # no half-written cache
    assert not [p for p in (tmp_path / "data" / ".partitions").glob("*") if p.is_dir()]


def test_nan_features_in_a_dataset_file(tmp_path, monkeypatch, capsys):
    raw = _cora(tmp_path)
    with warnings.catch_warnings():  # an old scipy pickle: its module path is deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        allx = pickle.loads((raw / "ind.cora.allx").read_bytes(), encoding="latin1")
    allx.data[0] = np.nan
    (raw / "ind.cora.allx").write_bytes(pickle.dumps(allx, protocol=2))
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    assert main(["partition", "--dataset", "Cora", "--parts", "2"]) == 1
    assert capsys.readouterr().err == "error: Cora: features contain NaN or inf\n"
    assert not [p for p in (tmp_path / "data" / ".partitions").glob("*") if p.is_dir()]


def test_labels_out_of_range_and_inf_features_are_refused():
    m = torch.ones(4, dtype=torch.bool)
    edges = torch.tensor([[0, 1], [1, 0]])
    for x, y in [(torch.ones(4, 2), torch.tensor([0, 1, 2, 3])),
                 (torch.tensor([[0.0, float("inf")]] * 4), torch.zeros(4, dtype=torch.long))]:
        with pytest.raises(DatasetError) as e:
            validate(Graph("hand-made", x, y, edges, m, m, m, 3))
        assert "\n" not in str(e.value) and str(e.value).startswith("hand-made: ")


def test_corrupted_partition_cache_is_detected_and_rebuilt(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    args = ["partition", "--dataset", SYNTH, "--parts", "2"]
    assert main(args) == 0
    entry = next(p for p in (tmp_path / "data" / ".partitions").iterdir() if p.is_dir())
    part = entry / "part1.pt"
    blob = bytearray(part.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    part.write_bytes(bytes(blob))
    capsys.readouterr()
    assert main(args) == 0
    assert "rebuilding partition cache:" in capsys.readouterr().err
    assert cache.validate(entry) is None  # intact again


def fit_briefly(cfg, rt, part, out_dir):
    from pathlib import Path
    summary = Trainer(cfg, rt, part).fit(Path(out_dir), {})
    return int(part.train_mask.sum()), summary


def test_a_partition_without_training_nodes_still_takes_part(tmp_path):
    g = make_synthetic(nodes=200, avg_degree=4, features=8, classes=3, seed=2)
    part_dir = cache.prepare_partition("no-train", 2, "metis", 0, tmp_path, graph=g)
    part_of = cache.load_book(part_dir).part_of
    g.train_mask[part_of == 1] = False  # part 1 keeps its nodes but none is a training node
    part_dir = cache.prepare_partition("no-train-1", 2, "metis", 0, tmp_path, graph=g)
    cfg = TrainConfig.of(dataset="no-train-1", method="digest", hidden=8, epochs=4, sync_interval=2,
                      progress=False, timeout=30)
    (n0, summary), (n1, _) = run_workers(fit_briefly, cfg, part_dir, 2, out_dir=tmp_path / "run")
    assert n0 > 0 and n1 == 0
    assert summary["epochs"] == 4 and np.isfinite(summary["final"]["train_loss"])
    assert (tmp_path / "run" / "summary.json").exists()


def test_self_loops_duplicates_and_one_way_edges_are_normalised(tmp_path):
    raw = torch.tensor([[0, 0, 1, 1, 2, 3, 3, 4, 5, 5],
                        [0, 1, 2, 2, 3, 3, 4, 5, 0, 0]])  # loops 0-0 3-3, duplicates, one way
    ei = canonical_edges(raw, 6)
    pairs = set(map(tuple, ei.t().tolist()))
    assert len(pairs) == ei.size(1)  # no duplicates
    assert all(u != v for u, v in pairs) and all((v, u) in pairs for u, v in pairs)
    assert pairs == {(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2), (3, 4), (4, 3), (4, 5),
                     (5, 4), (5, 0), (0, 5)}
    m = torch.ones(6, dtype=torch.bool)
    g = validate(Graph("messy", torch.randn(6, 4), torch.tensor([0, 1, 0, 1, 0, 1]), ei, m, m, m, 2))
    part_dir = cache.prepare_partition("messy", 1, "metis", 0, tmp_path, graph=g)
    cfg = TrainConfig.of(dataset="messy", hidden=4, epochs=3, progress=False)
    (_, summary), = run_workers(fit_briefly, cfg, part_dir, 1, out_dir=tmp_path / "run")
    assert summary["epochs"] == 3 and np.isfinite(summary["final"]["train_loss"])


def test_heap_reuse_off_is_recorded(tmp_path, capsys, monkeypatch):
    """--heap-reuse off leaves glibc's allocator as it is, and summary.json says so."""
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    run = tmp_path / "run"
    assert here(["train", "--dataset", SYNTH, "--hidden", 8, "--epochs", 1, "--no-progress",
                 "--heap-reuse", "off", "--out", run], capsys)[0] == 0
    assert json.loads((run / "summary.json").read_text())["machine"]["heap_reuse"] is False


# -- a second command never loses what the first one wrote -----------------------
def _snapshot(directory) -> dict:
    return {p: open(p, "rb").read() for p in files_under(directory)}


def test_a_complete_run_is_not_replaced_by_another_configuration(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    run = tmp_path / "run"
    train = ["train", "--dataset", SYNTH, "--hidden", 8, "--no-progress", "--out", run]
    assert here([*train, "--epochs", 2], capsys)[0] == 0
    first = _snapshot(run)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["epochs"] == 2
    # every worker's memory once its trainer is built: the peak so far is at least what stays
    mem, = summary["startup_memory"]
    assert mem["startup_peak_mb"] >= mem["resident_after_startup_mb"] > 0
    assert isinstance(summary["machine"]["heap_reuse"], bool)
    # another configuration: refused in one line, the first run's files intact
    rc, err = here([*train, "--epochs", 3], capsys)
    assert rc == 2 and len(err) == 1, err
    assert err[0] == (f"error: --out {run} holds a complete run of another configuration "
                      "(--epochs 2 -> 3); choose another --out, or give --overwrite to replace it")
    assert _snapshot(run) == first
    rc, err = here([*train, "--epochs", 2, "--hidden", 16, "--workers", 2], capsys)
    assert rc == 2 and "--hidden 8 -> 16" in err[0] and "--world-size 1 -> 2" in err[0], err
    assert _snapshot(run) == first
    # the same configuration (how it is watched aside): complete, nothing to do, exit 0
    capsys.readouterr()
    from digest.cli import main
    assert main([str(a) for a in [*train, "--epochs", 2, "--timeout", 99, "--progress"]]) == 0
    assert capsys.readouterr().out == (f"{run} already holds this run, complete; nothing to do "
                                       "(--overwrite runs it again)\n")
    assert _snapshot(run) == first
    # --overwrite: replaced
    assert here([*train, "--epochs", 3, "--overwrite"], capsys)[0] == 0
    assert json.loads((run / "summary.json").read_text())["epochs"] == 3
    assert len(rows(run / "metrics.csv")) == 3


def test_an_unfinished_run_is_not_a_complete_one(tmp_path, capsys, monkeypatch):
    """No summary.json (killed: only progress or a checkpoint), or one that is not complete: a new
    run replaces it, as before; --resume continues it."""
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text('{"status": "running"}')
    assert here(["train", "--dataset", SYNTH, "--hidden", 8, "--epochs", 2, "--no-progress",
                 "--out", run], capsys)[0] == 0
    assert json.loads((run / "summary.json").read_text())["status"] == "complete"


def test_resume_through_the_command_line_continues_the_run(tmp_path, capsys, monkeypatch):
    """`train --resume DIR` with only the flags a resumed run may change: the saved settings are
    taken from the checkpoint (2 workers, DIGEST at I = 3, dropout on), the run goes on from its
    last checkpoint to the same per-epoch metrics as the same command run uninterrupted; a key
    setting given with another value is refused in one line. (Killed runs: test_reliability.py.)"""
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    common = ["train", "--dataset", SYNTH, "--method", "digest", "--sync-interval", 3,
              "--workers", 2, "--hidden", 8, "--no-progress"]
    assert here([*common, "--epochs", 6, "--out", tmp_path / "direct"], capsys)[0] == 0
    run = tmp_path / "run"
    assert here([*common, "--epochs", 4, "--checkpoint-every", 2, "--out", run], capsys)[0] == 0
    rc, err = here(["train", "--resume", run, "--method", "exact", "--hidden", 16], capsys)
    assert rc == 2 and len(err) == 1 and err[0].startswith(f"error: --resume {run}: the run was "
                                                           "started with other settings"), err
    assert "--method digest -> exact" in err[0] and "--hidden 8 -> 16" in err[0]
    rc, err = here(["train", "--resume", run, "--workers", 1], capsys)
    assert rc == 2 and "--workers 2 -> 1" in err[0], err
    assert here(["train", "--resume", run, "--epochs", 6, "--no-progress"], capsys)[0] == 0
    assert metrics_of(run / "metrics.csv") == metrics_of(tmp_path / "direct" / "metrics.csv")
    assert json.loads((run / "summary.json").read_text())["epochs"] == 6
