"""DIGEST-A: asynchronous DIGEST for heterogeneous workers (docs/digest-a.md; docs/methods.md
section 4).

No barrier between workers while they train: a server process of their own (``server``, started
by rank 0) holds the parameter server and the representation store, reached over
torch.distributed.rpc; each worker (``client``) pushes its gradient every step and its boundary
rows every I of its own steps, and pulls newer halo blocks; ``trainer`` is the loop, with a global
budget of M x epochs gradients (a *server epoch* = M gradients applied). docs/digest-a.md is the
full specification: epochs and stopping, metrics, staleness, checkpoint and resume, gradient
scaling.
"""
from .client import AsyncClient, AsyncParamPolicy, AsyncStaleHalo, snapshot_epochs
from .trainer import AsyncTrainer

__all__ = ["AsyncClient", "AsyncParamPolicy", "AsyncStaleHalo", "AsyncTrainer", "snapshot_epochs"]
