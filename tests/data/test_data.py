"""load_dataset: spec parsing, one-line errors, offline behaviour, real-data round trips."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import digest.data as data
import digest.data.registry as registry
from digest.data import (REGISTRY, DatasetError, data_root, list_datasets, load_dataset,
                         parse_spec, validate)
from digest.data.presets import PRESETS
from digest.data.graph import Graph

SHARED = registry.SHARED_DATASETS


def needs(name):
    return pytest.mark.skipif(not (SHARED / name).is_dir(),
                              reason=f'{SHARED / name} is absent (real-data test)')


@pytest.fixture
def no_shared(tmp_path, monkeypatch):
    """Hide the shared mirror, so that missing files stay missing."""
    monkeypatch.setattr(registry, 'SHARED_DATASETS', tmp_path / 'no-shared')
    return tmp_path / 'root'


@pytest.fixture(scope='module')
def real_root(tmp_path_factory):
    """One writable root per module: each real dataset is processed once."""
    return tmp_path_factory.mktemp('real_root')


def one_line_error(spec, **kw) -> str:
    with pytest.raises(DatasetError) as e:
        load_dataset(spec, **kw)
    msg = str(e.value)
    assert msg and '\n' not in msg
    return msg


# ---- spec parsing -----------------------------------------------------------------------------

def test_parse_spec_names_and_options():
    # ``synthetic`` alone is the default preset, resolved (tests/data/test_presets.py: presets)
    assert parse_spec('synthetic') == (REGISTRY['synthetic'], PRESETS['default'].options)
    info, opts = parse_spec(' SYNTHETIC: nodes=2000000, avg_degree=25 ,classes=47,features=100,'
                            'homophily=0.7,seed=3')
    assert info.name == 'synthetic'
    assert opts == dict(nodes=2_000_000, avg_degree=25.0, classes=47, features=100,
                        homophily=0.7, seed=3)
    assert isinstance(opts['nodes'], int) and isinstance(opts['avg_degree'], float)
    assert parse_spec('synthetic:nodes=2.4e6')[1]['nodes'] == 2_400_000
    assert parse_spec('synthetic:communities=64,locality=0.95')[1] == dict(communities=64,
                                                                           locality=0.95)
    assert parse_spec('synthetic:split=popularity')[1] == dict(split='popularity')
    for spec, name in [('cora', 'Cora'), ('CITESEER', 'CiteSeer'), ('ogbn_arxiv', 'ogbn-arxiv'),
                       ('OGBN-Papers100M', 'ogbn-papers100M'), ('physics', 'Physics')]:
        assert parse_spec(spec)[0].name == name


@pytest.mark.parametrize('spec', [
    'synthetic:foo=1', 'synthetic:nodes=abc', 'synthetic:nodes=1', 'synthetic:nodes=2.5',
    'synthetic:homophily=1.5', 'synthetic:homophily=-0.1', 'synthetic:nodes',
    'synthetic:nodes=10,nodes=20', 'synthetic:avg_degree=0', 'synthetic:nodes=10,classes=11',
    'synthetic:nodes=10,avg_degree=10', 'synthetic:seed=nan', 'synthetic:features=inf',
    'synthetic:seed=-1', 'synthetic:communities=0', 'synthetic:locality=1.2', 'Cora:split=random',
    'synthetic:preset=nope', 'synthetic:train=0', 'synthetic:train=0.7,val=0.5',
    'synthetic:split=degree'])
def test_bad_options_are_one_line_errors(spec):
    msg = one_line_error(spec)
    assert 'valid keys' in msg and spec.partition(':')[2].split(',')[0] in msg


def test_unknown_name_lists_known_ones():
    msg = one_line_error('cora2')
    assert 'cora2' in msg and 'Cora' in msg and 'ogbn-products' in msg and 'synthetic' in msg
    assert one_line_error('synthetic', sparse='maybe').startswith('sparse must be')


# ---- synthetic through the loader -------------------------------------------------------------

def test_synthetic_default_and_options():
    g = load_dataset('synthetic')
    d = PRESETS['default'].options
    assert (g.num_nodes, g.num_features, g.num_classes) == (d['nodes'], d['features'], d['classes'])
    c = load_dataset('synthetic:preset=classic')  # the default before presets
    assert (c.num_nodes, c.num_features, c.num_classes) == (3000, 64, 8)
    assert not g.x.is_sparse and g.meta['density'] > 0.999  # Gaussian features: (almost) no exact zeros
    assert g.meta['options']['seed'] == 0 and 'random' in g.meta['split']
    h = load_dataset('synthetic:nodes=500,classes=3,features=5,seed=4', seed=9, sparse='always')
    assert h.x.is_sparse and h.x.is_coalesced() and h.x.dtype == torch.float32
    assert (h.num_nodes, h.num_classes, h.num_features, h.meta['options']['seed']) == (500, 3, 5, 4)
    assert h.name == 'synthetic:nodes=500,classes=3,features=5,seed=4'
    assert not torch.equal(load_dataset('synthetic:nodes=500', seed=1).y,
                           load_dataset('synthetic:nodes=500', seed=2).y)


# ---- offline: missing files -------------------------------------------------------------------

def test_missing_ogb_files_name_folder_and_url(no_shared):
    msg = one_line_error('ogbn-arxiv', root=no_shared)
    assert str(no_shared / 'ogbn_arxiv') in msg and 'raw/edge.csv.gz' in msg
    assert 'http://snap.stanford.edu/ogb/data/nodeproppred/arxiv.zip' in msg
    assert not (no_shared / 'ogbn_arxiv').exists(), 'nothing downloaded or created'


def test_missing_flickr_and_cora_files(no_shared, monkeypatch):
    msg = one_line_error('Flickr', root=no_shared)
    assert str(no_shared / 'Flickr' / 'raw') in msg and 'adj_full.npz' in msg
    assert 'drive.usercontent.google.com' in msg
    monkeypatch.setenv('DIGEST_DATA', str(no_shared))  # root from the environment
    msg = one_line_error('Cora')
    assert str(no_shared / 'Cora') in msg and 'ind.cora.x' in msg and 'kimiyoung/planetoid' in msg


def test_urls_match_pyg_and_ogb_sources():
    import pandas as pd
    import ogb.nodeproppred
    from torch_geometric.datasets import Coauthor, Flickr, Planetoid, Reddit
    assert REGISTRY['cora'].url == Planetoid.url and REGISTRY['reddit'].url == Reddit.url
    assert REGISTRY['cs'].url.startswith(Coauthor.url) and Flickr.adj_full_id in REGISTRY[
        'flickr'].url
    master = pd.read_csv(Path(ogb.nodeproppred.__file__).parent / 'master.csv', index_col=0)
    for name in ('ogbn-arxiv', 'ogbn-products', 'ogbn-papers100M'):
        assert REGISTRY[name.lower()].url == master[name]['url']


def test_data_root_and_list_datasets(no_shared, monkeypatch):
    monkeypatch.delenv('DIGEST_DATA', raising=False)
    assert data_root() == Path('data') and data_root('/x') == Path('/x')
    monkeypatch.setenv('DIGEST_DATA', '/env')
    assert data_root() == Path('/env') and data_root('/x') == Path('/x')
    rows = {r['name']: r for r in list_datasets(no_shared)}
    assert set(rows) == {i.name for i in REGISTRY.values()} | {f'synthetic:preset={p}' for p in PRESETS
                                                             if p != 'default'}
    assert rows['synthetic']['available'] and not rows['Cora']['available']
    assert rows['ogbn-products']['where'] == str(no_shared / 'ogbn_products')
    assert {r['kind'] for r in rows.values()} == {'synthetic', 'planetoid', 'amazon', 'coauthor',
                                                 'ogb', 'pyg'}


@needs('Cora')
def test_list_datasets_sees_shared_mirror(tmp_path):
    rows = {r['name']: r for r in list_datasets(tmp_path)}
    assert rows['Cora']['available'] and not rows['ogbn-arxiv']['available']


def test_tiny_ogb_dataset_offline(tmp_path):
    """A hand-made ogbn-arxiv in ogb's folder layout goes through the real ogb class."""
    import pandas as pd
    d, rng, n = tmp_path / 'ogbn_arxiv', np.random.default_rng(0), 40
    for sub in ('raw', 'split/time'):
        (d / sub).mkdir(parents=True)
    (d / 'RELEASE_v1.txt').write_text('v1\n')
    files = {'raw/edge.csv.gz': rng.integers(0, n, (90, 2)), 'raw/num-node-list.csv.gz': [n],
             'raw/num-edge-list.csv.gz': [90], 'raw/node-feat.csv.gz': rng.random((n, 3)),
             'raw/node-label.csv.gz': rng.integers(0, 40, (n, 1)),
             'raw/node_year.csv.gz': rng.integers(2000, 2020, (n, 1)),
             'split/time/train.csv.gz': np.arange(20), 'split/time/valid.csv.gz':
             np.arange(20, 30), 'split/time/test.csv.gz': np.arange(30, 40)}
    for name, arr in files.items():
        pd.DataFrame(arr).to_csv(d / name, header=False, index=False, compression='gzip')
    g = load_dataset('ogbn-arxiv', root=tmp_path)
    assert (g.num_nodes, g.num_features, g.num_classes) == (n, 3, 40)
    assert g.y.shape == (n,) and g.y.dtype == torch.int64 and g.x.dtype == torch.float32
    assert (int(g.train_mask.sum()), int(g.val_mask.sum()), int(g.test_mask.sum())) == (20, 10, 10)
    assert g.meta['split'] == 'ogb official (time)'
    assert torch.equal(load_dataset('ogbn-arxiv', root=tmp_path).edge_index, g.edge_index)


# ---- real datasets (shared mirror, copied into a writable root) --------------------------------

@needs('Cora')
def test_cora_public_split(real_root):
    g = load_dataset('Cora', root=real_root)
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (2708, 10556, 1433, 7)
    assert [int(m.sum()) for m in (g.train_mask, g.val_mask, g.test_mask)] == [140, 500, 1000]
    assert g.x.is_sparse and g.x.is_coalesced() and g.meta['density'] < 0.05
    assert g.meta['split'].startswith('planetoid public') and 'Cora' in g.meta['source']
    assert (real_root / 'Cora' / 'processed').is_dir(), 'processed in the writable copy'
    dense = load_dataset('cora', root=real_root, sparse='never')  # from processed/ this time
    assert not dense.x.is_sparse and torch.equal(dense.x, g.x.to_dense())
    assert torch.equal(dense.edge_index, g.edge_index)


@needs('CiteSeer')
def test_citeseer(real_root):
    g = load_dataset('CiteSeer', root=real_root)
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (3327, 9104, 3703, 6)
    assert [int(m.sum()) for m in (g.train_mask, g.val_mask, g.test_mask)] == [120, 500, 1000]


@needs('Photo')
def test_photo_random_split(real_root):
    g = load_dataset('Photo', root=real_root, seed=1)
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (7650, 238162, 745, 8)
    assert not g.x.is_sparse and g.meta['density'] > 0.05
    assert g.meta['split'] == 'random 60%/20%/20% (seed=1)'
    assert int(g.train_mask.sum()) == 4590 and not bool((g.train_mask & g.test_mask).any())
    assert torch.equal(load_dataset('Photo', root=real_root, seed=1).train_mask, g.train_mask)
    assert not torch.equal(load_dataset('Photo', root=real_root, seed=2).train_mask, g.train_mask)


@needs('CS')
def test_cs_sparse_features(real_root):
    g = load_dataset('CS', root=real_root)
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (18333, 163788, 6805, 15)
    assert g.x.is_sparse and 0.005 < g.meta['density'] < 0.012


@pytest.mark.slow
@needs('Physics')
def test_physics(real_root):
    g = load_dataset('Physics', root=real_root)
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (34493, 495924, 8415, 5)
    assert g.x.is_sparse and g.meta['density'] < 0.01


# ---- corrupt files and validation -------------------------------------------------------------

@needs('Photo')
def test_truncated_npz_is_a_dataset_error(tmp_path, monkeypatch):
    raw = tmp_path / 'Photo' / 'raw'
    raw.mkdir(parents=True)
    src = SHARED / 'Photo' / 'raw' / 'amazon_electronics_photo.npz'
    (raw / src.name).write_bytes(src.read_bytes()[: src.stat().st_size // 2])
    msg = one_line_error('Photo', root=tmp_path)
    assert 'amazon_electronics_photo.npz' in msg and 'corrupt' in msg
    assert not (tmp_path / 'Photo' / 'processed').exists(), 'half-written processed/ removed'


@needs('Cora')
def test_corrupt_processed_cache_is_rebuilt(tmp_path):
    g = load_dataset('Cora', root=tmp_path)
    for f in (tmp_path / 'Cora' / 'processed').iterdir():
        f.write_bytes(b'garbage')
    assert torch.equal(load_dataset('Cora', root=tmp_path).edge_index, g.edge_index)


def _graph(x, y=None, classes=3):
    n = x.size(0)
    y = torch.zeros(n, dtype=torch.long) if y is None else y
    m = torch.ones(n, dtype=torch.bool)
    return Graph('t', x, y, torch.tensor([[0, 1], [1, 0]]), m, m, m, classes)


def test_validate_rejects_bad_graphs():
    assert validate(_graph(torch.ones(4, 2))).num_nodes == 4
    bad = [_graph(torch.tensor([[0.0, float('nan')]] * 4)),
           _graph(torch.tensor([[0.0, float('inf')]] * 4).to_sparse_coo()),
           _graph(torch.ones(4, 2), torch.tensor([0, 1, 2, 3])),
           _graph(torch.ones(4, 2), torch.tensor([0, -1, 0, 0])),
           _graph(torch.ones(4, 2, dtype=torch.float64))]
    for g in bad:
        with pytest.raises(DatasetError) as e:
            validate(g)
        assert '\n' not in str(e.value)
    g = _graph(torch.ones(4, 2))
    g.edge_index = torch.tensor([[0], [7]])
    with pytest.raises(DatasetError):
        validate(g)


def test_normalize_rows_is_pygs_normalize_features_on_non_negative_features():
    """--normalize-features: each row / max(1, its L1 norm); on non-negative
    features exactly PyG's NormalizeFeatures; dense and sparse COO alike."""
    from torch_geometric.data import Data
    from torch_geometric.transforms import NormalizeFeatures
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(50, 30, generator=g) < 0.3).float() * torch.rand(50, 30, generator=g) * 5
    x[3] = 0  # an empty row stays empty
    x[4] = 0
    x[4, 7] = 0.5  # a row whose norm is below 1 is not scaled up (PyG clamps the sum at 1)
    want = NormalizeFeatures()(Data(x=x.clone())).x
    assert torch.allclose(data.normalize_rows(x), want)
    sparse = data.normalize_rows(x.to_sparse_coo())
    assert sparse.is_sparse and torch.allclose(sparse.to_dense(), want)
    assert torch.equal(data.normalize_rows(x)[4], x[4])
