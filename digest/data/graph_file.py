"""Reading and checking the file of a graph the user saved (``--dataset file:PATH``): a
``torch_geometric.data.Data`` (or a dict of tensors) saved with ``torch.save``, or an ``.npz`` with
the same arrays: ``x [N, F]``, ``edge_index [2, E]``, ``y [N]`` (or ``[N, 1]``), ``train_mask`` /
``val_mask`` / ``test_mask`` ``[N]`` and, optionally, ``num_classes``.

A ``.pt`` file is read with ``weights_only=True`` (PyG's ``Data`` classes allowed) and memory-mapped,
so its sizes come without a copy of it; an ``.npz``'s from its headers. A problem is one
``GraphFileError`` line naming it (exit status 2). Turning the arrays into a ``Graph``:
``user_graph.py``."""
from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import numpy as np
import torch

from ..errors import UsageError
from .registry import DatasetError
from .synthetic import split_sizes

MASKS = ('train_mask', 'val_mask', 'test_mask')
KEYS = ('x', 'edge_index', 'y', *MASKS, 'num_classes')
WHAT = {'x': 'node features', 'edge_index': 'edges', 'y': 'labels'}  # the arrays a file must hold


class GraphFileError(DatasetError, UsageError):
    """A user's graph file that is missing, unreadable or fails a check (exit status 2)."""


def file_sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1 << 22), b''):
            h.update(chunk)
    return h.hexdigest()


def read_arrays(path: Path, shapes_only: bool = False, keys: tuple = KEYS) -> dict:
    """The file's arrays by name (tensors; shape tuples with ``shapes_only``, read from an
    ``.npz``'s headers without its data); only ``keys`` (an ``.npz`` reads no other array)."""
    if path.is_dir():
        raise GraphFileError(f'file:{path} is a directory, not a graph file')
    if not path.is_file():
        raise GraphFileError(f'file:{path}: no such file')
    try:
        if path.suffix == '.npz':
            with zipfile.ZipFile(path) as z:
                if shapes_only:
                    return {n[:-4]: _npy_shape(z, n) for n in z.namelist() if n[:-4] in keys}
            with np.load(path, allow_pickle=False) as z:
                return {k: torch.from_numpy(z[k]) for k in z.files if k in keys}
        obj = _torch_load(path)
    except Exception as e:  # noqa: BLE001 - whatever the reader says, the file is not one of ours
        raise GraphFileError(f'file:{path}: cannot read it as a torch_geometric Data, a dict of '
                             f'tensors or an .npz ({type(e).__name__}: '
                             f'{(str(e).splitlines() or [""])[0][:120]})') from None
    if not isinstance(obj, dict):
        raise GraphFileError(f'file:{path} holds a {type(obj).__name__}, not a torch_geometric '
                             'Data or a dict of tensors')
    out = {k: v for k, v in obj.items() if k in keys and v is not None}
    if shapes_only:  # (a value that is no tensor: its type's name, for the message)
        return {k: tuple(v.shape) if torch.is_tensor(v) else type(v).__name__
                for k, v in out.items()}
    return out


def _npy_shape(z: zipfile.ZipFile, name: str) -> tuple:
    with z.open(name) as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        return tuple(read(f)[0])


def _torch_load(path: Path):
    from torch_geometric.data import Data
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage
    # weights_only: reading a file from elsewhere runs none of its code; PyG's classes are allowed.
    # Only those not allowed already: leaving the context removes what it was given, and PyG allows
    # Data process-wide (ogb's loader relies on that). mmap: the sizes (memory check) and the checks
    # read pages, not a copy of the file
    allowed = torch.serialization.get_safe_globals()
    extra = [c for c in (Data, DataEdgeAttr, DataTensorAttr, GlobalStorage) if c not in allowed]
    with torch.serialization.safe_globals(extra):
        try:
            obj = torch.load(path, map_location='cpu', weights_only=True, mmap=True)
        except RuntimeError:  # the legacy (pre-zip) format cannot be mapped
            obj = torch.load(path, map_location='cpu', weights_only=True)
    return obj.to_dict() if isinstance(obj, Data) else obj


def file_sizes(path) -> tuple[int, int, int]:
    """(nodes, directed edges after symmetrisation at most, features) of a graph file, for the
    memory check and the part count, read without loading the arrays."""
    shapes = read_arrays(Path(path), shapes_only=True)
    for key in ('x', 'edge_index'):
        if key not in shapes:
            raise GraphFileError(f'file:{path}: has no {WHAT[key]} ({key})')
        if isinstance(shapes[key], str):
            raise GraphFileError(f'file:{path}: {key} is a {shapes[key]}, not a tensor or an array')
        if len(shapes[key]) != 2:
            raise GraphFileError(f'file:{path}: {key} must be 2-D, got shape {list(shapes[key])}')
    return shapes['x'][0], 2 * shapes['edge_index'][1], shapes['x'][1]


# Integer dtypes a label, an edge id or a mask may have (numpy's uint16-uint64 arrive as torch's
# unsigned types, which lack the reductions the checks use: ``widen`` makes them int64 first)
INTEGERS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
FLOAT32_MAX = float(torch.finfo(torch.float32).max)


WIDE_UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)


def widen(a: dict) -> dict:
    """The arrays with numpy's wider unsigned integers (uint16-64) made int64 (features: float64,
    which holds a uint64 above 2^63), whose reductions torch lacks; the rest as they are."""
    return {k: v.to(torch.float64 if k == 'x' else torch.int64)
            if torch.is_tensor(v) and not v.is_sparse and v.dtype in WIDE_UNSIGNED else v
            for k, v in a.items()}


def classes_of(a: dict) -> int:
    """The classes a file's labels imply: its ``num_classes``, else the largest label + 1."""
    k = a.get('num_classes')
    return int(k) if k is not None else int(a['y'].max()) + 1


def file_classes(path) -> int | None:
    """The classes a graph file's labels imply (``classes_of``), reading its labels alone; None
    when they are missing or not integers (``check_arrays`` then names the problem)."""
    a = widen(read_arrays(Path(path), keys=('y', 'num_classes')))
    y, k = a.get('y'), a.get('num_classes')
    if not torch.is_tensor(y) or y.dtype not in INTEGERS or not y.numel() or (
            k is not None and not (torch.is_tensor(k) and k.numel() == 1 and k.dtype in INTEGERS
                                   or isinstance(k, int) and not isinstance(k, bool))):
        return None
    return classes_of(a)


def check_arrays(a: dict, name: str, rule: dict) -> None:
    """Refuse (``GraphFileError``, one line) what no graph or no meaningful run can be: missing
    features, edges or labels; mismatched shapes or unusable dtypes; no feature column; features
    that are NaN, inf or beyond float32; edge ids out of range; more classes than nodes; bad or
    overlapping masks (those only when no split ``rule``, the spec's ``split`` / ``train`` /
    ``val``, replaces them); an empty train, validation or test set, however it is made."""
    def bad(what):
        raise GraphFileError(f'{name}: {what}')
    for key, v in a.items():
        if key != 'num_classes' and not torch.is_tensor(v):
            bad(f'{key} is a {type(v).__name__}, not a tensor or an array')
    for key, what in WHAT.items():
        if a.get(key) is None:
            bad(f'has no {what} ({key})')
    x, ei, y = a['x'], a['edge_index'], a['y']
    if x.dim() != 2 or x.dtype == torch.bool or x.is_complex() or not (
            x.is_floating_point() or x.dtype in INTEGERS):
        bad(f'features (x) must be numbers [N, F], got {x.dtype} {list(x.shape)}')
    n = x.size(0)
    if n == 0:
        bad('the graph has no nodes (x has 0 rows)')
    if x.size(1) == 0:
        bad('the features (x) have 0 columns: a node needs at least one feature '
            '(for a graph without features, save a column of ones)')
    if y.reshape(-1).shape != (n,) or y.dim() > 2:
        bad(f'labels (y) have shape {list(y.shape)}, x has {n} rows: need y [N] or [N, 1]')
    if y.dtype not in INTEGERS:
        bad(f'labels (y) must be integers, got {y.dtype}')
    if int(y.min()) < 0:
        bad(f'labels (y) must be >= 0, found {int(y.min())}')
    if ei.dim() != 2 or ei.size(0) != 2 or ei.dtype not in INTEGERS:
        bad(f'edge_index must be integers [2, E], got {ei.dtype} {list(ei.shape)}')
    if ei.numel() and not 0 <= int(ei.min()) <= int(ei.max()) < n:
        out = int(ei.min()) if int(ei.min()) < 0 else int(ei.max())
        bad(f'edge_index holds node id {out}, outside 0..{n - 1} (x has {n} rows)')
    values = x.coalesce().values() if x.is_sparse else x
    if values.is_floating_point() and not torch.isfinite(values).all():
        bad('features (x) hold NaN or inf')
    if values.numel() and values.is_floating_point() and values.dtype.itemsize > 4 and \
            float(values.abs().max()) > FLOAT32_MAX:
        bad(f'features (x) hold {float(values.abs().max()):.3g}, beyond float32 '
            f'(|x| <= {FLOAT32_MAX:.3g}): scale them')
    k = a.get('num_classes')
    if k is not None and not ((isinstance(k, int) and not isinstance(k, bool) or torch.is_tensor(k)
                               and k.numel() == 1 and k.dtype in INTEGERS) and int(k) > int(y.max())):
        bad(f'num_classes {k.tolist() if torch.is_tensor(k) else k!r} is not an integer above '
            f'the largest label ({int(y.max())})')
    if classes_of(a) > n:
        said = f'num_classes {int(k)}' if k is not None else f'the largest label {int(y.max())}'
        bad(f'{said} implies {classes_of(a):,} classes, more than the {n:,} nodes: labels must '
            'be class ids 0..C-1')
    if rule:
        sizes = split_sizes(n, rule.get('train', 0.6), rule.get('val', 0.2))
        _nonempty(sizes, f"the split rule ({rule.get('train', 0.6):g} / {rule.get('val', 0.2):g} "
                  f"of {n} nodes)", bad)
        return
    given = [m for m in MASKS if a.get(m) is not None]
    if len(given) < 3:
        bad((f'has {", ".join(given)} but not ' if given else 'has no ') + ', '.join(
            m for m in MASKS if m not in given) + ': give all three masks or a split rule, '
            'e.g. --dataset file:PATH,split=random')
    for m in MASKS:
        if a[m].reshape(-1).shape != (n,) or a[m].dim() > 2:
            bad(f'{m} has shape {list(a[m].shape)}, x has {n} rows: need {m} [N]')
        if not (a[m].dtype == torch.bool or a[m].dtype in INTEGERS and
                0 <= int(a[m].min()) <= int(a[m].max()) <= 1):
            bad(f'{m} must be bool (or 0 / 1), got {a[m].dtype}')
    for i, first in enumerate(MASKS):
        for second in MASKS[i + 1:]:
            if both := int((a[first].reshape(-1).bool() & a[second].reshape(-1).bool()).sum()):
                bad(f'{first} and {second} overlap ({both} nodes are in both)')
    _nonempty([int(a[m].reshape(-1).bool().sum()) for m in MASKS], "the file's masks", bad)


def _nonempty(sizes, how: str, bad) -> None:
    """An empty train, validation or test set gives a run that means nothing (accuracy 0 of 0)."""
    empty = [s for s, c in zip(('train', 'validation', 'test'), sizes) if c == 0]
    if empty:
        bad(f"{how} leave{'s' if how.startswith('the split') else ''} the "
            f"{' and '.join([', '.join(empty[:-1]), empty[-1]] if len(empty) > 1 else empty)} "
            f"set{'s' if len(empty) > 1 else ''} empty "
            f"(train / val / test: {' / '.join(map(str, sizes))} nodes)")
