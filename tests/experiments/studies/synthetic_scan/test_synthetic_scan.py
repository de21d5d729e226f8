"""experiments/studies/synthetic_scan/command.py: the one-process emulation used to choose synthetic settings."""
from __future__ import annotations

import torch

from digest.data.synthetic import make_synthetic
from experiments.studies.synthetic_scan.command import train
from helpers import needs_shared


def _graph():
    return make_synthetic(nodes=120, avg_degree=6, features=8, classes=3, seed=0)


def test_one_part_is_plain_training():
    # PSGD-PA with a single part has nothing to average: it must be the plain run, bit for bit
    g = _graph()
    one = torch.zeros(g.num_nodes, dtype=torch.long)
    assert train(g, g.edge_index, 0, 5) == train(g, g.edge_index, 0, 5, one, 3)


def test_local_steps_change_the_run():
    # two parts averaged every step versus once at the end: different models, so the loop really
    # trains replicas apart between averagings
    g = _graph()
    halves = (torch.arange(g.num_nodes) >= g.num_nodes // 2).long()
    assert train(g, g.edge_index, 0, 6, halves, 1) != train(g, g.edge_index, 0, 6, halves, 6)


def test_best_epoch_is_reported():
    # the third value is the epoch of the best validation accuracy: 0 after a single epoch, and
    # within the run otherwise (how a scan tells whether exact converged inside its budget)
    g = _graph()
    assert train(g, g.edge_index, 0, 1)[2] == 0
    assert 0 <= train(g, g.edge_index, 0, 7)[2] < 7


def test_the_command_scans_at_the_parts_asked(capsys):
    from experiments.studies.synthetic_scan.command import main
    spec = "synthetic:nodes=120,avg_degree=6,features=8,classes=3"
    assert main([spec, "0", "2", "--parts", "2"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"{spec} seed 0, 2 parts: homophily ") and "exact - partition" in line


@needs_shared("Cora")
def test_a_real_graph_with_sparse_features_scans(capsys):
    # Cora's bag-of-words features load as sparse COO and it has no generator metadata: the scan
    # densifies them and measures homophily on the edges itself
    from experiments.studies.synthetic_scan.command import main
    assert main(["Cora", "0", "2", "--parts", "2"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("Cora seed 0, 2 parts: homophily 0.81") and "exact - partition" in line


def test_bad_arguments_are_one_line_errors(capsys):
    import pytest

    from experiments.studies.synthetic_scan.command import main
    for argv in (["synthetic", "zero"], ["synthetic", "0", "5", "--parts", "1"],
                 ["synthetic:colour=red"]):
        with pytest.raises(SystemExit) as err:
            main(argv)
        assert err.value.code == 2
        assert "Traceback" not in capsys.readouterr().err
