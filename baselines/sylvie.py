"""Sylvie (docs/methods.md section 10.2; Zhang, Hu, Sun, Wen, Zhang, arXiv 2303.01277): the exact
method's halo rows AND halo gradients quantised to one bit per value, pipelined as PipeGCN, with a
synchronous step every K steps (the Bounded Staleness Adaptor).

- Low-bit module: baselines/quantize.py at ``--sylvie-bits`` (default 1): per row its min a and
  scale s, each value stochastically rounded to a + q s, q in 0..2^b - 1 (at b = 1: the row's min
  or max, P(max) = (x - a) / (b - a), unbiased), packed 8 / b values per byte. The row's a and s
  travel as bfloat16 (``--sylvie-scale-dtype``, 4 bytes per row as the reference code's float16
  pair; float32: 8 bytes), rounded outward BEFORE quantising so that the reconstruction stays
  unbiased *(choice: the reference code rounds them after, which biases; bfloat16 rather than
  float16 because halo gradients, about 1e-5 to 1e-7 here, would be float16 subnormals)*. Bytes
  per block of n rows: n (ceil(F b / 8) + 4), i.e. the spec's ceil(n b / 8) F + 4 n when F b is a
  multiple of 8 (rows are packed one by one, not column by column). ``--sylvie-bits 32`` sends
  float32 rows (no quantisation). Layer-0 input features: float32, once (as every method).
- Random roundings: a generator seeded by (run seed, step, layer, direction, rank), AdaQP's
  stream: without pipelining, at b in {2, 4, 8} with float32 parameters the dequantised tensors
  are AdaQP uniform's, value for value.
- Pipelining (``--pipeline``, default on): baselines/pipegcn.py's machinery (this class extends
  ``PipeHalo``: its non-blocking sends, one-step-stale rows and gradients, fill and checkpoint),
  with the rows and gradients quantised before they leave and dequantised when waited for.
  Without smoothing.
- Synchronous steps (``--sync-every K``, the reference code's ``--fixed-synchro``, default 10
  *(choice)*): every step t with (t + 1) mod K == 0 exchanges this step's quantised rows and
  returns this step's quantised gradients (blocking, as exact/AdaQP); K = 0 never (plain
  pipelining), ``--no-pipeline`` every step. The rows received at a synchronous step are step t's
  rows, which the pipelined step t + 1 reads as they are; their gradients were applied at step t,
  so step t + 1 adds none. The pipelined step BEFORE a synchronous one sends nothing (neither rows
  nor gradients): the synchronous step replaces both *(choice)*. Staleness is thus 0 or 1 step.
- Step 0 (pipelined): halo rows from one exact float32 forward, PipeGCN's fill *(choice)*;
  ``--sylvie-step0 zeros``: zero halo rows and no gradient (the reference code).

Metrics (per step; metrics.csv averages them over workers): ``sync_step`` (1 synchronous, 0
pipelined: its mean is the fraction of synchronous steps), ``staleness_repr`` (0 or 1; none for
step 0's zeros), ``comm_wait`` (communication not hidden; ``comm_time`` as for PipeGCN),
``pipe_ready``, ``quant_time`` (seconds quantising, packing, unpacking and dequantising, the
measurement of the error included), ``wire_ratio`` (halo bytes sent / the same rows in float32),
``qerr_fwd_l{l}`` / ``qerr_bwd_l{l}`` (||x^ - x|| / ||x|| of the rows / gradients this worker
quantised for layer l in this step, Frobenius; dequantised at the sender from its own codes).

Shapes: as PipeGCN, ``halo(l, h_inner [n_inner, F]) -> [n_halo, F]``; on the wire uint8
``[rows, ceil(F b / 8) + 4]``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import Tensor

from digest.methods import register
from digest.options import Options, option
from digest.policies.counting import Sizes, Step
from digest.policies.halo import exchange
from digest.policies.params import ParamOptions, make_param_policy
from digest.runtime import comm
from digest.seeds import mix

from .pipegcn import PipeHalo
from .quantize import (PARAM_DTYPES, decode, dequantize, generator, quantize, to_wire,
                       wire_width)

FWD, BWD = 0, 1  # direction, part of the rounding seed (AdaQP's values)
SYLVIE_BITS = (1, 2, 4, 8, 32)  # 32: float32 rows, no quantisation
STEP0 = ("exact", "zeros")


@dataclass
class SylvieOptions(Options):
    """Sylvie: low-bit halo rows and gradients, pipelined, synchronous every K steps."""
    sylvie_bits: int = option(1, "bits per value of the halo rows and halo gradients (32 = "
                              "float32, no quantisation)", choices=SYLVIE_BITS)
    sylvie_scale_dtype: str = option("bfloat16", "dtype of each row's min and scale on the wire "
                                     "(bfloat16: 4 bytes per row; float32: 8)",
                                     choices=tuple(PARAM_DTYPES))
    pipeline: bool = option(True, "pipelined as PipeGCN: a step reads the rows and gradients "
                            "sent at the step before (--no-pipeline: every step synchronous)")
    sync_every: int = option(10, "every step t with (t + 1) mod K == 0 is synchronous (fresh "
                             "rows, same-step gradients); 0 = never (reference --fixed-synchro)")
    sylvie_step0: str = option("exact", "halo rows of a pipelined step 0: exact (one float32 "
                               "forward first, as PipeGCN) or zeros (the reference code)",
                               choices=STEP0)

    def group_period(self) -> int:  # the synchronous step
        return self.sync_every

    def check_group(self, cfg) -> None:
        if self.sylvie_bits not in SYLVIE_BITS:
            raise ValueError(f"--sylvie-bits must be one of {', '.join(map(str, SYLVIE_BITS))}")
        if self.sylvie_scale_dtype not in PARAM_DTYPES:
            raise ValueError(f"--sylvie-scale-dtype must be one of {', '.join(PARAM_DTYPES)}")
        if self.sync_every < 0:
            raise ValueError("--sync-every must be >= 0 (0 = never synchronous)")
        if self.sylvie_step0 not in STEP0:
            raise ValueError(f"--sylvie-step0 must be one of {', '.join(STEP0)}")


class _Decoded(comm.Pending):
    """A started all-to-all of packed rows whose ``wait()`` returns them dequantised."""

    def __init__(self, pending: comm.Pending, decode):
        super().__init__(pending.work, pending.recv, pending.send)
        self.decode, self.rows = decode, None

    def wait(self) -> Tensor:
        if self.rows is None:
            self.rows = self.decode(super().wait())
        return self.rows


class _SyncQuant(torch.autograd.Function):
    """A synchronous step's exchange: boundary rows quantised, one all-to-all, halo rows
    dequantised; backward: halo gradients quantised, sent back, dequantised and summed into the
    owners' rows (straight-through, as AdaQP's ``QuantExchange``)."""

    @staticmethod
    def forward(ctx, h_inner: Tensor, policy: "SylvieHalo", layer: int) -> Tensor:
        ctx.policy, ctx.layer, ctx.shape = policy, layer, h_inner.shape
        plan = policy.plan
        send = h_inner.detach().index_select(0, plan.send_flat)
        recv = comm.all_to_all_rows(policy._encode(send, layer, FWD), plan.send_counts,
                                    plan.recv_counts, "halo_fwd")
        return policy._decode(recv, h_inner.size(1))

    @staticmethod
    def backward(ctx, grad_halo: Tensor):
        policy, layer, plan = ctx.policy, ctx.layer, ctx.policy.plan
        policy.sent[layer] = grad_halo = grad_halo.contiguous()
        recv = comm.all_to_all_rows(policy._encode(grad_halo, layer, BWD), plan.recv_counts,
                                    plan.send_counts, "halo_bwd")
        g = policy._decode(recv, ctx.shape[1])
        policy.added[layer] = g
        return grad_halo.new_zeros(ctx.shape).index_add_(0, plan.send_flat, g), None, None


class SylvieHalo(PipeHalo):
    """PipeGCN's policy with quantised messages and synchronous steps (module docstring).
    For tests, as PipeHalo: ``used``, ``latest``, ``sent``, ``added`` of the current step."""

    def __init__(self, part, plan, model, cfg):
        super().__init__(part, plan, model, cfg, gamma=0.0)
        o = cfg.options
        self.bits = None if o.sylvie_bits == 32 else o.sylvie_bits
        self.params = PARAM_DTYPES[o.sylvie_scale_dtype]
        self.pipeline, self.every, self.step0 = o.pipeline, o.sync_every, o.sylvie_step0
        self.seed, self.widths = cfg.seed, model.widths
        self.layers = list(range(1, len(model.widths) - 1))
        self.step, self.sync = 0, False
        self._reset_counters()

    def synchronous(self, step: int) -> bool:
        """Whether ``step`` is synchronous (fresh rows, same-step gradients)."""
        return not self.pipeline or (self.every > 0 and (step + 1) % self.every == 0)

    def _reset_counters(self) -> None:
        self._qtime, self._qerr = 0.0, {}
        self._wire_bytes, self._fp32_bytes = 0, 0

    # -- the policy ---------------------------------------------------------------------------
    def before_step(self, step, forward):
        self.step, self.sync = step, self.synchronous(step)
        self._reset_counters()
        if not self.sync:
            if not self.feat and not self.alone and self.step0 == "zeros":
                dev = self.plan.send_flat.device
                self.feat = {l: torch.zeros(sum(self.plan.recv_counts), self.widths[l],
                                            device=dev) for l in self.layers}
                super().before_step(step, forward)
                self.age = None  # zeros: no rows of any step
                return
            super().before_step(step, forward)
            return
        self._waited, self._waits, self._ready = 0.0, 0, 0
        self.used, self.latest, self.added, self.sent = {}, {}, {}, {}
        self.age = 0
        # what the pipeline left for this step (rows and gradients of step t - 1; none when
        # step t - 1 knew this one is synchronous) is replaced by this step's own
        for store in (self.feat, self.grad):
            for layer in list(store):
                self._resolve(store.pop(layer))

    def halo(self, layer, h_inner):
        if self.alone:
            return None
        if not self.sync:
            return super().halo(layer, h_inner)
        self.latest[layer] = h_inner.detach()
        if self.bits is None:  # float32: the exact exchange, gradients back in this step
            rows = exchange(h_inner, self.plan, "halo_fwd", "halo_bwd")
            n = int(self.plan.send_flat.numel()) * h_inner.size(1) * 4
            self._wire_bytes += n
            self._fp32_bytes += n
        else:
            rows = _SyncQuant.apply(h_inner, self, layer)
        self.used[layer] = self.feat[layer] = rows.detach()  # what step t + 1 reads
        return rows

    def _next_is_sync(self) -> bool:
        return self.synchronous(self.step + 1)

    def _send_feat(self, layer, rows):
        if self._next_is_sync():  # replaced by the next step's fresh rows: nothing to send
            return None
        if self.bits is None:
            n = rows.numel() * 4
            self._wire_bytes += n
            self._fp32_bytes += n
            return super()._send_feat(layer, rows)
        plan, F = self.plan, rows.size(1)
        pending = comm.all_to_all_rows_async(self._encode(rows, layer, FWD), plan.send_counts,
                                             plan.recv_counts, "halo_fwd")
        return _Decoded(pending, lambda w: self._decode(w, F))

    def _send_grad(self, layer, grad_halo):
        if self._next_is_sync():  # the next step returns its own gradients instead
            return None
        if self.bits is None:
            n = grad_halo.numel() * 4
            self._wire_bytes += n
            self._fp32_bytes += n
            return super()._send_grad(layer, grad_halo)
        plan, F = self.plan, grad_halo.size(1)
        pending = comm.all_to_all_rows_async(self._encode(grad_halo, layer, BWD),
                                             plan.recv_counts, plan.send_counts, "halo_bwd")
        return _Decoded(pending, lambda w: self._decode(w, F))

    def _resolve(self, item):
        return None if item is None else super()._resolve(item)

    # -- the low-bit module -------------------------------------------------------------------
    def _encode(self, rows: Tensor, layer: int, direction: int) -> Tensor:
        """Rows ``[R, F]`` -> wire uint8 ``[R, ceil(F b / 8) + param bytes]``; records the
        relative quantisation error of these rows and the time taken."""
        t0 = time.perf_counter()
        gen = generator(mix(self.seed, self.step, layer, direction, comm.rank()), rows.device)
        q, lo, scale = quantize(rows, self.bits, gen, params=self.params)
        wire = to_wire(q, lo, scale, self.bits, self.params)
        if rows.numel():
            x = rows.detach().float()
            err = (dequantize(q, lo, scale) - x).norm() / x.norm().clamp_min(1e-30)
            self._qerr[direction, layer] = float(err)
        R, F = rows.shape
        self._wire_bytes += R * wire_width(F, self.bits, self.params)
        self._fp32_bytes += R * F * 4
        self._qtime += time.perf_counter() - t0
        return wire

    def _decode(self, wire: Tensor, features: int) -> Tensor:
        t0 = time.perf_counter()
        rows = decode(wire, self.bits, features, torch.float32, self.params)
        self._qtime += time.perf_counter() - t0
        return rows

    def state(self):
        out = super().state()
        out.update(sync_step=int(self.sync), quant_time=self._qtime,
                   wire_ratio=self._wire_bytes / self._fp32_bytes if self._fp32_bytes else None)
        for l in self.layers:
            out[f"qerr_fwd_l{l}"] = self._qerr.get((FWD, l))
            out[f"qerr_bwd_l{l}"] = self._qerr.get((BWD, l))
        return out


def sylvie_step(sizes: Sizes, step: int) -> Step:
    """A synchronous step: the quantised rows forward and gradients back, blocking. A pipelined
    one: the same started without blocking (overlapped), or nothing when the next step is
    synchronous. A pipelined step 0 is preceded by PipeGCN's float32 fill (--sylvie-step0
    exact). Every value sent or received is quantised or dequantised (unless 32 bits)."""
    o, M = sizes.options, sizes.workers

    def sync(t):
        return not o.pipeline or (o.sync_every > 0 and (t + 1) % o.sync_every == 0)

    fill = step == 0 and not sync(0) and o.sylvie_step0 == "exact"
    out = ([sizes.input_fetch()] if step == 0 else []) + (sizes.fill("halo_fwd") if fill else [])
    coded = [0] * M
    if sync(step) or not sync(step + 1):
        for l in sizes.hidden:
            F = sizes.widths[l]
            wire = 4 * F if o.sylvie_bits == 32 else \
                wire_width(F, o.sylvie_bits, PARAM_DTYPES[o.sylvie_scale_dtype])
            out += [sizes.rows(wire, "halo_fwd", overlapped=not sync(step)),
                    sizes.rows(wire, "halo_bwd", back=True, overlapped=not sync(step))]
            for r in range(M):
                coded[r] += 2 * F * sum(sizes.send[r][p] + sizes.send[p][r] for p in range(M)
                                        if p != r) * (o.sylvie_bits != 32)
    return Step(out + sizes.param_sync(step), "grad", forwards=int(fill), coded=tuple(coded))


@register("sylvie", "Sylvie: halo rows and gradients quantised to --sylvie-bits (1) bits, "
          "pipelined as PipeGCN, synchronous every --sync-every steps",
          options=(SylvieOptions, ParamOptions), traffic=sylvie_step)
def sylvie(cfg, part, plan, model):
    return SylvieHalo(part, plan, model, cfg), make_param_policy(cfg)
