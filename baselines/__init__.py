"""Baselines beside DIGEST: each a small file composing a halo policy and a parameter-sync policy
from ``digest/``. Importing this package registers them with ``digest.methods``."""
from . import bnsgcn, partition, pipegcn, vanishing, varco  # noqa: F401
