"""digest/files.py: a file is written whole or not at all, and nothing is left behind when the
write is interrupted (checkpoint sets and resume: tests/training/test_resume.py; the partition
cache's sweep of a killed writer's temporaries: tests/data/test_cache.py)."""
from __future__ import annotations

import pytest
import torch

from digest.files import write_atomic, write_text_atomic


def test_write_atomic_replaces_the_file_whole(tmp_path):
    path = tmp_path / "rank0.pt"
    assert write_atomic(path, lambda f: torch.save({"epoch": 1}, f)) == path
    write_atomic(path, lambda f: torch.save({"epoch": 2}, f))
    assert torch.load(path)["epoch"] == 2
    assert [p.name for p in tmp_path.iterdir()] == ["rank0.pt"]


@pytest.mark.parametrize("stop", [KeyboardInterrupt, OSError])  # Ctrl-C, a full disk
def test_an_interrupted_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, stop):
    path = tmp_path / "rank0.pt"
    write_atomic(path, lambda f: torch.save({"epoch": 1}, f))

    def interrupted(f):
        f.write(b"half a zip")
        raise stop

    with pytest.raises(stop):
        write_atomic(path, interrupted)
    assert [p.name for p in tmp_path.iterdir()] == ["rank0.pt"]
    assert torch.load(path)["epoch"] == 1


@pytest.mark.parametrize("fsync", [True, False])
def test_text_is_written_as_utf8_into_a_new_folder(tmp_path, fsync):
    path = tmp_path / "run" / "summary.json"
    write_text_atomic(path, "±1 µs\n", fsync=fsync)
    assert path.read_bytes() == "±1 µs\n".encode("utf-8")
    assert [p.name for p in path.parent.iterdir()] == ["summary.json"]
