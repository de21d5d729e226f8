"""The exact (propagation-based) method is exact: 1, 2 and 4 workers give the same per-epoch losses
and final parameters as each other and as a plain single-process torch_geometric model."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv, GCNConv, SAGEConv

from digest.runtime import comm
from digest.data.cache import prepare_partition
from digest.config import TrainConfig
from digest.models import MODELS
from digest.data.synthetic import make_synthetic
from digest.training.trainer import Trainer
from helpers import run_workers

EPOCHS = 20
REFERENCE = {"gcn": lambda i, o: GCNConv(i, o), "sage": lambda i, o: SAGEConv(i, o),
             "gat": lambda i, o: GATConv(i, o)}


def train_models(cfg, rt, part, models):
    """Every model for EPOCHS steps; returns {model: (global losses, final parameters)}."""
    out = {}
    for name in models:
        cfg.model.model = name
        trainer = Trainer(cfg, rt, part)
        losses = torch.tensor([trainer.step(e) for e in range(EPOCHS)], dtype=torch.float64)
        comm.all_reduce_(losses, category=None)
        out[name] = (losses, {k: v.clone() for k, v in trainer.model.state_dict().items()})
    return out


def reference(graph, cfg, name):
    """Plain single-process full-graph PyG training from the same initial weights."""
    torch.manual_seed(cfg.seed)
    ours = MODELS[name](graph.num_features, cfg.model.hidden, graph.num_classes, cfg.model.layers, 0.0)
    dims = ours.widths
    convs = torch.nn.ModuleList(REFERENCE[name](i, o) for i, o in zip(dims[:-1], dims[1:]))
    for conv, mine in zip(convs, ours.convs):
        conv.load_state_dict(mine.state_dict())
    opt = torch.optim.Adam(convs.parameters(), lr=cfg.optim.lr)
    losses = []
    for _ in range(EPOCHS):
        opt.zero_grad()
        h = graph.x
        for i, conv in enumerate(convs):
            h = conv(h, graph.edge_index)
            h = F.relu(h) if i < len(convs) - 1 else h
        loss = F.cross_entropy(h[graph.train_mask], graph.y[graph.train_mask])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return torch.tensor(losses, dtype=torch.float64)


@pytest.fixture(scope="module")
def graph():
    return make_synthetic(nodes=300, classes=4, avg_degree=6, features=16, seed=3)


def test_exact_equals_single_process_pyg(graph, tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    cfg = TrainConfig.of(dataset="exactness", hidden=16, layers=3, dropout=0.0, lr=0.01, epochs=EPOCHS)
    models = ["gcn", "sage", "gat"]
    runs = {}
    for world in (1, 2, 4):
        part_dir = prepare_partition("exactness", world, "metis", 0, root, graph=graph)
        runs[world] = run_workers(train_models, cfg, part_dir, world, models=models)[0]
    for name in models:
        ref = reference(graph, cfg, name)
        for world in (1, 2, 4):
            losses, params = runs[world][name]
            assert (losses - ref).abs().max() < 1e-4, (name, world, losses[-1], ref[-1])
            for k, v in params.items():
                assert torch.allclose(v, runs[1][name][1][k], atol=1e-4), (name, world, k)
        assert ref[-1] < ref[0]  # it actually trained
