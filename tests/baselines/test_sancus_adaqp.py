"""SANCUS and AdaQP (docs/methods.md sections 8.3, 8.4) in 2 real gloo worker processes: their
limits (SANCUS with threshold 0 is exact, for GCN, SAGE and GAT; AdaQP at 8 bits is exact up to
its rounding, for every model), their byte counts, SANCUS's staleness bound and backward, AdaQP's
seeded rounding. (Resume: test_resume.py.)

All in-process configurations run in ONE launch (worker start-up dominates the cost); each test
checks one property of the recorded per-epoch losses, bytes and method state.
"""
from __future__ import annotations

import math

import pytest
import torch

from baselines.sancus import SkipExchange
from digest.config import TrainConfig
from digest.policies.halo import exchange
from helpers import mean, total, train_runs

H = 10  # hidden width = F of both exchanged layers (10: packed rows need padding at 2 and 4 bits)
LAYERS = (1, 2)
MODEL_EPOCHS = 8
BASE = TrainConfig.of(dataset="sa", hidden=H, layers=3, dropout=0.0, epochs=20, progress=False)
RUNS = {
    "exact": dict(method="exact"),
    "sancus_eps0": dict(method="sancus", skip_threshold=0.0),
    "sancus_bound": dict(method="sancus", skip_threshold=1e9, max_staleness=3, epochs=10),
    "sancus_s0": dict(method="sancus", skip_threshold=1e9, max_staleness=0, epochs=3),
    "sancus_mixed": dict(method="sancus", max_staleness=4),  # EPS 0.1 (default)
    "adaqp_b2": dict(method="adaqp", quant_bits=2, epochs=4),
    "adaqp_b2_again": dict(method="adaqp", quant_bits=2, epochs=4),
    "adaqp_b4": dict(method="adaqp", quant_bits=4, epochs=2),
    "adaqp_b8": dict(method="adaqp", quant_bits=8),
    # the other models, with dropout (the same masks for every method: the same seeds)
    **{f"{m}_{model}": dict(method=m, model=model, dropout=0.5, epochs=MODEL_EPOCHS, **flags)
       for model in ("sage", "gat")
       for m, flags in (("exact", {}), ("sancus", dict(skip_threshold=0.0)),
                        ("adaqp", dict(quant_bits=8)))},
}


def expected_sancus_fwd(policy) -> int:
    """This worker's halo_fwd bytes of the step just taken, from the policy's own decisions: one
    flag byte per (layer, peer) block it owns plus 4 F bytes per row of every block it sent."""
    counts = [policy.plan.send_counts[p] for p in policy.out_peers]
    rows = sum(c for l in policy.skips for c, s in zip(counts, policy.skips[l]) if s == 0)
    return len(policy.skips) * len(counts) + rows * H * 4


def per_step(trainer, epoch, ctx) -> dict:
    return {"expected_fwd": expected_sancus_fwd(trainer.policy)} \
        if trainer.cfg.method == "sancus" else {}


def train_all(cfg, rt, part, runs):
    out = train_runs(cfg, rt, part, runs, per_step=per_step)
    for name in runs:
        for row in out[name]:  # these checks are about the hidden layers' exchanges
            row["bytes_halo_fwd"] -= row["input_bytes"]
            row["messages"] -= row["input_messages"]
    out["grad_check"] = grad_check(rt, part)
    return out


def grad_check(rt, part):
    """With every block skipped (the halo comes from a cache), the owners' row gradients equal
    the exact exchange's for the same upstream gradient: backward is never skipped."""
    from digest.policies.halo import HaloPlan
    plan = HaloPlan.of(part)
    g = torch.Generator().manual_seed(rt.rank)
    h = torch.randn(part.n_inner, 5, generator=g, requires_grad=True)
    up = torch.randn(part.n_halo, 5, generator=g)
    (exchange(h, plan) * up).sum().backward()
    exact = h.grad.clone()
    h.grad = None
    cache = torch.randn(part.n_halo, 5, generator=g)
    zero = [0] * len(plan.send_counts)
    none = torch.empty(0, dtype=torch.long)
    halo = SkipExchange.apply(h, plan, none, zero, zero, none, cache)
    (halo * up).sum().backward()
    return {"exact": exact, "skipped": h.grad.clone(), "halo_is_cache": torch.equal(halo, cache),
            "boundary": int(plan.send_flat.numel())}


# the one launch of this module's `world` fixture (tests/conftest.py)
WORLD = dict(fn=train_all, cfg=BASE, workers=2, graph=dict(seed=1), runs=RUNS)


# -- SANCUS ---------------------------------------------------------------------------------------

def test_sancus_threshold_zero_is_exact(world):
    rows, ranks = world.halo_rows, world.ranks
    exact, sancus = total(ranks, "exact", "loss"), total(ranks, "sancus_eps0", "loss")
    assert len(exact) == 20 and max(abs(a - b) for a, b in zip(exact, sancus)) < 1e-4
    assert exact[-1] < exact[0]  # it trains
    # backward never skipped; forward: exact's rows plus one flag byte per (layer, peer) block
    assert total(ranks, "sancus_eps0", "bytes_halo_bwd") == total(ranks, "exact", "bytes_halo_bwd")
    flags = 2 * len(LAYERS)  # 2 workers, one peer each, 2 exchanged layers
    assert set(total(ranks, "sancus_eps0", "bytes_halo_fwd")) == {rows * H * 4 * 2 + flags}
    assert set(mean(ranks, "sancus_eps0", "sent_fraction")) == {1.0}


def test_sancus_staleness_bound(world):
    """EPS huge: every block is skipped S = 3 steps, then sent: ages 0, 1, 2, 3, 0, ..."""
    rows, ranks = world.halo_rows, world.ranks
    T = len(ranks[0]["sancus_bound"])
    assert mean(ranks, "sancus_bound", "sent_fraction") == [1.0 if t % 4 == 0 else 0.0
                                                            for t in range(T)]
    assert mean(ranks, "sancus_bound", "staleness_repr") == [t % 4 for t in range(T)]
    assert mean(ranks, "sancus_bound", "staleness_repr_max") == [t % 4 for t in range(T)]
    fwd = total(ranks, "sancus_bound", "bytes_halo_fwd")
    flags = 2 * len(LAYERS)
    assert fwd == [rows * H * 4 * 2 + flags if t % 4 == 0 else flags for t in range(T)]
    exact_bwd = total(ranks, "exact", "bytes_halo_bwd")[0]
    assert set(total(ranks, "sancus_bound", "bytes_halo_bwd")) == {exact_bwd}
    # skipped peers send no message: forward messages are the 2 x 2 flag messages only
    msgs = total(ranks, "sancus_bound", "messages")
    assert msgs[0] - msgs[1] == 2 * len(LAYERS)
    # S = 0: always sent, whatever EPS
    assert set(mean(ranks, "sancus_s0", "sent_fraction")) == {1.0}


def test_sancus_mixed_decisions_counted_exactly(world):
    ranks = world.ranks
    frac = mean(ranks, "sancus_mixed", "sent_fraction")
    assert frac[0] == 1.0 and 0 < min(frac) < 1, frac  # both decisions occur
    for r in ranks:
        for t, row in enumerate(r["sancus_mixed"]):
            assert row["bytes_halo_fwd"] == row["expected_fwd"], t
            assert row["staleness_repr_max"] <= 4
    assert total(ranks, "sancus_mixed", "bytes_halo_bwd") == total(ranks, "exact", "bytes_halo_bwd")
    assert sum(total(ranks, "sancus_mixed", "bytes_halo_fwd")) < \
        sum(total(ranks, "exact", "bytes_halo_fwd"))
    loss = total(ranks, "sancus_mixed", "loss")
    assert loss[-1] < loss[0]


def test_sancus_gradient_of_cached_rows_goes_back(world):
    ranks = world.ranks
    for r in ranks:
        check = r["grad_check"]
        assert check["halo_is_cache"] and check["boundary"] > 0
        assert torch.equal(check["exact"], check["skipped"])
        assert check["exact"].abs().sum() > 0


# -- AdaQP ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("bits", [2, 4, 8])
def test_adaqp_bytes_are_packed_size(world, bits):
    rows, ranks = world.halo_rows, world.ranks
    per_row = math.ceil(H * bits / 8) + 8  # packed values + float32 offset and scale
    run = f"adaqp_b{bits}"
    for key in ("bytes_halo_fwd", "bytes_halo_bwd"):
        assert set(total(ranks, run, key)) == {rows * per_row * len(LAYERS)}, key
    assert ranks[0][run][0][f"quant_bits_l1"] == bits and ranks[0][run][0]["quant_bits_l2"] == bits
    assert total(ranks, run, "messages") == total(ranks, "exact", "messages")[:len(ranks[0][run])]


def test_adaqp_lossy_but_close_and_seeded(world):
    ranks = world.ranks
    exact = total(ranks, "exact", "loss")
    b2, b8 = total(ranks, "adaqp_b2", "loss"), total(ranks, "adaqp_b8", "loss")
    assert b2 == total(ranks, "adaqp_b2_again", "loss")  # roundings seeded by (seed, step, layer)
    assert abs(b2[1] - exact[1]) > 1e-6  # quantisation changes the arithmetic
    assert max(abs(a - b) for a, b in zip(exact, b8)) < 1e-2  # 8 bits: close to exact
    assert b8[-1] < b8[0]


# -- every model ----------------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["sage", "gat"])
def test_limits_equal_exact_for_every_model(world, model):
    """SAGE and GAT (GCN: above), with dropout: SANCUS with threshold 0 sends every block, so its
    losses are exact's and its bytes exact's plus the flag bytes; AdaQP at 8 bits stays within
    rounding of exact and moves its packed rows."""
    rows, ranks = world.halo_rows, world.ranks
    exact = total(ranks, f"exact_{model}", "loss")
    sancus, adaqp = total(ranks, f"sancus_{model}", "loss"), total(ranks, f"adaqp_{model}", "loss")
    assert len(exact) == MODEL_EPOCHS and exact[-1] < exact[0]
    assert max(abs(a - b) for a, b in zip(exact, sancus)) < 1e-4
    assert total(ranks, f"sancus_{model}", "bytes_halo_bwd") == \
        total(ranks, f"exact_{model}", "bytes_halo_bwd")
    assert set(total(ranks, f"sancus_{model}", "bytes_halo_fwd")) == \
        {rows * H * 4 * 2 + 2 * len(LAYERS)}
    assert abs(adaqp[1] - exact[1]) > 1e-7  # quantised: not the same arithmetic
    assert max(abs(a - b) for a, b in zip(exact, adaqp)) < 1e-2
    per_row = H + 8  # 8 bits: one byte per value, + float32 offset and scale
    for key in ("bytes_halo_fwd", "bytes_halo_bwd"):
        assert set(total(ranks, f"adaqp_{model}", key)) == {rows * per_row * len(LAYERS)}, key
