"""advise's bytes (digest/advise/traffic.py, from the methods' own step counts) against what real
runs record: 3 gloo workers in ONE launch train every countable method for 6 epochs on a small
graph, and every epoch's bytes, category by category and worker by worker, are the count's; the
collectives of a hand-made 3-part graph by hand; a method that cannot be counted says why."""
from __future__ import annotations

import pytest

from digest.advise.job import load_job
from digest.advise.traffic import count, sizes_of
from digest.config import TrainConfig
from digest.policies.counting import Sizes
from helpers import PART_OF, launch_world, small_graph, toy_graph, train_runs

RUNS = {  # every method whose bytes are known in advance, with options that exercise its periods
    "exact": {"method": "exact"},
    "exact-detached": {"method": "exact", "halo_grad": "off"},
    "partition": {"method": "partition"},
    "partition-pa2": {"method": "partition", "local_steps": 2},
    "digest": {"method": "digest", "sync_interval": 2},
    "digest-slice": {"method": "digest", "sync_interval": 3, "compressor": "slice",
                     "comp_max": 4.0},
    "vanishing": {"method": "digest-vanishing", "sync_interval": 4},
    "varco": {"method": "varco", "comp_max": 4.0},
    "varco-learned": {"method": "varco", "compressor": "learned", "comp_max": 4.0},
    "pipegcn": {"method": "pipegcn"},
    "bnsgcn": {"method": "bnsgcn", "boundary_rate": 0.5},
    "adaqp": {"method": "adaqp", "quant_bits": 2},
    "sylvie": {"method": "sylvie", "sync_every": 3},
    "sylvie-zeros": {"method": "sylvie", "sync_every": 0, "sylvie_step0": "zeros"},
    "sat": {"method": "sat", "sync_interval": 2},
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("advise_bytes")
    graph = small_graph(seed=62, nodes=240, features=10)
    cfg = TrainConfig.of(dataset="advise-bytes", workers=3, epochs=6, hidden=8, layers=3)
    _, ranks = launch_world(tmp, "advise-bytes", 3, train_runs, cfg, graph, runs=RUNS)
    job = load_job("advise-bytes", 3, root=tmp, graph=graph)
    return cfg, ranks, job


@pytest.mark.parametrize("name", sorted(RUNS))
def test_bytes_are_what_a_run_records(recorded, name):
    cfg, ranks, job = recorded
    counted = count(job, cfg.replace(**RUNS[name]))
    assert counted.reason == ""
    for t in range(cfg.optim.epochs):
        step = counted.steps[t]
        for r, rank in enumerate(ranks):
            rec = rank[name][t]
            assert rec["bytes_total"] == sum(c.sent[r] for c in step.collectives), (t, r)
            assert rec["messages"] == sum(c.messages[r] for c in step.collectives), (t, r)
            for cat, n in counted.by_category(t).items():
                assert sum(x[name][t][f"bytes_{cat}"] for x in ranks) == n, (t, cat)
        assert counted.bytes(t) == sum(x[name][t]["bytes_total"] for x in ranks)


def test_collectives_of_the_hand_made_graph():
    """The toy graph's 3 parts (tests/helpers.py): part p sends its rows in part q's halo.
    Halo of part 0 (nodes 0, 2, 5): 1, 3, 4 (owners 1, 2, 1); of part 1 (1, 4, 7): 0, 5, 8
    (owners 0, 0, 2); of part 2 (3, 6, 8): 2, 5, 7 (owners 0, 0, 1)."""
    from digest.data.partition import build_book, partition_stats
    graph = toy_graph()
    book = build_book(PART_OF, graph.edge_index, 3)
    assert [[int(book.send[p][q].numel()) for q in range(3)] for p in range(3)] == \
        [[0, 2, 2], [2, 0, 1], [1, 1, 0]]
    assert partition_stats(book, graph.edge_index)["halo_total"] == 9
    cfg = TrainConfig.of(dataset="toy", workers=3, hidden=4, layers=2, epochs=3)
    sizes = Sizes([[0, 2, 2], [2, 0, 1], [1, 1, 0]], [5, 4, 3], 39, [(60, 2), (60, 2), (60, 2)],
                  cfg)
    fwd = sizes.rows(16, "halo_fwd")  # 4 columns x 4 bytes
    assert fwd.sent == (64, 48, 32) and fwd.received == (48, 48, 48)
    assert fwd.messages == (2, 2, 2)
    back = sizes.rows(16, "halo_bwd", back=True)
    assert back.sent == (48, 48, 48) and back.received == (64, 48, 32)
    ring = sizes.all_reduce(39)  # 2 (M - 1) / M of 156 bytes, floored
    assert ring.sent == (208,) * 3 and ring.messages == (4,) * 3


def test_a_method_that_cannot_be_counted_says_why(recorded):
    cfg, _, job = recorded
    for name, over in {"sancus": {}, "minibatch": {}, "digest-async": {},
                       "adaqp": {"quant_assign": "adaptive"},
                       "digest-vanishing": {"sync_schedule": "drift"}}.items():
        counted = count(job, cfg.replace(method=name, **over))
        assert counted.steps == [] and len(counted.reason.splitlines()) == 1, name
        assert counted.reason


def test_sizes_of_a_job(recorded):
    cfg, _, job = recorded
    sizes = sizes_of(job, cfg)
    assert sizes.widths == [10, 8, 8, 4]
    assert sizes.params == 10 * 8 + 8 + 8 * 8 + 8 + 8 * 4 + 4
    assert sum(map(sum, sizes.send)) == sum(p.n_halo for p in job.parts)  # every halo row once
    assert [sizes.send[r][r] for r in range(3)] == [0, 0, 0]
