"""Each worker's work per step (digest/advise/work.py), counted by hand for one tiny part: 2 inner
rows, 1 halo row, 2 edges from inner rows and 1 from the halo row, a 2-layer GCN 2 -> 4 -> 3."""
from __future__ import annotations

import pytest

from digest.advise.job import PartCounts
from digest.advise.work import step_work

PART = PartCounts(n_inner=2, n_halo=1, e_inner=2, e_halo=1, x_inner=4, x_halo=2, train=1)
WIDTHS = [2, 4, 3]
P = 2 * 4 + 4 + 4 * 3 + 3  # GCN's parameters


def test_exact_halo_by_hand():
    """Layer 0 (transform first, 3 rows): dense 2 x 3 x 2 x 4, twice (forward, weight gradient)
    = 96; sparse (4 entries with the 2 self-loops + 1) x 4 columns, twice = 40; ReLU 2 x 4, twice
    = 16. Layer 1 (4 > 3: transform first): dense 2 x 3 x 4 x 3 twice + the input gradient of all
    3 rows 2 x 3 x 4 x 3 = 216; sparse 5 x 3 forward + 5 x 3 backward = 30. Loss 1 x 3, the
    optimiser 4 x 27."""
    w = step_work(PART, WIDTHS, "gcn", "grad", 0.0, False, P)
    assert (w.dense, w.sparse, w.sparse_x, w.elem) == (312, 70, 0, 16 + 3 + 4 * P)


def test_stale_and_no_halo_by_hand():
    const = step_work(PART, WIDTHS, "gcn", "const", 0.0, False, P)
    assert (const.dense, const.sparse) == (96 + 144 + 48, 40 + 15 + 12)  # no halo gradient
    none = step_work(PART, WIDTHS, "gcn", "none", 0.0, False, P)
    assert (none.dense, none.sparse) == (64 + 96 + 48, 32 + 12 + 12)  # the inner rows only


def test_forward_only_and_dropout():
    fwd = step_work(PART, WIDTHS, "gcn", "grad", 0.0, False, P, backward=False)
    assert (fwd.dense, fwd.sparse, fwd.elem) == (48 + 72, 20 + 15, 8)
    drop = step_work(PART, WIDTHS, "gcn", "grad", 0.5, False, P)
    # masks: layer 0's 3 x 2 inputs; layer 1's 3 x 4 inputs forward, and backward again
    assert drop.elem - step_work(PART, WIDTHS, "gcn", "grad", 0.0, False, P).elem == 6 + 12 + 12


def test_sparse_features_and_unmodelled_models():
    w = step_work(PART, WIDTHS, "gcn", "grad", 0.0, True, P)
    assert (w.sparse_x, w.dense) == ((4 + 2) * 4 * 2, 216)
    with pytest.raises(ValueError, match="no compute model for 'gat'"):
        step_work(PART, WIDTHS, "gat", "grad", 0.0, False, P)
