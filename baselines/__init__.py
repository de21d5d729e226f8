"""Baselines beside DIGEST: each a small file composing a halo policy and a parameter-sync policy
from ``digest/``. Importing this package registers them with ``digest.methods``."""
from . import (adaqp, bnsgcn, partition, pipegcn, sancus, vanishing,  # noqa: F401
               vanishing_async, varco)
