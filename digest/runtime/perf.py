"""Process-level performance settings of a worker (called once per process by ``run.worker``).

Why the allocator: CPU tensors of a full-graph step are large (a 35k x 256 float32 activation is
35 MB) and glibc serves every block above its mmap threshold (at most 32 MB by default) with a
fresh ``mmap``, returned with ``munmap`` when freed. Every step then pays a page fault (and the
kernel's zero fill) per 4 KiB page of every such tensor, about as much as writing the tensor once
more. Raising the mmap and trim thresholds keeps freed blocks in the heap, where the next step
reuses them: measured 2-4x faster allocation-plus-fill of such tensors and 1.3-1.6x faster
training steps (Physics; a 300k-node synthetic graph). The price is memory: freed blocks stay in
the process and the heap fragments, so the peak resident memory grows (measured +60% on the
300k-node graph, 1.39 -> 2.2 GiB). Memory-bound runs (the ogbn-products-size ones) give
``--heap-reuse off`` or set ``DIGEST_MALLOC_TUNE=0`` to keep glibc's defaults;
``DIGEST_MALLOC_MB`` sets the threshold (default 1024 MiB).

Why ``release_free_memory`` once after start-up: the start-up's temporaries (the sorts that build
a view's CSR blocks) are freed into the heap, where the raised trim threshold would keep them
resident for the whole run although no step reuses them.
"""
from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_tuned = None
THRESHOLD_MB = 1024


def tune_allocator(threshold: int | None = None) -> bool:
    """Serve blocks up to ``threshold`` bytes from the heap and keep freed memory (glibc only).
    Returns whether the setting is in effect. Idempotent."""
    global _tuned
    if _tuned is not None:
        return _tuned
    _tuned = False
    if os.environ.get("DIGEST_MALLOC_TUNE", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    if threshold is None:
        threshold = int(float(os.environ.get("DIGEST_MALLOC_MB", THRESHOLD_MB)) * 2**20)
    threshold = min(threshold, 2**31 - 1)  # a C int
    try:
        libc = ctypes.CDLL(None)
        ok = libc.mallopt(_M_MMAP_THRESHOLD, threshold) == 1
        ok = libc.mallopt(_M_TRIM_THRESHOLD, threshold) == 1 and ok
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return False
    _tuned = bool(ok)
    return _tuned


def release_free_memory() -> bool:
    """Hand the heap's free pages back to the system (glibc ``malloc_trim(0)``); returns whether
    any were. The heap's live blocks stay where they are."""
    if not sys.platform.startswith("linux"):  # pragma: no cover
        return False
    try:
        return bool(ctypes.CDLL(None).malloc_trim(0))
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return False
