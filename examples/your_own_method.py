"""A method of your own: a halo policy and a parameter policy, registered with ``digest.register``
and trained by ``digest.train`` with two worker processes, beside the exact method.

    python examples/your_own_method.py [OUT]

The method, ``one-way-halo``: every step fetches fresh halo rows, but sends their gradients back
to the owners only every ``--grad-every`` K steps (the other steps read the rows as constants:
no backward halo traffic); the summed gradient is clipped to ``--clip-norm`` after the all-reduce
(the same on every worker, so the replicated parameters stay equal). K = 1 is the exact method
with clipping. docs/adding-a-method.md explains each piece.

The workers are separate processes: they see the method because this file is named in
``DIGEST_PLUGINS``, which every worker imports (``main`` sets it; from the command line:
``DIGEST_PLUGINS=examples/your_own_method.py python -m digest train --method one-way-halo ...``).

OUT (default: a temporary folder, removed at the end) receives everything the script writes: the
partition cache (data/) and the two runs (exact/, one-way-halo/: metrics.csv, summary.json).
"""
from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, if not installed
from digest import (GradAllReduce, HaloPolicy, Options, exchange, option, register,  # noqa: E402
                    train)


@dataclass
class OneWayOptions(Options):
    """One-way halos."""
    grad_every: int = option(2, "send halo gradients back to their owners every K steps (1 = "
                             "every step, as exact)")
    clip_norm: float = option(1.0, "clip the all-reduced gradient to this L2 norm")

    def check_group(self, cfg):
        if self.grad_every < 1:
            raise ValueError("--grad-every must be >= 1")
        if self.clip_norm <= 0:
            raise ValueError("--clip-norm must be > 0")


class OneWayHalo(HaloPolicy):
    """Fresh halo rows every step; their gradients flow back only on every K-th step.
    Shapes: ``halo(l, h_inner [n_inner, F]) -> [n_halo, F]``."""

    def __init__(self, part, plan, every: int):
        super().__init__(part, plan)
        self.every, self.step = every, 0

    def before_step(self, step, forward):
        self.step = step

    def halo(self, layer, h_inner):
        rows = exchange(h_inner, self.plan)  # counted as halo_fwd (and halo_bwd when it flows back)
        return rows if self.step % self.every == 0 else rows.detach()

    def state(self):  # a metrics.csv column
        return {"halo_grads_sent": int(self.step % self.every == 0)}


class ClippedAllReduce(GradAllReduce):
    """Gradient all-reduce, then the sum clipped to ``max_norm``."""

    def __init__(self, max_norm: float):
        self.max_norm, self.norm = max_norm, 0.0

    def after_backward(self, model):
        super().after_backward(model)  # every worker now holds the same summed gradient
        self.norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), self.max_norm))

    def state(self):  # a metrics.csv column: the norm before clipping
        return {"grad_norm": self.norm}


@register("one-way-halo", "fresh halo rows; their gradients sent back every --grad-every steps",
          options=(OneWayOptions,))
def one_way_halo(cfg, part, plan, model):
    o = cfg.options
    return OneWayHalo(part, plan, o.grad_every), ClippedAllReduce(o.clip_norm)


def main(out: Path) -> dict:
    # the workers (and digest.train itself) import this file as a plugin, which registers the
    # method in each process; a DIGEST_PLUGINS the user set is kept
    here = str(Path(__file__).resolve())
    os.environ["DIGEST_PLUGINS"] = ",".join(filter(None, [os.environ.get("DIGEST_PLUGINS"), here]))
    common = dict(dataset="synthetic:nodes=400,classes=4,avg_degree=6,features=16,seed=0",
                  workers=2, epochs=20, hidden=16, seed=0, data_root=str(out / "data"),
                  progress=False)
    runs = {"exact": {}, "one-way-halo": dict(grad_every=2, clip_norm=1.0)}
    summaries = {}
    for method, flags in runs.items():
        s = summaries[method] = train(method=method, out=str(out / method), **common, **flags)
        back = s["bytes_by_category"]["bytes_halo_bwd"]
        print(f"{method}: test accuracy {s['test_at_best_val']:.3f} at best validation "
              f"{s['best_val']:.3f}, {back} bytes of halo gradients")
    print(f"files in {out}")
    return summaries


if __name__ == "__main__":  # the guard matters: the worker processes import this file
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
