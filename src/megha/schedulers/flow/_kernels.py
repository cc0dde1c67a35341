"""Compiled kernels of the dynamic flow network and of the incremental min-cost flow solver.

Storage (all ``int64``, grown by the Python wrapper :class:`megha.schedulers.flow.network.FlowNetwork`):

* ``N[row, v]`` — node table, rows ``N_*`` below;
* ``A[row, a]`` — arc table (one row per field), capacity stored as ``upper − lower`` and flow as
  ``true flow − lower`` (the standard lower-bound transformation);
* ``H[row, h]`` — half-arcs: ``h = 2a`` is the forward residual arc of arc ``a``, ``h = 2a + 1`` its reverse;
  each half-arc sits in the doubly linked adjacency list of its tail, so adding or removing an arc is O(1);
  rows from ``H_POS`` on hold the index of the residual half-arcs of every list of ``INDEX_DEGREE`` entries or more;
* ``M`` — counters (high-water marks, free-stack tops, dirty-list lengths, search stamp, statistics);
* ``FN``/``FA`` — free stacks of node and arc ids; ``DN``/``DA`` — dirty node and arc lists.

The solver keeps a pseudo-flow and node potentials ``π`` that satisfy reduced-cost optimality
(``c_π(u,w) = c(u,w) + π(u) − π(w) ≥ 0`` on every residual arc). A change (new node or arc, removed node or
arc, new cost, bounds or supply) breaks this only locally: :func:`k_solve` first restores reduced-cost
optimality on the touched arcs by saturating or emptying them, which leaves imbalances (excess ≠ 0) at a few
nodes, then removes the imbalances by successive shortest paths — a Dijkstra on reduced costs from one
imbalanced node (forward from an excess, backward from a deficit, whichever node has the smaller degree so the
search stays local), stopped as soon as a node of the opposite sign is settled — and updates only the
potentials of the nodes that search settled. A search reads the residual half-arcs of a node with an index (a
list of ``INDEX_DEGREE`` entries or more) from it, in list order, and never its other half-arcs. Each search
leaves reduced-cost optimality intact, so when no imbalance is left the flow is optimal (it equals a from-scratch
solve's cost).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import leading_zeros

# node rows
N_ALIVE = 0
N_SUP = 1  # supply b(v) (before the lower-bound transformation)
N_EXC = 2  # excess: b(v) + true inflow − true outflow
N_POT = 3  # potential π(v)
N_FIRST = 4  # first half-arc of the adjacency list, −1 if empty
N_DEG = 5
N_FLAG = 6
N_DIST = 7  # search scratch
N_PRED = 8
N_STAMP = 9
N_DONE = 10
N_HUB = 11  # 1 + the first slot of the node's half-arc index region (see INDEX_DEGREE), 0 if not indexed
N_HUSED = 12  # slots of the region used (holes included)
N_HCAP = 13  # slots of the region
NF = 14

# arc rows
A_CAP = 0  # upper − lower
A_COST = 1
A_FLOW = 2  # true flow − lower, in [0, A_CAP]
A_LOW = 3
A_ALIVE = 4
A_FLAG = 5
AF = 6

# half-arc rows
H_TO = 0
H_NEXT = 1
H_PREV = 2
# the half-arc index (see INDEX_DEGREE); these rows share the half-arc table's columns but only H_POS is per
# half-arc: H_WRF/H_WRB are bitset words over the pool's slots, the rows from H_POOL on are the pool
H_POS = 3  # the index slot of half-arc h in its tail's region, −1 if its tail is not indexed
H_WRF = 4  # bit s & 63 of word s >> 6: slot s holds a half-arc with residual capacity (forward scans)
H_WRB = 5  # bit set if the reverse of the slot's half-arc has residual capacity (backward scans)
H_POOL = 6  # the pool: slot → half-arc (−1: a hole), flat over the last POOL_ROWS rows
HF = 10

# meta counters
M_NHW = 0
M_AHW = 1
M_NFREE = 2
M_AFREE = 3
M_NDN = 4
M_NDA = 5
M_STAMP = 6
M_SEARCHES = 7
M_SCANS = 8
M_AUGMENTS = 9
M_NALIVE = 10
M_AALIVE = 11
M_SETTLED = 12
M_FAILED = 13
M_FIXES = 14  # arcs saturated or emptied by the optimality repair
M_SUPSUM = 15  # sum of the supplies of live nodes
M_NTL = 16  # entries in the flow log M[MF : MF + M_NTL] (−1: not kept; see _log_flow)
M_VISITS = 17  # adjacency-list entries the searches passed (indexed or not): the measure of the work budget
M_HBUMP = 18  # first free slot of the index pool (see _pool)
M_RFREE = 19  # M_RFREE + k: 1 + the first free region of 8·2^k slots (its first slot links the next), 0 if none
N_RCLASS = 40
MF = M_RFREE + N_RCLASS
TL_CAP = 4096  # room of the flow log (M has MF + TL_CAP entries)

# flags
F_NEW = 1
F_DIRTY = 2
F_ACTIVE = 4
F_NOINDEX = 8  # never give this node a half-arc index (see INDEX_DEGREE); set by the graph that owns the node

INF = np.int64(1) << np.int64(62)


# ------------------------------------------------------------------------------------------------ graph edits
@njit(cache=True)
def _mark_node(N, M, DN, v):
    f = N[N_FLAG, v]
    if f & F_DIRTY == 0:
        N[N_FLAG, v] = f | F_DIRTY
        DN[M[M_NDN]] = v
        M[M_NDN] += 1


@njit(cache=True)
def _mark_arc(A, M, DA, a):
    f = A[A_FLAG, a]
    if f & F_DIRTY == 0:
        A[A_FLAG, a] = f | F_DIRTY
        DA[M[M_NDA]] = a
        M[M_NDA] += 1


@njit(cache=True)
def _log_flow(M, a):
    """Record that arc ``a`` may carry flow: the flow log (``M[MF : MF + M[M_NTL]]``) lists every arc whose flow a
    solve set or moved, so a reader that empties it (see ``k_place`` of the compiled graph) need not scan every arc
    for flow. When full the log is dropped (``M[M_NTL] = −1``) until its reader starts a new one."""
    n = M[M_NTL]
    if n >= 0:
        if MF + n < M.size:
            M[MF + n] = a
            M[M_NTL] = n + 1
        else:
            M[M_NTL] = -1


@njit(cache=True)
def k_add_nodes(
    N: np.ndarray, M: np.ndarray, FN: np.ndarray, DN: np.ndarray, supplies: np.ndarray, out: np.ndarray
) -> None:
    """Allocate one node per supply; ids written to ``out``."""
    for i in range(supplies.size):
        if M[M_NFREE] > 0:
            M[M_NFREE] -= 1
            v = FN[M[M_NFREE]]
        else:
            v = M[M_NHW]
            M[M_NHW] += 1
        N[N_ALIVE, v] = 1
        N[N_SUP, v] = supplies[i]
        N[N_EXC, v] = supplies[i]
        M[M_SUPSUM] += supplies[i]
        N[N_POT, v] = 0
        N[N_FIRST, v] = -1
        N[N_DEG, v] = 0
        N[N_STAMP, v] = 0
        N[N_DONE, v] = 0
        N[N_HUB, v] = 0
        N[N_HUSED, v] = 0
        N[N_HCAP, v] = 0
        f = N[N_FLAG, v]
        N[N_FLAG, v] = (f & F_DIRTY) | F_NEW
        _mark_node(N, M, DN, v)
        M[M_NALIVE] += 1
        out[i] = v


# ------------------------------------------------------------------------------------------------ half-arc index
# A search scanning a node relaxes its residual half-arcs in adjacency-list order (the heap history, hence the
# placements, depends on that order), but most half-arcs have no residual capacity in the search's direction (the
# sink's in-arcs from busy machines, a machine's in-arcs that carry nothing), and walking a list chases one pointer
# per entry. A node of at least INDEX_DEGREE half-arcs therefore keeps an index: a region of slots in a pool (the
# rows from H_POOL on, read as one flat array, see _pool), one per half-arc in the order of linking (a new half-arc
# goes to the list head and to the next slot, so decreasing slots are list order; a removed half-arc leaves a
# hole), and two bitsets over the pool (H_WRF: the slot's half-arc has residual capacity, for forward scans; H_WRB:
# its reverse has, for backward scans; bit s & 63 of word s >> 6). A search walks the set bits of the region from
# the highest slot down: the residual half-arcs in list order, from consecutive slots; the others are never read.
# Every write of an arc's flow or capacity calls _sync_arc. Regions hold a power of two slots (at least
# MIN_REGION; one of fewer than 64 lies inside one bitset word); a full region is compacted in place when half of it
# is holes, else the node moves to a region twice the size; freed regions (a moved or removed node's) are reused by
# size before the end of the pool is; a full pool is repacked from the adjacency lists (as after the table grew: see
# k_index_rebuild), and a node that finds no room then is scanned through its list as before (same order, same
# result). A node flagged F_NOINDEX is never indexed: the scheduling graph flags its class aggregators, whose target
# arcs come and go with every machine that fills up or frees, so that keeping their index up to date costs more
# than it saves their searches (GOOG_subtrace, 10k workers: about 2 % of the whole run).
INDEX_DEGREE = 4
"""Half-arcs from which a node's adjacency list gets an index of its residual half-arcs."""
MIN_REGION = 8
POOL_ROWS = 4
"""Rows of the half-arc table that hold the index pool (room for ``POOL_ROWS`` slots per half-arc column)."""


@njit(cache=True)
def _pool(H):
    """The index pool: the rows from ``H_POOL`` on as one flat array (a view)."""
    return H.reshape(H.size)[H_POOL * H.shape[1] :]


@njit(cache=True)
def _set_bit(H, row, s, on):
    w = s >> 6
    m = np.int64(1) << (s & 63)
    if on:
        H[row, w] |= m
    else:
        H[row, w] &= ~m


@njit(cache=True)
def _sync_arc(A, H, a):
    """Bring the index bits of both halves of arc ``a`` in line with its flow and capacity (after any write)."""
    r = A[A_CAP, a] - A[A_FLOW, a]
    f = A[A_FLOW, a]
    s = H[H_POS, 2 * a]
    if s >= 0:
        _set_bit(H, H_WRF, s, r > 0)
        _set_bit(H, H_WRB, s, f > 0)
    s = H[H_POS, 2 * a + 1]
    if s >= 0:
        _set_bit(H, H_WRF, s, f > 0)
        _set_bit(H, H_WRB, s, r > 0)


@njit(cache=True)
def _residual_fwd(A, h):
    if h & 1 == 0:
        return A[A_CAP, h >> 1] - A[A_FLOW, h >> 1] > 0
    return A[A_FLOW, h >> 1] > 0


@njit(cache=True)
def _put_slot(A, H, pool, s, h):
    pool[s] = h
    H[H_POS, h] = s
    _set_bit(H, H_WRF, s, _residual_fwd(A, h))
    _set_bit(H, H_WRB, s, _residual_fwd(A, h ^ 1))


@njit(cache=True)
def _clear_region(H, b, cap):
    """Clear both bitsets over the slots ``[b, b + cap)`` (a region)."""
    if cap >= 64:
        for w in range(b >> 6, (b + cap) >> 6):
            H[H_WRF, w] = 0
            H[H_WRB, w] = 0
    else:
        m = ~(((np.int64(1) << cap) - 1) << (b & 63))
        H[H_WRF, b >> 6] &= m
        H[H_WRB, b >> 6] &= m


@njit(cache=True)
def _region_class(cap):
    return 60 - leading_zeros(np.int64(cap))  # cap = 8 · 2^k


@njit(cache=True)
def _region_free(H, M, b, cap):
    """Put region ``b`` of ``cap`` slots on the free list of its size (its bits are cleared when it is reused)."""
    k = _region_class(cap)
    _pool(H)[b] = M[M_RFREE + k]
    M[M_RFREE + k] = b + 1


@njit(cache=True)
def _region_alloc(H, M, cap):
    """A region of ``cap`` slots (a power of two, aligned to ``min(cap, 64)``), bits cleared: a freed one of that
    size, else one at the end of the pool; −1 if no room."""
    k = _region_class(cap)
    head = M[M_RFREE + k]
    if head > 0:
        b = head - 1
        M[M_RFREE + k] = _pool(H)[b]
        _clear_region(H, b, cap)
        return b
    align = min(cap, 64)
    b = (M[M_HBUMP] + align - 1) & ~(align - 1)
    if b + cap > POOL_ROWS * H.shape[1]:
        return -1
    M[M_HBUMP] = b + cap
    _clear_region(H, b, cap)
    return b


@njit(cache=True)
def _region_size(deg):
    c = MIN_REGION
    while c < 2 * deg:
        c *= 2
    return c


@njit(cache=True)
def _index_build(N, A, H, pool, v, b, cap):
    """Fill region ``b`` (``cap`` slots, bits cleared) with ``v``'s adjacency list, the head in the highest slot."""
    deg = N[N_DEG, v]
    N[N_HUSED, v] = deg
    N[N_HCAP, v] = cap
    s = b + deg - 1
    h = N[N_FIRST, v]
    while h >= 0:
        _put_slot(A, H, pool, s, h)
        s -= 1
        h = H[H_NEXT, h]
    N[N_HUB, v] = b + 1


@njit(cache=True)
def _index_drop(N, H, M, v):
    """Forget ``v``'s index (its list is scanned in full again); its region is freed."""
    if N[N_HUB, v] > 0:
        _region_free(H, M, N[N_HUB, v] - 1, N[N_HCAP, v])
    N[N_HUB, v] = 0
    h = N[N_FIRST, v]
    while h >= 0:
        H[H_POS, h] = -1
        h = H[H_NEXT, h]


@njit(cache=True)
def _index_repack(N, A, H, M):
    """Rebuild every index from the adjacency lists into a pool without garbage (nodes that no longer fit lose
    theirs)."""
    pool = _pool(H)
    M[M_HBUMP] = 0
    for k in range(N_RCLASS):
        M[M_RFREE + k] = 0
    for v in range(M[M_NHW]):
        if N[N_HUB, v] > 0:
            cap = _region_size(N[N_DEG, v])
            b = _region_alloc(H, M, cap)
            if b < 0:
                N[N_HUB, v] = 0  # no region to free: the pool is being rebuilt
                _index_drop(N, H, M, v)
            else:
                _index_build(N, A, H, pool, v, b, cap)


@njit(cache=True)
def k_index_rebuild(N: np.ndarray, A: np.ndarray, H: np.ndarray, M: np.ndarray) -> None:
    """Rebuild the half-arc index from the adjacency lists (after the half-arc table grew: the pool's rows moved)."""
    _index_repack(N, A, H, M)


@njit(cache=True)
def _index_place(N, A, H, M, v):
    """Index ``v`` (again) from its adjacency list: in place when its region has room for the list twice over,
    else in a new region (after a repack if the pool is full)."""
    hub = N[N_HUB, v]
    deg = N[N_DEG, v]
    if hub > 0:
        b = hub - 1
        cap = N[N_HCAP, v]
        if 2 * deg <= cap:
            _clear_region(H, b, cap)
            _index_build(N, A, H, _pool(H), v, b, cap)
            return
    new = _region_size(deg)
    b = _region_alloc(H, M, new)
    if b < 0:
        N[N_HUB, v] = 1  # repacked with the others (its region is rebuilt from the list)
        _index_repack(N, A, H, M)
        return
    old = hub - 1
    cap = N[N_HCAP, v]
    _index_build(N, A, H, _pool(H), v, b, new)
    if hub > 0:
        _region_free(H, M, old, cap)


@njit(cache=True)
def _link(N, A, H, M, v, h):
    first = N[N_FIRST, v]
    H[H_NEXT, h] = first
    H[H_PREV, h] = -1
    if first >= 0:
        H[H_PREV, first] = h
    N[N_FIRST, v] = h
    N[N_DEG, v] += 1
    hub = N[N_HUB, v]
    if hub > 0:
        used = N[N_HUSED, v]
        if used < N[N_HCAP, v]:
            N[N_HUSED, v] = used + 1
            _put_slot(A, H, _pool(H), hub - 1 + used, h)
        else:
            _index_place(N, A, H, M, v)
    else:
        H[H_POS, h] = -1
        if N[N_DEG, v] == INDEX_DEGREE and N[N_FLAG, v] & F_NOINDEX == 0:
            _index_place(N, A, H, M, v)  # once per crossing: a node that found no room is not retried each time


@njit(cache=True)
def _unlink(N, H, v, h):
    p = H[H_PREV, h]
    n = H[H_NEXT, h]
    if p >= 0:
        H[H_NEXT, p] = n
    else:
        N[N_FIRST, v] = n
    if n >= 0:
        H[H_PREV, n] = p
    N[N_DEG, v] -= 1
    s = H[H_POS, h]
    if s >= 0:
        H[H_POS, h] = -1
        _pool(H)[s] = -1
        _set_bit(H, H_WRF, s, False)
        _set_bit(H, H_WRB, s, False)


@njit(cache=True)
def _add_arc(N, A, H, M, FA, DN, DA, u, w, lo, up, cost):
    """Allocate one arc ``u → w`` (endpoints and bounds assumed valid, capacity reserved); returns its id."""
    if M[M_AFREE] > 0:
        M[M_AFREE] -= 1
        a = FA[M[M_AFREE]]
    else:
        a = M[M_AHW]
        M[M_AHW] += 1
    A[A_CAP, a] = up - lo
    A[A_COST, a] = cost
    A[A_FLOW, a] = 0
    A[A_LOW, a] = lo
    A[A_ALIVE, a] = 1
    h = 2 * a
    H[H_TO, h] = w
    H[H_TO, h + 1] = u
    H[H_POS, h] = -1
    H[H_POS, h + 1] = -1
    _link(N, A, H, M, u, h)
    _link(N, A, H, M, w, h + 1)
    if lo != 0:
        N[N_EXC, u] -= lo
        N[N_EXC, w] += lo
    _mark_arc(A, M, DA, a)
    _mark_node(N, M, DN, u)
    _mark_node(N, M, DN, w)
    M[M_AALIVE] += 1
    return a


@njit(cache=True)
def k_add_arcs(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    FA: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    tails: np.ndarray,
    heads: np.ndarray,
    lowers: np.ndarray,
    uppers: np.ndarray,
    costs: np.ndarray,
    out: np.ndarray,
) -> int:
    """Allocate arcs ``tails[i] → heads[i]`` with bounds ``[lowers, uppers]`` and unit costs; ids to ``out``.

    Returns −1 on success, else the index of the first invalid arc (dead endpoint or lower > upper);
    arcs before it have been added.
    """
    for i in range(tails.size):
        u = tails[i]
        w = heads[i]
        if u < 0 or w < 0 or u >= M[M_NHW] or w >= M[M_NHW] or N[N_ALIVE, u] == 0 or N[N_ALIVE, w] == 0:
            return i
        if lowers[i] > uppers[i] or lowers[i] < 0:
            return i
        out[i] = _add_arc(N, A, H, M, FA, DN, DA, u, w, lowers[i], uppers[i], costs[i])
    return -1


@njit(cache=True)
def _remove_arc(N, A, H, M, FA, DN, a):
    h = 2 * a
    u = H[H_TO, h + 1]
    w = H[H_TO, h]
    f = A[A_LOW, a] + A[A_FLOW, a]
    if f != 0:
        N[N_EXC, u] += f
        N[N_EXC, w] -= f
        _mark_node(N, M, DN, u)
        _mark_node(N, M, DN, w)
    _unlink(N, H, u, h)
    _unlink(N, H, w, h + 1)
    A[A_ALIVE, a] = 0
    A[A_FLOW, a] = 0
    FA[M[M_AFREE]] = a
    M[M_AFREE] += 1
    M[M_AALIVE] -= 1


@njit(cache=True)
def k_remove_arcs(
    N: np.ndarray, A: np.ndarray, H: np.ndarray, M: np.ndarray, FA: np.ndarray, DN: np.ndarray, ids: np.ndarray
) -> None:
    """Remove arcs (ids of dead arcs are ignored). Their flow turns into imbalance at their endpoints."""
    for i in range(ids.size):
        a = ids[i]
        if a >= 0 and a < M[M_AHW] and A[A_ALIVE, a] == 1:
            _remove_arc(N, A, H, M, FA, DN, a)


@njit(cache=True)
def _remove_node(N, A, H, M, FN, FA, DN, v):
    """Remove a live node with all its arcs."""
    while N[N_FIRST, v] >= 0:  # each removal unlinks the list head (both halves of a self-loop)
        _remove_arc(N, A, H, M, FA, DN, N[N_FIRST, v] >> 1)
    if N[N_HUB, v] > 0:
        _region_free(H, M, N[N_HUB, v] - 1, N[N_HCAP, v])
        N[N_HUB, v] = 0
    N[N_ALIVE, v] = 0
    N[N_EXC, v] = 0
    M[M_SUPSUM] -= N[N_SUP, v]
    N[N_SUP, v] = 0
    FN[M[M_NFREE]] = v
    M[M_NFREE] += 1
    M[M_NALIVE] -= 1


@njit(cache=True)
def k_remove_nodes(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    FN: np.ndarray,
    FA: np.ndarray,
    DN: np.ndarray,
    ids: np.ndarray,
) -> None:
    """Remove nodes with all their arcs (ids of dead nodes are ignored)."""
    for i in range(ids.size):
        v = ids[i]
        if v < 0 or v >= M[M_NHW] or N[N_ALIVE, v] == 0:
            continue
        _remove_node(N, A, H, M, FN, FA, DN, v)


@njit(cache=True)
def k_unwind(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    ids: np.ndarray,
    max_len: int,
) -> None:
    """Take each node's supply back out of the flow before the node is removed.

    For every unit of positive supply of a node, follow arcs carrying flow above their lower bound down to a
    node with negative supply (a sink) and lower the flow by one on the way, so that removing the node leaves
    no imbalance behind (a departing task just returns its unit to the sink). The touched arcs are re-checked
    by the next solve. A walk that meets no such arc stops; what it leaves is repaired by the next solve.
    """
    for i in range(ids.size):
        v = ids[i]
        if v < 0 or v >= M[M_NHW] or N[N_ALIVE, v] == 0:
            continue
        for _ in range(max(N[N_SUP, v], 0)):
            x = v
            steps = 0
            while steps < max_len:
                h = N[N_FIRST, x]
                found = -1
                while h >= 0:
                    if h & 1 == 0 and A[A_FLOW, h >> 1] > 0:
                        found = h
                        break
                    h = H[H_NEXT, h]
                if found < 0:
                    break
                a = found >> 1
                w = H[H_TO, found]
                A[A_FLOW, a] -= 1
                _sync_arc(A, H, a)
                N[N_EXC, x] += 1
                N[N_EXC, w] -= 1
                _mark_node(N, M, DN, x)
                _mark_node(N, M, DN, w)
                _mark_arc(A, M, DA, a)
                x = w
                steps += 1
                if N[N_SUP, x] < 0:
                    break


@njit(cache=True)
def k_set_costs(A: np.ndarray, M: np.ndarray, DA: np.ndarray, ids: np.ndarray, costs: np.ndarray) -> None:
    """New unit costs of the arcs ``ids``; the arcs whose cost changes are marked dirty for the next solve."""
    for i in range(ids.size):
        a = ids[i]
        if A[A_COST, a] != costs[i]:
            A[A_COST, a] = costs[i]
            _mark_arc(A, M, DA, a)


@njit(cache=True)
def _set_bound(N, A, H, M, DN, DA, a, lo, up):
    """New bounds ``[lo, up]`` of arc ``a`` (assumed valid)."""
    u = H[H_TO, 2 * a + 1]
    w = H[H_TO, 2 * a]
    dl = lo - A[A_LOW, a]
    if dl != 0:
        # keep the transformed flow: the true flow moves with the lower bound
        N[N_EXC, u] -= dl
        N[N_EXC, w] += dl
        A[A_LOW, a] = lo
    cap = up - lo
    A[A_CAP, a] = cap
    if A[A_FLOW, a] > cap:
        d = A[A_FLOW, a] - cap
        A[A_FLOW, a] = cap
        N[N_EXC, u] += d
        N[N_EXC, w] -= d
    _sync_arc(A, H, a)
    _mark_arc(A, M, DA, a)
    _mark_node(N, M, DN, u)
    _mark_node(N, M, DN, w)


@njit(cache=True)
def k_set_bounds(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    ids: np.ndarray,
    lowers: np.ndarray,
    uppers: np.ndarray,
) -> int:
    """New bounds of arcs; returns −1, or the index of the first invalid pair (lower > upper or < 0)."""
    for i in range(ids.size):
        lo = lowers[i]
        up = uppers[i]
        if lo > up or lo < 0:
            return i
        _set_bound(N, A, H, M, DN, DA, ids[i], lo, up)
    return -1


@njit(cache=True)
def _set_supply(N, M, DN, v, s):
    d = s - N[N_SUP, v]
    if d != 0:
        M[M_SUPSUM] += d
        N[N_SUP, v] = s
        N[N_EXC, v] += d
        _mark_node(N, M, DN, v)


@njit(cache=True)
def k_set_supplies(N: np.ndarray, M: np.ndarray, DN: np.ndarray, ids: np.ndarray, supplies: np.ndarray) -> None:
    """New supplies of the nodes ``ids``; the supply sum and excesses follow, changed nodes are marked dirty."""
    for i in range(ids.size):
        _set_supply(N, M, DN, ids[i], supplies[i])


@njit(cache=True)
def _add_flow(N, A, H, M, DN, DA, a, delta):
    """Change the flow of arc ``a`` by ``delta`` (clamped to its bounds); the next solve repairs imbalances."""
    f = A[A_FLOW, a] + delta
    if f < 0:
        f = 0
    if f > A[A_CAP, a]:
        f = A[A_CAP, a]
    d = f - A[A_FLOW, a]
    if d != 0:
        A[A_FLOW, a] = f
        _sync_arc(A, H, a)
        u = H[H_TO, 2 * a + 1]
        w = H[H_TO, 2 * a]
        N[N_EXC, u] -= d
        N[N_EXC, w] += d
        _mark_node(N, M, DN, u)
        _mark_node(N, M, DN, w)
    _mark_arc(A, M, DA, a)


@njit(cache=True)
def k_add_flow(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    ids: np.ndarray,
    deltas: np.ndarray,
) -> None:
    """Change the flow of arcs by ``deltas`` (clamped to the bounds); imbalances are repaired by the next solve."""
    for i in range(ids.size):
        _add_flow(N, A, H, M, DN, DA, ids[i], deltas[i])


@njit(cache=True)
def k_out_flow_arcs(N: np.ndarray, A: np.ndarray, H: np.ndarray, nodes: np.ndarray, out: np.ndarray) -> None:
    """For each node, the first outgoing arc carrying positive true flow (−1 if none)."""
    for i in range(nodes.size):
        v = nodes[i]
        out[i] = -1
        h = N[N_FIRST, v]
        while h >= 0:
            if h & 1 == 0:
                a = h >> 1
                if A[A_LOW, a] + A[A_FLOW, a] > 0:
                    out[i] = a
                    break
            h = H[H_NEXT, h]


@njit(cache=True)
def k_decompose(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    roots: np.ndarray,
    role: np.ndarray,
    task_role: int,
    cursor: np.ndarray,
    used: np.ndarray,
    touched: np.ndarray,
    out_task: np.ndarray,
    out_root: np.ndarray,
    out_arcs: np.ndarray,
) -> int:
    """Decompose the flow reaching ``roots`` (machines) into unit paths back to task nodes.

    The graph is acyclic from tasks to machines (task → aggregators → machine), so following, from a root,
    any in-arc with unused flow leads to a task. One row per unit: the task node, the root and up to four
    arcs (task side first, −1 padded). Per-node cursors make each adjacency list scanned once in total; at the
    end the cursors of the touched nodes and ``used`` of the arcs taken are reset. Returns the number of rows.
    """
    nt = 0
    rows = 0
    path = np.empty(8, dtype=np.int64)
    # the arcs whose ``used`` left 0, reset at the end (not every arc of every touched list): a walk uses at most
    # 8 arcs and ends in a row or in the end of its root's walks
    nu = 0
    used_list = np.empty(8 * (out_task.size + roots.size), dtype=np.int64)
    for i in range(roots.size):
        r = roots[i]
        while True:
            x = r
            k = 0
            ok = False
            while k < 8:
                h = cursor[x]
                if h == -2:
                    h = N[N_FIRST, x]
                    touched[nt] = x
                    nt += 1
                while h >= 0:
                    if h & 1 == 1:
                        a = h >> 1
                        if role[H[H_TO, h]] != 0 and A[A_LOW, a] + A[A_FLOW, a] - used[a] > 0:
                            break
                    h = H[H_NEXT, h]
                cursor[x] = h
                if h < 0:
                    break
                a = h >> 1
                if used[a] == 0:
                    used_list[nu] = a
                    nu += 1
                used[a] += 1
                path[k] = a
                k += 1
                u = H[H_TO, h]
                if role[u] == task_role:
                    ok = True
                    out_task[rows] = u
                    break
                x = u
            if not ok:
                break
            out_root[rows] = r
            for j in range(4):
                out_arcs[rows, j] = path[k - 1 - j] if j < k else -1
            rows += 1
    for j in range(nt):
        cursor[touched[j]] = -2
    for j in range(nu):
        used[used_list[j]] = 0
    return rows


@njit(cache=True)
def k_reset_solution(
    N: np.ndarray, A: np.ndarray, H: np.ndarray, M: np.ndarray, DN: np.ndarray, DA: np.ndarray
) -> None:
    """Forget the flow and potentials (cold start): every node new, every arc dirty."""
    for v in range(M[M_NHW]):
        if N[N_ALIVE, v] == 1:
            N[N_EXC, v] = N[N_SUP, v]
            N[N_POT, v] = 0
            N[N_FLAG, v] |= F_NEW
            _mark_node(N, M, DN, v)
    for a in range(M[M_AHW]):
        if A[A_ALIVE, a] == 1:
            A[A_FLOW, a] = 0
            _sync_arc(A, H, a)
            lo = A[A_LOW, a]
            if lo != 0:
                u = H[H_TO, 2 * a + 1]
                w = H[H_TO, 2 * a]
                N[N_EXC, u] -= lo
                N[N_EXC, w] += lo
            _mark_arc(A, M, DA, a)


# ------------------------------------------------------------------------------------------------ heap
# entries are (distance, tie, node); the tie key orders nodes at equal distance (see TIE_*): any order keeps
# the search a Dijkstra (every answer optimal), but it decides how much of a level is settled before the
# target turns up, and which of several optimal paths is taken
TIE_DEGREE = 0
"""Among equal distances the node of lowest degree comes first, so a search that can finish through a small node
never scans a hub (an aggregator or the sink) at that distance. The default until 2026-11."""
TIE_LIFO = 1
"""Among equal distances the node reached last comes first (depth first along zero reduced costs). The default:
it settles fewer nodes than ``TIE_DEGREE`` (on GOOG_subtrace with 10k workers the whole flow run takes about 13 %
less CPU), and the papers leave the choice among optimal placements open."""
TIE_LIFO_HUB = 2
"""As ``TIE_LIFO``, except that nodes above ``HUB_DEGREE`` arcs come after every other node of their distance
(lowest degree first among them)."""
TIE_NAMES = {"degree": TIE_DEGREE, "lifo": TIE_LIFO, "lifo-hub": TIE_LIFO_HUB}
HUB_DEGREE = 256
_HUB_KEY = np.int64(1) << np.int64(40)


@njit(cache=True)
def _tie_key(N, w, tie, seq):
    """Heap tie key of node ``w`` reached as the ``seq``-th label of its search (see ``TIE_*``)."""
    deg = N[N_DEG, w]
    if tie == TIE_DEGREE:
        return deg
    if tie == TIE_LIFO_HUB and deg > HUB_DEGREE:
        return _HUB_KEY + deg
    return -seq


@njit(cache=True)
def _hpush3(hp, n, d, t, v):
    """Push (distance ``d``, tie ``t``, node ``v``) on a binary heap of size ``n`` stored flat in ``hp``: entry ``i``
    is ``hp[3i:3i+3]``, so an entry's fields share a cache line; ordered by distance, then tie key (an entry does not
    rise above an equal parent). Returns the new size."""
    i = n
    while i > 0:
        p = (i - 1) >> 1
        pd = hp[3 * p]
        if pd < d or (pd == d and hp[3 * p + 1] <= t):
            break
        hp[3 * i] = pd
        hp[3 * i + 1] = hp[3 * p + 1]
        hp[3 * i + 2] = hp[3 * p + 2]
        i = p
    hp[3 * i] = d
    hp[3 * i + 1] = t
    hp[3 * i + 2] = v
    return n + 1


@njit(cache=True)
def _hpop3(hp, n):
    """Remove the root of a heap of size ``n`` stored flat as for :func:`_hpush3` (the caller reads the root
    first); returns the new size."""
    n -= 1
    if n == 0:
        return 0
    d = hp[3 * n]
    t = hp[3 * n + 1]
    v = hp[3 * n + 2]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        dc = hp[3 * c]
        if c + 1 < n:
            d1 = hp[3 * c + 3]
            if d1 < dc or (d1 == dc and hp[3 * c + 4] < hp[3 * c + 1]):
                c += 1
                dc = d1
        if dc > d or (dc == d and hp[3 * c + 1] >= t):
            break
        hp[3 * i] = dc
        hp[3 * i + 1] = hp[3 * c + 1]
        hp[3 * i + 2] = hp[3 * c + 2]
        i = c
    hp[3 * i] = d
    hp[3 * i + 1] = t
    hp[3 * i + 2] = v
    return n


# ------------------------------------------------------------------------------------------------ solver
@njit(cache=True)
def _residual(A, h):
    a = h >> 1
    if h & 1 == 0:
        return A[A_CAP, a] - A[A_FLOW, a]
    return A[A_FLOW, a]


@njit(cache=True)
def _hcost(A, h):
    if h & 1 == 0:
        return A[A_COST, h >> 1]
    return -A[A_COST, h >> 1]


@njit(cache=True)
def _push_half(N, A, H, h, delta):
    """Send ``delta`` units along half-arc ``h`` (residual assumed)."""
    a = h >> 1
    if h & 1 == 0:
        A[A_FLOW, a] += delta
    else:
        A[A_FLOW, a] -= delta
    _sync_arc(A, H, a)


@njit(cache=True)
def _search(N, A, H, M, hp, settled, src, forward, tie, stack, top):
    """Dijkstra on reduced costs from ``src`` (forward from an excess, backward from a deficit).

    Stops when the nearest node of opposite imbalance is known; updates the potentials of the settled nodes
    and augments along the path. Returns the units moved (0 if no such node is reachable). A target reached at
    the distance of the node being scanned ends the scan at once: reduced costs are non-negative, so no later arc
    of that node can give any label below it (the search then stops at the next pop; same labels, same result).
    With ``TIE_LIFO`` the nodes labelled at the distance being settled go on ``stack`` instead of the heap (the
    same order as the heap's: they were labelled after every heap entry of that distance, the last one first);
    the stack grows down from ``stack[top]`` (it may share the heap's node array: see :func:`k_solve`).
    """
    M[M_STAMP] += 1
    cur = M[M_STAMP]
    M[M_SEARCHES] += 1
    pool = _pool(H)
    N[N_STAMP, src] = cur
    N[N_DIST, src] = 0
    N[N_PRED, src] = -1
    n = _hpush3(hp, 0, 0, 0, src)
    ub = INF
    best = -1
    ns = 0
    scans = 0  # half-arcs read in lists walked in full
    hscans = 0  # residual half-arcs read from an index
    visits = 0  # list entries the indexed scans passed (read or skipped)
    seq = 0
    sp = 0
    lifo = tie == TIE_LIFO
    d = 0
    while n > 0 or sp > 0:
        if sp > 0:  # labelled at the current distance d
            sp -= 1
            u = stack[top - sp]
        else:
            d = hp[0]
            u = hp[2]
            n = _hpop3(hp, n)
        if d >= ub:
            break
        if N[N_DONE, u] == cur or N[N_DIST, u] != d:
            continue
        N[N_DONE, u] = cur
        settled[ns] = u
        ns += 1
        pu = N[N_POT, u]
        hub = N[N_HUB, u]
        if hub > 0:  # the residual half-arcs from the index, in list order (see INDEX_DEGREE)
            b = hub - 1
            used = N[N_HUSED, u]
            cap = N[N_HCAP, u]
            wlo = b >> 6
            wi = (b + used - 1) >> 6
            row = H_WRF if forward else H_WRB
            stop_at = -1  # the slot whose label ended the scan
            while wi >= wlo and stop_at < 0:
                word = H[row, wi]
                sb = wi << 6
                if cap < 64:  # a small region: its bits of the word
                    word = (word >> (b & 63)) & ((np.int64(1) << cap) - 1)
                    sb = b
                while word != 0:
                    k = 63 - leading_zeros(word)
                    word ^= np.int64(1) << k
                    slot = sb + k
                    h = pool[slot]
                    hscans += 1
                    a = h >> 1
                    w = H[H_TO, h]
                    if forward:
                        c = A[A_COST, a] if h & 1 == 0 else -A[A_COST, a]
                        nd = d + c + pu - N[N_POT, w]
                        pred = h
                    else:
                        c = A[A_COST, a] if h & 1 == 1 else -A[A_COST, a]
                        nd = d + c + N[N_POT, w] - pu
                        pred = h ^ 1
                    if nd < ub and not (N[N_STAMP, w] == cur and (N[N_DONE, w] == cur or N[N_DIST, w] <= nd)):
                        N[N_STAMP, w] = cur
                        N[N_DIST, w] = nd
                        N[N_PRED, w] = pred
                        if (N[N_EXC, w] < 0) if forward else (N[N_EXC, w] > 0):
                            ub = nd
                            best = w
                            if nd == d:  # no label below d is left: the rest of u's arcs cannot improve on it
                                stop_at = slot
                                break
                        else:
                            seq += 1
                            if lifo and nd == d:
                                stack[top - sp] = w
                                sp += 1
                            else:
                                n = _hpush3(hp, n, nd, _tie_key(N, w, tie, seq), w)
                wi -= 1
            if stop_at < 0:
                visits += N[N_DEG, u]
            else:  # the list entries up to the one that ended it: the slots used from there up
                for t in range(stop_at, b + used):
                    if pool[t] >= 0:
                        visits += 1
            continue
        h = N[N_FIRST, u]
        if forward:
            while h >= 0:
                scans += 1
                a = h >> 1
                res = A[A_CAP, a] - A[A_FLOW, a] if h & 1 == 0 else A[A_FLOW, a]
                if res > 0:  # the cost and the neighbour are read only for a residual half-arc
                    c = A[A_COST, a] if h & 1 == 0 else -A[A_COST, a]
                    w = H[H_TO, h]
                    nd = d + c + pu - N[N_POT, w]
                    if nd < ub and not (N[N_STAMP, w] == cur and (N[N_DONE, w] == cur or N[N_DIST, w] <= nd)):
                        N[N_STAMP, w] = cur
                        N[N_DIST, w] = nd
                        N[N_PRED, w] = h
                        if N[N_EXC, w] < 0:
                            ub = nd
                            best = w
                            if nd == d:  # no label below d is left: the rest of u's arcs cannot improve on it
                                break
                        else:
                            seq += 1
                            if lifo and nd == d:
                                stack[top - sp] = w
                                sp += 1
                            else:
                                n = _hpush3(hp, n, nd, _tie_key(N, w, tie, seq), w)
                h = H[H_NEXT, h]
        else:
            while h >= 0:
                scans += 1
                hh = h ^ 1  # the half-arc w → u
                a = hh >> 1
                res = A[A_CAP, a] - A[A_FLOW, a] if hh & 1 == 0 else A[A_FLOW, a]
                if res > 0:
                    c = A[A_COST, a] if hh & 1 == 0 else -A[A_COST, a]
                    w = H[H_TO, h]
                    nd = d + c + N[N_POT, w] - pu
                    if nd < ub and not (N[N_STAMP, w] == cur and (N[N_DONE, w] == cur or N[N_DIST, w] <= nd)):
                        N[N_STAMP, w] = cur
                        N[N_DIST, w] = nd
                        N[N_PRED, w] = hh
                        if N[N_EXC, w] > 0:
                            ub = nd
                            best = w
                            if nd == d:  # no label below d is left: the rest of u's arcs cannot improve on it
                                break
                        else:
                            seq += 1
                            if lifo and nd == d:
                                stack[top - sp] = w
                                sp += 1
                            else:
                                n = _hpush3(hp, n, nd, _tie_key(N, w, tie, seq), w)
                h = H[H_NEXT, h]
    M[M_SCANS] += scans + hscans
    M[M_VISITS] += scans + visits
    M[M_SETTLED] += ns
    if best < 0:
        M[M_FAILED] += 1
        return 0
    # potentials of the settled nodes (the others move by the constant ub, which is dropped)
    for i in range(ns):
        u = settled[i]
        if forward:
            N[N_POT, u] -= ub - N[N_DIST, u]
        else:
            N[N_POT, u] += ub - N[N_DIST, u]
    # bottleneck
    if forward:
        delta = min(N[N_EXC, src], -N[N_EXC, best])
        x = best
        while x != src:
            hh = N[N_PRED, x]
            r = _residual(A, hh)
            if r < delta:
                delta = r
            x = H[H_TO, hh ^ 1]
        x = best
        while x != src:
            hh = N[N_PRED, x]
            _push_half(N, A, H, hh, delta)
            _log_flow(M, hh >> 1)
            x = H[H_TO, hh ^ 1]
        N[N_EXC, src] -= delta
        N[N_EXC, best] += delta
    else:
        delta = min(N[N_EXC, best], -N[N_EXC, src])
        x = best
        while x != src:
            hh = N[N_PRED, x]
            r = _residual(A, hh)
            if r < delta:
                delta = r
            x = H[H_TO, hh]
        x = best
        while x != src:
            hh = N[N_PRED, x]
            _push_half(N, A, H, hh, delta)
            _log_flow(M, hh >> 1)
            x = H[H_TO, hh]
        N[N_EXC, best] -= delta
        N[N_EXC, src] += delta
    M[M_AUGMENTS] += 1
    return delta


@njit(cache=True)
def _init_potential(N, A, H, v):
    """Potential for a new node that keeps its arcs to already-priced nodes optimal where possible."""
    lo = -INF  # out-arcs need π(v) ≥ π(w) − c
    hi = INF  # in-arcs need π(v) ≤ π(u) + c
    h = N[N_FIRST, v]
    while h >= 0:
        w = H[H_TO, h]
        if w != v and N[N_FLAG, w] & F_NEW == 0:
            if _residual(A, h) > 0:
                x = N[N_POT, w] - _hcost(A, h)
                if x > lo:
                    lo = x
            if _residual(A, h ^ 1) > 0:
                x = N[N_POT, w] + _hcost(A, h ^ 1)
                if x < hi:
                    hi = x
        h = H[H_NEXT, h]
    if lo > -INF and (lo <= hi or hi == INF):
        N[N_POT, v] = lo
    elif hi < INF:
        N[N_POT, v] = hi
    else:
        N[N_POT, v] = 0


TIGHTEN_MAX_DEGREE = 256


@njit(cache=True)
def _lo(N, A, H, v):
    """Smallest valid potential of ``v``: max over its residual out-arcs of π(w) − c (−INF if none)."""
    lo = -INF
    h = N[N_FIRST, v]
    while h >= 0:
        if _residual(A, h) > 0:
            x = N[N_POT, H[H_TO, h]] - _hcost(A, h)
            if x > lo:
                lo = x
        h = H[H_NEXT, h]
    return lo


@njit(cache=True)
def _hi(N, A, H, v):
    """Largest valid potential of ``v``: min over its residual in-arcs of π(u) + c (INF if none)."""
    hi = INF
    h = N[N_FIRST, v]
    while h >= 0:
        r = h ^ 1
        if _residual(A, r) > 0:
            x = N[N_POT, H[H_TO, h]] + _hcost(A, r)
            if x < hi:
                hi = x
        h = H[H_NEXT, h]
    return hi


@njit(cache=True)
def _fix_arc(N, A, H, M, DN, a):
    """Restore reduced-cost optimality of one arc: first by moving the potential of a small endpoint within
    its valid range (no flow change), else by saturating or emptying the arc (which leaves imbalances)."""
    u = H[H_TO, 2 * a + 1]
    w = H[H_TO, 2 * a]
    c = A[A_COST, a]
    rc = c + N[N_POT, u] - N[N_POT, w]
    f = A[A_FLOW, a]
    if rc < 0 and f < A[A_CAP, a]:
        # lower π(w) or raise π(u) as far as their other arcs allow
        if N[N_DEG, w] <= TIGHTEN_MAX_DEGREE and u != w:
            lo = _lo(N, A, H, w)
            if lo < N[N_POT, w]:
                N[N_POT, w] = max(lo, c + N[N_POT, u]) if lo > -INF else c + N[N_POT, u]
        rc = c + N[N_POT, u] - N[N_POT, w]
        if rc < 0 and N[N_DEG, u] <= TIGHTEN_MAX_DEGREE and u != w:
            hi = _hi(N, A, H, u)
            if hi > N[N_POT, u]:
                N[N_POT, u] = min(hi, N[N_POT, w] - c) if hi < INF else N[N_POT, w] - c
        rc = c + N[N_POT, u] - N[N_POT, w]
    elif rc > 0 and f > 0:
        # raise π(w) or lower π(u)
        if N[N_DEG, w] <= TIGHTEN_MAX_DEGREE and u != w:
            hi = _hi(N, A, H, w)
            if hi > N[N_POT, w]:
                N[N_POT, w] = min(hi, c + N[N_POT, u]) if hi < INF else c + N[N_POT, u]
        rc = c + N[N_POT, u] - N[N_POT, w]
        if rc > 0 and N[N_DEG, u] <= TIGHTEN_MAX_DEGREE and u != w:
            lo = _lo(N, A, H, u)
            if lo < N[N_POT, u]:
                N[N_POT, u] = max(lo, N[N_POT, w] - c) if lo > -INF else N[N_POT, w] - c
        rc = c + N[N_POT, u] - N[N_POT, w]
    target = f
    if rc < 0:
        target = A[A_CAP, a]
    elif rc > 0:
        target = 0
    d = target - f
    if d != 0:
        A[A_FLOW, a] = target
        _sync_arc(A, H, a)
        N[N_EXC, u] -= d
        N[N_EXC, w] += d
        _mark_node(N, M, DN, u)
        _mark_node(N, M, DN, w)
        M[M_FIXES] += 1


@njit(cache=True)
def k_solve(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    hd: np.ndarray,
    hv: np.ndarray,
    settled: np.ndarray,
    active: np.ndarray,
    budget: int,
    tie: int = TIE_LIFO,
) -> int:
    """Repair the last solution after the recorded changes; returns the remaining total |excess| (0 = optimal),
    or −1 if the searches passed more than ``budget`` adjacency-list entries (``M_VISITS``: read, or skipped by a
    hub's index; ``budget`` ≤ 0: no limit) before all imbalances were gone: the state is then valid (reduced-cost
    optimal, the imbalances left recorded as changes) but unsolved.
    ``tie`` orders the nodes of equal distance in each search (``TIE_*``; every order gives an optimal flow).

    Scratch: ``hd`` holds the searches' heap, three int64 per entry (:func:`_hpush3`), when it has room for
    3·(2·live arcs + 2) of them (:meth:`FlowNetwork.search_heap` sizes one); a shorter ``hd`` gets a buffer per
    call instead. ``hv`` holds the ``TIE_LIFO`` stack; ``settled`` and ``active`` one entry per node."""
    # 1. price new nodes
    nd = M[M_NDN]
    for i in range(nd):
        v = DN[i]
        if N[N_ALIVE, v] == 1 and N[N_FLAG, v] & F_NEW != 0:
            _init_potential(N, A, H, v)
            N[N_FLAG, v] &= ~F_NEW
    # 2. reduced-cost optimality on touched arcs
    na = M[M_NDA]
    for i in range(na):
        a = DA[i]
        A[A_FLAG, a] &= ~F_DIRTY
        if A[A_ALIVE, a] == 1:
            _fix_arc(N, A, H, M, DN, a)
            if A[A_FLOW, a] + A[A_LOW, a] > 0:  # edited since the last solve and carrying flow: logged
                _log_flow(M, a)
    M[M_NDA] = 0
    # 3. imbalanced nodes, lowest degree first
    nd = M[M_NDN]
    k = 0
    for i in range(nd):
        v = DN[i]
        N[N_FLAG, v] &= ~F_DIRTY
        if N[N_ALIVE, v] == 1 and N[N_EXC, v] != 0 and N[N_FLAG, v] & F_ACTIVE == 0:
            N[N_FLAG, v] |= F_ACTIVE
            active[k] = v
            k += 1
    M[M_NDN] = 0
    if k > 1:
        deg = np.empty(k, dtype=np.int64)
        for i in range(k):
            deg[i] = N[N_DEG, active[i]]
        order = np.argsort(deg, kind="mergesort")
        tmp = active[:k].copy()
        for i in range(k):
            active[i] = tmp[order[i]]
    # 4. successive shortest paths
    left = 0
    stop = False
    limit = M[M_VISITS] + budget
    # every heap entry and every stack entry of a search is a label set by a scan of a distinct residual half-arc
    # (each node is settled once), plus the source's, so together they never exceed 2·(live arcs) + 1 entries
    # the heap lives in hd, three int64 per entry (see _hpush3) when hd holds that many, else in a buffer of this
    # call; the LIFO stack lives in hv, growing down from the top, or in an array of its own if hv is smaller
    # (each node goes on the stack at most once per search: its label there is the least it can get)
    need = 3 * (2 * M[M_AALIVE] + 2)
    hp = hd
    if hd.size < need:
        hp = np.empty(need if k > 0 else 3, dtype=np.int64)
    stack = hv
    if hv.size < 2 * M[M_AALIVE] + 2:
        stack = np.empty(N.shape[1] if tie == TIE_LIFO and k > 0 else 1, dtype=np.int64)
    top = stack.size - 1
    for i in range(k):
        v = active[i]
        N[N_FLAG, v] &= ~F_ACTIVE
        if stop:
            continue
        while N[N_EXC, v] != 0:
            moved = _search(N, A, H, M, hp, settled, v, N[N_EXC, v] > 0, tie, stack, top)
            if moved == 0:
                break
            if budget > 0 and M[M_VISITS] > limit:
                stop = True
                break
    for i in range(k):
        v = active[i]
        e = N[N_EXC, v]
        if e != 0:
            left += abs(e)
            _mark_node(N, M, DN, v)  # retried at the next solve
    if stop and left > 0:
        return -1
    return left


@njit(cache=True)
def k_sync_arcs(A: np.ndarray, H: np.ndarray, ids: np.ndarray) -> None:
    """Bring the half-arc index in line with flows written outside the kernels (see ``FlowNetwork.write_flows``)."""
    for i in range(ids.size):
        _sync_arc(A, H, ids[i])


@njit(cache=True)
def _bit(H, row, s):
    return (H[row, s >> 6] >> (s & 63)) & 1


@njit(cache=True)
def k_check_index(N: np.ndarray, A: np.ndarray, H: np.ndarray, M: np.ndarray) -> int:
    """Verify the half-arc index against the adjacency lists and the flows; returns −1, or the first node whose
    index disagrees (an indexed node: its list in decreasing slots of its region, each slot's bits equal to the
    residual capacities, holes clear; any other node: no half-arc with a slot; a node flagged ``F_NOINDEX``: no
    index)."""
    pool = _pool(H)
    for v in range(M[M_NHW]):
        if N[N_ALIVE, v] == 0:
            continue
        hub = N[N_HUB, v]
        h = N[N_FIRST, v]
        if hub != 0 and N[N_FLAG, v] & F_NOINDEX != 0:
            return v
        if hub == 0:
            while h >= 0:
                if H[H_POS, h] != -1:
                    return v
                h = H[H_NEXT, h]
            continue
        b = hub - 1
        used = N[N_HUSED, v]
        cap = N[N_HCAP, v]
        if b % min(cap, 64) != 0 or used > cap or b + cap > M[M_HBUMP] or b + cap > pool.size:
            return v
        last = b + used
        n = 0
        while h >= 0:
            s = H[H_POS, h]
            if s < b or s >= last or pool[s] != h:
                return v
            if _bit(H, H_WRF, s) != (1 if _residual(A, h) > 0 else 0):
                return v
            if _bit(H, H_WRB, s) != (1 if _residual(A, h ^ 1) > 0 else 0):
                return v
            last = s
            n += 1
            h = H[H_NEXT, h]
        if n != N[N_DEG, v]:
            return v
        k = 0
        for s in range(b, b + cap):
            if s < b + used and pool[s] >= 0:
                k += 1
            elif _bit(H, H_WRF, s) != 0 or _bit(H, H_WRB, s) != 0:
                return v
        if k != n:
            return v
    return -1


@njit(cache=True)
def k_check(N: np.ndarray, A: np.ndarray, H: np.ndarray, M: np.ndarray) -> tuple[int, int]:
    """Verify bounds, conservation, reduced-cost optimality and the half-arc index; returns an error code (0 = fine)
    and an id."""
    nhw = M[M_NHW]
    bal = np.zeros(nhw, dtype=np.int64)
    for v in range(nhw):
        if N[N_ALIVE, v] == 1:
            bal[v] = N[N_SUP, v]
    for a in range(M[M_AHW]):
        if A[A_ALIVE, a] == 0:
            continue
        u = H[H_TO, 2 * a + 1]
        w = H[H_TO, 2 * a]
        f = A[A_FLOW, a]
        if f < 0 or f > A[A_CAP, a]:
            return 1, a
        t = f + A[A_LOW, a]
        bal[u] -= t
        bal[w] += t
        rc = A[A_COST, a] + N[N_POT, u] - N[N_POT, w]
        if (f < A[A_CAP, a] and rc < 0) or (f > 0 and rc > 0):
            return 2, a
    for v in range(nhw):
        if N[N_ALIVE, v] == 1 and bal[v] != N[N_EXC, v]:
            return 3, v
    v = k_check_index(N, A, H, M)
    if v >= 0:
        return 4, v
    return 0, -1
