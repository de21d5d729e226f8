"""The byte counter: what one process sent to OTHER processes, by category (docs/methods.md
section 6). Only the functions of digest/runtime/comm.py that send increment it (and ``add``, for
a transfer made outside them); the trainer reads and resets it every epoch."""
from __future__ import annotations

from collections import defaultdict

# What the byte counter distinguishes (docs/methods.md section 6).
CATEGORIES = ("halo_fwd", "halo_bwd", "store", "params")


class Traffic:
    """Bytes and messages this process sent to OTHER processes, by category, plus the wall time
    spent inside communication calls. Reset by the trainer at every epoch."""

    def __init__(self):
        self.extra: list[str] = []  # categories a method declared beyond CATEGORIES
        self.reset()

    def declare(self, category: str) -> None:
        """A method's own category (e.g. the mini-batch baseline's ``feat_fetch``): reported as
        ``bytes_<category>`` and in ``bytes_total`` from now on in this process. A category never
        declared (a probe's) is counted apart and reported by nobody."""
        if category not in CATEGORIES and category not in self.extra:
            self.extra.append(category)

    def reset(self):
        self.bytes = defaultdict(int)
        self.messages = 0
        self.seconds = 0.0

    def add(self, category: str, nbytes: int, messages: int) -> None:
        """Count a transfer made outside these functions (the layer-0 halo features, which the
        partition cache delivers in each worker's part file)."""
        self.bytes[category] += int(nbytes)
        self.messages += int(messages)

    def snapshot(self) -> dict:
        out = {f"bytes_{c}": int(self.bytes.get(c, 0)) for c in (*CATEGORIES, *self.extra)}
        out["bytes_total"] = sum(out.values())
        out["messages"] = self.messages
        out["comm_time"] = self.seconds
        return out


traffic = Traffic()
