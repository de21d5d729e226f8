"""A graph the user saved, named ``--dataset file:PATH`` (the file's formats and checks:
``graph_file.py``). Without masks, or in place of them, a split rule in the spec draws them as the
synthetic generator does (``file:PATH,split=random,train=0.6,val=0.2``; ``split=popularity``: by
degree). Its edges are made symmetric and deduplicated as every graph's.

Everything is checked before anything is written. The file's path and sha256 go into the graph's
meta (every run's summary.json keeps them under ``dataset``) and into the partition cache key; a
complete run whose graph or partition file changed since is another run (``files_changed``)."""
from __future__ import annotations

from pathlib import Path

import torch

from .graph import Graph, canonical_edges, degree
from .graph_file import MASKS, check_arrays, file_sha256, read_arrays, widen
from .synthetic import popularity_split, random_split

RULE = ('split', 'train', 'val')  # the spec's options that make a split rule
# What ``python -m digest datasets`` says about the user's own graph and partition.
FILE_ROWS = [('file:PATH', 'your graph: a torch_geometric Data saved with torch.save, or an .npz '
              '(x, edge_index, y, train/val/test masks); without masks add a split rule: '
              'file:PATH,split=random[,train=0.6,val=0.2] or split=popularity (docs/datasets.md)'),
             ('--partition-file', "your partition (train, partition): METIS's output (one part id "
              "a line), .npy or .pt (1-D integers); `partition ... --write DIR` writes the "
              "suite's")]


def check_file(opts: dict) -> dict:
    """Read and check the file of ``file:PATH`` (``opts`` from ``parse_spec``); its arrays."""
    arrays = widen(read_arrays(Path(opts['path'])))
    check_arrays(arrays, f"file:{opts['path']}", {k: v for k, v in opts.items() if k in RULE})
    return arrays


def load_graph_file(spec: str, opts: dict, seed: int) -> Graph:
    """The graph of ``file:PATH`` (``opts`` from ``parse_spec``: ``path`` and the split rule),
    checked, its edges symmetrised and deduplicated as every graph's.

    Args:
        spec: the dataset spec (the graph's name). opts: ``parse_spec``'s options.
        seed: the seed of ``split=random``.
    Shapes: x ``[N, F]`` float32 (dense or sparse COO, as saved), y ``[N]`` int64, edge_index
    ``[2, E]`` int64 (both directions), masks ``[N]`` bool."""
    path, rule = Path(opts['path']), {k: v for k, v in opts.items() if k in RULE}
    a = check_file(opts)
    x = a['x'].coalesce().float() if a['x'].is_sparse else a['x'].to(torch.float32, copy=True)
    y = a['y'].reshape(-1).to(torch.int64, copy=True)  # copies: nothing stays mapped to the file
    n = y.numel()
    ei = canonical_edges(a['edge_index'], n)
    if rule:
        train, val = rule.get('train', 0.6), rule.get('val', 0.2)
        fractions = '/'.join(f'{100 * f:.4g}%' for f in (train, val, 1 - train - val))
        if rule.get('split') == 'popularity':
            masks = popularity_split(degree(ei, n), train, val)
            how = f'popularity {fractions} (by degree, most connected first)'
        else:
            masks, how = random_split(n, seed, train, val), f'random {fractions} (seed={seed})'
    else:
        masks, how = [a[m].reshape(-1).to(torch.bool, copy=True) for m in MASKS], "the file's masks"
    k = a.get('num_classes')
    where = path.resolve()
    meta = {'source': f'file: {where}', 'file': str(where), 'sha256': file_sha256(path),
            'split': how, 'options': rule}
    return Graph(str(spec).strip(), x, y, ei, *masks, int(k) if k is not None else int(y.max()) + 1,
                 meta)


def files_changed(summary: dict) -> list[str]:
    """The user's files a run recorded (graph and partition: ``file`` and ``sha256`` in its
    summary's ``dataset.meta`` and ``partition``) whose content differs now, one phrase each."""
    out = []
    for what, rec in (('graph', (summary.get('dataset') or {}).get('meta')),
                      ('partition', summary.get('partition'))):
        if isinstance(rec, dict) and rec.get('file') and rec.get('sha256'):
            now = file_sha256(rec['file']) if Path(rec['file']).is_file() else 'missing'
            if now != rec['sha256']:
                out.append(f"the {what} file {rec['file']} changed (sha256 {rec['sha256'][:12]} "
                           f"-> {now[:12]})")
    return out
