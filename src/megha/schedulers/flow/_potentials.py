"""Compiled potentials for a flow installed by a bulk solve, computed only when an incremental solve needs them.

After a bulk solve (an optimal flow from a from-scratch solver, without duals), the incremental solver needs node
potentials that make the flow reduced-cost optimal. Computing them costs several passes over the whole residual
network (about 1 CPU-second at Google scale, 2.4M arcs), and is wasted when the next solve is a bulk solve again
(an overloaded graph at Google scale, where every round goes to the bulk solve). :func:`k_deferred_potentials`
computes them at the start of the next incremental solve instead, after the caller's edits: over the residual
arcs of the arcs that no edit touched since the bulk solve (the dirty arcs are left out; the incremental solve
repairs them, as after any edit). Those arcs carry the bulk solve's optimal flow, so their residual network has
no negative cycle, and the potentials are shortest-path distances from a virtual root joined to every node at
cost 0 (label-correcting with a deque, over compact per-node copies of the residual arcs, as
:func:`megha.schedulers.flow._kernels.k_install_potentials` does). Excesses, flags and the lists of changes are
left as the edits made them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from megha.schedulers.flow._kernels import (
    A_CAP,
    A_COST,
    A_FLAG,
    A_FLOW,
    F_DIRTY,
    H_NEXT,
    H_TO,
    M_AALIVE,
    M_NHW,
    N_ALIVE,
    N_DEG,
    N_FIRST,
    N_POT,
)


@njit(cache=True)
def k_deferred_potentials(N, A, H, M, queue, inq):
    """Potentials making every residual arc of an arc not marked dirty reduced-cost optimal (module docstring).

    ``queue`` (node capacity + 1) and ``inq`` (node capacity) are scratch. Returns the work (half-arc scans), or
    −1 if it exceeded the Bellman–Ford bound (a negative residual cycle among the clean arcs: the flow installed
    was not optimal, or it was edited without marking the arcs).
    """
    nhw = M[M_NHW]
    qn = queue.size
    rs = np.zeros(nhw + 1, dtype=np.int64)
    for v in range(nhw):
        if N[N_ALIVE, v] == 1:
            k = 0
            h = N[N_FIRST, v]
            while h >= 0:
                a = h >> 1
                if A[A_FLAG, a] & F_DIRTY == 0:
                    res = A[A_CAP, a] - A[A_FLOW, a] if h & 1 == 0 else A[A_FLOW, a]
                    if res > 0:
                        k += 1
                h = H[H_NEXT, h]
            rs[v + 1] = k
    for v in range(nhw):
        rs[v + 1] += rs[v]
    rh = np.empty(rs[nhw], dtype=np.int32)
    rc = np.empty(rs[nhw], dtype=np.int64)
    for v in range(nhw):
        if N[N_ALIVE, v] == 1:
            k = rs[v]
            h = N[N_FIRST, v]
            while h >= 0:
                a = h >> 1
                if A[A_FLAG, a] & F_DIRTY == 0:
                    if h & 1 == 0:
                        res = A[A_CAP, a] - A[A_FLOW, a]
                        c = A[A_COST, a]
                    else:
                        res = A[A_FLOW, a]
                        c = -A[A_COST, a]
                    if res > 0:
                        rh[k] = H[H_TO, h]
                        rc[k] = c
                        k += 1
                h = H[H_NEXT, h]
    pot = np.zeros(nhw, dtype=np.int64)
    head = 0
    size = 0
    for v in range(nhw):
        inq[v] = 0
        if N[N_ALIVE, v] == 1:
            queue[size] = v
            size += 1
            inq[v] = 1
    limit = (size + 1) * (2 * M[M_AALIVE] + 1)
    work = 0
    while size > 0:
        u = queue[head]
        head += 1
        if head == qn:
            head = 0
        size -= 1
        inq[u] = 0
        pu = pot[u]
        for k in range(rs[u], rs[u + 1]):
            w = rh[k]
            nd = pu + rc[k]
            if nd < pot[w]:
                pot[w] = nd
                if inq[w] == 0:
                    inq[w] = 1
                    if size > 0 and nd < pot[queue[head]]:
                        head = head - 1 if head > 0 else qn - 1
                        queue[head] = w
                    else:
                        t = head + size
                        queue[t - qn if t >= qn else t] = w
                    size += 1
        work += N[N_DEG, u]
        if work > limit:
            return -1
    for v in range(nhw):
        if N[N_ALIVE, v] == 1:
            N[N_POT, v] = pot[v]
    return work
