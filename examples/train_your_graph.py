"""Train on a graph of your own: build it in PyG, save it with torch.save, train DIGEST on it with
two worker processes.

    python examples/train_your_graph.py [OUT]

OUT (default: a temporary folder, removed at the end) receives everything the script writes: the
graph (graph.pt), the partition cache (data/.partitions/) and the run (run/metrics.csv,
run/summary.json). The same run from the command line:

    python -m digest train --dataset file:OUT/graph.pt --method digest --workers 2 ...

A graph without train/val/test masks takes a split rule instead:
``--dataset file:graph.pt,split=random`` (docs/datasets.md).
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
from torch_geometric.data import Data

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, if not installed
from digest import train  # noqa: E402


def make_graph(nodes: int = 240, classes: int = 4, features: int = 16, seed: int = 0) -> Data:
    """Node i has class i % classes; 80% of the edges join two nodes of a class, and the features
    carry a weak hint of the class, so neighbours help.

    Shapes: x ``[N, F]`` float32, edge_index ``[2, E]`` int64 (one direction is enough: the loader
    adds the other and drops duplicates), y ``[N]`` int64, masks ``[N]`` bool (60/20/20%)."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(nodes) % classes
    src = torch.randint(0, nodes, (3 * nodes,), generator=g)
    shift = classes * torch.randint(1, nodes // classes, src.shape, generator=g)
    same_class = (src + shift) % nodes  # ids i and i + k * classes share a class
    dst = torch.where(torch.rand(src.shape, generator=g) < 0.8, same_class,
                      torch.randint(0, nodes, src.shape, generator=g))
    x = torch.randn(nodes, features, generator=g)
    x[:, :classes] += 0.5 * torch.nn.functional.one_hot(y, classes)
    order = torch.randperm(nodes, generator=g)
    masks = [torch.zeros(nodes, dtype=torch.bool) for _ in range(3)]
    for mask, part in zip(masks, torch.tensor_split(order, [int(0.6 * nodes), int(0.8 * nodes)])):
        mask[part] = True
    return Data(x=x, edge_index=torch.stack([src, dst]), y=y, train_mask=masks[0],
                val_mask=masks[1], test_mask=masks[2])


def main(out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    graph = out / "graph.pt"
    torch.save(make_graph(), graph)
    summary = train(dataset=f"file:{graph}", method="digest", workers=2, epochs=30, layers=2,
                    hidden=32, seed=0, data_root=str(out / "data"), out=str(out / "run"),
                    progress=False)
    print(f"digest on {graph}, 2 workers: test accuracy {summary['test_at_best_val']:.3f} at best "
          f"validation {summary['best_val']:.3f}; files in {out / 'run'}")
    return summary


if __name__ == "__main__":  # the guard matters: the worker processes import this file
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
