"""What decides each verdict point and the one-screen table (experiments/studies/verdict/
points.py ``points``, screen.py ``screen``; docs/methods.md section 12): exact's share
of its epoch in collectives, communication over compute, the share the link alone needs and the
compute-bound label, on hand-made runs. No training."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from experiments.studies.verdict import points as verdict
from experiments.studies.verdict import screen as verdict_render
from experiments.suites.load import Loaded, RunRecord


def exact_run(bw: str, epoch_s: float, comm_s: float, busiest_bytes: float, rnd: int = 0):
    """An exact speed run: 6 epochs (3 timed after the warm-up) of ``epoch_s``, ``comm_s`` of it in
    collectives, the busiest of two workers sending ``busiest_bytes`` an epoch."""
    m = pd.DataFrame({"epoch": range(6), "epoch_time": [9.0] * 3 + [epoch_s] * 3,
                      "comm_time": [9.0] * 3 + [comm_s] * 3, "val_acc": [float("nan")] * 6,
                      "bytes_w0": [busiest_bytes] * 6, "bytes_w1": [busiest_bytes / 2] * 6})
    return RunRecord("toy", f"exact@{bw}", "exact", 2, 0, Path("."), {}, m, round=rnd)


def test_a_point_says_what_decides_it():
    speed = Loaded([exact_run("50mbit", 2.0, 1.9, 10e6), exact_run("10gbit", 0.2, 0.1, 10e6)],
                   ["toy"], [], later=[exact_run("50mbit", 4.0, 3.8, 10e6, rnd=1)], warmup=3)
    p = verdict.points(speed, ["10gbit", "50mbit"]).set_index("bandwidth")
    # 50mbit: the rounds' timed epochs pooled: 5.7 s of 9 in collectives, 8e7 bits at 5e7 bit/s
    assert p.loc["50mbit", "exact_comm_share"] == pytest.approx(0.95)
    assert p.loc["50mbit", "comm_compute_ratio"] == pytest.approx(19.0)
    assert p.loc["50mbit", "wire_share"] == pytest.approx(1.6 / 3.0)
    assert not p.loc["50mbit", "compute_bound"]
    # 10gbit: the link alone needs 8 ms of a 200 ms epoch: compute-bound, however long the
    # collectives took (waiting on the other workers' compute)
    assert p.loc["10gbit", "wire_share"] == pytest.approx(0.04)
    assert p.loc["10gbit", "compute_bound"] and p.loc["10gbit", "exact_comm_share"] == 0.5


def test_the_cluster_a_point_stands_for():
    # a worker is half a core: 1-core nodes on twice the link; a 2 TFLOP/s device against a core
    # of 100 GFLOP/s (1e-11 s a flop) is 40 workers
    assert verdict.device_k(1e-11) == pytest.approx(40)
    assert verdict_render.stands_for("50mbit", 1e-11) == (
        "1-core nodes on links of 100 Mbit/s; 2 TFLOP/s devices (k = 40) on links of 2 Gbit/s")
    assert verdict_render.stands_for("10gbit", 1e-11, compute_bound=True).startswith(
        "1-core nodes on links of at least 20 Gbit/s;")


class _V:  # the parts of a GraphVerdict the one-screen table reads
    def __init__(self, speed, acc, points, bandwidths):
        self.speed, self.acc, self.points, self.bandwidths = speed, acc, points, bandwidths


def _verdict(aa_lo: float, digest_lo: float) -> _V:
    speed = pd.DataFrame([
        {"method": "exact", "bandwidth": "50mbit", "speedup": 1.0, "lo": 1.0, "hi": 1.0,
         "pairs": 6, "verdict": "", "note": "", "clean": aa_lo >= 0.95, "aa_lo": aa_lo,
         "aa_hi": 1.02},
        {"method": "digest-I10", "bandwidth": "50mbit", "speedup": 1.8, "lo": digest_lo,
         "hi": 2.1, "pairs": 6, "verdict": "faster" if digest_lo > 1.02 else
         "no measurable difference", "note": "", "clean": aa_lo >= 0.95, "aa_lo": aa_lo,
         "aa_hi": 1.02}])
    acc = pd.DataFrame([{"method": "exact", "test_mean": 92.0, "delta": 0.0, "q": 0.99},
                        {"method": "digest-I10", "test_mean": 91.8, "delta": -0.2, "q": 0.99}])
    points = pd.DataFrame([{"bandwidth": "50mbit", "exact_comm_share": 0.97,
                            "compute_bound": False}])
    return _V(speed, acc, points, ["50mbit"])


@pytest.mark.parametrize("aa_lo, digest_lo, cell", [
    (0.98, 1.5, "digest-I10 1.80x [1.50, 2.10]"),
    (0.98, 0.9, "none measurably faster"),
    (0.90, 1.5, "A/A not clean: none named")])
def test_a_screen_cell_names_a_winner_only_where_its_interval_clears_a_clean_a_a(
        aa_lo, digest_lo, cell):
    text = verdict_render.screen({"toy": _verdict(aa_lo, digest_lo)})
    head, _, row = text.splitlines()
    assert head == ("| graph | target (x exact's best val.) | 50mbit: exact 97% in collectives |")
    assert row == f"| toy | 0.99 | {cell} |"
