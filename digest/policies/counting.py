"""A method's traffic, counted without running it (``python -m digest advise``; docs/methods.md
section 13).

Every method that can say in advance what one of its steps sends registers a *step count*
beside its builder (``register(..., traffic=fn)``): ``fn(sizes, step) -> Step``, the collectives
that step makes, in the units ``digest/runtime/comm.py`` counts them (so advise's bytes per epoch
are what a run records), plus what its computation reads (halo rows with or without a gradient,
or none). A method whose bytes depend on the data or on timing registers the reason instead
(``traffic="..."``), and advise prints it.

The counting rules, those of comm.py:
- an all-to-all of row blocks: a worker counts the rows it sends to OTHER workers times the bytes
  of a row, and one message per other worker it sends a non-empty block to;
- an all-reduce (ring): 2 (M - 1) / M of the buffer and 2 (M - 1) messages per worker;
- the layer-0 halo features, fetched once: the receiving worker counts them at step 0.
"""
from __future__ import annotations

from dataclasses import dataclass


class Unpredictable(ValueError):
    """A step count cannot be given for these options (bytes depend on the data or on timing)."""


@dataclass(frozen=True)
class Collective:
    """One collective of one step.

    Args:
        category: the byte category it is counted in (``halo_fwd``, ``store``, ...).
        sent, received: bytes each worker sends to / receives from the others. Shape ``[M]``.
        messages: messages each worker sends. Shape ``[M]``.
        overlapped: started without blocking and waited for later (pipelined methods).
    """

    category: str
    sent: tuple
    received: tuple
    messages: tuple
    overlapped: bool = False


@dataclass
class Step:
    """What one step does, as counted.

    Args:
        collectives: in the order they happen.
        halo: what the step's computation reads for the halo rows of hidden layers: ``grad``
            (fresh rows whose gradients go back), ``const`` (stored rows, no gradient) or
            ``none`` (partition-based: the induced subgraph).
        forwards: extra forward-only passes (a store or pipeline fill before step 0).
        coded: values each worker encodes and decodes (quantised messages). Shape ``[M]``.
        unmodelled: work the time model does not know (say what), or ``""``.
    """

    collectives: list
    halo: str = "grad"
    forwards: int = 0
    coded: tuple = ()
    unmodelled: str = ""


@dataclass
class Sizes:
    """What a step count needs to know of the job.

    Args:
        send: ``send[r][p]`` rows worker r sends to worker p in a halo exchange (0 for r == p).
        widths: columns of h^l, l = 0..L (``GNN.widths``).
        params: number of model parameters.
        fetch: per worker, (bytes, messages) of its halo's input features, fetched once.
        cfg: the run's ``TrainConfig`` (its ``options`` are the method's).
    """

    send: list
    widths: list
    params: int
    fetch: list
    cfg: object

    @property
    def workers(self) -> int:
        return len(self.send)

    @property
    def epochs(self) -> int:
        return self.cfg.optim.epochs

    @property
    def options(self):
        return self.cfg.options

    @property
    def hidden(self) -> list[int]:
        """The exchanged hidden layers 1..L-1."""
        return list(range(1, len(self.widths) - 1))

    def rows(self, row_bytes: int, category: str, back: bool = False, overlapped: bool = False,
             counts: list | None = None) -> Collective:
        """An all-to-all of row blocks of ``row_bytes`` bytes each: the halo exchange (``back``:
        its reverse, halo gradients to their owners), or ``counts[r][p]`` rows instead."""
        M = self.workers
        rows = counts if counts is not None else self.send
        if back:
            rows = [[rows[p][r] for p in range(M)] for r in range(M)]
        sent = tuple(sum(rows[r][p] for p in range(M) if p != r) * row_bytes for r in range(M))
        received = tuple(sum(rows[p][r] for p in range(M) if p != r) * row_bytes
                         for r in range(M))
        messages = tuple(sum(1 for p in range(M) if p != r and rows[r][p]) for r in range(M))
        return Collective(category, sent, received, messages, overlapped)

    def all_reduce(self, numel: int, category: str = "params", itemsize: int = 4) -> Collective:
        """A ring all-reduce of ``numel`` values (none with one worker)."""
        M = self.workers
        nbytes = int(2 * (M - 1) * numel * itemsize // M) if M > 1 else 0
        msgs = 2 * (M - 1) if M > 1 else 0
        return Collective(category, (nbytes,) * M, (nbytes,) * M, (msgs,) * M)

    def input_fetch(self) -> Collective:
        """Layer 0's halo features, fetched once (counted at step 0 by the receiver)."""
        got = tuple(b for b, _ in self.fetch)
        return Collective("halo_fwd", got, got, tuple(m for _, m in self.fetch))

    def param_sync(self, step: int, extra: int = 0) -> list[Collective]:
        """``make_param_policy``'s traffic at ``step``: a gradient all-reduce every step, or the
        parameters averaged every ``--local-steps`` K steps and at the last step. ``extra``:
        parameters a method adds to the model (VARCO's learned codecs)."""
        k = getattr(self.options, "local_steps", 1)
        if k <= 1 or (step + 1) % k == 0 or step == self.epochs - 1:
            return [self.all_reduce(self.params + extra)]
        return []

    def fill(self, category: str) -> list[Collective]:
        """One exact forward exchange of every hidden layer (a store or pipeline fill)."""
        return [self.rows(4 * self.widths[l], category) for l in self.hidden]


def exact_step(sizes: Sizes, step: int) -> Step:
    """Exact (docs/methods.md section 2): every hidden layer's rows forward and gradients back,
    every step (``--halo-grad off``: no gradients); layer 0's features once."""
    out = [sizes.input_fetch()] if step == 0 else []
    back = getattr(sizes.options, "halo_grad", "on") == "on"
    for l in sizes.hidden:
        out += [sizes.rows(4 * sizes.widths[l], "halo_fwd")]
        out += [sizes.rows(4 * sizes.widths[l], "halo_bwd", back=True)] if back else []
    return Step(out + sizes.param_sync(step), "grad")


def partition_step(sizes: Sizes, step: int) -> Step:
    """Partition-based (section 3): parameters only."""
    return Step(sizes.param_sync(step), "none")

