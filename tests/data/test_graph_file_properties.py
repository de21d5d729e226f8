"""Property-based tests of the user's graph and partition files (digest/data/graph_file.py,
user_graph.py, part_file.py, integrity.check_request): arrays of random shapes, dtypes and values
(NaN, inf, huge, negative), keys missing and extra, in ``.npz`` and ``.pt`` (a dict or a PyG
``Data``), with and without a split rule. Every file is either refused by the checks a command
makes first, in one line and with nothing written, or loaded into a graph on which a run means
something (features, classes within the nodes, non-empty train / val / test sets) and trains;
never another exception. The examples are bounded and derandomised (the fast tier's time, the same
examples every run); hypothesis shrinks a failure to its smallest file."""
from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import digest
from digest.data import DatasetError, check_request, load_dataset, validate
from digest.data.part_file import check_assignment, read_assignment
from digest.data.partition import PartitionError
from digest.errors import UsageError

MASKS = ("train_mask", "val_mask", "test_mask")
DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int32, np.int8, np.uint8, np.uint16,
          np.uint64, np.bool_, np.complex64]
FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64) | st.sampled_from(
    [0.0, 1.0, -1.0, 1e300, -1e300, 3.5e38, 1e-300])
INTS = st.integers(-3, 12) | st.sampled_from([10 ** 9, 2 ** 40, -2 ** 40, 2 ** 62])
SETTINGS = settings(max_examples=120, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def array(draw, shape):
    """An array of ``shape`` in any of ``DTYPES``, its values (NaN, inf, huge, tiny, negative)
    kept within the dtype's range."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    if dtype.kind in "fc":  # finite values beyond the dtype become 0 (numpy would warn: inf)
        top = float(np.finfo(dtype).max)
        elements = FLOATS.map(lambda v: v if not np.isfinite(v) or abs(v) < top else 0.0)
    elif dtype.kind == "b":
        elements = st.booleans()
    else:
        info = np.iinfo(dtype)
        elements = INTS.map(lambda v: int(min(max(v, info.min), info.max)))
    return draw(arrays(dtype, shape, elements=elements))


@st.composite
def graph_file(draw):
    """(the arrays a file holds, a split rule or "", the format): a graph a run could use, then
    none to three mutations of it (a dtype, a shape, special values, a key dropped or added, a
    mask emptied or overlapping, a ``num_classes``), so that both the accepted files and every
    check are reached."""
    n, f, c = draw(st.integers(3, 8)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    order = np.random.default_rng(draw(st.integers(0, 99))).permutation(n)
    a = {"x": draw(arrays(np.float32, (n, f), elements=st.floats(-1, 1, width=32))),
         "edge_index": draw(arrays(np.int64, (2, draw(st.integers(0, 10))),
                                   elements=st.integers(0, n - 1))),
         "y": draw(arrays(np.int64, (n,), elements=st.integers(0, c - 1)))}
    for i, m in enumerate(MASKS):  # disjoint, none empty: one node each, the rest to train
        a[m] = np.isin(np.arange(n), order[i:i + 1] if i else order[[0, *range(3, n)]])
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from([*a, "num_classes", "edge_attr"]))
        how = draw(st.sampled_from(["dtype", "shape", "values", "drop", "empty", "overlap"]))
        if key in ("num_classes", "edge_attr"):
            a[key] = draw(st.sampled_from([3, 10 ** 9, 0, True]) | array(()) | array((2,)))
        elif how == "drop":
            del a[key]
        elif how == "dtype":
            a[key] = a[key].astype(draw(st.sampled_from(DTYPES)))
        elif how == "shape":
            shape = draw(st.sampled_from([(n + 1,), (max(0, n - 1),), (n, 0), (n, 2), (0, f), (2, 1),
                                          (), (n, f, 1)]))
            a[key] = draw(array(shape))
        elif how == "values":
            a[key] = draw(array(np.shape(a[key])))
        elif key in MASKS:
            a[key] = np.zeros(n, bool) if how == "empty" else np.ones(n, bool)
    rule = draw(st.sampled_from(["", "", "", ",split=random", ",split=popularity,train=0.5",
                                 ",split=random,train=0.9,val=0.1", ",train=0.34,val=0.33"]))
    return a, rule, draw(st.sampled_from([".npz", ".pt", ".pt-data"]))


def _save(a: dict, path: Path, how: str) -> Path:
    if how == ".npz":
        np.savez(path.with_suffix(".npz"), **{k: np.asarray(v) for k, v in a.items()})
        return path.with_suffix(".npz")
    t = {k: v if isinstance(v, int) else torch.from_numpy(np.asarray(v)) for k, v in a.items()}
    path = path.with_suffix(".pt")
    if how == ".pt-data":
        from torch_geometric.data import Data
        t = Data(**t)
    torch.save(t, path)
    return path


def _files(root: Path) -> set:
    return {p.relative_to(root) for p in root.rglob("*")}


def _one_line(e: BaseException) -> None:
    text = str(e)
    assert text and "\n" not in text and "Traceback" not in text, repr(text)


@SETTINGS
@given(graph_file())
def test_a_graph_file_is_refused_in_one_line_or_trains(case):
    a, rule, how = case
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = _save(a, root / "g", how)
        spec = f"file:{path}{rule}"
        before = _files(root)
        try:  # what `python -m digest train` checks first, with its model
            check_request(spec, 1, "--workers", None, (4, 2))
            g = load_dataset(spec, root=root / "data")
        except (UsageError, DatasetError) as e:
            _one_line(e)
            assert _files(root) == before, "a refused file wrote something"
            event("refused: " + str(e).split(": ", 1)[-1][:30])
            return
        event("loaded and trained")
        validate(g)
        assert g.num_features >= 1 and 1 <= g.num_classes <= g.num_nodes
        assert int(g.y.max()) < g.num_classes
        assert all(int(m.sum()) > 0 for m in (g.train_mask, g.val_mask, g.test_mask))
        assert torch.isfinite(g.x.coalesce().values() if g.x.is_sparse else g.x).all()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            summary = digest.train(dataset=spec, workers=1, epochs=2, hidden=4, layers=2,
                                   out=str(root / "run"), data_root=str(root / "data"))
        assert summary["epochs"] == 2 and 0 <= summary["best_val"] <= 1


@st.composite
def partition_file(draw):
    """(file contents, suffix, nodes, parts)."""
    nodes, parts = draw(st.integers(1, 8)), draw(st.integers(1, 4))
    suffix = draw(st.sampled_from([".npy", ".pt", ".txt", ".part"]))
    shape = draw(st.sampled_from([(nodes,), (nodes,), (nodes + 1,), (nodes, 1), ()]))
    if suffix in (".npy", ".pt"):
        return draw(array(shape)), suffix, nodes, parts
    lines = draw(st.lists(st.one_of(INTS.map(str), st.sampled_from(["", " 1", "x", "1.5", "0 1"])),
                          max_size=nodes + 1))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n\n"])), suffix, nodes, parts


@SETTINGS
@given(partition_file())
def test_a_partition_file_is_refused_in_one_line_or_gives_every_node_a_part(case):
    content, suffix, nodes, parts = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"p{suffix}"
        if suffix == ".npy":
            np.save(path, content)
        elif suffix == ".pt":
            torch.save(torch.from_numpy(np.asarray(content)), path)
        else:
            path.write_text(content)
        try:
            part_of = read_assignment(path)
            check_assignment(part_of, nodes, parts, str(path), "--workers")
        except PartitionError as e:
            _one_line(e)
            event("refused")
            return
        event("accepted")
        assert part_of.dtype == torch.int64 and part_of.shape == (nodes,)
        assert sorted(set(part_of.tolist())) == list(range(parts))


@pytest.mark.parametrize("what", ["graph", "partition"])
def test_a_directory_is_named_as_one(tmp_path, what):
    spec = f"file:{tmp_path}" if what == "graph" else "synthetic:nodes=50"
    with pytest.raises((UsageError, DatasetError, PartitionError), match="is a directory"):
        check_request(spec, 2, "--workers", None if what == "graph" else str(tmp_path))
