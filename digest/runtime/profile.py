"""``--profile DIR``: torch.profiler over a window of training steps, one report per rank.

Where the time of a step goes is what decides which hot path to attack (sparse products, dropout,
the optimiser, the exchange), and it differs by rank: the ranks with the most halo rows do the
most work. The window skips the first steps (allocator warm-up, DIGEST's store fill) and covers
``STEPS`` steps from ``START`` (fewer when the run is shorter). Each rank writes

- ``DIR/profile_rank{r}.txt``: operators by self CPU time, then by operator and input shapes;
- ``DIR/trace_rank{r}.json``: the timeline, for https://ui.perfetto.dev or chrome://tracing.

Labels ``train_step`` and ``evaluate`` mark the trainer's phases, so a window that contains an
evaluation says how much of it was one. With more workers than cores the times are wall-clock
under contention: compare shares within one report, not absolute times across runs.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

START, STEPS = 5, 10


def label(name: str):
    """A named range in the profile (a no-op costing microseconds when nothing profiles)."""
    return torch.profiler.record_function(name)


class StepProfiler:
    """``before(step)`` / ``after(step)`` around every step of a training loop; profiles steps
    ``first .. last - 1`` and writes the reports after the last one (or at ``close()``, for a loop
    that stopped inside the window or before it). Inert when ``out`` is None."""

    def __init__(self, out: str | None, rank: int, start: int, epochs: int):
        self.out, self.rank = (Path(out) if out else None), rank
        self.first = max(start, min(START, epochs - 1))  # a resumed run profiles its own steps
        self.last = min(self.first + STEPS, epochs)
        self._prof, self._done, self._written = None, None, False

    def before(self, step: int) -> None:
        if self.out is not None and step == self.first and self._prof is None and not self._written:
            # kineto prints a "USDT: ... profiler_start" / "profiler_stop" line per rank at its
            # own top log level (5); 6 silences them (read when the first profile starts)
            os.environ.setdefault("KINETO_LOG_LEVEL", "6")
            cuda = [torch.profiler.ProfilerActivity.CUDA] if torch.cuda.is_available() else []
            self._prof = torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU, *cuda], record_shapes=True)
            self._prof.__enter__()

    def after(self, step: int) -> None:
        if self._prof is not None:
            self._done = step
            if step == self.last - 1:
                self.close()

    def close(self, steps_taken: int | None = None) -> None:
        """Stop profiling and write the reports (once). A rank that never reached the window (a
        DIGEST-A worker whose peers spent the budget first) writes a report saying so, with the
        ``steps_taken`` it did, so every rank has its file and nobody looks for a missing one."""
        if self.out is None or self._written:
            return
        prof, self._prof = self._prof, None
        if prof is not None:
            prof.__exit__(None, None, None)
        self._written = True
        self.out.mkdir(parents=True, exist_ok=True)
        report = self.out / f"profile_rank{self.rank}.txt"
        if self._done is None:  # stopped before a profiled step finished: nothing to report
            took = "" if steps_taken is None else f"this rank took {steps_taken} step(s), "
            report.write_text(f"rank {self.rank}: no step profiled: {took}the window was steps "
                              f"{self.first}..{self.last - 1}\n")
            return
        head = (f"rank {self.rank}: steps {self.first}..{self._done} "
                f"({self._done - self.first + 1}), {torch.get_num_threads()} torch thread(s)\n")
        by_op = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40)
        by_shape = prof.key_averages(group_by_input_shape=True).table(
            sort_by="self_cpu_time_total", row_limit=30)
        report.write_text(f"{head}\nby operator\n{by_op}\nby operator and input shapes\n{by_shape}\n")
        prof.export_chrome_trace(str(self.out / f"trace_rank{self.rank}.json"))
