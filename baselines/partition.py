"""Partition-based training, Cluster-GCN style / PSGD-PA (docs/methods.md section 3): every cut edge
is dropped, each worker trains on its induced subgraph (induced-degree normalisation); only
parameters are synchronised (gradient all-reduce, or averaging every --local-steps K)."""
from digest.policies.counting import partition_step
from digest.policies.halo import NoHalo
from digest.methods import register
from digest.policies.params import ParamOptions, make_param_policy


@register("partition", "partition-based (Cluster-GCN / PSGD-PA): cut edges dropped, no halo traffic",
          options=(ParamOptions,), traffic=partition_step)
def partition_based(cfg, part, plan, model):
    return NoHalo(part, plan), make_param_policy(cfg)
