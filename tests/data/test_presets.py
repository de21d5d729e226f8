"""Synthetic presets (digest/data/presets.py): the generated statistics match what each preset
states (nodes, directed edges within 5%, features, classes, edge homophily within 0.03), at a
reduced size where the full one would be slow; and how a spec resolves them."""
from __future__ import annotations

import pytest

from digest.data import REGISTRY, DatasetError, list_datasets, load_dataset, parse_spec
from digest.data.presets import PRESETS
from digest.data.synthetic import make_synthetic

# Reduced sizes (nodes, communities): about as many nodes per community as at full size, so that
# the same-class pairs inside a community (where duplicates are lost) weigh the same.
REDUCED = {'arxiv-like': (20_000, 8), 'products-like': (25_000, 3), 'products-small': (25_000, 26)}


@pytest.mark.parametrize('name', list(PRESETS))
def test_generated_statistics_match_the_preset(name):
    p = PRESETS[name]
    opts = dict(p.options)
    assert opts.get('nodes', 3000) == p.nodes  # the stated size is the generated one at full size
    n, k = REDUCED.get(name, (p.nodes, opts.get('communities', 1)))
    if n != p.nodes:
        opts.update(nodes=n, communities=k)
    g = make_synthetic(**opts)
    assert g.num_nodes == n
    assert abs(g.num_edges / (p.avg_degree * n) - 1) <= 0.05, (g.num_edges, p.avg_degree * n)
    assert g.num_features == p.features and g.num_classes == p.classes
    assert abs(g.meta['homophily_measured'] - p.homophily) <= 0.03, g.meta['homophily_measured']


def test_spec_resolves_presets():
    default = parse_spec('synthetic')[1]
    assert default == PRESETS['default'].options and parse_spec('synthetic:preset=default')[1] == default
    info, opts = parse_spec('synthetic:preset=arxiv-like,nodes=20000')
    assert info is REGISTRY['synthetic']
    assert opts == {**PRESETS['arxiv-like'].options, 'nodes': 20000}
    # explicit keys without a preset stand on the generator's defaults, as before presets
    assert parse_spec('synthetic:nodes=600,classes=4')[1] == {'nodes': 600, 'classes': 4}
    assert parse_spec('synthetic:preset=classic')[1] == {}
    with pytest.raises(DatasetError, match='preset must be one of default, arxiv-like'):
        parse_spec('synthetic:preset=arxiv')
    with pytest.raises(DatasetError, match='train \\+ val <= 1'):
        parse_spec('synthetic:train=0.9,val=0.2')


def test_default_loads_with_its_split_and_presets_are_listed():
    g = load_dataset('synthetic:preset=default,nodes=2000,communities=4')
    n = g.num_nodes
    assert int(g.train_mask.sum()) == round(PRESETS['default'].options['train'] * n)
    rows = {r['name']: r for r in list_datasets()}
    for name, p in PRESETS.items():
        row = rows['synthetic' if name == 'default' else f'synthetic:preset={name}']
        assert row['available'] and f'{p.nodes:,} nodes, {p.edges:,} directed edges' in row['where']
