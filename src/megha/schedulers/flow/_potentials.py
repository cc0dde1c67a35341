"""Compiled node potentials for a flow installed by a bulk solve (one label-correcting kernel for every caller).

After a bulk solve (an optimal flow from a from-scratch solver, without duals), the incremental solvers need node
potentials that make the flow reduced-cost optimal: shortest-path distances in the residual network from a virtual
root joined to every node at cost 0, computed by :func:`k_residual_potentials` (label-correcting with a deque: a
node whose label drops below the front's goes first), over compact per-node copies of the residual arcs (one walk
of the adjacency lists, so the passes read contiguous memory instead of chasing the lists and the arc table). An
optimal flow has no negative residual cycle, so the pass ends; it gives up (−1) past the Bellman–Ford bound.

Two uses: at once after the bulk solve (:func:`k_install_potentials`: every arc, and a clean state for the next
incremental solve), or deferred (``skip_dirty``: :func:`k_deferred_potentials`). Computing them costs several
passes over the whole residual network (about 1 CPU-second at Google scale, 2.4M arcs), and is wasted when the
next solve is a bulk solve again (an overloaded graph at Google scale, where every round goes to the bulk solve).
Deferred, they are computed at the start of the next incremental solve instead, after the caller's edits: over the
residual arcs of the arcs that no edit touched since the bulk solve (the dirty arcs are left out; the incremental
solve repairs them, as after any edit). Those arcs carry the bulk solve's optimal flow, so their residual network
has no negative cycle. Excesses, flags and the lists of changes are left as the edits made them.
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
    F_NEW,
    H_NEXT,
    H_TO,
    M_AALIVE,
    M_NDA,
    M_NDN,
    M_NHW,
    N_ALIVE,
    N_DEG,
    N_EXC,
    N_FIRST,
    N_FLAG,
    N_POT,
)


@njit(cache=True)
def k_residual_potentials(
    N: np.ndarray, A: np.ndarray, H: np.ndarray, M: np.ndarray, queue: np.ndarray, inq: np.ndarray, skip_dirty: bool
) -> int:
    """Potentials making every residual arc reduced-cost optimal — of the arcs not marked dirty if ``skip_dirty``
    (module docstring). ``queue`` (node capacity + 1) and ``inq`` (node capacity) are scratch. Returns the work
    (half-arc scans), or −1 if it exceeded the Bellman–Ford bound (a negative residual cycle among those arcs: the
    flow installed was not optimal, or it was edited without marking the arcs).
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
                if not skip_dirty or A[A_FLAG, a] & F_DIRTY == 0:
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
                if not skip_dirty or A[A_FLAG, a] & F_DIRTY == 0:
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


@njit(cache=True)
def k_deferred_potentials(
    N: np.ndarray, A: np.ndarray, H: np.ndarray, M: np.ndarray, queue: np.ndarray, inq: np.ndarray
) -> int:
    """Potentials making every residual arc of an arc not marked dirty reduced-cost optimal (module docstring);
    returns the work, or −1 past the Bellman–Ford bound."""
    return k_residual_potentials(N, A, H, M, queue, inq, True)


@njit(cache=True)
def k_install_potentials(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    queue: np.ndarray,
    inq: np.ndarray,
) -> int:
    """After a balanced optimal flow was written from elsewhere (a bulk solve): potentials that make it
    reduced-cost optimal over every arc, no excess, no new node, and (if that worked) no recorded change left.
    Returns the work (half-arc scans), or −1 past the Bellman–Ford bound (the flow was not optimal)."""
    for v in range(M[M_NHW]):
        if N[N_ALIVE, v] == 1:
            N[N_EXC, v] = 0
            N[N_FLAG, v] &= ~F_NEW
    work = k_residual_potentials(N, A, H, M, queue, inq, False)
    if work < 0:
        return work
    for i in range(M[M_NDN]):
        N[N_FLAG, DN[i]] &= ~F_DIRTY
    M[M_NDN] = 0
    for i in range(M[M_NDA]):
        A[A_FLAG, DA[i]] &= ~F_DIRTY
    M[M_NDA] = 0
    return work


# numba cache stamp: megha.schedulers.flow._kernels=78fb17ad863d
