"""One training epoch per method at 1, 2 and 4 workers on the synthetic default graph, and the
reference: a plain single-process torch_geometric full-graph GCN of the same shape on that graph.
The model is the CLI default: GCN, 3 layers, hidden 256, dropout 0.5, Adam."""
from __future__ import annotations


import pytest

from group import WorkerGroup
from workers import make_trainer

DATASET = "synthetic"
METHODS = ["exact", "digest", "partition", "varco"]


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.parametrize("method", METHODS)
def test_epoch(benchmark, data_root, method, world):
    from digest.data.cache import prepare_partition
    from digest.config import TrainConfig
    cfg = TrainConfig.of(dataset=DATASET, method=method, workers=world, progress=False)
    part_dir = prepare_partition(DATASET, world, cfg.data.partitioner, cfg.seed, data_root, cfg.data.sparse)
    with WorkerGroup(world, make_trainer, cfg.flat(), str(part_dir)) as group:
        benchmark.pedantic(group.call, args=("step",), warmup_rounds=2, rounds=10, iterations=1)
    benchmark.extra_info.update(dataset=DATASET, method=method, workers=world, model="gcn",
                                layers=cfg.model.layers, hidden=cfg.model.hidden)


@pytest.mark.parametrize("adjacency", ["edge_index", "sparse"])
def test_epoch_plain_pyg_reference(benchmark, data_root, adjacency):
    """PyG's two usual forms: gather/scatter on ``edge_index`` and one SpMM on a sparse CSR
    adjacency (run in this process, threads = cores, default allocator)."""
    import torch

    from digest.data import load_dataset
    from digest.training.metrics import available_cores
    from experiments.studies.bench.reference import plain_step_fn
    torch.set_num_threads(available_cores())
    graph = load_dataset(DATASET, data_root)
    step = plain_step_fn(graph, hidden=256, layers=3, dropout=0.5, adjacency=adjacency)
    benchmark.pedantic(step, warmup_rounds=2, rounds=10, iterations=1)
    benchmark.extra_info.update(dataset=DATASET, method=f"plain PyG (GCNConv, {adjacency})",
                                workers=1, layers=3, hidden=256)
