"""Partition cache: round trip, keys, corruption detection and rebuild, atomic writes, locking."""
import json
import threading

import pytest
import torch

import digest.data.cache as cache
from digest.data.cache import (CacheError, cache_key, cache_root, load_book, load_manifest, load_part,
                          prepare_partition, save_parts, validate)
from digest.data.local_graph import LocalPart, extract_part
from digest.data.partition import build_book, partition
from helpers import PART_OF, UNDIRECTED, toy_graph


def same(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.is_sparse == b.is_sparse and a.dtype == b.dtype
        return a.shape == b.shape and torch.equal(a.to_dense(), b.to_dense())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def assert_part_equal(p: LocalPart, q: LocalPart):
    for name in p.__dataclass_fields__:
        assert same(getattr(p, name), getattr(q, name)), name


@pytest.mark.parametrize("sparse", [False, True])
def test_save_load_round_trip(tmp_path, sparse):
    g = toy_graph(sparse=sparse)
    book = build_book(PART_OF, g.edge_index, 3)
    book.stats = {"edge_cut": 5, "method": "hand"}
    d = save_parts(g, book, tmp_path / "c", {"key": "k1"})
    assert sorted(p.name for p in d.iterdir()) == ["book.pt", "manifest.json", "part0.pt", "part1.pt", "part2.pt"]
    b2 = load_book(d)
    assert b2.num_parts == 3 and b2.stats == book.stats
    assert torch.equal(b2.part_of, PART_OF)
    assert same(b2.inner, book.inner) and same(b2.halo, book.halo) and same(b2.send, book.send)
    for m in range(3):
        q = load_part(d, m)
        assert_part_equal(q, extract_part(g, book, m))
        assert q.x.is_sparse == sparse
        # send lists are compact, not views dragging the whole halo storage along
        for t in q.send_idx:
            assert t.untyped_storage().nbytes() == t.numel() * 8
    man = load_manifest(d)
    assert man["key"] == "k1" and man["num_parts"] == 3
    assert man["graph"] == {"name": "toy", "nodes": 9, "edges": 24, "features": 5, "classes": 3,
                            "sparse_x": sparse, "meta": {"source": "hand", "opts": {"a": 1}}}
    assert sorted(man["files"]) == ["book.pt", "part0.pt", "part1.pt", "part2.pt"]
    assert validate(d, "k1") is None and validate(d, "other") is not None


def test_key_changes_with_each_field():
    base = dict(dataset_spec="Cora", dataset_options={}, parts=4, method="metis", seed=0, sparse="auto")
    variants = [dict(dataset_spec="CiteSeer"), dict(dataset_options={"nodes": "10"}), dict(parts=8),
                dict(method="random"), dict(seed=1), dict(sparse=True), dict(sparse=False),
                dict(dataset_seed=1)]
    keys = {cache_key(**base)} | {cache_key(**{**base, **v}) for v in variants}
    assert len(keys) == len(variants) + 1
    key = cache_key(**base)
    assert len(key) == 16 and int(key, 16) >= 0  # 16 hex digits: a folder name
    # the options' order is not part of the key (a dict literal's order is the caller's)
    assert cache_key(**{**base, "dataset_options": {"a": 1, "b": 2}}) == \
        cache_key(**{**base, "dataset_options": {"b": 2, "a": 1}})
    assert cache_key(**base) == cache_key(**base, dataset_seed=0)  # one seed for both by default
    old = cache.FORMAT_VERSION
    try:
        cache.FORMAT_VERSION = old + 1
        assert cache_key(**base) not in keys
    finally:
        cache.FORMAT_VERSION = old


def test_option_order_does_not_change_dir(tmp_path):
    g = toy_graph()
    a = prepare_partition("toy:b=2,a=1", 3, "random", root=tmp_path, graph=g)
    b = prepare_partition("toy:a=1, b=2", 3, "random", root=tmp_path, graph=g)
    c = prepare_partition("toy:a=1,b=3", 3, "random", root=tmp_path, graph=g)
    assert a == b != c


def test_cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "env"))
    assert cache_root(tmp_path / "r") == tmp_path / "r" / ".partitions"
    assert cache_root() == tmp_path / "env" / ".partitions"
    monkeypatch.delenv("DIGEST_DATA")
    assert cache_root().parts[-2:] == ("data", ".partitions")


def test_prepare_builds_once_then_reuses(tmp_path, capsys):
    g = toy_graph()
    d = prepare_partition("toy", 3, "random", seed=0, root=tmp_path, graph=g)
    assert d.parent == tmp_path / ".partitions" and d.name.startswith("toy-random3-")
    assert "building partition cache" in capsys.readouterr().err
    mtimes = {p.name: p.stat().st_mtime_ns for p in d.iterdir()}
    assert prepare_partition("toy", 3, "random", seed=0, root=tmp_path, graph=g) == d
    assert capsys.readouterr().err == ""
    assert {p.name: p.stat().st_mtime_ns for p in d.iterdir()} == mtimes
    book = partition(g, 3, "random", 0)
    assert torch.equal(load_book(d).part_of, book.part_of)
    assert_part_equal(load_part(d, 2), extract_part(g, book, 2))
    assert load_manifest(d)["stats"]["edge_cut"] == book.stats["edge_cut"]


def test_flipped_byte_detected_and_rebuilt(tmp_path, capsys):
    g = toy_graph()
    d = prepare_partition("toy", 3, "metis", root=tmp_path, graph=g)
    good = load_part(d, 1)
    path = d / "part1.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CacheError, match="part1.pt checksum mismatch"):
        load_part(d, 1)
    load_part(d, 0)  # the other parts are still fine
    capsys.readouterr()
    assert prepare_partition("toy", 3, "metis", root=tmp_path, graph=g) == d
    err = capsys.readouterr().err
    assert err.startswith("rebuilding partition cache:") and "part1.pt checksum mismatch" in err
    assert err.count("\n") == 1
    assert_part_equal(load_part(d, 1), good)


def test_missing_manifest_or_file_means_rebuild(tmp_path, capsys):
    g = toy_graph()
    d = prepare_partition("toy", 3, "random", root=tmp_path, graph=g)
    (d / "manifest.json").unlink()
    with pytest.raises(CacheError, match="cannot read manifest.json"):
        load_part(d, 0)
    capsys.readouterr()
    prepare_partition("toy", 3, "random", root=tmp_path, graph=g)
    assert "rebuilding partition cache:" in capsys.readouterr().err
    assert validate(d) is None
    (d / "part2.pt").unlink()
    with pytest.raises(CacheError, match="cannot read part2.pt"):
        load_part(d, 2)
    prepare_partition("toy", 3, "random", root=tmp_path, graph=g)
    assert "rebuilding partition cache:" in capsys.readouterr().err
    assert validate(d) is None


def test_stale_manifest_and_other_graph_rebuilt(tmp_path, capsys):
    g = toy_graph()
    d = prepare_partition("toy", 3, "random", root=tmp_path, graph=g)
    man = json.loads((d / "manifest.json").read_text())
    (d / "manifest.json").write_text(json.dumps({**man, "format": 0}))
    capsys.readouterr()
    prepare_partition("toy", 3, "random", root=tmp_path, graph=g)
    assert "is not format" in capsys.readouterr().err
    # same spec, different graph (fewer edges): the summary check catches it
    g2 = toy_graph(edges=UNDIRECTED[:-1])
    prepare_partition("toy", 3, "random", root=tmp_path, graph=g2)
    assert "graph edges 24 != 22" in capsys.readouterr().err
    assert load_manifest(d)["graph"]["edges"] == 22


def test_atomic_write_leaves_no_temp_files(tmp_path):
    g = toy_graph()
    d = prepare_partition("toy", 3, "random", root=tmp_path, graph=g)
    assert not list(d.glob(".*")) and not list(d.glob("*.tmp"))

    def boom(f):
        f.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        cache._atomic_write(d / "part0.pt", boom)
    assert not list(d.glob(".*"))
    assert validate(d) is None  # the old file is untouched
    (d / ".part0.pt.crashed.tmp").write_bytes(b"junk")  # a writer killed mid-way
    save_parts(g, partition(g, 3, "random"), d, {"key": "x"})
    assert not list(d.glob(".*"))


def test_concurrent_prepare_builds_once(tmp_path, monkeypatch):
    g = toy_graph()
    calls = []
    real = cache.partition

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(cache, "partition", counting)
    out = []
    threads = [threading.Thread(target=lambda: out.append(
        prepare_partition("toy", 3, "metis", root=tmp_path, graph=g))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(set(out)) == 1 and len(out) == 4
    assert validate(out[0]) is None


def test_prepare_with_load_dataset(tmp_path, capsys):
    data = pytest.importorskip("digest.data")
    spec = "synthetic:nodes=300,avg_degree=4,features=8"
    d = prepare_partition(spec, 2, "metis", seed=1, root=tmp_path)
    assert d.name.startswith("synthetic-metis2-")
    # spelling and option order do not matter; the partition seed does
    assert prepare_partition("Synthetic:features=8, avg_degree=4,nodes=300", 2, "metis", seed=1,
                             root=tmp_path) == d
    assert capsys.readouterr().err.count("building partition cache") == 1
    g = data.load_dataset(spec, tmp_path, seed=1)
    book = partition(g, 2, "metis", 1)
    assert torch.equal(load_book(d).part_of, book.part_of)
    assert_part_equal(load_part(d, 1), extract_part(g, book, 1))
    assert load_manifest(d)["graph"]["nodes"] == 300
    with pytest.raises(data.DatasetError):
        prepare_partition("nosuchdataset", 2, root=tmp_path)
