"""Atomic file writes: a reader sees the old file or the whole new one, never part of one.

Every file a later step reads back (partition caches, checkpoints, metrics, summaries, progress
files) is written here: into a temporary file in the same folder (a rename within one file
system is atomic on POSIX), flushed and fsynced, then renamed over the target. A write that is
interrupted (Ctrl-C, a full disk, an error in the writer) leaves the old file and no temporary.
The temporary is named ``.<name>.<random>.tmp``, so a folder can sweep what a killed writer left
(``digest.data.cache`` does)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import IO, Callable


def write_atomic(path: str | os.PathLike, write: Callable[[IO[bytes]], object],
                 fsync: bool = True) -> Path:
    """Write a file whole or not at all.

    Args:
        path: the file; its folder is created if missing.
        write: called once with the temporary file, open for binary writing, e.g.
            ``lambda f: torch.save(state, f)``.
        fsync: make the content durable before the rename. ``False`` keeps the write atomic for
            readers but not across a power cut (files rewritten every epoch, such as progress).

    Returns:
        ``path`` as a ``Path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: str | os.PathLike, text: str, fsync: bool = True) -> Path:
    """:func:`write_atomic` of ``text`` as UTF-8."""
    data = text.encode("utf-8")
    return write_atomic(path, lambda f: f.write(data), fsync=fsync)
