"""digest/runtime/profile.py: the profiled window, and the per-rank reports of real 2-worker runs."""
from __future__ import annotations

import json

import pytest

from digest.cli import main
from digest.runtime.profile import StepProfiler


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


def test_a_rank_that_never_reached_the_window_says_so(tmp_path):
    p = StepProfiler(str(tmp_path), 1, 0, 12)
    for step in range(3):  # a DIGEST-A worker whose peers spent the budget after its 3 steps
        p.before(step)
        p.after(step)
    p.close(3)
    p.close(3)  # once
    assert (tmp_path / "profile_rank1.txt").read_text() == \
        "rank 1: no step profiled: this rank took 3 step(s), the window was steps 5..11\n"
    assert not (tmp_path / "trace_rank1.json").exists()


@pytest.mark.parametrize("method", ["digest", pytest.param("digest-async",
                                                        marks=pytest.mark.slow)])
def test_every_rank_writes_its_operator_table_and_timeline(method, tmp_path, data_root, capfd):
    out, prof = tmp_path / "run", tmp_path / "profile"
    assert main(["train", "--dataset", "synthetic:nodes=300", "--hidden", "8", "--epochs", "12",
                 "--workers", "2", "--method", method, "--sync-interval", "2", "--no-progress",
                 "--eval-every", "4", "--out", str(out), "--profile", str(prof)]) == 0
    profiled = 0
    for r in range(2):
        text = (prof / f"profile_rank{r}.txt").read_text()
        if text.startswith(f"rank {r}: no step profiled: this rank took "):
            # DIGEST-A: the budget (2 x 12 gradients) is shared by pace; on a busy machine one
            # worker may take all but a few of them
            assert method == "digest-async" and not (prof / f"trace_rank{r}.json").exists()
            continue
        profiled += 1
        assert text.startswith(f"rank {r}: steps 5..")  # DIGEST-A: as many as this worker took
        assert "by operator and input shapes" in text and "aten::" in text
        events = json.loads((prof / f"trace_rank{r}.json").read_text())["traceEvents"]
        labels = {e.get("name") for e in events}
        assert "train_step" in labels
        if method == "digest":  # steps 5..11, with the evaluations of epochs 7 and 11
            assert text.startswith(f"rank {r}: steps 5..11 (7)")
            assert "evaluate" in labels
    # one of the two took at least half of the 24 gradients, so it reached step 5
    assert profiled == 2 if method == "digest" else profiled >= 1
    assert (out / "summary.json").exists()
    shown = capfd.readouterr()
    assert "profiler_start" not in shown.err + shown.out  # kineto's own log lines stay quiet
