"""The dataset registry: every dataset ``load_dataset`` knows (name, kind, the raw files its PyG /
OGB class needs, where to fetch them), the options of ``synthetic:key=value,...``, their parsing
(``parse_spec``), the sizes used to estimate memory before a load (``SIZES``), the data root and
the shared read-only mirror, and what is available locally (``list_datasets``). ``file:PATH``
names a graph the user saved (``digest/data/user_graph.py``); it is not listed, as it is no
dataset of the suite's."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .presets import PRESETS, resolve
from .synthetic import SPLITS

# Read-only mirror of raw files (PyG folder layout), next to the repository: <repo>/../shared.
SHARED_DATASETS = Path(__file__).resolve().parents[3] / 'shared' / 'datasets'


class DatasetError(ValueError):
    """A dataset cannot be provided; the message is one line saying what to do."""


@dataclass(frozen=True)
class DatasetInfo:
    name: str      # canonical spelling
    kind: str      # synthetic | planetoid | amazon | coauthor | pyg | ogb
    folder: str    # folder under the data root that holds the files ('' for synthetic)
    files: tuple   # files the PyG / ogb class needs, relative to folder
    classes: int   # number of classes (0: from the generator options)
    url: str       # where to fetch them (taken from the PyG / ogb sources)
    how: str = 'download {url} into {where}/raw'


def _planetoid(name, classes):
    files = tuple(f'raw/ind.{name.lower()}.{s}'
                  for s in ('x', 'tx', 'allx', 'y', 'ty', 'ally', 'graph', 'test.index'))
    return DatasetInfo(name, 'planetoid', name, files, classes,
                       'https://github.com/kimiyoung/planetoid/raw/master/data',
                       'download each file as {url}/<name> into {where}/raw')


def _npz(name, kind, file, classes):
    return DatasetInfo(name, kind, name, (f'raw/{file}',), classes,
                       f'https://github.com/shchur/gnn-benchmark/raw/master/data/npz/{file}')


def _ogb(name, short, split, classes, extra=(), binary=False):
    raw = ('data.npz', 'node-label.npz') if binary else tuple(f'{f}.csv.gz' for f in (
        'edge', 'num-node-list', 'num-edge-list', 'node-feat', 'node-label') + extra)
    files = ('RELEASE_v1.txt', *(f'raw/{f}' for f in raw),
             *(f'split/{split}/{s}.csv.gz' for s in ('train', 'valid', 'test')))
    return DatasetInfo(name, 'ogb', name.replace('-', '_'), files, classes,
                       f'http://snap.stanford.edu/ogb/data/nodeproppred/{short}.zip',
                       f"download {{url}}, unzip it and rename the folder '{short}' to {{where}}")


_FLICKR = {'adj_full.npz': '1crmsTbd1-2sEXsGwa2IKnIB7Zd3TmUsy', 'feats.npy':
           '1join-XdvX3anJU_MLVtick7MgeAQiWIZ', 'class_map.json':
           '1uxIkbtg5drHTsKt-PAsZZ4_yJmgFmle9', 'role.json': '1htXCtuktuCW8TR8KiKfrFDAxUgekQoV7'}
REGISTRY = {i.name.lower(): i for i in [
    DatasetInfo('synthetic', 'synthetic', '', (), 0, '', ''),
    _planetoid('Cora', 7), _planetoid('CiteSeer', 6),
    _npz('Photo', 'amazon', 'amazon_electronics_photo.npz', 8),
    _npz('Computers', 'amazon', 'amazon_electronics_computers.npz', 10),
    _npz('CS', 'coauthor', 'ms_academic_cs.npz', 15),
    _npz('Physics', 'coauthor', 'ms_academic_phy.npz', 5),
    DatasetInfo('Flickr', 'pyg', 'Flickr', tuple(f'raw/{f}' for f in _FLICKR), 7, ' '.join(
        f'https://drive.usercontent.google.com/download?confirm=t&id={i} ({f})'
        for f, i in _FLICKR.items()), 'download the 4 files {url} into {where}/raw'),
    DatasetInfo('Reddit', 'pyg', 'Reddit', ('raw/reddit_data.npz', 'raw/reddit_graph.npz'), 41,
                'https://data.dgl.ai/dataset/reddit.zip',
                'download {url}, unzip it into {where}/raw'),
    _ogb('ogbn-arxiv', 'arxiv', 'time', 40, extra=('node_year',)),
    _ogb('ogbn-products', 'products', 'sales_ranking', 47),
    _ogb('ogbn-papers100M', 'papers100M-bin', 'time', 172, binary=True)]}

# Options of 'synthetic:key=value,...': type, validity check, what the check means.
SYNTHETIC_KEYS = {
    'nodes': (int, lambda v: v >= 2, 'an int >= 2'),
    'classes': (int, lambda v: v >= 1, 'an int >= 1'),
    'features': (int, lambda v: v >= 1, 'an int >= 1'),
    'seed': (int, lambda v: v >= 0, 'an int >= 0'),
    'avg_degree': (float, lambda v: v > 0, 'a number > 0'),
    'homophily': (float, lambda v: 0 <= v <= 1, 'a number in [0, 1]'),
    'signal': (float, lambda v: v >= 0, 'a number >= 0'),
    'degree_exp': (float, lambda v: v > 1, 'a number > 1'),
    'communities': (int, lambda v: v >= 1, 'an int >= 1'),
    'locality': (float, lambda v: 0 <= v <= 1, 'a number in [0, 1]'),
    'aligned': (float, lambda v: 0 <= v <= 1, 'a number in [0, 1]'),
    'train': (float, lambda v: 0 < v < 1, 'a number in (0, 1)'),
    'val': (float, lambda v: 0 <= v < 1, 'a number in [0, 1)'),
    'split': (str, lambda v: v in SPLITS, ' or '.join(SPLITS)),
    'preset': (str, lambda v: v in PRESETS, 'one of ' + ', '.join(PRESETS))}

# 'file:PATH[,key=value,...]': a graph the user saved; its options are the split rule used when the
# file has no masks (or in place of them), checked as the generator's are.
FILE = DatasetInfo('file', 'file', '', (), 0, '')
FILE_KEYS = {k: SYNTHETIC_KEYS[k] for k in ('split', 'train', 'val')}


# (nodes, directed edges after symmetrisation, features) of the registered datasets: enough to
# estimate the memory a load needs BEFORE trying it (see ``check_memory``).
SIZES = {'Cora': (2708, 10556, 1433), 'CiteSeer': (3327, 9104, 3703),
         'Photo': (7650, 238162, 745), 'Computers': (13752, 491722, 767),
         'CS': (18333, 163788, 6805), 'Physics': (34493, 495924, 8415),
         'Flickr': (89250, 899756, 500), 'Reddit': (232965, 114615892, 602),
         'ogbn-arxiv': (169343, 2315598, 128), 'ogbn-products': (2449029, 123718280, 100),
         'ogbn-papers100M': (111059956, 3231371744, 128)}


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The writable data root: ``root``, else ``$DIGEST_DATA``, else ``./data``."""
    return Path(root or os.environ.get('DIGEST_DATA') or 'data').expanduser()


def parse_spec(spec: str) -> tuple[DatasetInfo, dict]:
    """``'synthetic:nodes=2000,homophily=0.7'`` -> (registry entry, typed options).

    Synthetic options are the generator's keyword arguments, resolved: ``synthetic`` alone is
    ``synthetic:preset=default``; ``preset=NAME`` puts that preset's options under the explicit
    keys (``synthetic:preset=arxiv-like,nodes=20000``); explicit keys without a preset stand on
    ``make_synthetic``'s defaults, as before presets existed (``presets.resolve``).
    ``'file:g.pt,split=random'`` -> (``FILE``, ``{'path': 'g.pt', 'split': 'random'}``): the path
    runs to the first comma."""
    name, _, opts = str(spec).strip().partition(':')
    path = None
    if name.strip().lower() == 'file':
        info, (path, _, opts) = FILE, opts.partition(',')
        if not path.strip():
            raise DatasetError(f'{spec!r} names no file; write file:PATH, e.g. file:graph.pt')
    else:
        info = REGISTRY.get(name.strip().lower().replace('_', '-'))
    if info is None:
        raise DatasetError(f'unknown dataset {name.strip()!r}; known: '
                           + ', '.join(i.name for i in REGISTRY.values()) + ', file:PATH')
    keys = {'synthetic': SYNTHETIC_KEYS, 'file': FILE_KEYS}.get(info.kind, {})
    valid = 'valid keys: ' + (', '.join(keys) or f'none ({info.name} takes no options)')
    out = {}
    for item in filter(None, (s.strip() for s in opts.split(','))):
        key, eq, text = (s.strip() for s in item.partition('='))
        if key not in keys or not eq or key in out:
            raise DatasetError(f'bad option {item!r} in {spec!r}; {valid}')
        kind, ok, want = keys[key]
        if kind is str:
            if not ok(text):
                raise DatasetError(f'bad value {item!r} in {spec!r}: {key} must be {want}; {valid}')
            out[key] = text
            continue
        try:
            num = float(text)
            value = kind(num) if np.isfinite(num) and (kind is float or num.is_integer()) else None
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise DatasetError(f'bad value {item!r} in {spec!r}: {key} must be {want}; {valid}')
        out[key] = value
    if info.kind == 'synthetic':
        out = resolve(out or {'preset': 'default'})
    if path is not None:
        out = {'path': path.strip(), **out}
    n = out.get('nodes', 3000)
    if out.get('classes', 1) > n or out.get('avg_degree', 0) > n - 1 or \
            out.get('train', 0.6) + out.get('val', 0.2) > 1:
        raise DatasetError(f'bad options in {spec!r}: need classes <= nodes, '
                           f'avg_degree <= nodes - 1 and train + val <= 1; {valid}')
    return info, out


def missing_files(info: DatasetInfo, base: Path) -> list[str]:
    return [f for f in info.files if not (base / info.folder / f).is_file()]


def list_datasets(root: str | os.PathLike | None = None) -> list[dict]:
    """Every registered dataset: name, kind, available, where (folder for its files), url; after
    ``synthetic`` (its default preset), one row per other preset, ``where`` giving its size."""
    r = data_root(root)
    rows = [dict(name=i.name, kind=i.kind, url=i.url,
                 where=str(r / i.folder) if i.folder else '(generated) ' + _size(PRESETS['default']),
                 available=i.kind == 'synthetic' or not missing_files(i, r)
                 or not missing_files(i, SHARED_DATASETS)) for i in REGISTRY.values()]
    presets = [dict(name=f'synthetic:preset={k}', kind='synthetic', url='', available=True,
                    where=f'(generated) {_size(p)}; {p.about}')
               for k, p in PRESETS.items() if k != 'default']
    return rows[:1] + presets + rows[1:]


def _size(p) -> str:
    return (f'{p.nodes:,} nodes, {p.edges:,} directed edges, {p.features} features, '
            f'{p.classes} classes, edge homophily {p.homophily:.2f}')
