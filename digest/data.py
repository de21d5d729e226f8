"""Dataset loading: ``load_dataset(spec) -> Graph`` (METHODS.md 1) and the dataset registry.

Real datasets go through their PyG / OGB classes, strictly offline: raw files are checked BEFORE a
class is built (so no download is ever attempted); missing ones are copied from the shared
read-only mirror when it has them, else a one-line ``DatasetError`` says which files go where and
where to fetch them on a connected machine.
"""
from __future__ import annotations

import contextlib, gzip, io, json, os, pickle, shutil, warnings, zipfile  # noqa: E401
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .graph import Graph, canonical_edges
from .synthetic import make_synthetic, random_split

# Read-only mirror of raw files (PyG folder layout), next to the repository: <repo>/../shared.
SHARED_DATASETS = Path(__file__).resolve().parents[2] / 'shared' / 'datasets'
SPARSE_BELOW = 0.05  # 'auto' keeps features as sparse COO below this density


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
    'locality': (float, lambda v: 0 <= v <= 1, 'a number in [0, 1]')}


# (nodes, directed edges after symmetrisation, features) of the registered datasets: enough to
# estimate the memory a load needs BEFORE trying it (see ``check_memory``).
SIZES = {'Cora': (2708, 10556, 1433), 'CiteSeer': (3327, 9104, 3703),
         'Photo': (7650, 238162, 745), 'Computers': (13752, 491722, 767),
         'CS': (18333, 163788, 6805), 'Physics': (34493, 495924, 8415),
         'Flickr': (89250, 899756, 500), 'Reddit': (232965, 114615892, 602),
         'ogbn-arxiv': (169343, 2315598, 128), 'ogbn-products': (2449029, 123718280, 100),
         'ogbn-papers100M': (111059956, 3231371744, 128)}


def memory_estimate(spec: str) -> int:
    """Bytes a load of ``spec`` needs at its peak, roughly: dense float32 features, labels and
    masks, plus 16 bytes per directed edge (two int64 ids) times 3 for the copies made while the
    edges are symmetrised, deduplicated and partitioned. Raises DatasetError on a bad spec."""
    info, opts = parse_spec(spec)
    if info.kind == 'synthetic':
        nodes = opts.get('nodes', 3000)
        edges, feats = nodes * opts.get('avg_degree', 10.0), opts.get('features', 64)
    else:
        nodes, edges, feats = SIZES[info.name]
    return int(nodes * (feats * 4 + 8 + 3) + edges * 16 * 3)


def _human(n: float) -> str:
    for unit in ('B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'):
        if n < 1024 or unit == 'PiB':
            return f'{n:.1f} {unit}' if n < 10 else f'{n:.0f} {unit}'
        n /= 1024


def check_memory(spec: str) -> None:
    """Refuse (DatasetError, one line with the estimate) a dataset this machine cannot hold, before
    generating or loading anything."""
    import psutil
    need, have = memory_estimate(spec), psutil.virtual_memory().available
    if need > have:
        raise DatasetError(f'{str(spec).strip()} needs about {_human(need)} of memory, this machine '
                           f'has {_human(have)} available')


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The writable data root: ``root``, else ``$DIGEST_DATA``, else ``./data``."""
    return Path(root or os.environ.get('DIGEST_DATA') or 'data').expanduser()


def parse_spec(spec: str) -> tuple[DatasetInfo, dict]:
    """``'synthetic:nodes=2000,homophily=0.7'`` -> (registry entry, typed options)."""
    name, _, opts = str(spec).strip().partition(':')
    info = REGISTRY.get(name.strip().lower().replace('_', '-'))
    if info is None:
        raise DatasetError(f'unknown dataset {name.strip()!r}; known: '
                           + ', '.join(i.name for i in REGISTRY.values()))
    keys = SYNTHETIC_KEYS if info.kind == 'synthetic' else {}
    valid = 'valid keys: ' + (', '.join(keys) or f'none ({info.name} takes no options)')
    out = {}
    for item in filter(None, (s.strip() for s in opts.split(','))):
        key, eq, text = (s.strip() for s in item.partition('='))
        if key not in keys or not eq or key in out:
            raise DatasetError(f'bad option {item!r} in {spec!r}; {valid}')
        kind, ok, want = keys[key]
        try:
            num = float(text)
            value = kind(num) if np.isfinite(num) and (kind is float or num.is_integer()) else None
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise DatasetError(f'bad value {item!r} in {spec!r}: {key} must be {want}; {valid}')
        out[key] = value
    n = out.get('nodes', 3000)
    if out.get('classes', 1) > n or out.get('avg_degree', 0) > n - 1:
        raise DatasetError(f'bad options in {spec!r}: need classes <= nodes and '
                           f'avg_degree <= nodes - 1; {valid}')
    return info, out


def _missing(info: DatasetInfo, base: Path) -> list[str]:
    return [f for f in info.files if not (base / info.folder / f).is_file()]


def list_datasets(root: str | os.PathLike | None = None) -> list[dict]:
    """Every registered dataset: name, kind, available, where (folder for its files), url."""
    r = data_root(root)
    return [dict(name=i.name, kind=i.kind, url=i.url,
                 where=str(r / i.folder) if i.folder else '(generated)',
                 available=i.kind == 'synthetic' or not _missing(i, r)
                 or not _missing(i, SHARED_DATASETS)) for i in REGISTRY.values()]


def _ensure_files(info: DatasetInfo, root: Path) -> Path:
    """Make the raw files present under ``root/folder`` (copying the shared mirror if needed)."""
    where, missing = root / info.folder, _missing(info, root)
    if missing and not _missing(info, SHARED_DATASETS):
        try:
            shutil.copytree(SHARED_DATASETS / info.folder, where, dirs_exist_ok=True,
                            copy_function=shutil.copyfile)
            for d in [where, *where.rglob('*')]:  # copytree copies the read-only dir modes
                if d.is_dir():
                    d.chmod(d.stat().st_mode | 0o700)
        except OSError as e:
            raise DatasetError(f'{info.name}: cannot copy {SHARED_DATASETS / info.folder} '
                               f'to {where}: {e}') from None
        missing = _missing(info, root)
    if missing:
        raise DatasetError(f'{info.name}: missing {", ".join(missing)} in {where} (no network '
                           'here); on a connected machine '
                           + info.how.format(url=info.url, where=where))
    return where


def _compact(data):
    """PyG pre_transform: save low-density features as sparse COO in processed/ (CS / Physics
    would otherwise be written dense: 0.5 GB / 1.2 GB of mostly zeros)."""
    x = data.x
    if x is not None and not x.is_sparse and x.numel() and (
            torch.count_nonzero(x).item() / x.numel() < SPARSE_BELOW):
        data.x = x.to_sparse_coo().coalesce()
    return data


def _build(info: DatasetInfo, root: Path):
    """Construct the PyG / OGB dataset: (data, [train, val, test] masks or None, split)."""
    import torch_geometric.datasets as D
    if info.kind == 'ogb':
        from ogb.nodeproppred import PygNodePropPredDataset
        from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
        from torch_geometric.data.storage import GlobalStorage
        # ogb calls torch.load without weights_only, i.e. weights_only=True since torch 2.6,
        # which refuses PyG's own storage classes unless they are allow-listed.
        with torch.serialization.safe_globals([DataEdgeAttr, DataTensorAttr, GlobalStorage]):
            ds = PygNodePropPredDataset(name=info.name, root=str(root))
            idx, data = ds.get_idx_split(), ds[0]
        masks = [torch.zeros(data.num_nodes, dtype=torch.bool).index_fill_(0, idx[k], True)
                 for k in ('train', 'valid', 'test')]
        return data, masks, f"ogb official ({ds.meta_info['split']})"
    if info.kind in ('amazon', 'coauthor'):  # no official split: the caller draws one
        return getattr(D, info.kind.capitalize())(str(root), info.name,
                                                  pre_transform=_compact)[0], None, None
    if info.kind == 'planetoid':
        data = D.Planetoid(str(root), info.name, split='public', pre_transform=_compact)[0]
        split = 'planetoid public (20 per class / 500 val / 1000 test)'
    else:  # Flickr, Reddit: their root is the dataset folder itself
        data = getattr(D, info.name)(str(root / info.folder), pre_transform=_compact)[0]
        split = f'official ({info.name} train/val/test masks)'
    return data, [data.train_mask, data.val_mask, data.test_mask], split


def _suspect(where: Path, info: DatasetInfo) -> str:
    """Name the first raw file that fails an integrity read (zip CRC, gzip stream, npy, ...)."""
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


def _load_real(info: DatasetInfo, root: Path):
    where = _ensure_files(info, root)
    for attempt in range(2):
        had_processed = (where / 'processed').exists()
        try:  # PyG / ogb print progress and warn about pre_transform changes: keep them quiet
            with contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter('ignore')
                return _build(info, root)
        except (KeyboardInterrupt, MemoryError, DatasetError):
            raise
        except Exception as e:  # noqa: BLE001 - any processing failure = unreadable files
            shutil.rmtree(where / 'processed', ignore_errors=True)  # never keep a half-written one
            if had_processed and attempt == 0:
                continue  # a stale or corrupt processed/ cache: rebuild once from the raw files
            msg = (str(e).splitlines() or [''])[0][:160]
            raise DatasetError(f'{info.name}: {_suspect(where, info)} in {where} looks corrupt or '
                               f'truncated ({type(e).__name__}: {msg}); fetch it again from '
                               f'{info.url}') from None


def normalize_rows(x: torch.Tensor) -> torch.Tensor:
    """Each row divided by its L1 norm, at least 1 (``--normalize-features``): for non-negative
    features (bag-of-words) PyG's ``NormalizeFeatures`` (which first subtracts the global minimum,
    0 there). Row by row, so a worker normalises its own inner and halo rows exactly as the whole
    graph would be. Dense or sparse COO ``[N, F]`` float32 in, the same layout out.

    Why: raw bag-of-words rows of Amazon Photo have L1 norms near 259, so Adam's first step (about
    lr on every weight, in the gradient's sign) moves each first-layer output by about
    lr x 259 = 2.6 at lr 0.01; the logits jump (train loss 2.1 -> 35 after one step for a
    3-layer 256-wide SAGE) and most first-layer ReLUs die (README, Choices)."""
    if x.is_sparse:
        x = x.coalesce()
        idx, v = x.indices(), x.values()
        norm = torch.zeros(x.size(0), dtype=v.dtype).index_add_(0, idx[0], v.abs())
        return torch.sparse_coo_tensor(idx, v / norm.clamp(min=1)[idx[0]], x.shape).coalesce()
    return x / x.abs().sum(1, keepdim=True).clamp(min=1)


def validate(graph: Graph) -> Graph:
    """Reject non-float32 / NaN / inf features, out-of-range labels or edges, bad masks."""
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


def load_dataset(spec: str, root: str | os.PathLike | None = None, seed: int = 0,
                 sparse: str = 'auto') -> Graph:
    """Load ``spec`` (e.g. ``'Cora'``, ``'ogbn-arxiv'``, ``'synthetic:nodes=2000,homophily=0.7'``).

    Args:
        spec: dataset name (case-insensitive), optionally ``:key=value,...`` (synthetic only).
        root: writable data root (see ``data_root``).
        seed: seed of the random 60/20/20 split (Amazon, Coauthor) and of the generator.
        sparse: 'auto' (sparse COO below 5% feature density), 'always' or 'never'.

    Shapes: x ``[N, F]`` float32 (dense or coalesced sparse COO), y ``[N]`` int64,
    edge_index ``[2, E]`` int64 (both directions, deduplicated, no self-loops), masks ``[N]`` bool.
    """
    if sparse not in ('auto', 'always', 'never'):
        raise DatasetError(f"sparse must be 'auto', 'always' or 'never', got {sparse!r}")
    info, opts = parse_spec(spec)
    check_memory(spec)
    if info.kind == 'synthetic':
        g = make_synthetic(**{'seed': int(seed), **opts}, name=str(spec).strip())
        x, meta = g.x, g.meta
    else:
        r = data_root(root)
        try:
            r.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise DatasetError(f'data root {r} is not writable: {e}') from None
        data, masks, split = _load_real(info, r)
        n, y = int(data.num_nodes), data.y.view(-1)
        unlabeled = torch.isnan(y) if y.is_floating_point() else torch.zeros(n, dtype=torch.bool)
        y = torch.where(unlabeled, 0, y).long()  # papers100M: unlabeled nodes are in no split
        if masks is None:
            masks, split = random_split(n, seed), f'random 60%/20%/20% (seed={seed})'
        x = data.x.float()
        g = Graph(info.name, x, y, canonical_edges(data.edge_index, n),
                  *(m.bool().view(-1) for m in masks), info.classes)
        meta = {'source': f'{info.kind}: {info.name} from {r / info.folder}', 'split': split,
                'options': {}, 'unlabeled_nodes': int(unlabeled.sum())}
    x = x.coalesce() if x.is_sparse else x
    nnz = x._nnz() if x.is_sparse else int(torch.count_nonzero(x))
    density = nnz / max(1, x.size(0) * x.size(1))
    if sparse == 'always' or (sparse == 'auto' and density < SPARSE_BELOW):
        x = x if x.is_sparse else x.to_sparse_coo().coalesce()
    elif x.is_sparse:
        x = x.to_dense()
    g.x, g.meta = x, {**meta, 'density': density, 'sparse': sparse, 'seed': seed}
    return validate(g)
