"""Compiled export of the residual network of a flow, and the write-back of a flow change found on it.

Used by :func:`megha.schedulers.flow.solvers.solve_ortools_residual`: one pass over the arc table gives the residual
arcs (forward: capacity − flow, at the reduced cost; backward: the flow, at minus the reduced cost) in the compact
node numbering of the export, each with a reference ``2·arc`` (forward) or ``2·arc + 1`` (backward); a second pass
adds the flow found on each residual arc to its arc.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from megha.schedulers.flow._kernels import A_ALIVE, A_CAP, A_COST, A_FLOW, H_TO, M_AHW, N_POT, _sync_arc


@njit(cache=True)
def k_residual_arcs(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    index: np.ndarray,
    tails: np.ndarray,
    heads: np.ndarray,
    caps: np.ndarray,
    costs: np.ndarray,
    refs: np.ndarray,
) -> int:
    """Residual arcs of the live arcs into ``tails``/``heads`` (compact node ids via ``index``), ``caps``, ``costs``
    (reduced under ``N_POT``) and ``refs`` (``2·arc`` forward, ``2·arc + 1`` backward); returns their number (the
    outputs hold at least twice the live arcs)."""
    k = 0
    for a in range(M[M_AHW]):
        if A[A_ALIVE, a] == 0:
            continue
        u = H[H_TO, 2 * a + 1]
        w = H[H_TO, 2 * a]
        rc = A[A_COST, a] + N[N_POT, u] - N[N_POT, w]
        f = A[A_FLOW, a]
        r = A[A_CAP, a] - f
        if r > 0:
            tails[k] = index[u]
            heads[k] = index[w]
            caps[k] = r
            costs[k] = rc
            refs[k] = 2 * a
            k += 1
        if f > 0:
            tails[k] = index[w]
            heads[k] = index[u]
            caps[k] = f
            costs[k] = -rc
            refs[k] = 2 * a + 1
            k += 1
    return k


@njit(cache=True)
def k_add_residual_flow(A: np.ndarray, H: np.ndarray, refs: np.ndarray, flows: np.ndarray) -> int:
    """Add the flow found on each residual arc to its arc (forward: more flow, backward: less); returns the number
    of arcs changed."""
    n = 0
    for i in range(refs.size):
        d = flows[i]
        if d != 0:
            a = refs[i] >> 1
            if refs[i] & 1 == 0:
                A[A_FLOW, a] += d
            else:
                A[A_FLOW, a] -= d
            _sync_arc(A, H, a)
            n += 1
    return n


# numba cache stamp: megha.schedulers.flow._kernels=78fb17ad863d
