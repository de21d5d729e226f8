"""Halo exchange throughput (bytes/s) with 2 and 4 workers, measured inside the workers."""
from __future__ import annotations

import pytest

from group import WorkerGroup
from workers import make_exchange

GRAPH = "synthetic:nodes=20000,avg_degree=15"
WIDTH = 256
LOOP = 20


@pytest.mark.parametrize("world", [2, 4])
def test_halo_exchange_throughput(benchmark, data_root, world):
    from digest.data.cache import load_manifest, prepare_partition
    part_dir = prepare_partition(GRAPH, world, "metis", 0, data_root)
    seconds, sent = [], []

    with WorkerGroup(world, make_exchange, str(part_dir), WIDTH) as group:
        group.call("loop", 2)  # warm-up

        def run():
            res = group.call("loop", LOOP)
            sent.append(sum(b for b, _ in res))
            seconds.append(max(s for _, s in res))

        benchmark.pedantic(run, rounds=5, iterations=1)
    stats = load_manifest(part_dir)["stats"]
    best = sorted(b / s for b, s in zip(sent, seconds))
    benchmark.extra_info.update(
        graph=GRAPH, workers=world, width=WIDTH, exchanges_per_round=LOOP,
        bytes_per_exchange=sent[0] // LOOP, halo_rows=stats["halo_total"],
        bytes_per_s_median=best[len(best) // 2], bytes_per_s_best=best[-1])
    assert sent[0] == stats["halo_total"] * WIDTH * 4 * LOOP
