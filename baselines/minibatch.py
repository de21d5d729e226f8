"""Mini-batch neighbour-sampling data parallelism (docs/methods.md section 10.3; the sampling foil
of Bajaj et al., VLDB 2025): every worker trains the replicated model on sampled L-hop
neighbourhoods of mini-batches of seed nodes, gradients all-reduced after every mini-batch.

- Model: the run's architecture (``--model``, the same classes and parameters as every method
  here), on each sampled subgraph taken as a graph of its own: GCN with the GLOBAL degrees (the
  full-graph normalisation; only then does full fan-out reproduce full-graph training), SAGE's
  mean over the sampled in-neighbours, GAT's attention over them. Gradient all-reduce after every
  step (counted under params), as DistributedDataParallel's.
- Features and topology replicated (``--mb-features replicated``, the default): at start-up the
  workers assemble the whole graph (topology, X, labels, masks) from their parts
  (``comm.all_gather_object``, start-up, not training bytes: a single machine holding the whole
  graph, as DGL/Quiver with full caching in Bajaj et al.), so sampling and feature reads cross no
  wire: zero feature bytes. The method state says so (``features_replicated`` 1, ``replica_mb``);
  peak memory includes the replica. ``--mb-features fetch``: the topology is replicated, X and
  the labels stay with their owners, and every step fetches the sampled rows other workers own
  (baselines/feature_fetch.py; bytes under ``feat_fetch``, rows per step ``mb_fetched_rows``,
  the time apart as ``fetch_time``). ``--mb-cache halo`` (section 10.3) is not implemented.
- Seeds (``--mb-seeds part``, default): worker m's seeds are its part's training nodes T_m;
  ``random``: each epoch a permutation of all training nodes (the same on every worker) cut into M
  slices. Equal step counts: S = ceil(|T| / (M B)) steps per epoch (B = ``--batch-size`` per
  worker); a worker shuffles its seeds (a generator seeded by run seed, epoch and rank) and cuts
  them into S chunks whose sizes differ by at most one (``torch.tensor_split``); an empty chunk
  still joins the all-reduce with a zero gradient. Each training node is a seed exactly once per
  epoch. Loss of worker m at step t: (1 / N_t) sum of the cross-entropy over its chunk, N_t = the
  seeds of ALL workers at step t, so the summed gradient is the mean over every seed of the step
  (= DDP's mean of M losses (M / N_t) sum).
- Sampling: PyG's ``NeighborLoader(data, input_nodes=chunk, num_neighbors=[f_1..f_L],
  batch_size=len(chunk))`` over the GLOBAL topology, uniform without replacement, directional
  subgraph; ``f_1`` is the seeds' own fan-out (the last layer's). Its sampler here is
  ``TorchNeighborSampler`` (baselines/sampling.py), a pure-torch implementation of PyG's
  ``NeighborSampler._sample`` (pyg-lib, which PyG uses when installed, is not on PyPI, and
  torch-sparse does not build for this torch): the same output (n_id seeds first, then each
  hop's new nodes; edges per hop), its draws from a generator seeded by (run seed, epoch, step,
  rank), so a run is reproducible.
  ``--mb-fanouts`` (default 15,10,5 for 3 layers as PyG's example, otherwise 10 per layer;
  -1 = every neighbour). ``--mb-local-only``: sampling restricted to the edges inside V_m
  (ablation).
- Evaluation: the suite's exact full-graph inference (the trainer's, unchanged), the same code as
  every method. One epoch = S synchronous mini-batch steps; its time is the training clock
  (evaluation excluded, as for every method).

Metrics (per epoch, averaged over workers by the harness): ``mb_steps`` (S), ``mb_batch_mean`` /
``mb_batch_std`` (this worker's chunk sizes), ``mb_nodes_hop{k}`` / ``mb_edges_hop{k}`` (mean
sampled nodes and edges per step at hop k; hop 0 = the seeds), ``sample_time`` (sampling and
feature gathering, the fetch apart), ``mb_compute_time`` (forward, backward, optimiser),
``allreduce_time`` (waiting in the gradient all-reduce; also in ``comm_time``),
``features_replicated``, ``replica_mb``; with ``fetch``: ``fetch_time`` (its wall seconds; the
waits also in ``comm_time``) and ``mb_fetched_rows`` (rows fetched per step).

Equivalence (tests/baselines/test_minibatch.py): fan-out -1, one chunk per worker holding all its seeds
(S = 1), dropout 0 -> one epoch is one exact full-graph step at the same M (same losses and
parameters up to round-off).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader

from digest.data import normalize_rows
from digest.methods import register
from digest.options import Options, option
from digest.policies.halo import HaloPolicy
from digest.policies.params import GradAllReduce
from digest.runtime import comm
from digest.seeds import mix
from digest.training.trainer import Trainer

from .feature_fetch import FeatureFetch
from .sampling import TorchNeighborSampler, replicate, select_rows

SEEDS = ("part", "random")
FEATURES = ("replicated", "fetch")


@dataclass
class MiniBatchOptions(Options):
    """Mini-batch neighbour sampling: data parallel, gradient all-reduce every mini-batch."""
    batch_size: int = option(1024, "seed nodes per worker and step (B); S = ceil(|train| / (M B)) "
                             "steps per epoch")
    mb_fanouts: str = option("", "neighbours sampled per hop, the seeds' hop first, e.g. 15,10,5 "
                             "(-1 = all; default: 15,10,5 for 3 layers, 10 per layer otherwise)")
    mb_seeds: str = option("part", "part: a worker's seeds are its part's training nodes; random: "
                           "a permutation of all training nodes cut into M slices every epoch",
                           choices=SEEDS)
    mb_local_only: bool = option(False, "sample only edges inside the worker's part (ablation)")
    mb_features: str = option("replicated", "replicated: every worker holds every feature row (one "
                              "machine, no feature bytes); fetch: rows stay with their owners and "
                              "each step fetches the sampled ones (bytes under feat_fetch)",
                              choices=FEATURES)

    def check_group(self, cfg) -> None:
        if self.batch_size < 1:
            raise ValueError("--batch-size must be >= 1")
        if self.mb_seeds not in SEEDS:
            raise ValueError(f"--mb-seeds must be one of {', '.join(SEEDS)}")
        fanouts(self.mb_fanouts, cfg.model.layers)  # raises ValueError with one line


def fanouts(spec: str, layers: int) -> list[int]:
    """``--mb-fanouts`` as a list of L fan-outs (-1 = all neighbours)."""
    if not spec.strip():
        return [15, 10, 5] if layers == 3 else [10] * layers
    try:
        out = [int(s) for s in spec.split(",")]
    except ValueError:
        raise ValueError(f"--mb-fanouts must be comma-separated integers, got {spec!r}") from None
    if len(out) != layers:
        raise ValueError(f"--mb-fanouts needs one fan-out per layer ({layers}), got {len(out)}")
    if any(f == 0 or f < -1 for f in out):
        raise ValueError("--mb-fanouts: each fan-out must be >= 1 or -1 (all neighbours)")
    return out


# -- the method -----------------------------------------------------------------------------------

class MiniBatchState(HaloPolicy):
    """What the mini-batch method keeps per worker: the replicated graph, its sampler, the seeds,
    and the epoch's statistics (``state()``). It is no halo policy: training runs on sampled
    subgraphs (``MiniBatchTrainer.step``); evaluation uses the trainer's exact halo."""

    def __init__(self, part, plan, model, cfg):
        super().__init__(part, plan)
        o = cfg.options
        self.B, self.seeds_mode, self.seed = o.batch_size, o.mb_seeds, cfg.seed
        self.fanouts = fanouts(o.mb_fanouts, cfg.model.layers)
        self.M, self.rank = comm.world_size(), comm.rank()
        fetch = o.mb_features == "fetch"
        g = replicate(part, features=not fetch)
        self.replica_mb = g.pop("nbytes") / 2 ** 20
        # the replica, or the own rows (index_select: sparse COO features cannot be sliced)
        x = g["x"] if not fetch else part.x.index_select(0, torch.arange(part.n_inner))
        flag = cfg.data.normalize_features
        vals = x.coalesce().values() if x.is_sparse else x
        low = torch.tensor([float(vals.min()) if vals.numel() else 0.0])
        if fetch:  # every worker's rows decide, as the replica's would
            comm.all_reduce_(low, category=None, op=comm.dist.ReduceOp.MIN)
        nonneg = flag is None and float(low) >= 0
        x = normalize_rows(x) if type(model).normalizes(flag, nonneg) else x
        x = x.to_sparse_csr() if x.is_sparse else x
        self.y, self.deg, self.part_of = g["y"], g["deg"], g["part_of"]
        self.fetch = FeatureFetch(x, part.y, part.global_ids[:part.n_inner], self.part_of,
                                  labels=self.seeds_mode == "random") if fetch else None
        self.x = None if fetch else x
        self.train_ids = g["train"].nonzero().squeeze(1)  # every training node, ascending
        self.train_counts = torch.bincount(self.part_of[self.train_ids], minlength=self.M).tolist()
        ei = g["edge_index"]
        if o.mb_local_only:
            inside = (self.part_of[ei[0]] == self.rank) & (self.part_of[ei[1]] == self.rank)
            ei = ei[:, inside]
        self.data = Data(edge_index=ei, num_nodes=int(self.y.numel()))
        self.sampler = TorchNeighborSampler(self.data, self.fanouts)
        self.steps = max(1, math.ceil(int(self.train_ids.numel()) / (self.M * self.B)))
        self.stats: dict = {}

    def halo(self, layer, h_inner):  # pragma: no cover - never called: see the class docstring
        raise RuntimeError("minibatch trains on sampled subgraphs, not with a halo policy")

    # -- seeds ---------------------------------------------------------------------------------
    def chunks(self, epoch: int) -> tuple[list[Tensor], list[int]]:
        """This worker's S seed chunks of ``epoch`` and N_t, the seeds of all workers per step."""
        if self.seeds_mode == "random":
            g = torch.Generator().manual_seed(mix(self.seed, epoch, 2))
            perm = self.train_ids[torch.randperm(self.train_ids.numel(), generator=g)]
            slices = torch.tensor_split(perm, self.M)
            mine, sizes = slices[self.rank], [int(s.numel()) for s in slices]
        else:
            own = self.train_ids[self.part_of[self.train_ids] == self.rank]
            g = torch.Generator().manual_seed(mix(self.seed, epoch, self.rank, 1))
            mine, sizes = own[torch.randperm(own.numel(), generator=g)], self.train_counts
        per_step = [0] * self.steps
        for n in sizes:  # tensor_split: the first n % S chunks hold one more
            for t in range(self.steps):
                per_step[t] += n // self.steps + (1 if t < n % self.steps else 0)
        return list(torch.tensor_split(mine, self.steps)), per_step

    # -- one mini-batch ------------------------------------------------------------------------
    def sample(self, seeds: Tensor, epoch: int, step: int) -> Data:
        """The sampled subgraph of ``seeds`` (PyG ``NeighborLoader``; n_id seeds first)."""
        self.sampler.generator.manual_seed(mix(self.seed, epoch, step, self.rank, 3))
        loader = NeighborLoader(self.data, num_neighbors=self.fanouts, input_nodes=seeds,
                                batch_size=int(seeds.numel()), shuffle=False,
                                neighbor_sampler=self.sampler)
        return next(iter(loader))

    def view(self, model_cls, batch: Data, device):
        """The model's GraphView of a sampled subgraph: every sampled node an inner row, no
        halo; GCN reads the global degrees."""
        part = SimpleNamespace(n_inner=int(batch.n_id.numel()), n_halo=0,
                               edge_index=batch.edge_index, deg=self.deg[batch.n_id])
        view = model_cls.view(part)
        for name in ("adj", "adj_t", "adj_halo", "adj_halo_t", "edge_index"):
            t = getattr(view, name)
            if t is not None:
                setattr(view, name, t.to(device))
        return view

    def features(self, n_id: Tensor, n_seeds: int) -> tuple[Tensor, Tensor]:
        """Input rows of the sampled nodes ``[n, F_0]`` and the seeds' labels ``[n_seeds]``: read
        from the replica, or fetched (collective: then every worker calls it every step)."""
        if self.fetch is not None:
            return self.fetch(n_id, n_seeds)
        return select_rows(self.x, n_id), self.y[n_id[:n_seeds]]

    def state(self):
        return {**self.stats, "features_replicated": int(self.fetch is None),
                "replica_mb": self.replica_mb}


class MiniBatchTrainer(Trainer):
    """The harness's trainer (evaluation, metrics, checkpoints, outer loop) with one epoch = S
    mini-batch steps."""

    def step(self, epoch: int) -> float:
        mb: MiniBatchState = self.policy
        model, dev = self.model, self.rt.device
        model_cls = type(model)
        model.train()
        chunks, totals = mb.chunks(epoch)
        t_sample = t_compute = t_reduce = t_fetch = 0.0
        if mb.fetch is not None:
            mb.fetch.fetched = 0
        losses, nodes, edges = [], [0.0] * (len(mb.fanouts) + 1), [0.0] * len(mb.fanouts)
        for t, seeds in enumerate(chunks):
            self.opt.zero_grad(set_to_none=True)
            n = int(seeds.numel())
            loss = 0.0
            if not n and mb.fetch is not None:  # the fetch is collective: take part, ask nothing
                f0 = time.perf_counter()
                mb.features(seeds, 0)
                t_fetch += time.perf_counter() - f0
            if n:
                t0 = time.perf_counter()
                batch = mb.sample(seeds, epoch, t)
                f0 = time.perf_counter()
                rows, y = mb.features(batch.n_id, n)
                fetched = time.perf_counter() - f0 if mb.fetch is not None else 0.0
                t_fetch, t0 = t_fetch + fetched, t0 + fetched  # sample_time: without the fetch
                x = model_cls.inputs(rows, int(batch.n_id.numel()))
                x = tuple(v if v is None else v.to(dev) for v in x)
                view = mb.view(model_cls, batch, dev)
                y = y.to(dev)
                for k, c in enumerate(batch.num_sampled_nodes):
                    nodes[k] += c / len(chunks)
                for k, c in enumerate(batch.num_sampled_edges):
                    edges[k] += c / len(chunks)
                t1 = time.perf_counter()
                t_sample += t1 - t0
                out = model(x, view, lambda layer, h: None)[:n]
                step_loss = F.cross_entropy(out, y, reduction="sum") / totals[t]
                step_loss.backward()
                loss = float(step_loss.detach())
                t_compute += time.perf_counter() - t1
            c0, w0 = comm.traffic.seconds, time.perf_counter()
            self.params.after_backward(model)  # the all-reduce: every worker, every step
            t_reduce += comm.traffic.seconds - c0
            t_compute += (time.perf_counter() - w0) - (comm.traffic.seconds - c0)
            t2 = time.perf_counter()
            self.params.apply(epoch, self.opt, model)
            t_compute += time.perf_counter() - t2
            losses.append(loss)
        sizes = torch.tensor([float(c.numel()) for c in chunks])
        mb.stats = {"mb_steps": len(chunks), "mb_batch_mean": float(sizes.mean()),
                    "mb_batch_std": float(sizes.std(unbiased=False)),
                    **{f"mb_nodes_hop{k}": v for k, v in enumerate(nodes)},
                    **{f"mb_edges_hop{k + 1}": v for k, v in enumerate(edges)},
                    "sample_time": t_sample, "mb_compute_time": t_compute,
                    "allreduce_time": t_reduce}
        if mb.fetch is not None:  # fetch_time: the fetches' wall seconds (their waits in comm_time)
            mb.stats.update(fetch_time=t_fetch, mb_fetched_rows=mb.fetch.fetched / len(chunks))
        return sum(losses) / len(losses)  # summed over workers: the mean of the steps' losses


@register("minibatch", "mini-batch neighbour sampling (PyG NeighborLoader over the whole graph, "
          "features replicated or fetched), gradient all-reduce every mini-batch",
          options=(MiniBatchOptions,), trainer=MiniBatchTrainer,
          traffic="its work and fetched rows follow the sampled subgraphs, which the partition "
          "does not fix")
def minibatch(cfg, part, plan, model):
    return MiniBatchState(part, plan, model, cfg), GradAllReduce()
