"""Partition-based training, Cluster-GCN style / PSGD-PA (METHODS.md section 3): every cut edge is
dropped, each worker trains on its induced subgraph (induced-degree normalisation); only
parameters are synchronised (gradient all-reduce, or averaging every --local-steps K)."""
from digest.halo import NoHalo
from digest.methods import register
from digest.sync import make_param_sync


@register("partition", "partition-based (Cluster-GCN / PSGD-PA): cut edges dropped, no halo traffic")
def partition_based(cfg, part, plan, model):
    return NoHalo(part, plan), make_param_sync(cfg.local_steps)
