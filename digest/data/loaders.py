"""Dataset loaders: ``load_dataset(spec) -> Graph`` (docs/methods.md section 1) for the generated
synthetic graph and the real datasets.

Real datasets go through their PyG / OGB classes, strictly offline: raw files are checked BEFORE a
class is built (so no download is ever attempted); missing ones are copied from the shared
read-only mirror (``registry.SHARED_DATASETS``) when it has them, else a one-line ``DatasetError``
says which files go where and where to fetch them on a connected machine.
"""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import warnings
from pathlib import Path

import torch

from .graph import Graph, canonical_edges
from .synthetic import make_synthetic, random_split
from . import registry
from .integrity import suspect_file, check_memory, validate
from .registry import DatasetError, DatasetInfo, missing_files, data_root, parse_spec
from .user_graph import load_graph_file

SPARSE_BELOW = 0.05  # 'auto' keeps features as sparse COO below this density


def _ensure_files(info: DatasetInfo, root: Path) -> Path:
    """Make the raw files present under ``root/folder`` (copying the shared mirror if needed)."""
    where, missing = root / info.folder, missing_files(info, root)
    if missing and not missing_files(info, registry.SHARED_DATASETS):
        try:
            shutil.copytree(registry.SHARED_DATASETS / info.folder, where, dirs_exist_ok=True,
                            copy_function=shutil.copyfile)
            for d in [where, *where.rglob('*')]:  # copytree copies the read-only dir modes
                if d.is_dir():
                    d.chmod(d.stat().st_mode | 0o700)
        except OSError as e:
            raise DatasetError(f'{info.name}: cannot copy {registry.SHARED_DATASETS / info.folder} '
                               f'to {where}: {e}') from None
        missing = missing_files(info, root)
    if missing:
        raise DatasetError(f'{info.name}: missing {", ".join(missing)} in {where} (no network '
                           'here); on a connected machine '
                           + info.how.format(url=info.url, where=where))
    return where


def _compact(data):
    """PyG pre_transform: save low-density features as sparse COO in processed/ (CS / Physics
    would otherwise be written dense: 0.5 GB / 1.2 GB of mostly zeros).

    Shapes: ``data.x [N, F]`` dense in, dense or coalesced sparse COO ``[N, F]`` out."""
    x = data.x
    if x is not None and not x.is_sparse and x.numel() and (
            torch.count_nonzero(x).item() / x.numel() < SPARSE_BELOW):
        data.x = x.to_sparse_coo().coalesce()
    return data


def _build(info: DatasetInfo, root: Path):
    """Construct the PyG / OGB dataset: (data, [train, val, test] masks or None, split).

    Args:
        info: the registry entry (not synthetic). root: the data root holding ``info.folder``.
    Shapes: masks ``[N]`` (bool, or what the PyG class stores); None for Amazon / Coauthor,
    which have no official split."""
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
            raise DatasetError(f'{info.name}: {suspect_file(where, info)} in {where} looks corrupt or '
                               f'truncated ({type(e).__name__}: {msg}); fetch it again from '
                               f'{info.url}') from None


def load_dataset(spec: str, root: str | os.PathLike | None = None, seed: int = 0,
                 sparse: str = 'auto') -> Graph:
    """Load ``spec`` (e.g. ``'Cora'``, ``'ogbn-arxiv'``, ``'synthetic:nodes=2000,homophily=0.7'``).

    Args:
        spec: dataset name (case-insensitive), optionally ``:key=value,...`` (synthetic only), or
            ``file:PATH[,split=...]``: a graph the user saved (``user_graph.py``).
        root: writable data root (see ``data_root``).
        seed: seed of the random 60/20/20 split (Amazon, Coauthor, ``file:...,split=random``) and
            of the generator.
        sparse: 'auto' (sparse COO below 5% feature density), 'always' or 'never'.

    Shapes: x ``[N, F]`` float32 (dense or coalesced sparse COO), y ``[N]`` int64,
    edge_index ``[2, E]`` int64 (both directions, deduplicated, no self-loops), masks ``[N]`` bool.
    """
    if sparse not in ('auto', 'always', 'never'):
        raise DatasetError(f"sparse must be 'auto', 'always' or 'never', got {sparse!r}")
    info, opts = parse_spec(spec)
    check_memory(spec)
    if info.kind in ('synthetic', 'file'):
        g = make_synthetic(**{'seed': int(seed), **opts}, name=str(spec).strip()) \
            if info.kind == 'synthetic' else load_graph_file(spec, opts, seed)
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
        # the indices of a coalesced tensor, unchanged: no check, no second coalesce (and no
        # warning in every worker's log that the check is off)
        return torch.sparse_coo_tensor(idx, v / norm.clamp(min=1)[idx[0]], x.shape,
                                       check_invariants=False, is_coalesced=True)
    return x / x.abs().sum(1, keepdim=True).clamp(min=1)
