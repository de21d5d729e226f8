"""Baselines beside DIGEST: each a small file composing a halo policy and a parameter-sync policy
from ``digest/``. Importing this package registers them with ``digest.methods``."""
from . import partition, varco  # noqa: F401
from . import adaqp, sancus  # noqa: F401  (second wave: METHODS.md 8.3, 8.4)
