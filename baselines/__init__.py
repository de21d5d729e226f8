"""Baselines beside DIGEST: each a small file composing a halo policy and a parameter-sync policy
from ``digest/``. Importing this package registers them with ``digest.methods``."""
from . import (adaqp, bnsgcn, minibatch, partition, pipegcn, sancus, sat, sylvie,  # noqa: F401
               vanishing, vanishing_async, varco)
