"""Partitions in open formats: one made elsewhere (``--partition-file PATH``), and the suite's own
written out for other tools and for a repeated run (``python -m digest partition ... --write DIR``).

A node-to-part assignment is read from METIS's output format (``gpmetis``'s ``graph.part.M``: one
part id a line, node i on line i + 1), a 1-D integer array (``.npy``) or a 1-D integer tensor
saved with ``torch.save`` (``.pt``). It must give every node a part, use exactly the run's parts
and leave none empty; the book, halos and edge cut are then computed from it as from METIS's."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..files import write_atomic, write_text_atomic
from .graph import Graph
from .graph_file import file_sha256
from .partition import PartitionBook, PartitionError, build_book, partition_stats

TEXT, ARRAY = 'part_of.txt', 'part_of.npy'  # what ``--write DIR`` writes


def read_assignment(path) -> Tensor:
    """The part id of every node. Shape ``[N]``, int64. ``PartitionError`` (one line) for a file
    that is missing, unreadable or not a 1-D integer sequence."""
    p, name = Path(path), f'--partition-file {path}'
    if p.is_dir():
        raise PartitionError(f'{name} is a directory, not a partition file')
    if not p.is_file():
        raise PartitionError(f'{name}: no such file')
    try:
        if p.suffix == '.npy':
            part_of = torch.from_numpy(np.load(p, allow_pickle=False))
        elif p.suffix == '.pt':
            part_of = torch.load(p, map_location='cpu', weights_only=True)
        else:
            part_of = torch.from_numpy(_text(p.read_text(), name))
    except PartitionError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the reader says, the file is not an assignment
        raise PartitionError(f'{name}: cannot read it ({type(e).__name__}: '
                             f'{(str(e).splitlines() or [""])[0][:120]})') from None
    if not torch.is_tensor(part_of) or part_of.dim() != 1 or part_of.is_floating_point() \
            or part_of.is_complex() or part_of.dtype == torch.bool:
        what = f'{part_of.dtype} {list(part_of.shape)}' if torch.is_tensor(part_of) else \
            type(part_of).__name__
        raise PartitionError(f'{name}: need a 1-D integer array of part ids, got {what}')
    return part_of.to(torch.int64)


def _text(text: str, name: str) -> np.ndarray:
    """METIS's output: one integer a line (blank lines after the last are ignored)."""
    lines = text.rstrip('\n').split('\n') if text.strip() else []
    try:
        return np.array(lines, dtype=np.int64)
    except ValueError:
        for i, line in enumerate(lines):
            try:
                int(line)
            except ValueError:
                raise PartitionError(f'{name}: line {i + 1} ({line[:40]!r}) is not one part id '
                                     '(METIS format: one part id a line)') from None
        raise


def check_assignment(part_of: Tensor, nodes: int, parts: int, name: str, flag: str) -> None:
    """``PartitionError`` (one line) unless ``part_of`` gives each of the ``nodes`` nodes a part in
    ``0..parts-1`` and every part a node. ``flag`` names the part count (``--workers``)."""
    if part_of.numel() != nodes:
        raise PartitionError(f'--partition-file {name}: {part_of.numel()} part ids, the graph has '
                             f'{nodes} nodes')
    lo, hi = int(part_of.min()), int(part_of.max())
    if lo < 0 or hi >= parts:
        bad = lo if lo < 0 else hi
        node = int((part_of == bad).nonzero()[0])
        raise PartitionError(f'--partition-file {name}: part id {bad} (node {node}) is outside '
                             f'0..{parts - 1} ({flag} {parts})')
    empty = (torch.bincount(part_of, minlength=parts) == 0).nonzero().view(-1).tolist()
    if empty:
        raise PartitionError(f'--partition-file {name}: {len(empty)} of the {parts} parts ({flag} '
                             f'{parts}) have no node: part {", ".join(map(str, empty[:5]))}')


def partition_from_file(graph: Graph, path, num_parts: int) -> PartitionBook:
    """The book of the assignment in ``path``, with the statistics METIS's gets; ``stats`` records
    where it came from (``method`` 'file', ``file``, ``sha256``)."""
    t0 = time.perf_counter()
    part_of = read_assignment(path)
    check_assignment(part_of, graph.num_nodes, num_parts, str(path), '--workers')
    book = build_book(part_of, graph.edge_index, num_parts)
    book.stats = partition_stats(book, graph.edge_index)
    book.stats.update(method='file', file=str(Path(path).resolve()), sha256=file_sha256(path),
                      seconds=round(time.perf_counter() - t0, 3))
    return book


def write_assignment(part_of: Tensor, directory) -> list[Path]:
    """``DIR/part_of.txt`` (METIS's format) and ``DIR/part_of.npy`` (int64), written atomically."""
    d = Path(directory)
    try:
        text = write_text_atomic(d / TEXT, ''.join(f'{p}\n' for p in part_of.tolist()))
        array = write_atomic(d / ARRAY, lambda f: np.save(f, part_of.numpy().astype(np.int64)))
    except OSError as e:
        raise PartitionError(f'--write {directory}: cannot write there '
                             f'({e.strerror or type(e).__name__})') from None
    return [text, array]
