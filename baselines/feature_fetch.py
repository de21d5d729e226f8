"""Features that stay with their owners: the mini-batch baseline's ``--mb-features fetch``
(docs/methods.md section 10.3 (b)). Topology is replicated; each worker holds only its own
part's feature rows (and labels). Every mini-batch step, the rows of the sampled nodes that other
workers own are fetched from them in ONE round of all-to-alls, every worker taking part (also
with an empty mini-batch), all counted under the byte category ``feat_fetch``:

1. counts: to every peer, how many node ids it is asked for and how many of them are seeds
   (2 x 8 B per peer);
2. ids: the requested global ids (8 B each);
3. rows: the owners' feature rows (4 F_0 B each, float32, dense on the wire);
4. labels, with ``--mb-seeds random`` only: the labels of requested seeds (8 B each); with
   ``--mb-seeds part`` every seed is the worker's own.

Requests are ordered by owner, and within an owner seeds first, so the owner replies labels for
the first k ids it was sent.

Shapes: ``n_id [n]`` global ids with the ``n_seeds`` seeds first (PyG's ``batch.n_id``); the
result ``x [n, F_0]`` dense float32 and ``y [n_seeds]`` int64.
"""
from __future__ import annotations

import torch
from torch import Tensor

from digest.runtime import comm

from .sampling import select_rows

CATEGORY = "feat_fetch"


class FeatureFetch:
    """One worker's own rows and the exchange that fetches the rest.

    Args:
        x_own: this worker's feature rows ``[n_own, F_0]``, dense or sparse CSR, in the order of
            ``own_ids``; y_own: their labels ``[n_own]``.
        own_ids: their global ids ``[n_own]``; part_of: every node's owner ``[N]``.
        labels: whether seeds may be other workers' nodes (``--mb-seeds random``).
    """

    def __init__(self, x_own: Tensor, y_own: Tensor, own_ids: Tensor, part_of: Tensor,
                 labels: bool):
        self.x, self.y, self.part_of, self.labels = x_own, y_own, part_of, labels
        self.M, self.rank = comm.world_size(), comm.rank()
        self.local = torch.full((part_of.numel(),), -1, dtype=torch.long)
        self.local[own_ids] = torch.arange(own_ids.numel())
        self.width = int(x_own.size(1))
        self.fetched = 0  # rows fetched since the last reset (the method state's mean per step)
        comm.traffic.declare(CATEGORY)

    def _rows(self, ids: Tensor) -> Tensor:
        rows = select_rows(self.x, self.local[ids])
        return (rows.to_dense() if rows.is_sparse else rows).float()

    def __call__(self, n_id: Tensor, n_seeds: int) -> tuple[Tensor, Tensor]:
        """Features of ``n_id`` and labels of its first ``n_seeds`` (collective: every worker
        calls it once per step)."""
        owner = self.part_of[n_id]
        seed = torch.arange(n_id.numel()) < n_seeds
        remote = (owner != self.rank).nonzero().squeeze(1)
        # by owner, seeds first within an owner (stable sort of owner * 2 + not-seed)
        order = remote[torch.argsort(owner[remote] * 2 + (~seed[remote]).long(), stable=True)]
        asked = torch.bincount(owner[order], minlength=self.M)
        seeds_asked = torch.bincount(owner[order][seed[order]], minlength=self.M)
        one = [1] * self.M
        counts = comm.all_to_all_rows(torch.stack([asked, seeds_asked], 1), one, one, CATEGORY)
        send, recv = asked.tolist(), counts[:, 0].tolist()
        ids = comm.all_to_all_rows(n_id[order], send, recv, CATEGORY)
        rows = comm.all_to_all_rows(self._rows(ids), recv, send, CATEGORY)
        x = torch.empty(n_id.numel(), self.width)
        mine = owner == self.rank
        x[mine] = self._rows(n_id[mine])
        x[order] = rows
        y = torch.empty(n_seeds, dtype=self.y.dtype)
        own_seeds = mine[:n_seeds]
        y[own_seeds] = self.y[self.local[n_id[:n_seeds][own_seeds]]]
        if self.labels:
            k_in, k_out = counts[:, 1].tolist(), seeds_asked.tolist()
            wanted = torch.cat([block[:k] for block, k in zip(ids.split(recv), k_in)])
            got = comm.all_to_all_rows(self.y[self.local[wanted]], k_in, k_out, CATEGORY)
            y[order[seed[order]]] = got
        self.fetched += int(order.numel())
        return x, y
