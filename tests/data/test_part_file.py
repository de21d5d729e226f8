"""Partitions in open formats (digest/data/part_file.py): an assignment read from METIS's output,
.npy or .pt gives the book ``build_book`` gives; ``partition --write`` writes what it reads back;
every bad assignment is one line, exit 2, nothing written."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from digest.data.part_file import read_assignment, partition_from_file, write_assignment
from digest.data.partition import build_book, partition_stats
from helpers import PART_OF, here, toy_graph


def write(path, part_of):
    """``part_of`` (a list or tensor) in the format the suffix names."""
    if path.suffix == ".npy":
        np.save(path, np.asarray(part_of))
    elif path.suffix == ".pt":
        torch.save(torch.as_tensor(part_of), path)
    else:
        path.write_text("".join(f"{p}\n" for p in list(part_of)))
    return path


@pytest.mark.parametrize("name", ["graph.part.3", "parts.txt", "parts.npy", "parts.pt"])
def test_every_format_reads_as_the_assignment(tmp_path, name):
    part_of = read_assignment(write(tmp_path / name, PART_OF.tolist()))
    assert part_of.dtype == torch.int64 and torch.equal(part_of, PART_OF)


def test_write_then_read_is_the_same_assignment(tmp_path):
    text, array = write_assignment(PART_OF, tmp_path / "out")
    assert (text.name, array.name) == ("part_of.txt", "part_of.npy")
    assert text.read_text() == "0\n1\n0\n2\n1\n0\n2\n1\n2\n"  # METIS's format: one id a line
    assert torch.equal(read_assignment(text), PART_OF)
    assert torch.equal(read_assignment(array), PART_OF)
    assert np.load(array).dtype == np.int64


def test_the_book_is_build_books_and_says_where_it_came_from(tmp_path):
    g = toy_graph()
    path = write(tmp_path / "p.txt", PART_OF.tolist())
    book, want = partition_from_file(g, path, 3), build_book(PART_OF, g.edge_index, 3)
    assert torch.equal(book.part_of, want.part_of)
    for m in range(3):
        assert torch.equal(book.inner[m], want.inner[m]) and torch.equal(book.halo[m], want.halo[m])
        assert all(torch.equal(a, b) for a, b in zip(book.send[m], want.send[m]))
    source = ("method", "file", "sha256", "seconds")
    stats = {k: v for k, v in book.stats.items() if k not in source}
    assert stats == partition_stats(want, g.edge_index) and stats["edge_cut"] == 5
    assert book.stats["method"] == "file" and book.stats["file"] == str(path.resolve())
    assert book.stats["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


BAD = [  # (file name, content, the line after "--partition-file PATH: ")
    ("p.txt", PART_OF.tolist()[:8], "8 part ids, the graph has 9 nodes"),
    ("p.txt", [0, 1, 0, 3, 1, 0, 2, 1, 2], "part id 3 (node 3) is outside 0..2 ({flag} 3)"),
    ("p.npy", [0, 1, 0, 2, 1, -1, 2, 1, 2], "part id -1 (node 5) is outside 0..2 ({flag} 3)"),
    ("p.pt", [0, 1, 0, 1, 1, 0, 1, 1, 0], "1 of the 3 parts ({flag} 3) have no node: part 2"),
    ("p.txt", [0, 2, 0, 2, 2, 0, 2, 2, 0], "1 of the 3 parts ({flag} 3) have no node: part 1"),
    ("p.txt", ["0", "1", "0", "x", "1", "0", "2", "1", "2"],
     "line 4 ('x') is not one part id (METIS format: one part id a line)"),
    ("p.txt", ["0 1", "0", "2", "1", "0", "2", "1", "2"], "line 1 ('0 1') is not one part id"),
    ("p.npy", np.asarray(PART_OF.tolist(), dtype=float),
     "need a 1-D integer array of part ids, got torch.float64 [9]"),
    ("p.pt", PART_OF.view(9, 1), "need a 1-D integer array of part ids, got torch.int64 [9, 1]"),
    ("p.npy", None, "cannot read it"),
    ("p.txt", "missing", "no such file"),
]


@pytest.mark.parametrize("command", ["train", "partition"])
@pytest.mark.parametrize("name,content,said", BAD)
def test_a_bad_partition_file_is_one_line_exit_2_nothing_written(tmp_path, capsys, monkeypatch,
                                                                 name, content, said, command):
    from torch_geometric.data import Data
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    g = toy_graph()
    graph = tmp_path / "g.pt"
    torch.save(Data(x=g.x, edge_index=g.edge_index, y=g.y, train_mask=g.train_mask,
                    val_mask=g.val_mask, test_mask=g.test_mask), graph)
    path = tmp_path / name
    if content is None:
        path.write_bytes(b"\x93NUMPY garbage")
    elif not isinstance(content, str):
        write(path, content)
    args = ["train", "--workers", 3, "--epochs", 1, "--out", tmp_path / "run"] \
        if command == "train" else ["partition", "--parts", 3]
    rc, err = here([*args, "--dataset", f"file:{graph}", "--partition-file", path], capsys)
    flag = "--workers" if command == "train" else "--parts"
    assert rc == 2 and len(err) == 1, (rc, err)
    assert err[0].startswith(f"error: --partition-file {path}: {said.format(flag=flag)}"), err
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(
        {"g.pt", name} - ({name} if isinstance(content, str) else set()))
