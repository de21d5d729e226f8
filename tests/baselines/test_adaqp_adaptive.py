"""AdaQP's adaptive bit assignment (docs/methods.md section 8.4, ``--quant-assign adaptive``): the
greedy on hand-made blocks, then 3 real gloo workers (budget, one assignment on every worker, exact
byte counts, training). (Resume, the restored assignment and statistics: test_resume.py.)

All in-process configurations run in ONE launch (worker start-up dominates the cost).
"""
from __future__ import annotations

import itertools
import math
import random

import pytest
import torch

from baselines.adaqp import BWD, FWD, exchange_blocks
from baselines.bit_assignment import greedy_bits
from baselines.quantize import BITS, variance_proxy, wire_width
from digest.config import TrainConfig
from digest.runtime import comm
from helpers import total, train_runs

WORKERS = 3
H = 10  # hidden width = F of both exchanged layers (packed rows padded at 2 and 4 bits)
R = 4  # --quant-adapt-every
EPOCHS = 12
BASE = TrainConfig.of(dataset="aq", hidden=H, layers=3, dropout=0.0, epochs=EPOCHS, progress=False)
RUNS = {
    "uniform_b4": dict(method="adaqp", quant_bits=4),
    "adaptive_b4": dict(method="adaqp", quant_bits=4, quant_assign="adaptive",
                        quant_adapt_every=R),
    "uniform_b2": dict(method="adaqp", quant_bits=2, epochs=3),
    "adaptive_b2": dict(method="adaqp", quant_bits=2, quant_assign="adaptive",
                        quant_adapt_every=1, epochs=3),
}


def objective(variance, bits):
    return sum(v / (2 ** b - 1) ** 2 for v, b in zip(variance, bits))


def spent(cost, bits):
    return sum(c[BITS.index(b)] for c, b in zip(cost, bits))


# -- the greedy -----------------------------------------------------------------------------------

def test_greedy_expected_assignment():
    cost = [(10, 20, 40)] * 3  # three equal blocks: 2 bits 10 bytes, 4 bits 20, 8 bits 40
    # per extra byte: block 0 2->4 gains 1000 (1/9 - 1/225) / 10 = 10.7, then 4->8 0.22; block 1
    # 2->4 0.107: the uniform-4 budget (60) buys block 0 both upgrades, then nothing fits
    assert greedy_bits([1000, 10, 1], cost, 60) == [8, 2, 2]
    # V = 100: block 0's 4->8 (0.022 per byte) comes after block 1's 2->4 (0.107) and no longer
    # fits (70 > 60); block 2's 2->4 (0.011) still does
    assert greedy_bits([100, 10, 1], cost, 60) == [4, 4, 4]
    assert greedy_bits([100, 10, 1], cost, 59) == [4, 4, 2]
    assert greedy_bits([100, 10, 1], cost, 29) == [2, 2, 2]  # below the fewest: the fewest
    assert greedy_bits([0, 10, 1], cost, 1000) == [2, 8, 8]  # nothing to gain at V = 0
    # a cheaper upgrade fills what a dearer one could not: block 1 (5 bytes per step) after
    # block 0's 4->8 (+20) is dropped
    assert greedy_bits([1000, 1], [(10, 20, 40), (5, 10, 15)], 35) == [4, 8]
    assert greedy_bits([1000, 1], [(10, 20, 40), (5, 10, 15)], 34) == [4, 4]
    # the greedy's weakness: block 1 (more variance per byte) takes both upgrades (387 bytes),
    # block 0's 2->4 (+96) no longer fits: [2, 8] (bound 8.07) where [4, 2] (1.71) fits; within
    # the uniform-4 budget (459) the uniform assignment (0.38) replaces it
    variance, cost = [72.6, 12.4], [(312, 408, 600), (39, 51, 75)]
    assert greedy_bits(variance, cost, 449) == [2, 8]
    assert greedy_bits(variance, cost, 459) == [4, 4]


@pytest.mark.parametrize("bits", BITS)
def test_greedy_equal_variance_per_row_is_uniform(bits):
    """Blocks of equal rows (V and bytes both proportional to rows): at the uniform budget of b
    bits the greedy returns b everywhere."""
    n = [3, 1, 7, 2, 5]
    F = 10
    variance = [2.5 * k for k in n]
    cost = [tuple(k * wire_width(F, b) for b in BITS) for k in n]
    budget = sum(k * wire_width(F, bits) for k in n)
    assert greedy_bits(variance, cost, budget) == [bits] * len(n)
    per_block = {2: 10, 4: 20, 8: 40}[bits]
    assert greedy_bits([1.0] * 4, [(10, 20, 40)] * 4, 4 * per_block) == [bits] * 4


def test_greedy_within_budget_and_never_worse_than_uniform():
    """Random small instances: never over the budget, never a larger bound than a uniform
    assignment within the budget, and mostly (it is a greedy) the brute-force optimum's."""
    rng = random.Random(0)
    optimal, feasible = 0, 0
    for _ in range(300):
        k = rng.randint(1, 5)
        F = rng.randint(1, 20)
        n = [rng.randint(1, 30) for _ in range(k)]
        variance = [rng.choice([0.0, rng.uniform(0, 10), rng.uniform(0, 1e4)]) * m for m in n]
        cost = [tuple(m * wire_width(F, b) for b in BITS) for m in n]
        budget = spent(cost, [rng.choice(BITS)] * k) - rng.randint(0, 20)
        got = greedy_bits(variance, cost, budget)
        if spent(cost, [2] * k) > budget:
            assert got == [2] * k
            continue
        assert spent(cost, got) <= budget
        feasible += 1
        for b in BITS:
            if spent(cost, [b] * k) <= budget:
                assert objective(variance, got) <= objective(variance, [b] * k)
        best = min(objective(variance, b) for b in itertools.product(BITS, repeat=k)
                   if spent(cost, b) <= budget)
        optimal += objective(variance, got) <= best * (1 + 1e-9)
    assert optimal >= 0.9 * feasible, (optimal, feasible)  # 184 of 190 when written


def test_variance_proxy_bounds_rounding_variance():
    x = torch.tensor([[0.0, 1.0, 0.5], [2.0, 2.0, 2.0], [-1.0, 3.0, 0.0]])
    v = variance_proxy(x, [2, 0, 1])
    assert v.tolist() == [3 * 1 / 4 + 0.0, 0.0, 3 * 16 / 4]


# -- three workers --------------------------------------------------------------------------------

def expected_bytes(policy, step, direction):
    """This worker's bytes in ``direction`` of the step just taken, from the assignment it used:
    its blocks' rows at their widths, plus forward, the decisions' gathers (at step 0 one of M
    float32 per layer, at every R-th step one of 2 L' M)."""
    M, me = comm.world_size(), comm.rank()
    counts = policy.plan.send_counts if direction == FWD else policy.plan.recv_counts
    out = sum(counts[p] * wire_width(H, int(policy.assign[li, direction, me, p]))
              for li in range(len(policy.layers)) for p in range(M) if p != me)
    if direction == FWD and step == 0:
        out += len(policy.layers) * (M - 1) * M * 4
    elif direction == FWD and step % policy.every == 0:
        out += (M - 1) * 2 * len(policy.layers) * M * 4
    return out


def mixed_width_check(part) -> dict:
    """``exchange_blocks`` with a different width per (sender, receiver) pair against the exact
    exchange of the same rows: every received row within one rounding step of its range."""
    from digest.policies.halo import HaloPlan, exchange
    plan, M, me = HaloPlan.of(part), comm.world_size(), comm.rank()
    width = lambda s, p: BITS[(2 * s + p) % 3]  # noqa: E731 - the same table on every worker
    h = torch.randn(part.n_inner, H, generator=torch.Generator().manual_seed(me)) * (me + 1)
    exact = exchange(h, plan)
    comm.traffic.reset()
    got = exchange_blocks(h.index_select(0, plan.send_flat), plan.send_counts, plan.recv_counts,
                          [width(me, p) for p in range(M)], [width(p, me) for p in range(M)],
                          torch.Generator().manual_seed(0), "halo_fwd", torch.float32)
    step = torch.cat([(exact_p.amax(1) - exact_p.amin(1)) / (2 ** width(p, me) - 1)
                      for p, exact_p in enumerate(exact.split(plan.recv_counts))])
    sent = sum(n * wire_width(H, width(me, p)) for p, n in enumerate(plan.send_counts) if p != me)
    return {"within": bool(((got - exact).abs() <= step[:, None] * (1 + 1e-5) + 1e-6).all()),
            "rows": int(got.size(0)), "bytes": comm.traffic.bytes["halo_fwd"], "expected": sent}


def per_step(trainer, epoch, ctx) -> dict:
    if trainer.cfg.options.quant_assign != "adaptive":
        return {}
    return {"assign": trainer.policy.assign.clone(),
            "expected_fwd": expected_bytes(trainer.policy, epoch, FWD),
            "expected_bwd": expected_bytes(trainer.policy, epoch, BWD)}


def train_all(cfg, rt, part, runs):
    out = train_runs(cfg, rt, part, runs, per_step=per_step)
    for name in runs:
        for row in out[name]:  # leave out the input features, fetched once at step 0
            row["bytes_halo_fwd"] -= row["input_bytes"]
            row["messages"] -= row["input_messages"]
    out["mixed"] = mixed_width_check(part)
    return out


# the one launch of this module's `world` fixture (tests/conftest.py)
WORLD = dict(fn=train_all, cfg=BASE, workers=WORKERS, graph=dict(seed=1), runs=RUNS)


def test_mixed_widths_decode_and_count(world):
    for r in world.ranks:
        check = r["mixed"]
        assert check["within"] and check["rows"] > 0
        assert check["bytes"] == check["expected"] > 0


def test_adaptive_within_uniform_bytes(world):
    for key in ("bytes_halo_fwd", "bytes_halo_bwd"):
        uni, ada = total(world.ranks, "uniform_b4", key), total(world.ranks, "adaptive_b4", key)
        assert all(a <= u for a, u in zip(ada, uni)), (key, ada, uni)
    # the budget is spent, not just respected: within one upgrade of a block of the uniform
    assert sum(total(world.ranks, "adaptive_b4", "bytes_total")) > \
        0.9 * sum(total(world.ranks, "uniform_b4", "bytes_total"))


def test_adaptive_counts_exactly(world):
    for r in world.ranks:
        for t, row in enumerate(r["adaptive_b4"]):
            assert row["bytes_halo_fwd"] == row["expected_fwd"], t
            assert row["bytes_halo_bwd"] == row["expected_bwd"], t


def test_every_worker_same_assignment(world):
    for t in range(EPOCHS):
        first = world.ranks[0]["adaptive_b4"][t]["assign"]
        assert all(torch.equal(r["adaptive_b4"][t]["assign"], first) for r in world.ranks[1:]), t
        assert {r["adaptive_b4"][t]["quant_bits_l1"] for r in world.ranks} == \
            {world.ranks[0]["adaptive_b4"][t]["quant_bits_l1"]}
    runs = [r["adaptive_b4"] for r in world.ranks]
    steps = [runs[0][t]["assign"] for t in range(EPOCHS)]
    # step 0 decides the forward blocks only (backward stays at 4 bits until statistics exist),
    # mixing widths; the assignment changes only at the decision steps R, 2R, ..., and the first
    # of them, with the statistics gathered since, does change it
    assert set(steps[0][:, BWD].unique().tolist()) == {4}
    assert len(steps[0][:, FWD].unique()) > 1
    for t in range(1, EPOCHS):
        if t % R:
            assert torch.equal(steps[t], steps[t - 1]), t
    assert not torch.equal(steps[R], steps[0])
    # the reported width is a row-weighted mean of 2, 4 and 8; columns stable over the run
    assert all(2 <= row["quant_bits_l1"] <= 8 for row in runs[0])
    assert len({tuple(sorted(row)) for row in runs[0]}) == 1


def test_adaptive_trains(world):
    loss = total(world.ranks, "adaptive_b4", "loss")
    assert all(math.isfinite(x) for x in loss) and loss[-1] < loss[0]
    uni = total(world.ranks, "uniform_b4", "loss")
    assert abs(loss[0] - uni[0]) < 0.05  # same model, same step-0 forward up to rounding


def test_adaptive_at_two_bits_is_uniform(world):
    """At 2 bits there is no room above the fewest: nothing is gathered, nothing changes."""
    for key in ("loss", "bytes_halo_fwd", "bytes_halo_bwd", "messages"):
        assert total(world.ranks, "adaptive_b2", key) == total(world.ranks, "uniform_b2", key), key
