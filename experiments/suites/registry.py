"""Every method registered, as ``python -m digest`` has them, through the registry's own loading
(``digest.methods.load_all``: DIGEST-A, the baselines, and the modules named in
``DIGEST_PLUGINS``, methods of your own)."""
from __future__ import annotations

from digest import methods


def register_methods():
    """Register every method; returns the registry module ``digest.methods``."""
    return methods.load_all()


def registered_methods() -> set[str]:
    """The names of every registered method."""
    return set(register_methods().METHODS)
