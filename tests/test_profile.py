"""digest/profile.py: the profiled window, and the per-rank reports of real 2-worker runs."""
from __future__ import annotations

import json

import pytest

from digest.cli import main
from digest.profile import StepProfiler


def test_window_skips_the_warm_up_and_fits_short_and_resumed_runs():
    def window(start, epochs):
        p = StepProfiler("unused", 0, start, epochs)
        return p.first, p.last

    assert window(0, 100) == (5, 15)
    assert window(0, 3) == (2, 3)  # a short run profiles its last step
    assert window(0, 1) == (0, 1)
    assert window(20, 100) == (20, 30)  # a resumed run profiles steps it runs
    inert = StepProfiler(None, 0, 0, 100)
    for step in range(10):
        inert.before(step)
        inert.after(step)
    assert inert._prof is None


@pytest.mark.parametrize("method", ["digest", "digest-async"])
def test_every_rank_writes_its_operator_table_and_timeline(method, tmp_path, data_root):
    out, prof = tmp_path / "run", tmp_path / "profile"
    assert main(["train", "--dataset", "synthetic:nodes=300", "--hidden", "8", "--epochs", "12",
                 "--workers", "2", "--method", method, "--sync-interval", "2", "--no-progress",
                 "--eval-every", "4", "--out", str(out), "--profile", str(prof)]) == 0
    for r in range(2):
        text = (prof / f"profile_rank{r}.txt").read_text()
        assert text.startswith(f"rank {r}: steps 5..")  # DIGEST-A: as many as this worker took
        assert "by operator and input shapes" in text and "aten::" in text
        events = json.loads((prof / f"trace_rank{r}.json").read_text())["traceEvents"]
        labels = {e.get("name") for e in events}
        assert "train_step" in labels
        if method == "digest":  # steps 5..11, with the evaluations of epochs 7 and 11
            assert text.startswith(f"rank {r}: steps 5..11 (7)")
            assert "evaluate" in labels
    assert (out / "summary.json").exists()
