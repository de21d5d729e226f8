"""Quick look at a dataset spec (synthetic, or a real graph such as ``Cora``) before a suite
uses it: METIS edge cut at 4 parts (or ``--parts P``) and the edge homophily of the cut edges,
and test accuracy (at best validation, with that epoch) of exact versus partition-based
training, emulated in ONE process:

    python -m experiments.studies.synthetic_scan SPEC [SEEDS] [EPOCHS] [LOCAL_STEPS] [--parts P]
    python -m experiments.studies.synthetic_scan synthetic 0,1,2 60 5,20

"exact" trains a 3-layer GCN (hidden 64, dropout 0.5, Adam lr 0.01, the quick suite's model) on
the whole graph; "partition" trains it on the graph without the edges METIS cuts into P parts
(with the induced degrees), which is what partition-based training with gradient all-reduce
computes. With LOCAL_STEPS K, also partition-based training in its PSGD-PA form
(``--local-steps K``): one replica per part, each with its own Adam, takes steps on its part's
training nodes and the replicas' parameters are averaged every K steps (digest/policies/params.py
``ModelAveraging``). All are evaluated on the whole graph (PSGD-PA only after an averaging).
It takes seconds per seed (about 80 s with two K on the default, 4 replicas each) where the
CLI's 4 worker processes take a minute a run, so settings can be scanned; the choice is then
checked with ``python -m digest train`` (digest/data/presets.py records both).

Shapes: the normalised adjacency is sparse CSR ``[N, N]``; logits ``[N, C]``.
"""
from __future__ import annotations

import copy
import sys
import time

import torch
import torch.nn.functional as F


def norm_adj(edge_index: torch.Tensor, n: int) -> torch.Tensor:
    """D^-1/2 (A + I) D^-1/2 as CSR ``[n, n]`` from ``edge_index [2, E]`` (both directions)."""
    loops = torch.arange(n)
    src, dst = torch.cat([edge_index[0], loops]), torch.cat([edge_index[1], loops])
    deg = torch.bincount(dst, minlength=n).float()
    w = deg[src].rsqrt() * deg[dst].rsqrt()
    return torch.sparse_coo_tensor(torch.stack([dst, src]), w, (n, n)).coalesce().to_sparse_csr()


class _GCN(torch.nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.lins = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x, adj):
        for k, lin in enumerate(self.lins):
            x = adj @ lin(F.dropout(x, 0.5, self.training))
            if k < len(self.lins) - 1:
                x = F.relu(x)
        return x


def train(graph, train_edges: torch.Tensor, seed: int, epochs: int,
          part: torch.Tensor | None = None, local_steps: int = 1) -> tuple[float, float, int]:
    """(best val accuracy, test accuracy at that epoch, that epoch) of a GCN trained on
    ``train_edges`` and evaluated on the whole graph. With ``part`` (``[N]``, part of each node)
    and ``local_steps`` K: one replica per part, averaged every K steps (PSGD-PA); each replica's
    loss is its part's share of the global mean times the number of parts, as ``ModelAveraging``
    scales it."""
    torch.manual_seed(seed)
    a_train = norm_adj(train_edges, graph.num_nodes)
    a_full = norm_adj(graph.edge_index, graph.num_nodes)
    model = _GCN([graph.num_features, 64, 64, graph.num_classes])
    parts = torch.zeros(graph.num_nodes, dtype=torch.long) if part is None else part
    m = int(parts.max()) + 1
    # the replicas start identical (deepcopy draws no random numbers)
    replicas = [model] + [copy.deepcopy(model) for _ in range(m - 1)]
    opts = [torch.optim.Adam(r.parameters(), lr=0.01) for r in replicas]
    y, best, n_train = graph.y, (-1.0, 0.0, -1), int(graph.train_mask.sum())
    for epoch in range(epochs):
        for k, (replica, opt) in enumerate(zip(replicas, opts)):
            replica.train()
            opt.zero_grad()
            mask = graph.train_mask & (parts == k)
            out = replica(graph.x, a_train)[mask]
            loss = (F.cross_entropy(out, y[mask]) if m == 1 else
                    F.cross_entropy(out, y[mask], reduction='sum') * (m / n_train))
            loss.backward()
            opt.step()
        if m > 1:
            if (epoch + 1) % local_steps and epoch != epochs - 1:
                continue  # evaluated only once the replicas are one model again
            with torch.no_grad():
                for ps in zip(*(r.parameters() for r in replicas)):
                    mean = torch.stack(ps).mean(0)
                    for p in ps:
                        p.copy_(mean)
        model.eval()
        with torch.no_grad():
            pred = model(graph.x, a_full).argmax(1)
        val = (pred[graph.val_mask] == y[graph.val_mask]).float().mean().item()
        if val > best[0]:
            best = (val, (pred[graph.test_mask] == y[graph.test_mask]).float().mean().item(), epoch)
    return best


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def main(argv=None) -> int:
    import argparse
    import warnings

    from digest.data import load_dataset
    from digest.data.partition import partition
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(prog="python -m experiments.studies.synthetic_scan",
                                 description="exact against partition-based training of a "
                                             "dataset spec, emulated in one process")
    ap.add_argument("spec", nargs="?", default="synthetic",
                    help="a dataset spec: synthetic:... or a real graph's name (e.g. Cora)")
    ap.add_argument("seeds", nargs="?", type=_ints, default=[0], help="e.g. 0,1,2")
    ap.add_argument("epochs", nargs="?", type=int, default=60)
    ap.add_argument("local_steps", nargs="?", type=_ints, default=[],
                    help="PSGD-PA's K values, e.g. 5,20")
    ap.add_argument("--parts", type=int, default=4, help="METIS parts (workers), >= 2")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.parts < 2 or args.epochs < 1:
        ap.error("need --parts >= 2 and EPOCHS >= 1")
    torch.set_num_threads(1)
    for seed in args.seeds:
        t0 = time.time()
        try:
            g = load_dataset(args.spec, seed=seed)
        except ValueError as err:  # DatasetError: an unknown dataset or a bad option
            ap.error(f"spec {args.spec!r}: {err}")
        if g.x.is_sparse:  # bag-of-words graphs load as sparse COO; dropout needs dense
            g.x = g.x.to_dense()
        part = partition(g, args.parts, "metis", seed).part_of
        src, dst = g.edge_index
        keep = part[src] == part[dst]
        same = g.y[src] == g.y[dst]
        e = train(g, g.edge_index, seed, args.epochs)
        p = train(g, g.edge_index[:, keep], seed, args.epochs)
        pa = "".join(f" | PSGD-PA K={k} test "
                     f"{train(g, g.edge_index[:, keep], seed, args.epochs, part, k)[1]:.4f}"
                     for k in args.local_steps)
        print(f"{args.spec} seed {seed}, {args.parts} parts: homophily "
              f"{same.float().mean().item():.3f} (cut edges "
              f"{same[~keep].float().mean().item():.3f}), cut "
              f"{1 - keep.float().mean().item():.1%} | exact test {e[1]:.4f} (val {e[0]:.4f}, "
              f"epoch {e[2]}) | partition test {p[1]:.4f} (val {p[0]:.4f}, epoch {p[2]}) | "
              f"exact - partition {100 * (e[1] - p[1]):+.2f} points{pa} "
              f"[{time.time() - t0:.0f} s]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
