"""Your own graph and your own partition through ``python -m digest train`` (issue 61): a graph
saved as a PyG ``Data`` trains with every registered method to the metrics the same graph and split
give through the registry; ``--partition-file`` with the assignment ``partition --write`` wrote
reproduces the METIS run to the bit; summary.json records both files and their sha256, and a
complete run whose file changed is not taken for the same run."""
from __future__ import annotations

import hashlib
import json

import pytest
import torch

from digest import METHODS
from digest.cli import main
from helpers import DATASET, here, metrics_of, needs_shared

COMMON = ["--epochs", 2, "--hidden", 8, "--layers", 2, "--eval-every", 1, "--no-progress"]
# DIGEST-A is deterministic with one worker only (the order gradients arrive in is not)
ONE_WORKER = {"digest-async", "digest-async-vanishing"}
# the fast tier's share of every method (a sync one, DIGEST, DIGEST-A, a baseline); all: --all
FAST = {"exact", "digest", "partition"}  # the rest (DIGEST-A: a server process) in the slow tier


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """DATASET as the registry loads it (seed 0), saved as a PyG ``Data`` with its masks."""
    from digest.data import load_dataset
    return save_data(load_dataset(DATASET, seed=0), tmp_path_factory.mktemp("graph") / "graph.pt")


def save_data(g, path):
    """``g``'s arrays as a PyG ``Data``, saved with ``torch.save``."""
    from torch_geometric.data import Data
    torch.save(Data(x=g.x, edge_index=g.edge_index, y=g.y, train_mask=g.train_mask,
                    val_mask=g.val_mask, test_mask=g.test_mask), path)
    return path


def train(capsys, out, *args):
    """``python -m digest train`` in this process (its workers from the warm launcher); DIGEST-A,
    whose rpc agent starts once per process, in one launched process, as torchrun runs it."""
    argv = ["train", *COMMON, "--out", out, *args]
    method = args[args.index("--method") + 1] if "--method" in args else "exact"
    if method in ONE_WORKER:
        from digest.runtime.launch import launch_all
        assert launch_all(main, ([str(a) for a in argv],), 1) == {0: 0}
    else:
        rc, err = here(argv, capsys)
        assert rc == 0, err
    return metrics_of(out / "metrics.csv")


@pytest.mark.parametrize("method", [m if m in FAST else pytest.param(m, marks=pytest.mark.slow)
                                    for m in sorted(METHODS)])
def test_every_method_trains_on_a_saved_graph_as_on_the_registry_graph(
        method, saved, tmp_path, session_data, capsys):
    flags = ["--method", method, "--workers", 1 if method in ONE_WORKER else 2]
    registry = train(capsys, tmp_path / "registry", "--dataset", DATASET, *flags)
    mine = train(capsys, tmp_path / "file", "--dataset", f"file:{saved}", *flags)
    assert mine == registry and len(mine) == 2
    summary = json.loads((tmp_path / "file" / "summary.json").read_text())
    assert summary["dataset"]["meta"]["sha256"] == hashlib.sha256(saved.read_bytes()).hexdigest()


@pytest.mark.slow
@needs_shared("Cora")
def test_cora_saved_as_a_data_file_trains_as_cora(tmp_path, session_data, capsys):
    """A real graph (sparse bag-of-words features, the public split) round-trips too."""
    from digest.data import load_dataset
    path = save_data(load_dataset("Cora"), tmp_path / "cora.pt")
    flags = ["--method", "digest", "--workers", 2, "--model", "sage"]
    assert train(capsys, tmp_path / "file", "--dataset", f"file:{path}", *flags) == \
        train(capsys, tmp_path / "registry", "--dataset", "Cora", *flags)


@pytest.mark.parametrize("method,source", [("exact", "registry"), ("digest", "file")])
def test_the_written_partition_reproduces_the_metis_run(method, source, saved, tmp_path,
                                                        session_data, capsys):
    spec = DATASET if source == "registry" else f"file:{saved}"
    flags = ["--dataset", spec, "--method", method, "--workers", 3, "--seed", 4]
    metis = train(capsys, tmp_path / "metis", *flags)
    rc, _ = here(["partition", "--dataset", spec, "--parts", 3, "--seed", 4,
                  "--write", tmp_path / "parts"], capsys)
    assert rc == 0 and sorted(p.name for p in (tmp_path / "parts").iterdir()) == [
        "part_of.npy", "part_of.txt"]
    for name in ("part_of.txt", "part_of.npy"):
        path = tmp_path / "parts" / name
        again = train(capsys, tmp_path / name, *flags, "--partition-file", path)
        assert again == metis  # every loss and accuracy, to the bit
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        assert summary["config"]["partition_file"] == str(path)
        assert summary["partition"]["method"] == "file"
        assert summary["partition"]["file"] == str(path.resolve())
        assert summary["partition"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert summary["partition"]["edge_cut"] == json.loads(
            (tmp_path / "metis" / "summary.json").read_text())["partition"]["edge_cut"]


def test_a_complete_run_whose_partition_file_changed_is_another_run(saved, tmp_path, session_data,
                                                                     capsys):
    parts = tmp_path / "parts.txt"
    parts.write_text("".join(f"{i % 2}\n" for i in range(300)))
    args = ["--dataset", f"file:{saved}", "--workers", 2, "--partition-file", parts]
    train(capsys, tmp_path / "run", *args)
    capsys.readouterr()
    assert main([str(a) for a in ["train", *COMMON, "--out", tmp_path / "run", *args]]) == 0
    assert "already holds this run, complete" in capsys.readouterr().out
    parts.write_text("".join(f"{(i // 150)}\n" for i in range(300)))
    rc, err = here(["train", *COMMON, "--out", tmp_path / "run", *args], capsys)
    assert rc == 2 and len(err) == 1 and "holds a complete run of another configuration" in err[0]
    assert f"the partition file {parts} changed (sha256 " in err[0]


def test_digest_train_runs_from_python_and_returns_the_summary(saved, tmp_path, session_data):
    """``digest.train`` is ``python -m digest train``: the same folder, the summary returned, and
    the summary already there when the folder holds this run complete."""
    import digest
    flags = dict(dataset=f"file:{saved}", epochs=2, hidden=8, layers=2, progress=False,
                 out=str(tmp_path / "run"))
    first = digest.train(digest.TrainConfig.of(method="digest", workers=2), **flags)
    assert first["config"]["method"] == "digest" and first["world_size"] == 2
    assert first == json.loads((tmp_path / "run" / "summary.json").read_text())
    assert digest.train({"method": "digest", "workers": 2, **flags}) == first
    with pytest.raises(digest.UsageError, match="has no labels"):
        torch.save({"x": torch.ones(3, 2), "edge_index": torch.tensor([[0], [1]])},
                   tmp_path / "bad.pt")
        digest.train(dataset=f"file:{tmp_path / 'bad.pt'}", out=str(tmp_path / "bad"))
    assert not (tmp_path / "bad").exists()


def _refusable(g, kind: str) -> dict:
    """``g``'s arrays with one flaw that leaves no meaningful run (issue 80's four files)."""
    a = {"x": g.x.to_dense() if g.x.is_sparse else g.x, "edge_index": g.edge_index, "y": g.y.clone(),
         "train_mask": g.train_mask, "val_mask": g.val_mask, "test_mask": g.test_mask}
    none = torch.zeros_like(g.train_mask)
    if kind == "zero features":
        a["x"] = a["x"][:, :0]
    elif kind == "label 10^9":
        a["y"][0] = 10 ** 9
    elif kind == "empty train mask":
        a["train_mask"] = none
    else:
        a.update(train_mask=none, val_mask=none, test_mask=none)
    return a


@pytest.mark.parametrize("kind, says", [
    ("zero features", "the features (x) have 0 columns"),
    ("label 10^9", "the largest label 1000000000 implies 1,000,000,001 classes, more than the"),
    ("empty train mask", "the file's masks leave the train set empty"),
    ("all masks empty", "the file's masks leave the train, validation and test sets empty")])
def test_a_graph_file_without_a_meaningful_run_is_refused_in_one_line(kind, says, tmp_path,
                                                                      capsys):
    """Each exits 2 in one line before anything is written (before this check, a worker's
    traceback, a 1 TB allocation or a run reporting accuracy 0 of 0)."""
    from digest.data import load_dataset
    from torch_geometric.data import Data
    path = tmp_path / "g.pt"
    torch.save(Data(**_refusable(load_dataset(DATASET, seed=0), kind)), path)
    rc, err = here(["train", "--dataset", f"file:{path}", "--workers", 2, *COMMON,
                    "--out", tmp_path / "run", "--data-root", tmp_path / "data"], capsys)
    assert rc == 2 and len(err) == 1 and err[0].startswith(f"error: file:{path}: "), err
    assert says in err[0] and "Traceback" not in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.pt"]  # nothing written
