"""Integrity checks of a dataset: ``validate`` (dtypes, shapes, finite features, ids in range of a
loaded ``Graph``), ``suspect_file`` (which raw file fails an integrity read when a load fails), the
memory check made before anything is generated or loaded (``memory_estimate``, ``check_memory``),
and ``check_request``: all of that for a command's dataset and part count, a user's graph and
partition files included, before anything is written."""
from __future__ import annotations

import gzip
import json
import pickle
import zipfile
from pathlib import Path

import numpy as np
import torch

from ..errors import UsageError
from .graph import Graph
from .graph_file import file_classes, file_sizes
from .part_file import check_assignment, read_assignment
from .registry import SIZES, DatasetError, DatasetInfo, parse_spec
from .user_graph import check_file


def dataset_size(info: DatasetInfo, opts: dict) -> tuple:
    """(nodes, directed edges, features) of a parsed spec: the generator's options, the registry's
    ``SIZES``, or a user file's array shapes (read without loading it)."""
    if info.kind == 'synthetic':
        nodes = opts.get('nodes', 3000)
        return nodes, nodes * opts.get('avg_degree', 10.0), opts.get('features', 64)
    return file_sizes(opts['path']) if info.kind == 'file' else SIZES[info.name]


def dataset_classes(info: DatasetInfo, opts: dict) -> int | None:
    """The classes of a parsed spec (a file's: read from its labels alone; None when they are not
    integer labels, which ``check_file`` then names)."""
    if info.kind == 'synthetic':
        return opts.get('classes', 8)  # make_synthetic's default
    return file_classes(opts['path']) if info.kind == 'file' else info.classes


def memory_estimate(spec: str, model: tuple[int, int] | None = None,
                    classes: int | None = None) -> int:
    """Bytes a load of ``spec`` needs at its peak, roughly: dense float32 features, labels and
    masks, plus 16 bytes per directed edge (two int64 ids) times 3 for the copies made while the
    edges are symmetrised, deduplicated and partitioned. With ``model`` = (hidden width, layers),
    also the training's tensors: every layer's output over all nodes (the last one C wide, C the
    classes the labels imply), each 3 times (the output, its gradient and what autograd keeps),
    and the weights 4 times (themselves, their gradients, Adam's two moments); ``classes``: C
    when the caller read it already. Raises DatasetError on a bad spec."""
    info, opts = parse_spec(spec)
    nodes, edges, feats = dataset_size(info, opts)
    need = int(nodes * (feats * 4 + 8 + 3) + edges * 16 * 3)
    if model is None:
        return need
    hidden, layers = model
    classes = classes or dataset_classes(info, opts) or 1
    widths = [feats, *[hidden] * (layers - 1), classes]
    weights = sum(a * b + b for a, b in zip(widths, widths[1:]))
    return need + int(nodes * sum(widths[1:]) * 4 * 3 + weights * 4 * 4)


def _human(n: float) -> str:
    for unit in ('B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'):
        if n < 1024 or unit == 'EiB':
            return f'{n:.1f} {unit}' if n < 10 else f'{n:.0f} {unit}'
        n /= 1024


def check_memory(spec: str, model: tuple[int, int] | None = None,
                 classes: int | None = None) -> None:
    """Refuse (DatasetError, one line with the estimate) a dataset this machine cannot hold (with
    ``model``: a run of that model on it), before generating or loading anything."""
    import psutil
    need, have = memory_estimate(spec, model, classes), psutil.virtual_memory().available
    if need > have:
        what = f'{str(spec).strip()}' + ('' if model is None else
                                         f' (hidden {model[0]}, {model[1]} layers)')
        raise DatasetError(f'{what} needs about {_human(need)} of memory, this machine '
                           f'has {_human(have)} available')


def check_request(spec: str, parts: int | None = None, flag: str = '--parts',
                  partition_file: str | None = None, model: tuple[int, int] | None = None) -> None:
    """A dataset name or option the registry rejects, more parts than nodes, a bad graph file or
    a bad partition file is a usage error (2); a dataset this machine cannot hold (a run of
    ``model`` = (hidden, layers) on it, when given) is refused with the memory estimate (1):
    before anything is generated, read whole or written."""
    try:
        info, opts = parse_spec(spec)
    except DatasetError as e:
        raise UsageError(str(e)) from None
    nodes = dataset_size(info, opts)[0]
    if parts is not None and not 1 <= parts <= nodes:
        raise UsageError(f'{flag} must be between 1 and the number of nodes ({nodes}), got {parts}')
    classes = dataset_classes(info, opts) if model is not None or info.kind == 'file' else None
    if info.kind == 'file' and (classes or 0) > nodes:
        check_file(opts)  # the labels alone, before the memory estimate they would blow up
    check_memory(spec, model, classes)
    if info.kind == 'file':  # read whole once here: a bad file is refused before a cache exists
        check_file(opts)
    if partition_file is not None:
        check_assignment(read_assignment(partition_file), nodes, parts, partition_file, flag)


def suspect_file(where: Path, info: DatasetInfo) -> str:
    """Name the first raw file of ``info`` under ``where`` that fails an integrity read (zip CRC,
    gzip stream, npy, json, pickle), or list them all when each reads."""
    for f in info.files:
        p = where / f
        try:
            if p.stat().st_size == 0:
                return f
            if p.suffix == '.npz':
                with zipfile.ZipFile(p) as z:
                    if z.testzip() is not None:
                        return f
            elif p.suffix == '.gz':
                with gzip.open(p) as g:
                    while g.read(1 << 24):
                        pass
            elif p.suffix == '.npy':
                np.load(p, mmap_mode='r')
            elif p.suffix == '.json':
                json.loads(p.read_text())
            elif info.kind == 'planetoid' and p.suffix != '.index':  # what PyG unpickles
                pickle.loads(p.read_bytes(), encoding='latin1')
        except Exception:  # noqa: BLE001 - any failure to read means this file is bad
            return f
    return f'one of {", ".join(info.files)}'


def validate(graph: Graph) -> Graph:
    """Reject non-float32 / NaN / inf features, out-of-range labels or edges, bad masks
    (``DatasetError``, one line); returns ``graph`` unchanged.

    Shapes: x ``[N, F]`` float32 (dense or sparse COO), y ``[N]`` int64 in ``[0, C)``,
    edge_index ``[2, E]`` int64 in ``[0, N)``, train/val/test masks ``[N]`` bool."""
    n, x, y, ei, name = graph.num_nodes, graph.x, graph.y, graph.edge_index, graph.name
    if x.dim() != 2 or x.size(0) != n or x.dtype != torch.float32:
        raise DatasetError(f'{name}: features must be float32 [N={n}, F], got {x.dtype} '
                           f'{list(x.shape)}')
    if not torch.isfinite(x.coalesce().values() if x.is_sparse else x).all():
        raise DatasetError(f'{name}: features contain NaN or inf')
    if y.dim() != 1 or y.dtype != torch.int64 or (
            n and (int(y.min()) < 0 or int(y.max()) >= graph.num_classes)):
        raise DatasetError(f'{name}: labels must be int64 [N] in [0, {graph.num_classes})')
    if ei.dim() != 2 or ei.size(0) != 2 or ei.dtype != torch.int64 or (
            ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= n)):
        raise DatasetError(f'{name}: edge_index must be int64 [2, E] with ids in [0, {n})')
    if any(m.dtype != torch.bool or m.shape != (n,)
           for m in (graph.train_mask, graph.val_mask, graph.test_mask)):
        raise DatasetError(f'{name}: masks must be bool [N={n}]')
    return graph
