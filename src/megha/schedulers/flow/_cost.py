"""Compiled total cost of a flow network's current flow (one pass over the arc table, no temporaries)."""

from __future__ import annotations

import numpy as np
from numba import njit

from megha.schedulers.flow._kernels import A_ALIVE, A_COST, A_FLOW, A_LOW, M_AHW

_LIMIT = np.int64(1) << np.int64(61)


@njit(cache=True)
def k_total_cost(A: np.ndarray, M: np.ndarray) -> tuple[int, bool]:
    """``(Σ cost · true flow over the live arcs, exact)``; ``exact`` is False when int64 could overflow (the sum of
    flows times the largest |cost| reaches 2**62), and the caller must then add up in Python integers."""
    total = 0
    flows = 0
    top = 0
    over = False
    for a in range(M[M_AHW]):
        if A[A_ALIVE, a] == 1:
            f = A[A_FLOW, a] + A[A_LOW, a]
            c = A[A_COST, a]
            total += f * c
            flows += f  # true flows are ≥ 0
            if flows > _LIMIT:  # (with upper bounds below 2**62 the running sum cannot wrap before this test)
                over = True
                flows = 0
            top = max(top, abs(c))
    return total, not over and float(flows) * float(top) < 2.0**62


# numba cache stamp: megha.schedulers.flow._kernels=78fb17ad863d
