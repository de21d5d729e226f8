"""Sylvie (docs/methods.md 10.2, baselines/sylvie.py): the 1-bit quantiser (unbiased, every output a
row's min or max, bytes as the formula), then 3 real gloo workers in ONE launch for the
equivalences (float32 without pipelining = exact; float32 pipelined with K = 0 = PipeGCN;
b = 4 without pipelining = AdaQP uniform, tensor for tensor; K = 1 = no stale step), the
synchronous-step schedule and its bytes; bad option values through the command line."""
from __future__ import annotations

import math

import pytest
import torch

from baselines.quantize import (decode, dequantize, encode, generator, pack, quantize, unpack,
                                wire_width)
from digest.config import TrainConfig, validate
from digest.runtime import comm
from digest.training.trainer import Trainer
from helpers import here, resumed

BF16 = torch.bfloat16


# -- the low-bit module, one process --------------------------------------------------------------

@pytest.mark.parametrize("params", [torch.float32, BF16])
def test_one_bit_is_unbiased(params):
    """Mean of N = 40000 one-bit draws within 1e-2 of each row's range: one draw's standard
    deviation is at most range / 2, the mean's range / (2 sqrt(N)) = 0.0025 range (4 sigma), for 60
    values; a constant row comes back exactly with float32 parameters, unbiased with bfloat16."""
    torch.manual_seed(0)
    x = torch.randn(6, 10) * torch.tensor([1, 10, 1e-6, 3, 1, 1])[:, None]  # row 2: gradient-sized
    x[4] = 0.7
    N = 40000
    q, lo, scale = quantize(x.repeat(N, 1), 1, generator(5, "cpu"), params=params)
    draws = dequantize(q, lo, scale).view(N, *x.shape)
    span = (x.amax(1) - x.amin(1)).clamp_min(1e-3 * x.abs().amax(1))  # constant row: its value
    err = ((draws.mean(0) - x).abs().amax(1) / span)
    assert err.max() < 1e-2, err
    if params == torch.float32:
        assert torch.equal(draws[:, 4], x[4].expand(N, -1))


def test_one_bit_outputs_are_row_min_or_max():
    torch.manual_seed(1)
    x = torch.randn(5, 13)
    q, lo, scale = quantize(x, 1, generator(2, "cpu"))
    out = dequantize(q, lo, scale)
    lo_x, hi_x = x.amin(1, keepdim=True), x.amax(1, keepdim=True)
    assert ((out == lo_x) | (torch.isclose(out, hi_x, rtol=0, atol=1e-6))).all()
    # bfloat16 parameters: the two levels enclose the row, within 2^-7 of its range
    q, lo, scale = quantize(x, 1, generator(2, "cpu"), params=BF16)
    out = dequantize(q, lo, scale)
    span = hi_x - lo_x
    assert (lo[:, None] <= lo_x).all() and (lo + scale >= hi_x.squeeze(1) - 1e-6).all()
    near_lo, near_hi = (out - lo_x).abs() <= span / 128, (out - hi_x).abs() <= span / 128
    assert (near_lo | near_hi).all()
    assert torch.equal(lo.to(BF16).float(), lo) and torch.equal(scale.to(BF16).float(), scale)


@pytest.mark.parametrize("features", [1, 8, 13, 16])
def test_one_bit_pack_and_bytes(features):
    g = torch.Generator().manual_seed(features)
    q = torch.randint(0, 2, (7, features), generator=g, dtype=torch.uint8)
    assert pack(q, 1).shape == (7, math.ceil(features / 8))
    assert torch.equal(unpack(pack(q, 1), 1, features), q)
    x = torch.randn(7, features, generator=g)
    for params, extra in ((BF16, 4), (torch.float32, 8)):
        w = encode(x, 1, generator(3, "cpu"), params=params)
        assert w.dtype == torch.uint8 and w.shape == (7, math.ceil(features / 8) + extra)
        assert wire_width(features, 1, params) == math.ceil(features / 8) + extra
        # decoding reads exactly what was quantised
        q1, lo, scale = quantize(x, 1, generator(3, "cpu"), params=params)
        assert torch.equal(decode(w, 1, features, params=params), dequantize(q1, lo, scale))


# -- three workers --------------------------------------------------------------------------------

WORKERS, H, STEPS = 3, 16, 7
BASE = TrainConfig.of(dataset="sylvie", hidden=H, layers=3, dropout=0.0, epochs=STEPS,
                      progress=False)
RUNS = {
    "exact": dict(method="exact"),
    "fp32_sync": dict(method="sylvie", sylvie_bits=32, pipeline=False),
    "pipegcn": dict(method="pipegcn"),
    "fp32_pipe": dict(method="sylvie", sylvie_bits=32, sync_every=0),
    "adaqp4": dict(method="adaqp", quant_bits=4),
    "q4_sync": dict(method="sylvie", sylvie_bits=4, sylvie_scale_dtype="float32", pipeline=False),
    "k1": dict(method="sylvie", sync_every=1),
    "k3": dict(method="sylvie", sync_every=3),
    "zeros": dict(method="sylvie", sync_every=0, sylvie_step0="zeros", epochs=2),
}


def record(cfg, rt, part, runs, out_dir):
    torch.set_num_threads(1)
    out = {"send_rows": int(sum(s.numel() for s in part.send_idx)), "n_halo": part.n_halo}
    for name, over in runs.items():
        run_cfg = cfg.replace(**over)
        validate(run_cfg)
        trainer = Trainer(run_cfg, rt, part)
        policy, seen = trainer.policy, {}
        read = policy.halo

        def spy(layer, h, read=read, seen=seen):  # the halo rows each layer read
            rows = read(layer, h)
            seen[layer] = None if rows is None else rows.detach().clone()
            return rows
        policy.halo = spy
        steps = []
        for t in range(run_cfg.optim.epochs):
            comm.traffic.reset()
            seen.clear()
            loss = trainer.step(t)
            steps.append({"loss": loss, **comm.traffic.snapshot(), **policy.state(),
                          "rows": dict(seen),
                          "grads": [p.grad.clone() for p in trainer.model.parameters()]})
        out[name] = {"steps": steps,
                     "params": [p.detach().clone() for p in trainer.model.parameters()]}
    # dropout on; stopped after step 3 (its quantised rows and gradients still in flight) and
    # after step 4 (the step before a synchronous one: nothing in flight)
    direct = cfg.replace(**runs["k3"], dropout=0.5)
    trainer = Trainer(direct, rt, part)
    out["direct"] = [trainer.step(t) for t in range(STEPS)]
    out["resumed"] = {stop: resumed(direct, rt, part, f"{out_dir}/{stop}", stop) for stop in (4, 5)}
    return out


# the one launch of this module's `world` fixture (tests/conftest.py)
WORLD = dict(fn=record, cfg=BASE, workers=WORKERS, graph=dict(seed=5), runs=RUNS, out_dir=True)


def losses(ranks, run):
    steps = range(len(ranks[0][run]["steps"]))
    return [sum(r[run]["steps"][t]["loss"] for r in ranks) for t in steps]


def test_float32_without_pipelining_is_exact(world):
    for r in world.ranks:
        for a, b in zip(r["fp32_sync"]["steps"], r["exact"]["steps"]):
            assert a["loss"] == b["loss"]
            assert all(torch.equal(x, y) for x, y in zip(a["grads"], b["grads"]))
            assert a["sync_step"] == 1 and a["staleness_repr"] == 0
            for key in ("bytes_halo_fwd", "bytes_halo_bwd", "bytes_params"):
                assert a[key] == b[key], key
        assert all(torch.equal(x, y)
                   for x, y in zip(r["fp32_sync"]["params"], r["exact"]["params"]))


def test_float32_pipelined_without_sync_is_pipegcn(world):
    for r in world.ranks:
        for a, b in zip(r["fp32_pipe"]["steps"], r["pipegcn"]["steps"]):
            assert a["loss"] == b["loss"]
            assert all(torch.equal(x, y) for x, y in zip(a["grads"], b["grads"]))
            for key in ("bytes_halo_fwd", "bytes_halo_bwd", "staleness_repr"):
                assert a[key] == b[key], key
            assert a["sync_step"] == 0
    # pipelining did change training
    assert losses(world.ranks, "fp32_pipe") != losses(world.ranks, "exact")


def test_four_bits_without_pipelining_is_adaqp_uniform(world):
    """Same quantiser and random stream: the same dequantised halo rows, loss for loss."""
    for r in world.ranks:
        for a, b in zip(r["q4_sync"]["steps"], r["adaqp4"]["steps"]):
            for layer in (1, 2):
                assert torch.equal(a["rows"][layer], b["rows"][layer])
            assert a["loss"] == b["loss"]
            assert all(torch.equal(x, y) for x, y in zip(a["grads"], b["grads"]))
            for key in ("bytes_halo_fwd", "bytes_halo_bwd"):
                assert a[key] == b[key], key


def test_k1_has_no_stale_step(world):
    for r in world.ranks:
        steps = r["k1"]["steps"]
        assert [s["sync_step"] for s in steps] == [1] * STEPS
        assert [s["staleness_repr"] for s in steps] == [0] * STEPS


def test_schedule_rows_and_bytes_of_one_bit_k3(world):
    """K = 3: steps 2 and 5 synchronous, the others read the rows of the step before (step 0 the
    exact fill); the step before a synchronous one sends nothing; every other step sends
    rows x (ceil(H / 8) + 4) bytes each way (halo gradients: as many rows as halo rows)."""
    sync = [(t + 1) % 3 == 0 for t in range(STEPS)]
    wire = math.ceil(H / 8) + 4
    for r in world.ranks:
        steps = r["k3"]["steps"]
        assert [s["sync_step"] for s in steps] == [int(s) for s in sync]
        # step 0 reads the exact fill (staleness 0), later pipelined steps the step before
        assert [s["staleness_repr"] for s in steps] == [0] + [0 if s else 1 for s in sync[1:]]
        for t, s in enumerate(steps):
            if t >= 1 and sync[t - 1]:  # after a synchronous step: its own received rows
                for layer in (1, 2):
                    assert torch.equal(s["rows"][layer], steps[t - 1]["rows"][layer])
            silent = t + 1 < STEPS and sync[t + 1]  # the pipelined step before a synchronous one
            fwd = 0 if silent else 2 * r["send_rows"] * wire
            bwd = 0 if silent else 2 * r["n_halo"] * wire
            if t == 0:  # also the exact fill (float32 hidden rows) and the input features, once
                assert s["bytes_halo_fwd"] > fwd
            else:
                assert s["bytes_halo_fwd"] == fwd, t
            assert s["bytes_halo_bwd"] == bwd, t
            if not silent:
                assert s["wire_ratio"] == pytest.approx(wire / (4 * H))
                for layer in (1, 2):
                    assert 0 < s[f"qerr_fwd_l{layer}"] < 2 and s[f"qerr_bwd_l{layer}"] > 0
                assert s["quant_time"] > 0  # it quantised and packed what it sent
            # a pipelined step waits for the rows the pipelined step before it started (a timed
            # wait, never 0); a synchronous step's wait is its own, and the step after it reads
            # rows already there; the last step waits for what it started (nothing is left in
            # flight when training stops)
            waited = t >= 1 and not sync[t] and (not sync[t - 1] or t == STEPS - 1)
            assert (s["comm_wait"] > 0) == waited and s["comm_wait"] >= 0, t
    assert all(math.isfinite(x) for x in losses(world.ranks, "k3"))


def test_step0_zeros(world):
    for r in world.ranks:
        s0, s1 = r["zeros"]["steps"]
        assert all(float(v.abs().sum()) == 0 for v in s0["rows"].values())
        assert s0["staleness_repr"] is None and s1["staleness_repr"] == 1
        assert s0["bytes_halo_fwd"] == r["exact"]["steps"][0]["bytes_halo_fwd"] - \
            r["exact"]["steps"][1]["bytes_halo_fwd"] + 2 * r["send_rows"] * (math.ceil(H / 8) + 4)


def test_resume_continues_identically(world):
    """Rows and gradients in flight (waited for, dequantised and saved) and the schedule survive
    a checkpoint: restored into a new trainer, the run continues as the direct one."""
    for r in world.ranks:
        for stop in (4, 5):
            assert r["resumed"][stop] == r["direct"], stop


# -- the command line -----------------------------------------------------------------------------

@pytest.mark.parametrize("flags,message", [
    (["--sync-every", "-1"], "error: --sync-every must be >= 0 (0 = never synchronous)"),
])
def test_bad_values_are_one_line(flags, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    rc, err = here(["train", "--method", "sylvie", *flags, "--out", tmp_path / "run"], capsys)
    assert rc == 2 and err == [message]
    assert not (tmp_path / "run").exists()


def test_bad_choice_is_refused_by_argparse(tmp_path, capsys):
    rc, err = here(["train", "--method", "sylvie", "--sylvie-bits", "3"], capsys)  # (SystemExit)
    assert rc == 2 and len(err) == 1 and "argument --sylvie-bits: invalid choice: 3" in err[0]
