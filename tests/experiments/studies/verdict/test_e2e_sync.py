"""experiments/configs/bench_e2e_sync_cs.yaml stops each run at or above the verdict's CS target
(0.99 x exact's mean best validation accuracy over bench_converge_cs's committed runs), and close
to it, so that every run trains up to its target and not much further."""
from __future__ import annotations

from pathlib import Path

from experiments.analysis.convergence import convergence, target_of_conv
from experiments.suites.layout import runs_folder
from experiments.suites.load import load
from experiments.suites.suite import load_suite


def test_the_stop_is_at_the_target_it_checks():
    root = Path(__file__).resolve().parents[4]
    target = target_of_conv(convergence(load(root / runs_folder("bench_converge_cs"),
                                             load_suite("bench_converge_cs"))))
    stop = load_suite("bench_e2e_sync_cs").model["stop_at_val"]
    assert target <= stop < target + 0.001, (target, stop)
