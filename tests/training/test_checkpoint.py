"""digest/training/checkpoint.py's file write: whole or not at all, and nothing left behind when
interrupted mid-write (the set logic and resume: test_resume.py)."""
from __future__ import annotations

import pytest
import torch

from digest.training import checkpoint


def test_write_atomic_replaces_the_file_whole(tmp_path):
    path = tmp_path / "rank0.pt"
    checkpoint.write_atomic({"epoch": 1}, path)
    checkpoint.write_atomic({"epoch": 2}, path)
    assert torch.load(path)["epoch"] == 2
    assert [p.name for p in tmp_path.iterdir()] == ["rank0.pt"]


def test_an_interrupted_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "rank0.pt"
    checkpoint.write_atomic({"epoch": 1}, path)

    def interrupted(state, f):
        f.write(b"half a zip")
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint.torch, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.write_atomic({"epoch": 2}, path)
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["rank0.pt"]
    assert torch.load(path)["epoch"] == 1
