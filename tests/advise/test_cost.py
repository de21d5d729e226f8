"""The time model (digest/advise/cost.py, predict.py) on steps small enough to price by hand: a
step with free links costs its compute term exactly; a two-worker step with one collective, by
hand, blocking and pipelined; a stated compute rate scales compute and nothing else; the
per-epoch time is the mean over the window after the warm-up."""
from __future__ import annotations

import math

import pytest

from digest.advise.cost import Network, Rates, calibrated, step_seconds
from digest.advise.job import load_job
from digest.advise.predict import predict
from digest.advise.protocol import WARMUP
from digest.advise.traffic import count
from digest.advise.work import Work
from digest.config import TrainConfig
from digest.policies.counting import Collective, Step
from helpers import small_graph

RATES = Rates(dense=1e-9, sparse=0.0, sparse_x=0.0, elem=0.0, efficiency=0.5, overhead=1e-3,
              overlap=1.0)
ONE = Collective("halo_fwd", sent=(1000, 3000), received=(3000, 1000), messages=(1, 1))
WORK = [Work(dense=1e6), Work(dense=2e6)]  # 1 ms and 2 ms at 1 ns per flop
NONE = [Work(), Work()]


def test_a_step_by_hand():
    """share 2: compute = 2 x 2 ms = 4 ms; the collective: 3000 B (worker 1's send, worker 0's
    receive) over 0.5 x 1e6 B/s = 6 ms, + 1 ms overhead + 1 message x 0.1 ms = 7.1 ms."""
    net = Network(1e6, 1e-4)
    blocking = step_seconds(Step([ONE]), WORK, NONE, net, RATES, share=2.0)
    assert blocking["compute"] == pytest.approx(4e-3)
    assert blocking["comm"] == pytest.approx(7.1e-3)
    assert blocking["time"] == pytest.approx(11.1e-3)
    piped = Collective(**{**ONE.__dict__, "overlapped": True})
    hidden = step_seconds(Step([piped]), WORK, NONE, net, RATES, share=2.0)
    assert hidden["hidden"] == pytest.approx(4e-3)  # min(compute, overlapped), all of it hidden
    assert hidden["time"] == pytest.approx(7.1e-3)
    half = step_seconds(Step([piped]), WORK, NONE, net, Rates(**{**RATES.__dict__,
                                                                 "overlap": 0.5}), share=2.0)
    assert half["time"] == pytest.approx(9.1e-3)


def test_a_fill_and_quantised_values_are_compute():
    rates = Rates(**{**RATES.__dict__, "codec": 1e-6})
    step = Step([], forwards=1, coded=(10, 0))
    out = step_seconds(step, WORK, [Work(dense=5e5), Work(dense=5e5)], Network(1e6), rates)
    assert out["time"] == pytest.approx(max(1e-3 + 0.5e-3 + 10e-6, 2e-3 + 0.5e-3))


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    graph = small_graph(seed=63, nodes=200, features=8)
    return load_job("advise-cost", 4, root=tmp_path_factory.mktemp("advise_cost"), graph=graph)


@pytest.mark.parametrize("method", ["exact", "digest", "pipegcn", "sylvie", "partition"])
def test_free_links_cost_exactly_the_compute_term(job, method):
    """Infinite bandwidth, no latency, no overhead: every step's time is its compute term."""
    rates = Rates(**{**calibrated().__dict__, "overhead": 0.0})
    cfg = TrainConfig.of(method=method, dataset="advise-cost", workers=4, epochs=12, hidden=16)
    timing = predict(job, count(job, cfg), rates, Network(math.inf), share=1.0)
    assert len(timing.steps) == 12
    for s in timing.steps:
        assert s["comm"] == 0.0 and s["time"] == s["compute"] > 0


def test_stated_rate_scales_compute_only(job):
    base = calibrated()
    faster = base.at_gflops(10 * base.gflops())
    assert faster.dense == pytest.approx(base.dense / 10)
    assert faster.elem == pytest.approx(base.elem / 10)
    assert (faster.efficiency, faster.overhead, faster.overlap) == \
        (base.efficiency, base.overhead, base.overlap)
    cfg = TrainConfig.of(method="exact", dataset="advise-cost", workers=4, epochs=8, hidden=16)
    counted = count(job, cfg)
    slow = predict(job, counted, base, Network(1e6))
    fast = predict(job, counted, faster, Network(1e6))
    assert fast.mean("compute") == pytest.approx(slow.mean("compute") / 10)
    assert fast.mean("comm") == pytest.approx(slow.mean("comm"))


def test_per_epoch_time_is_the_mean_after_the_warm_up(job):
    """DIGEST at I = 2 syncs on every second step: the window's mean counts each period whole."""
    cfg = TrainConfig.of(method="digest", dataset="advise-cost", workers=4, epochs=9, hidden=16,
                         sync_interval=2)
    timing = predict(job, count(job, cfg), calibrated(), Network(1e6))
    times = [s["time"] for s in timing.steps]
    assert timing.mean() == pytest.approx(sum(times[WARMUP:]) / (9 - WARMUP))
    assert times[3] > times[4] == pytest.approx(times[6]) and times[5] == pytest.approx(times[3])
