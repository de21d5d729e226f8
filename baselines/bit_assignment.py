"""AdaQP's adaptive bit assignment (docs/methods.md section 8.4; used by baselines/adaqp.py with
``--quant-assign adaptive``): one width per message block, chosen to minimise the bound on the
rounding variance within a byte budget."""
from __future__ import annotations

import heapq

from .quantize import BITS


def rounding_variance(variance: list[float], bits: list[int]) -> float:
    """The bound sum_k V_k / (2^b_k - 1)^2 of an assignment's rounding variance."""
    return sum(v / (2 ** b - 1) ** 2 for v, b in zip(variance, bits))


def greedy_bits(variance: list[float], cost: list[tuple[int, ...]], budget: int) -> list[int]:
    """Bits per block (from BITS) that minimise sum_k V_k / (2^b_k - 1)^2 subject to
    sum_k cost_k(b_k) <= budget: our greedy, not the paper's solver.

    Every block starts at the fewest bits; then the upgrade (one block one step up in BITS) with
    the largest variance reduction per extra byte is taken while it fits the budget. One that does
    not fit is dropped with the block's later upgrades (the spent bytes only grow, so it never
    fits later), while cheaper ones of other blocks may still fit. V / (2^b - 1)^2 is convex and
    decreasing in b, so a block's upgrades come in order of falling value per byte anyway. Ties go
    to the lower block index: every worker computes the same answer from the same inputs.
    Not optimal: when cheap upgrades leave too little room for a block's dear one, the optimum
    may differ (it is the knapsack problem); so that it is never worse than the simplest answer,
    a uniform assignment within the budget with a smaller bound replaces it.

    Args:
        variance: V_k >= 0 per block (blocks with V_k = 0 gain nothing and stay at the fewest).
        cost: per block, its bytes at each width of BITS (non-decreasing).
        budget: most bytes of all blocks together. If even the fewest bits exceed it, every block
            gets the fewest (the caller checks feasibility).
    Returns:
        bits per block, ``len(variance)``.
    """
    level = [0] * len(variance)
    spent = sum(c[0] for c in cost)
    heap = []

    def offer(k: int, i: int) -> None:  # the upgrade of block k from BITS[i] to BITS[i + 1]
        if i + 1 >= len(BITS):
            return
        gain = variance[k] * ((2 ** BITS[i] - 1) ** -2 - (2 ** BITS[i + 1] - 1) ** -2)
        extra = cost[k][i + 1] - cost[k][i]
        if gain > 0:
            heapq.heappush(heap, (-gain / extra if extra else -float("inf"), k, i, extra))

    for k in range(len(variance)):
        offer(k, 0)
    while heap:
        _, k, i, extra = heapq.heappop(heap)
        if spent + extra <= budget:
            spent, level[k] = spent + extra, i + 1
            offer(k, i + 1)
    chosen = [BITS[i] for i in level]
    for i, b in enumerate(BITS):
        uniform = [b] * len(variance)
        if (sum(c[i] for c in cost) <= budget
                and rounding_variance(variance, uniform) < rounding_variance(variance, chosen)):
            chosen = uniform
    return chosen
