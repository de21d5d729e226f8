"""How a run is judged (docs/methods.md sections 11 and 12), named once for the library and the
harness: the warm-up epochs a per-epoch time leaves out, and the accuracy targets, as fractions
of exact's best validation accuracy."""
from __future__ import annotations

WARMUP = 3  # first epochs of a run left out of its per-epoch time (allocator, caches, first sync)
# Targets: beside 0.98, stricter ones, which a coarse evaluation or a method that plateaus just
# below exact cannot fake. TARGET is the one a verdict and ``python -m digest advise`` lead with;
# FALLBACK the lower one taken where exact itself misses TARGET at some seed.
TARGETS = (0.98, 0.99, 0.995)
TARGET = TARGETS[1]
FALLBACK = TARGETS[:1]
