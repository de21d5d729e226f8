"""The mini-batch method's data side (docs/methods.md 10.3; used by baselines/minibatch.py): a
pure-torch backend for PyG's ``NeighborSampler`` (pyg-lib, which PyG uses when installed, is not on
PyPI, and torch-sparse does not build for this torch), the whole graph assembled on every worker
from the parts, and row selection from sparse features."""
from __future__ import annotations

import warnings

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.sampler import NeighborSampler, SamplerOutput

from digest.runtime import comm


# -- the sampler ----------------------------------------------------------------------------------

class TorchNeighborSampler(NeighborSampler):
    """PyG's ``NeighborSampler`` (homogeneous, directional, without replacement) with its
    ``_sample`` written in torch: for each hop, every node first reached at the hop before draws
    min(f, in-degree) of its in-neighbours uniformly without replacement (all for f = -1); nodes
    not yet in the subgraph are appended (sorted by id within a hop). Draws come from
    ``self.generator`` (set it before sampling)."""

    def __init__(self, data: Data, num_neighbors: list[int]):
        with warnings.catch_warnings():  # "without pyg-lib is deprecated": this is the backend
            warnings.simplefilter("ignore")
            super().__init__(data, num_neighbors=num_neighbors, replace=False)
        self.generator = torch.Generator()
        self._local = torch.full((self.num_nodes,), -1, dtype=torch.long)  # global -> batch row

    def _sample(self, seed, seed_time=None, **kwargs) -> SamplerOutput:
        if isinstance(seed, dict) or seed_time is not None or self.disjoint:
            raise NotImplementedError("TorchNeighborSampler: homogeneous, non-temporal only")
        colptr, row, local, gen = self.colptr, self.row, self._local, self.generator
        seed = seed.long()
        local[seed] = torch.arange(seed.numel())
        nodes, rows, cols, edges = [seed], [], [], []
        n_nodes, n_edges = [int(seed.numel())], []
        frontier, count = seed, int(seed.numel())
        try:
            for f in self.num_neighbors.get_mapped_values():
                start = colptr[frontier]
                deg = colptr[frontier + 1] - start
                total = int(deg.sum())
                seg = torch.repeat_interleave(torch.arange(frontier.numel()), deg)
                first = torch.cumsum(deg, 0) - deg  # each segment's first entry
                pos = start[seg] + torch.arange(total) - first[seg]
                if f >= 0 and total and int(deg.max()) > f:
                    # a random order within every segment, then its first f entries
                    order = torch.argsort(seg.double() + torch.rand(total, generator=gen,
                                                                    dtype=torch.float64))
                    rank = torch.arange(total) - first[seg[order]]
                    keep = order[rank < f]
                    pos, seg = pos[keep], seg[keep]
                src = row[pos]
                new = torch.unique(src[local[src] < 0])
                local[new] = torch.arange(count, count + new.numel())
                count += int(new.numel())
                rows.append(local[src])
                cols.append(local[frontier][seg])
                edges.append(pos)
                nodes.append(new)
                n_nodes.append(int(new.numel()))
                n_edges.append(int(pos.numel()))
                frontier = new
            node = torch.cat(nodes)
        finally:
            local[torch.cat(nodes)] = -1  # ready for the next batch
        return SamplerOutput(node=node, row=torch.cat(rows) if rows else seed.new_empty(0),
                             col=torch.cat(cols) if cols else seed.new_empty(0),
                             edge=torch.cat(edges) if edges else seed.new_empty(0), batch=None,
                             num_sampled_nodes=n_nodes, num_sampled_edges=n_edges)


# -- the replicated graph -------------------------------------------------------------------------

def replicate(part, features: bool = True) -> dict:
    """The whole graph on this worker, assembled from every worker's part (one start-up
    ``all_gather_object``; collective). Returns global ``edge_index [2, E]``, ``x`` (dense
    ``[N, F]`` or sparse COO; None without ``features``), ``y [N]``, ``train [N]`` (bool),
    ``part_of [N]``, ``deg [N]`` (global degrees) and ``nbytes`` (what this worker holds of it)."""
    return assemble(comm.all_gather_object(own_share(part, features)))


def own_share(part, features: bool = True) -> dict:
    """What worker m contributes: its inner rows (global ids), the edges into them, their
    features (unless not ``features``), labels, training mask and global degrees."""
    n = part.n_inner
    ids = part.global_ids
    src, dst = part.edge_index
    mine = {"ids": ids[:n], "src": ids[src], "dst": ids[dst], "y": part.y,
            "train": part.train_mask, "deg": part.deg[:n], "features": int(part.x.size(1))}
    x = part.x
    if not features:
        mine["x"] = None
    elif x.is_sparse:
        x = x.coalesce()
        keep = x.indices()[0] < n
        mine["x"] = ("sparse", ids[x.indices()[0][keep]], x.indices()[1][keep], x.values()[keep])
    else:
        mine["x"] = ("dense", x[:n])
    return mine


def assemble(parts: list[dict]) -> dict:
    """The whole graph from every worker's ``own_share``, in rank order."""
    N = sum(int(p["ids"].numel()) for p in parts)
    Fdim = parts[0]["features"]
    y = torch.empty(N, dtype=parts[0]["y"].dtype)
    train = torch.zeros(N, dtype=torch.bool)
    deg = torch.zeros(N, dtype=parts[0]["deg"].dtype)
    part_of = torch.empty(N, dtype=torch.long)
    for m, p in enumerate(parts):
        y[p["ids"]], train[p["ids"]], deg[p["ids"]], part_of[p["ids"]] = p["y"], p["train"], \
            p["deg"], m
    edge_index = torch.stack([torch.cat([p["src"] for p in parts]),
                              torch.cat([p["dst"] for p in parts])])
    if parts[0]["x"] is None:
        X = None
    elif parts[0]["x"][0] == "sparse":
        idx = torch.stack([torch.cat([p["x"][1] for p in parts]),
                           torch.cat([p["x"][2] for p in parts])])
        vals = torch.cat([p["x"][3] for p in parts])
        X = torch.sparse_coo_tensor(idx, vals, (N, Fdim), check_invariants=False).coalesce()
    else:
        X = torch.empty(N, Fdim, dtype=parts[0]["x"][1].dtype)
        for p in parts:
            X[p["ids"]] = p["x"][1]
    out = {"edge_index": edge_index, "x": X, "y": y, "train": train, "part_of": part_of,
           "deg": deg}
    out["nbytes"] = sum(_nbytes(t) for t in out.values() if t is not None)
    return out


def _nbytes(t: Tensor) -> int:
    if t.is_sparse:
        return _nbytes(t.indices()) + _nbytes(t.values())
    if t.layout == torch.sparse_csr:
        return sum(_nbytes(v) for v in (t.crow_indices(), t.col_indices(), t.values()))
    return t.numel() * t.element_size()


def select_rows(x: Tensor, index: Tensor) -> Tensor:
    """Rows ``index`` of dense or sparse-CSR ``x``: ``[len(index), F]`` (sparse COO then)."""
    if x.layout != torch.sparse_csr:
        return x.index_select(0, index)
    crow, col, val = x.crow_indices(), x.col_indices(), x.values()
    start = crow[index]
    count = crow[index + 1] - start
    rows = torch.repeat_interleave(torch.arange(index.numel()), count)
    first = torch.cumsum(count, 0) - count
    pos = start[rows] + torch.arange(int(count.sum())) - first[rows]
    return torch.sparse_coo_tensor(torch.stack([rows, col[pos].long()]), val[pos],
                                   (index.numel(), x.size(1)), is_coalesced=True,
                                   check_invariants=False)
