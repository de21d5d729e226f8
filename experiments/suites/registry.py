"""Every method registered, as ``python -m digest`` has them, without importing its command line:
``baselines`` registers its methods (DIGEST-A's too) on import, and ``digest.methods.import_plugins``
imports the modules named in ``DIGEST_PLUGINS`` (methods of your own)."""
from __future__ import annotations

import baselines  # noqa: F401  (registers the baselines on import)
from digest import methods


def register_methods():
    """Register every method (the baselines on this module's import, then the plugins); the
    registry module ``digest.methods``."""
    methods.import_plugins()
    return methods
