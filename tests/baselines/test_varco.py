"""VARCO, DIGEST with a compressed store, and partition-based traffic, in 2 real worker processes.

All configurations run in ONE launch (the start-up of worker processes dominates the cost); each
test below checks one property of the recorded per-epoch losses, bytes and method state.
"""
from __future__ import annotations

import pytest
import torch

from digest.config import TrainConfig
from helpers import total, train_runs

H = 16  # hidden width = F of every exchanged layer
BASE = TrainConfig.of(dataset="varco", hidden=H, layers=3, dropout=0.0, epochs=20, progress=False)
RUNS = {
    "exact": dict(method="exact"),
    "varco_r1": dict(method="varco", comp_schedule="none"),
    "varco_learned_r1": dict(method="varco", compressor="learned", comp_schedule="fixed",
                             comp_ratio=1.0),
    "varco_r4": dict(method="varco", comp_schedule="fixed", comp_ratio=4.0, epochs=2),
    "varco_r4_all": dict(method="varco", comp_schedule="fixed", comp_ratio=4.0, comp_layers="1,2",
                         epochs=2),
    "varco_random_r4": dict(method="varco", compressor="random", comp_schedule="fixed",
                            comp_ratio=4.0, epochs=2),
    "varco_learned_r4": dict(method="varco", compressor="learned", comp_schedule="fixed",
                             comp_ratio=4.0, epochs=4),
    "varco_variable": dict(method="varco", comp_max=8.0, comp_slope=2.0),
    "varco_default": dict(method="varco", epochs=8),  # r_max 32, r_min 1, slope 1
    "digest": dict(method="digest", sync_interval=3),
    "digest_none": dict(method="digest", sync_interval=3, compressor="none"),
    "digest_slice": dict(method="digest", sync_interval=3, compressor="slice"),
    "digest_random": dict(method="digest", sync_interval=3, compressor="random",
                          comp_schedule="fixed", comp_ratio=4.0),
    "digest_learned": dict(method="digest", compressor="learned"),
    "partition": dict(method="partition", epochs=3),
}


def codec(trainer, ctx) -> dict:
    """The learned codec's parameters and how many parameters the optimiser updates."""
    return {"codec": {k: v.clone() for k, v in trainer.model.state_dict().items()
                      if "compressor" in k},
            "opt_params": sum(p.numel() for g in trainer.opt.param_groups for p in g["params"])}


def train_all(cfg, rt, part, runs):
    return train_runs(cfg, rt, part, runs, finish=codec)


# the one launch of this module's `world` fixture (tests/conftest.py)
WORLD = dict(fn=train_all, cfg=BASE, workers=2, graph=dict(seed=1), runs=RUNS)


def hidden_fwd(ranks, run, rows):
    """Per-epoch forward halo bytes without layer 0's input features (counted once, in epoch 0)."""
    return [f - i for f, i in zip(total(ranks, run, "bytes_halo_fwd"),
                                  total(ranks, run, "input_bytes"))]


def test_ratio_one_equals_exact(world):
    ranks = world.ranks
    exact = total(ranks, "exact", "loss")
    for run in ("varco_r1", "varco_learned_r1"):
        assert max(abs(a - b) for a, b in zip(exact, total(ranks, run, "loss"))) < 1e-4, run
        assert total(ranks, run, "bytes_halo_fwd") == total(ranks, "exact", "bytes_halo_fwd")
        assert total(ranks, run, "bytes_halo_bwd") == total(ranks, "exact", "bytes_halo_bwd")
    assert exact[-1] < exact[0]  # it trains


def test_compressed_bytes_are_k_columns(world):
    rows, ranks = world.halo_rows, world.ranks
    k = 4  # ceil(16 / 4)
    # default layers for L = 3: layer 1 compressed, layer 2 (the last layer's input) exact
    for run in ("varco_r4", "varco_random_r4", "varco_learned_r4"):
        assert set(hidden_fwd(ranks, run, rows)) == {rows * (k + H) * 4}, run
        assert set(total(ranks, run, "bytes_halo_bwd")) == {rows * (k + H) * 4}, run
    assert set(hidden_fwd(ranks, "varco_r4_all", rows)) == {rows * (k + k) * 4}
    assert set(total(ranks, "varco_r4_all", "bytes_halo_bwd")) == {rows * (k + k) * 4}
    assert hidden_fwd(ranks, "exact", rows)[0] == rows * (H + H) * 4
    assert ranks[0]["varco_r4"][0]["comp_width"] == k
    # the halo really is lossy: the first step's loss already differs from exact's
    assert abs(total(ranks, "varco_r4", "loss")[0] - total(ranks, "exact", "loss")[0]) > 1e-4


def test_variable_schedule_reaches_r_min_at_T_minus_2_over_s(world):
    rows, ranks = world.halo_rows, world.ranks
    ratios = [r["comp_ratio"] for r in ranks[0]["varco_variable"]]
    assert ratios[0] == 8.0
    assert ratios[5] == pytest.approx(8 - 2 * 5 * 7 / 18)  # the reference code divides by T - 2
    assert min(t for t, r in enumerate(ratios) if r == 1.0) == 9  # (T - 2) / s = 18 / 2
    fwd = total(ranks, "varco_variable", "bytes_halo_fwd")
    assert hidden_fwd(ranks, "varco_variable", rows)[0] == rows * (2 + H) * 4  # k = ceil(16 / 8)
    assert fwd[9:] == total(ranks, "exact", "bytes_halo_fwd")[9:]


def test_default_schedule_ends_with_two_full_width_epochs(world):
    """The reference code's r(t) = max(32 - 31 t / (T - 2), 1) at T = 8: full width (k = F = 16,
    the exact method's bytes) in the last two epochs, and only there."""
    rows, ranks = world.halo_rows, world.ranks
    got = ranks[0]["varco_default"]
    assert [r["comp_ratio"] for r in got] == [max(32 - 31 * t / 6, 1.0) for t in range(8)]
    assert [r["comp_ratio"] for r in got][-3:] == [32 - 31 * 5 / 6, 1.0, 1.0]
    assert [r["comp_width"] for r in got] == [1, 1, 1, 1, 2, 3, H, H]  # ceil(16 / r(t))
    assert hidden_fwd(ranks, "varco_default", rows) == [rows * (k + H) * 4
                                                        for k in (1, 1, 1, 1, 2, 3, H, H)]
    exact_bwd = total(ranks, "exact", "bytes_halo_bwd")[0]
    assert total(ranks, "varco_default", "bytes_halo_bwd")[-2:] == [exact_bwd] * 2
    assert total(ranks, "varco_default", "bytes_halo_bwd")[-3] < exact_bwd


def test_learned_codec_is_trained_and_identical_on_every_worker(world):
    ranks = world.ranks
    codecs = [r["end"]["varco_learned_r4"]["codec"] for r in ranks]
    assert set(codecs[0]) == {f"compressor.1.{n}" for n in ("enc_weight", "enc_bias", "dec_weight",
                                                             "dec_bias")}
    for key, value in codecs[0].items():
        assert torch.equal(value, codecs[1][key]), key
    assert not torch.equal(codecs[0]["compressor.1.enc_weight"], torch.eye(H))  # it moved
    plain = ranks[0]["end"]["varco_r4"]["opt_params"]
    assert ranks[0]["end"]["varco_learned_r4"]["opt_params"] == plain + 2 * (H * H + H)


def test_digest_store_compression_only_when_asked(world):
    ranks = world.ranks
    store = {run: sum(total(ranks, run, "bytes_store"))
             for run in ("digest", "digest_none", "digest_slice", "digest_random")}
    assert store["digest"] == store["digest_none"]  # --compressor auto keeps the exact sync
    assert total(ranks, "digest", "loss") == total(ranks, "digest_none", "loss")
    assert "comp_ratio" not in ranks[0]["digest"][0]
    assert store["digest_slice"] < store["digest_none"]
    assert store["digest_random"] < store["digest_none"]
    # one all-to-all per sync still: same message count as the exact store
    assert total(ranks, "digest_slice", "messages") == total(ranks, "digest_none", "messages")
    assert "learned" in ranks[0]["digest_learned"]


def test_partition_based_sends_no_representations(world):
    ranks = world.ranks
    for key in ("bytes_halo_fwd", "bytes_halo_bwd", "bytes_store"):
        assert set(total(ranks, "partition", key)) == {0}, key
    assert all(b > 0 for b in total(ranks, "partition", "bytes_params"))
