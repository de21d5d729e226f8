"""A graph the user saved (``--dataset file:PATH``, digest/data/user_graph.py): a PyG ``Data`` or an
``.npz`` loads as the same graph through the registry would, edges normalised, split rules drawn
as the generator draws them, the file's sha256 in the meta and the cache key; the memory check
reads the sizes from the file; every bad file is one line, exit 2, nothing written."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from digest.data import load_dataset, memory_estimate
from digest.data.cache import load_manifest, prepare_partition
from digest.data.synthetic import popularity_split
from helpers import DATASET, here, toy_graph

MASKS = ("train_mask", "val_mask", "test_mask")


def arrays(g, **over) -> dict:
    """The graph's arrays by the names a file holds; ``over`` replaces (None drops) some."""
    a = {"x": g.x, "edge_index": g.edge_index, "y": g.y, **{m: getattr(g, m) for m in MASKS}}
    a.update(over)
    return {k: v for k, v in a.items() if v is not None}


def save(path, a: dict):
    """As PyG ``Data`` (.pt) or ``np.savez`` (.npz)."""
    if path.suffix == ".npz":
        np.savez(path, **{k: v.numpy() for k, v in a.items()})
    else:
        from torch_geometric.data import Data
        torch.save(Data(**a), path)
    return path


def same_graph(g, h):
    for k in ("x", "y", "edge_index", *MASKS):
        assert torch.equal(getattr(g, k), getattr(h, k)), k
    assert g.num_classes == h.num_classes and g.x.is_sparse == h.x.is_sparse


@pytest.mark.parametrize("suffix", [".pt", ".npz"])
def test_a_saved_graph_loads_as_the_registry_graph(tmp_path, suffix):
    g = load_dataset(DATASET, seed=3)
    path = save(tmp_path / f"g{suffix}", arrays(g))
    h = load_dataset(f"file:{path}", seed=3)
    same_graph(g, h)
    assert h.name == f"file:{path}" and h.meta["split"] == "the file's masks"
    assert h.meta["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert h.meta["file"] == str(path.resolve())


def test_reading_a_file_leaves_torchs_allow_list_as_it_was(tmp_path):
    """PyG allows ``Data`` for every ``torch.load`` of the process (ogb's loader relies on it);
    reading a user's file must not take it away."""
    from torch.serialization import get_safe_globals
    before = set(map(str, get_safe_globals()))
    load_dataset(f"file:{save(tmp_path / 'g.pt', arrays(toy_graph()))}")
    assert set(map(str, get_safe_globals())) == before


def test_edges_are_symmetrised_and_deduplicated(tmp_path):
    g = toy_graph()
    one_way = torch.tensor([[0, 0, 2, 1, 4, 4, 5], [2, 2, 0, 1, 1, 7, 5]])  # dup, loop, both ways
    h = load_dataset(f"file:{save(tmp_path / 'g.pt', arrays(g, edge_index=one_way))}")
    assert h.edge_index.tolist() == [[2, 4, 0, 1, 7, 4], [0, 1, 2, 4, 4, 7]]  # sorted by (dst, src)


def test_split_rules_are_the_generators(tmp_path):
    """Without masks, ``split=random`` draws what the generator draws for the same seed, and
    ``split=popularity`` the most connected nodes first; a rule also replaces a file's masks."""
    spec = "synthetic:nodes=300,avg_degree=5,features=16,classes=4,seed=7,train=0.5,val=0.25"
    g = load_dataset(spec)
    bare = save(tmp_path / "bare.pt", arrays(g, **dict.fromkeys(MASKS)))
    same_graph(g, load_dataset(f"file:{bare},split=random,train=0.5,val=0.25", seed=7))
    masked = save(tmp_path / "m.pt", arrays(g))
    h = load_dataset(f"file:{masked},split=popularity,train=0.5,val=0.25")
    deg = torch.bincount(g.edge_index[1], minlength=300)
    for got, want in zip((h.train_mask, h.val_mask, h.test_mask), popularity_split(deg, 0.5, 0.25)):
        assert torch.equal(got, want)
    assert h.meta["split"].startswith("popularity 50%/25%/25%")


def test_labels_as_a_column_floats_ints_and_num_classes(tmp_path):
    g = toy_graph()
    a = arrays(g, y=g.y.view(-1, 1).int(), x=g.x.double(), num_classes=torch.tensor(5))
    h = load_dataset(f"file:{save(tmp_path / 'g.pt', a)}")
    assert h.y.dtype == torch.int64 and torch.equal(h.y, g.y) and h.x.dtype == torch.float32
    assert h.num_classes == 5


def test_memory_estimate_reads_the_sizes_from_the_file(tmp_path):
    g = toy_graph()  # 9 nodes, 24 directed edges, 5 features
    for suffix in (".pt", ".npz"):
        path = save(tmp_path / f"g{suffix}", arrays(g))
        assert memory_estimate(f"file:{path}") == 9 * (5 * 4 + 8 + 3) + 2 * 24 * 16 * 3


def test_the_cache_key_is_the_files_content(tmp_path):
    g = toy_graph()
    path = save(tmp_path / "g.pt", arrays(g))
    first = prepare_partition(f"file:{path}", 2, root=tmp_path / "data")
    assert prepare_partition(f"file:{path}", 2, root=tmp_path / "data") == first
    save(path, arrays(g, x=g.x + 1))  # the same path, another graph: another entry
    second = prepare_partition(f"file:{path}", 2, root=tmp_path / "data")
    assert second != first and load_manifest(second)["graph"]["meta"]["sha256"] == \
        hashlib.sha256(path.read_bytes()).hexdigest()


def _overlap(g):
    val = g.val_mask.clone()
    val[[0, 1]] = True  # two training nodes
    return {"val_mask": val}


BAD = {  # what the file does wrong -> (arrays over the toy graph's, what the line says)
    "no labels": (lambda g: {"y": None}, "has no labels (y)"),
    "no features": (lambda g: {"x": None}, "has no node features (x)"),
    "labels of another length": (lambda g: {"y": g.y[:8]},
                                 "labels (y) have shape [8], x has 9 rows"),
    "a mask of another length": (lambda g: {"test_mask": g.test_mask[:7]},
                                 "test_mask has shape [7], x has 9 rows: need test_mask [N]"),
    "edge_index not [2, E]": (lambda g: {"edge_index": g.edge_index.t()},
                              "edge_index must be integers [2, E], got torch.int64 [24, 2]"),
    "NaN features": (lambda g: {"x": g.x.index_put((torch.tensor([4]), torch.tensor([1])),
                                                   torch.tensor(float("nan")))},
                     "features (x) hold NaN or inf"),
    "inf features": (lambda g: {"x": g.x * torch.tensor([1, 1, float("inf"), 1, 1])},
                     "features (x) hold NaN or inf"),
    "edge id out of range": (lambda g: {"edge_index": torch.tensor([[0, 9], [1, 2]])},
                             "edge_index holds node id 9, outside 0..8 (x has 9 rows)"),
    "negative edge id": (lambda g: {"edge_index": torch.tensor([[0, -1], [1, 2]])},
                         "edge_index holds node id -1, outside 0..8"),
    "negative label": (lambda g: {"y": g.y - 1}, "labels (y) must be >= 0, found -1"),
    "float labels": (lambda g: {"y": g.y.float()},
                     "labels (y) must be integers, got torch.float32"),
    "float mask": (lambda g: {"val_mask": g.val_mask.float()},
                   "val_mask must be bool (or 0 / 1), got torch.float32"),
    "overlapping masks": (_overlap, "train_mask and val_mask overlap (2 nodes are in both)"),
    "no masks, no rule": (lambda g: dict.fromkeys(MASKS), "has no train_mask, val_mask, test_mask: "
                          "give all three masks or a split rule"),
    "two masks": (lambda g: {"val_mask": None}, "has train_mask, test_mask but not val_mask"),
    "features as a list": (lambda g: {"x": g.x.tolist()}, "x is a list, not a tensor or an array"),
    "labels as a list": (lambda g: {"y": g.y.tolist()}, "y is a list, not a tensor or an array"),
    "too few classes": (lambda g: {"num_classes": torch.tensor(2)},
                        "num_classes 2 is not an integer above the largest label (2)"),
    "float classes": (lambda g: {"num_classes": 3.0},
                      "num_classes 3.0 is not an integer above the largest label (2)"),
}


@pytest.mark.parametrize("command", ["train", "partition"])
@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_file_is_one_line_exit_2_nothing_written(tmp_path, capsys, monkeypatch, case,
                                                       command):
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    over, said = BAD[case]
    g = toy_graph()
    path = save(tmp_path / "g.pt", arrays(g, **over(g)))
    args = ["train", "--epochs", 1, "--out", tmp_path / "run"] if command == "train" else \
        ["partition", "--parts", 2]
    rc, err = here([*args, "--dataset", f"file:{path}"], capsys)
    assert rc == 2 and len(err) == 1 and err[0].startswith(f"error: file:{path}: {said}"), (rc, err)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["g.pt"]  # nothing written


@pytest.mark.parametrize("content,said", [
    (None, "no such file"),
    (b"not a graph", "cannot read it as a torch_geometric Data, a dict of tensors or an .npz"),
    ([1, 2, 3], "holds a list, not a torch_geometric Data or a dict of tensors")])
def test_a_missing_or_unreadable_file(tmp_path, capsys, monkeypatch, content, said):
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    path = tmp_path / "g.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        torch.save(content, path)
    rc, err = here(["train", "--dataset", f"file:{path}", "--out", tmp_path / "run"], capsys)
    assert rc == 2 and len(err) == 1 and err[0].startswith(f"error: file:{path}") and said in err[0]
    assert sorted(p.name for p in tmp_path.rglob("*")) == (["g.pt"] if content else [])


def test_the_datasets_command_says_how_to_bring_a_graph_and_a_partition(tmp_path, capsys):
    from digest.cli import main
    capsys.readouterr()
    assert main(["datasets", "--data-root", str(tmp_path)]) == 0
    last = capsys.readouterr().out.splitlines()[-2:]
    assert last[0].startswith("file:PATH ") and "torch_geometric Data saved with torch.save" in \
        last[0] and "split=random" in last[0]
    assert last[1].startswith("--partition-file ") and "METIS's output" in last[1]
    assert "--write DIR" in last[1]


def test_a_spec_without_a_path_or_with_a_bad_rule(capsys):
    assert here(["partition", "--parts", 2, "--dataset", "file:"], capsys) == (
        2, ["error: 'file:' names no file; write file:PATH, e.g. file:graph.pt"])
    rc, err = here(["partition", "--parts", 2, "--dataset", "file:g.pt,split=degree"], capsys)
    assert rc == 2 and len(err) == 1 and "bad value 'split=degree'" in err[0]
    assert "valid keys: split, train, val" in err[0]


def test_a_file_too_large_for_this_machine_is_refused_with_the_estimate(tmp_path, capsys,
                                                                         monkeypatch):
    import psutil
    path = save(tmp_path / "g.pt", arrays(toy_graph()))
    monkeypatch.setattr(psutil, "virtual_memory", lambda: type("M", (), {"available": 100})())
    rc, err = here(["partition", "--parts", 2, "--dataset", f"file:{path}"], capsys)
    assert (rc, err) == (1, [f"error: file:{path} needs about 2.5 KiB of memory, this machine has "
                             "100 B available"])
