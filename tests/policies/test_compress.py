"""Compression schedule and compressors (docs/methods.md section 5), single process."""
from __future__ import annotations

import pytest
import torch

from digest.policies.compress import compressor_factory, parse_layers, ratio_schedule, width


def sched(epoch, epochs=20, r_max=32.0, r_min=1.0, slope=1.0, kind="variable", fixed=4.0):
    return ratio_schedule(kind, epoch, epochs, r_max, r_min, slope, fixed)


def test_variable_schedule_values():
    # the reference code's r(t) = max(r_max - s t (r_max - r_min) / (T - 2), r_min)
    assert sched(0) == 32.0
    assert sched(9) == 32 - 9 * 31 / 18  # 16.5
    assert sched(17) == 32 - 17 * 31 / 18
    assert sched(18) == 1.0 and sched(19) == 1.0  # the last two epochs at r_min
    assert sched(5, epochs=10, r_max=8, r_min=2, slope=0.5) == 8 - 0.5 * 5 * 6 / 8
    # T = 200, r_max = 32 (the suites' setting): full width from epoch 198 on; dividing by T
    # left the last epoch at 1.155 (222 of 256 columns)
    assert [sched(t, epochs=200) for t in (0, 99, 197, 198, 199)] == [
        32.0, 32 - 99 * 31 / 198, 32 - 197 * 31 / 198, 1.0, 1.0]
    assert width(256, sched(197, epochs=200)) == 222 and width(256, sched(198, epochs=200)) == 256
    # T <= 2: every epoch is one of the last two
    assert sched(0, epochs=2) == sched(1, epochs=2) == sched(0, epochs=1) == 1.0


@pytest.mark.parametrize("slope,epochs", [(2.0, 20), (4.0, 20), (3.0, 10), (1.5, 9), (1.0, 7)])
def test_variable_schedule_reaches_r_min_at_T_minus_2_over_s(slope, epochs):
    rs = [sched(t, epochs=epochs, slope=slope) for t in range(epochs)]
    first = next(t for t, r in enumerate(rs) if r == 1.0)
    assert first == next(t for t in range(epochs) if t >= (epochs - 2) / slope)
    assert rs[-2:] == [1.0, 1.0]
    assert all(a >= b for a, b in zip(rs, rs[1:]))  # non-increasing


def test_fixed_and_none_schedules():
    assert [sched(t, kind="fixed", fixed=4.0) for t in (0, 7, 19)] == [4.0] * 3
    assert [sched(t, kind="none") for t in (0, 7, 19)] == [1.0] * 3
    with pytest.raises(ValueError):
        sched(0, kind="linear")


def test_width_rounding():
    assert width(16, 1.0) == 16 and width(16, 2.0) == 8 and width(16, 3.0) == 6  # ceil(5.33)
    assert width(16, 32.0) == 1 and width(16, 1000.0) == 1  # at least one column
    assert width(10, 4.0) == 3 and width(256, 16.5) == 16  # ceil(15.5)
    assert width(16, 2.0000000001) == 8  # round-off in r does not add a column


def test_parse_layers():
    assert parse_layers("", 4, [1, 2]) == [1, 2]
    assert parse_layers("2, 1,2", 4, []) == [1, 2]
    with pytest.raises(ValueError):
        parse_layers("0", 3, [])  # layer 0 (input features) is not exchanged per step
    with pytest.raises(ValueError):
        parse_layers("3", 3, [])


def test_slice_is_exact_on_the_kept_columns():
    c = compressor_factory("slice", 0)(1, 6)
    h = torch.randn(5, 6)
    z = c.encode(h, 2, 0)
    assert torch.equal(z, h[:, :2])
    out = c.decode(z, 6, 0)
    assert torch.equal(out[:, :2], h[:, :2]) and torch.equal(out[:, 2:], torch.zeros(5, 4))
    assert torch.equal(c.decode(c.encode(h, 6, 0), 6, 0), h)


def test_random_columns_shared_by_seed_layer_step():
    make = compressor_factory("random", 3)
    a, b = make(1, 32), make(1, 32)  # e.g. the sender and the receiver
    assert torch.equal(a.columns(8, 5, "cpu"), b.columns(8, 5, "cpu"))
    assert not torch.equal(a.columns(8, 5, "cpu"), a.columns(8, 6, "cpu"))  # other step
    assert not torch.equal(a.columns(8, 5, "cpu"), make(2, 32).columns(8, 5, "cpu"))  # other layer
    h = torch.randn(4, 32)
    z = a.encode(h, 8, 5)
    out = b.decode(z, 32, 5)
    cols = a.columns(8, 5, "cpu")
    assert torch.allclose(out[:, cols], h[:, cols] * 4)  # rescaled by F / k
    assert int((out != 0).any(0).sum()) == 8


def test_random_reconstruction_is_unbiased():
    c = compressor_factory("random", 0)(1, 12)
    h = torch.randn(3, 12)
    mean = sum(c.decode(c.encode(h, 3, s), 12, s) for s in range(2000)) / 2000
    # each entry: mean of 2000 draws of 4 h (prob 1/4) or 0; std of the mean = |h| sqrt(3) / sqrt(2000)
    assert (mean - h).abs().max() < 6 * 3 ** 0.5 / 2000 ** 0.5 * h.abs().max()
    assert (mean - h).abs().mean() < 0.1 * h.abs().mean()


def test_learned_shapes_gradients_and_identity_start():
    c = compressor_factory("learned", 0)(1, 8)
    assert sum(p.numel() for p in c.parameters()) == 2 * (8 * 8 + 8)
    h = torch.randn(5, 8, requires_grad=True)
    z = c.encode(h, 3, 0)
    out = c.decode(z, 8, 0)
    assert z.shape == (5, 3) and out.shape == (5, 8)
    assert torch.allclose(out[:, :3], h[:, :3]) and torch.allclose(out[:, 3:], torch.zeros(5, 5))
    out.pow(2).sum().backward()
    assert h.grad is not None and h.grad.abs().sum() > 0
    assert c.enc_weight.grad[:3].abs().sum() > 0 and c.enc_weight.grad[3:].abs().sum() == 0
    assert c.dec_weight.grad[:, :3].abs().sum() > 0 and c.dec_weight.grad[:, 3:].abs().sum() == 0


def test_none_and_unknown():
    c = compressor_factory("none", 0)(1, 4)
    h = torch.randn(2, 4)
    assert torch.equal(c.decode(c.encode(h, 1, 0), 4, 0), h)
    with pytest.raises(ValueError):
        compressor_factory("zip", 0)
