"""AdaQP's quantiser (baselines/quantize.py), single process: unbiased stochastic rounding, exact
packed sizes for 2, 4 and 8 bits, pack/unpack round trip, seeded draws."""
from __future__ import annotations

import math

import pytest
import torch

from baselines.quantize import (PARAM_BYTES, decode, dequantize, encode, generator, pack,
                                packed_width, quantize, unpack, wire_width)
from digest.seeds import mix


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_unbiased(bits):
    """The mean of N = 20000 dequantised draws is within 1e-2 of each row's range of the input.
    One draw's error is at most range / (2^b - 1) and its standard deviation at most half that,
    so the mean's is <= range / 6 / sqrt(N) ~ 0.0012 range at 2 bits: 1e-2 is > 8 sigma there
    (with N = 2000 it would be 2.7 sigma, too tight for 60 values), far more at 4 and 8 bits."""
    torch.manual_seed(0)
    x = torch.randn(6, 10) * torch.tensor([1, 10, 0.01, 3, 1, 1])[:, None]
    x[4] = 0.7  # a constant row: reconstructed exactly
    N = 20000
    reps = x.repeat(N, 1)  # one quantisation of N copies = N independent draws per value
    q, lo, scale = quantize(reps, bits, generator(123, "cpu"))
    mean = dequantize(q, lo, scale).view(N, *x.shape).mean(0)
    span = x.amax(1) - x.amin(1)
    keep = span > 0
    err = (mean - x).abs().amax(1)[keep] / span[keep]
    assert err.max() < 1e-2, err
    assert torch.equal(dequantize(q, lo, scale).view(N, *x.shape)[:, 4], x[4].expand(N, -1))
    # one draw lands on one of the two levels around each value
    one = dequantize(*quantize(x, bits, generator(1, "cpu")))
    assert ((one - x).abs() <= (span / (2 ** bits - 1))[:, None] * (1 + 1e-5)).all()


def test_rounding_to_nearest_is_biased_but_stochastic_is_not():
    x = torch.full((1, 4), 0.25)
    x[0, 0], x[0, 1] = 0.0, 1.0  # range 1, 1 bit... at 2 bits the levels are 0, 1/3, 2/3, 1
    near = dequantize(*quantize(x, 2, stochastic=False))
    assert near[0, 2].item() == pytest.approx(1 / 3)  # 0.25 always rounds to 1/3
    reps = x.repeat(4000, 1)
    stoch = dequantize(*quantize(reps, 2, generator(7, "cpu"))).mean(0)
    assert stoch[2].item() == pytest.approx(0.25, abs=0.01)


@pytest.mark.parametrize("bits,features", [(2, 1), (2, 4), (2, 10), (4, 7), (4, 10), (8, 10),
                                           (8, 3)])
def test_pack_round_trip_and_size(bits, features):
    g = torch.Generator().manual_seed(bits * 100 + features)
    q = torch.randint(0, 2 ** bits, (5, features), generator=g, dtype=torch.uint8)
    packed = pack(q, bits)
    assert packed.dtype == torch.uint8
    assert packed.shape == (5, math.ceil(features * bits / 8)) == (5, packed_width(features, bits))
    assert torch.equal(unpack(packed, bits, features), q)


def test_pack_layout_two_bits():
    q = torch.tensor([[1, 2, 3, 0, 3]], dtype=torch.uint8)
    assert pack(q, 2).tolist() == [[1 | 2 << 2 | 3 << 4, 3]]  # first value in the lowest bits


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_wire_size_and_decode(bits):
    x = torch.randn(7, 10)
    wire = encode(x, bits, generator(5, "cpu"))
    assert wire.dtype == torch.uint8
    assert wire.shape == (7, math.ceil(10 * bits / 8) + PARAM_BYTES) == (7, wire_width(10, bits))
    q, lo, scale = quantize(x, bits, generator(5, "cpu"))
    assert torch.equal(decode(wire, bits, 10), dequantize(q, lo, scale))
    # empty blocks (a peer with no rows) stay empty
    assert encode(x[:0], bits).shape == (0, wire_width(10, bits))
    assert decode(encode(x[:0], bits), bits, 10).shape == (0, 10)


def test_seeded_draws_repeat():
    x = torch.randn(4, 6)
    a = encode(x, 2, generator(mix(0, 5, 1, 0, 1), "cpu"))
    b = encode(x, 2, generator(mix(0, 5, 1, 0, 1), "cpu"))
    c = encode(x, 2, generator(mix(0, 6, 1, 0, 1), "cpu"))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert len({mix(0, 5, 1, d, r) for d in (0, 1) for r in range(4)}) == 8


def test_bad_bits():
    with pytest.raises(ValueError):
        quantize(torch.randn(2, 2), 3)
