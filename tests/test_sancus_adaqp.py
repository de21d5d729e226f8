"""SANCUS and AdaQP (docs/methods.md sections 8.3, 8.4) in 2 real gloo worker processes, plus their
resumption through the command line.

All in-process configurations run in ONE launch (worker start-up dominates the cost); each test
checks one property of the recorded per-epoch losses, bytes and method state.
"""
from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from baselines.sancus import SkipExchange
from digest.runtime import comm
from digest.data.cache import load_book, prepare_partition
from digest.config import TrainConfig, validate
from digest.policies.halo import exchange
from digest.data.synthetic import make_synthetic
from digest.training.trainer import Trainer
from distributed import run_workers

ROOT = Path(__file__).resolve().parents[1]
H = 10  # hidden width = F of both exchanged layers (10: packed rows need padding at 2 and 4 bits)
LAYERS = (1, 2)
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
    **{f"{m}_{model}": dict(method=m, model=model, dropout=0.5, epochs=2)
       for m in ("sancus", "adaqp") for model in ("gcn", "sage", "gat")},
}


def expected_sancus_fwd(policy) -> int:
    """This worker's halo_fwd bytes of the step just taken, from the policy's own decisions: one
    flag byte per (layer, peer) block it owns plus 4 F bytes per row of every block it sent."""
    counts = [policy.plan.send_counts[p] for p in policy.out_peers]
    rows = sum(c for l in policy.skips for c, s in zip(counts, policy.skips[l]) if s == 0)
    return len(policy.skips) * len(counts) + rows * H * 4


def train_all(cfg, rt, part, runs):
    torch.set_num_threads(1)
    out = {"grad_check": grad_check(rt, part)}
    for name, over in runs.items():
        run_cfg = cfg.replace(**over)
        validate(run_cfg)
        trainer = Trainer(run_cfg, rt, part)
        rows = []
        for epoch in range(trainer.cfg.optim.epochs):
            comm.traffic.reset()
            loss = trainer.step(epoch)
            row = {"loss": loss, **comm.traffic.snapshot(), **trainer.policy.state()}
            if epoch == 0:  # these checks are about the hidden layers' exchanges: leave out the
                # input features, fetched once and counted by the trainer at step 0
                nbytes, messages = trainer.input_fetch
                row["bytes_halo_fwd"] -= nbytes
                row["messages"] -= messages
            if run_cfg.method == "sancus":
                row["expected_fwd"] = expected_sancus_fwd(trainer.policy)
            rows.append(row)
        out[name] = rows
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


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    graph = make_synthetic(nodes=300, classes=4, avg_degree=8, features=12, seed=1)
    part_dir = prepare_partition("sa", 2, "metis", 0, tmp_path_factory.mktemp("data"), graph=graph)
    rows = sum(load_book(part_dir).stats["halo_sizes"])  # rows sent per exchange, all workers
    return rows, run_workers(train_all, BASE, part_dir, 2, runs=RUNS)


def total(ranks, run, key):
    """Per-epoch sum over workers of ``key``."""
    return [sum(r[run][t][key] for r in ranks) for t in range(len(ranks[0][run]))]


def mean(ranks, run, key):
    return [v / len(ranks) for v in total(ranks, run, key)]


# -- SANCUS ---------------------------------------------------------------------------------------

def test_sancus_threshold_zero_is_exact(world):
    rows, ranks = world
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
    rows, ranks = world
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
    _, ranks = world
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
    _, ranks = world
    for r in ranks:
        check = r["grad_check"]
        assert check["halo_is_cache"] and check["boundary"] > 0
        assert torch.equal(check["exact"], check["skipped"])
        assert check["exact"].abs().sum() > 0


# -- AdaQP ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("bits", [2, 4, 8])
def test_adaqp_bytes_are_packed_size(world, bits):
    rows, ranks = world
    per_row = math.ceil(H * bits / 8) + 8  # packed values + float32 offset and scale
    run = f"adaqp_b{bits}"
    for key in ("bytes_halo_fwd", "bytes_halo_bwd"):
        assert set(total(ranks, run, key)) == {rows * per_row * len(LAYERS)}, key
    assert ranks[0][run][0][f"quant_bits_l1"] == bits and ranks[0][run][0]["quant_bits_l2"] == bits
    assert total(ranks, run, "messages") == total(ranks, "exact", "messages")[:len(ranks[0][run])]


def test_adaqp_lossy_but_close_and_seeded(world):
    _, ranks = world
    exact = total(ranks, "exact", "loss")
    b2, b8 = total(ranks, "adaqp_b2", "loss"), total(ranks, "adaqp_b8", "loss")
    assert b2 == total(ranks, "adaqp_b2_again", "loss")  # roundings seeded by (seed, step, layer)
    assert abs(b2[1] - exact[1]) > 1e-6  # quantisation changes the arithmetic
    assert max(abs(a - b) for a, b in zip(exact, b8)) < 1e-2  # 8 bits: close to exact
    assert b8[-1] < b8[0]


# -- every model ----------------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["gcn", "sage", "gat"])
@pytest.mark.parametrize("method", ["sancus", "adaqp"])
def test_models_run(world, method, model):
    _, ranks = world
    rows = ranks[0][f"{method}_{model}"]
    assert len(rows) == 2 and all(math.isfinite(r["loss"]) for r in rows)
    assert all(r["bytes_halo_fwd"] > 0 and r["bytes_halo_bwd"] > 0 for r in rows)


# -- resume through the command line --------------------------------------------------------------

DATASET = "synthetic:nodes=400,classes=3,avg_degree=6,features=12,seed=2"


def cli(args, data_root, cwd):
    env = {**os.environ, "DIGEST_DATA": str(data_root), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "digest", "train", "--dataset", DATASET,
                           "--workers", "2", "--hidden", "8", "--no-progress",
                           *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def metrics(out: Path) -> list[dict]:
    with open(out / "metrics.csv") as f:
        return list(csv.DictReader(f))


# SANCUS at EPS 0.1 without dropout: sent at steps 0 and 3, half its blocks skipped at 1, 2, 4, 5
# (so the resumed steps 4 and 5 decide from the restored sent rows, caches and counters)
@pytest.mark.parametrize("flags", [["--method", "sancus", "--dropout", "0", "--max-staleness", "3"],
                                   ["--method", "adaqp", "--quant-bits", "2"]],
                         ids=["sancus", "adaqp"])
def test_resume_continues_identically(flags, data_root, tmp_path):
    direct, cut = tmp_path / "direct", tmp_path / "cut"
    cli([*flags, "--epochs", 6, "--out", direct], data_root, tmp_path)
    cli([*flags, "--epochs", 4, "--checkpoint-every", 2, "--out", cut], data_root, tmp_path)
    cli(["--resume", cut, "--epochs", 6], data_root, tmp_path)
    a, b = metrics(direct), metrics(cut)
    keys = ["train_loss", "bytes_halo_fwd", "bytes_halo_bwd", "val_acc", "test_acc"]
    keys += ["sent_fraction", "staleness_repr"] if flags[1] == "sancus" else ["quant_bits_l1"]
    assert [[r[k] for k in keys] for r in a] == [[r[k] for k in keys] for r in b]
    assert len(a) == 6
    if flags[1] == "sancus":  # the resumed steps did reuse restored caches
        assert max(float(r["sent_fraction"]) for r in a[4:]) < 1
