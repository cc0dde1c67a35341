"""Compiled bookkeeping of :class:`megha.schedulers.flow.compiled.CompiledGraph` (one call per round step).

Tables (all ``int64``, grown by the Python wrapper; one row per field, one column per item):

* ``CT[row, c]`` — equivalence classes (one per hard-constraint mask): node, mask, waiting units, live targets,
  flags (dirty / starved / full), and the slices of the class's fitting machines (``fit_pool``) and of its
  target arcs (``t_mach``/``t_arc``);
* ``JT[row, j]`` — jobs: unscheduled aggregator ``U_j``, its arc to the sink, waiting and running units, the
  fairness lower bound, and whether the job is in the graph;
* ``GT[row, g]`` — task groups: the tasks of one job with the same hard and soft masks share one node with
  supply = their number; ``order[start + cursor]`` is the next of them to place (tasks in id order);
* ``GM`` — counters (list lengths, the random state, flags).

The machine columns are separate 1-D arrays (the cost models read them too). Every kernel edits the flow
network through the helpers of :mod:`megha.schedulers.flow._kernels`, so the incremental solver sees each change.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from megha.schedulers.flow._kernels import (
    A_ALIVE,
    A_CAP,
    A_COST,
    A_FLOW,
    A_LOW,
    F_NEW,
    F_NOINDEX,
    H_NEXT,
    H_TO,
    M_AFREE,
    M_AHW,
    M_NDA,
    M_NTL,
    MF,
    N_FIRST,
    N_FLAG,
    N_POT,
    N_SUP,
    _add_arc,
    _add_flow,
    _lo,
    _log_flow,
    _mark_arc,
    _remove_arc,
    _remove_node,
    _set_bound,
    _set_supply,
    k_add_nodes,
    k_decompose,
)

# class rows
CT_NODE = 0
CT_MASK = 1
CT_WAIT = 2  # waiting units of the class's groups
CT_LIVE = 3  # targets with a free slot (at the last accounting)
CT_FLAG = 4
CT_FIT0 = 5  # fit_pool[FIT0 : FIT0 + FITN] = machines satisfying the mask
CT_FITN = 6
CT_T0 = 7  # t_mach/t_arc[T0 : T0 + TN] = current targets (TCAP reserved)
CT_TN = 8
CT_TCAP = 9
CT_KEY = 10  # urgency (see _class_key), valid unless CF_KEYSTALE
CTF = 11

CF_DIRTY = 1
CF_STARVED = 2
CF_FULL = 4  # every machine satisfies the mask: permanent arcs, no targets
CF_LISTED = 8  # in the starved list
CF_KEYSTALE = 16  # CT_KEY must be recomputed
CF_MISSED = 32  # starved, and some free machine it fits left the pending list without it (see k_wake)

# job rows
JT_NODE = 0
JT_ARC = 1
JT_IN = 2  # waiting units in the graph (N_j)
JT_RUN = 3  # running tasks
JT_LOWER = 4
JT_ALIVE = 5  # U_j exists
JT_UPPER = 6  # the upper bound last set on U_j → S
JTF = 7

# group rows
GT_NODE = 0
GT_JOB = 1
GT_CLASS = 2
GT_N = 3  # units still waiting
GT_START = 4
GT_CUR = 5
GTF = 6

# meta
GM_NCD = 0  # dirty classes listed in cdirty
GM_NMD = 1  # dirty machines listed in mdirty
GM_NFREE = 2  # machines in free_list
GM_NST = 3  # entries in the starved list
GM_RNG = 4  # random state
GM_NACT = 5  # entries in the active-job list
GM_JOBS = 6  # 1: some job's demand changed since the last fairness update
GM_NGFREE = 7  # recycled group ids
GM_NFREED = 8  # machines in freed_buf (freed up at the last k_machines)
GM_NPEND = 9  # machines in the pending list (see k_wake)
GM_STAMP = 10  # k_wake's marking stamp
GM_NDS = 11  # demands in the sorted demand list of k_jobs
GM_NUNST = 12  # classes in the starved list that stopped being starved since k_wake last dropped such entries
# settings of the graph, fixed at its creation, read by the packed entry points (k_*_packed)
GM_FANOUT = 13  # ec_fanout
GM_SPARE = 14  # targets wanted beyond the waiting units of a class
GM_FANIN = 15  # ec_fanin
GM_EXACT = 16  # 1: exact class keys (the waiting-cost clock is frozen)
GM_FAIR = 17  # 1: fair shares
GM_GROLE = 18  # node role of a task group
GM_EROLE = 19  # node role of a class aggregator
GM_UPD = 20  # k_update's out (UPD_F fields from here: GM[GM_UPD + UPD_*])
GM_PSCAN = 23  # machines' sink arcs k_place read looking for flow (over all calls)
GM_PLOG = 24  # k_place calls that read the flow log instead of every free machine's sink arc
GMF = 25

# machine table MT (rows, one column per machine): the per-machine arrays of the update kernels in one array
MT_FREE = 0  # free slots
MT_MASK = 1  # constraint mask
MT_ARC = 2  # sink arc
MT_NODE = 3  # node
MT_SLOTS = 4  # slots
MT_WASFREE = 5  # 1: free at the last accounting (k_machines)
MT_FLAG = 6  # 1: listed dirty
MT_FPOS = 7  # position in the free list (−1: not free)
MT_DIRTY = 8  # the dirty-machine list (GM_NMD entries)
MT_FREELIST = 9  # the free list (GM_NFREE entries)
MT_FREED = 10  # machines freed at the last k_machines (GM_NFREED entries)
MT_PEND = 11  # the pending list (GM_NPEND entries)
MT_MPEND = 12  # 1: in the pending list
MT_SCRATCH = 13  # k_refresh's marks
MTF = 14

# class lists CX (rows, one column per class id): the per-class lists of the update kernels in one array
CX_DIRTY = 0  # the dirty-class list (GM_NCD entries)
CX_STARVED = 1  # the starved list (GM_NST entries)
CX_SMASK = 2  # the mask of each class in the starved list
CX_MARK = 3  # k_wake's marks
CXF = 4

BIG = np.int64(1) << np.int64(40)
LOW = np.int64(1) << np.int64(50)  # how far below the sink a potential may be lowered where nothing binds it


@njit(cache=True)
def _rand(GM):
    """Next value of a 64-bit linear congruential generator (wrapping arithmetic), 31 high-quality bits."""
    x = GM[GM_RNG] * np.int64(6364136223846793005) + np.int64(1442695040888963407)
    GM[GM_RNG] = x
    return (x >> np.int64(33)) & np.int64(0x7FFFFFFF)


@njit(cache=True)
def _mark_machine(m_flag, mdirty, GM, m):
    if m_flag[m] == 0:
        m_flag[m] = 1
        mdirty[GM[GM_NMD]] = m
        GM[GM_NMD] += 1


@njit(cache=True)
def _mark_class(CT, cdirty, GM, c):
    f = CT[CT_FLAG, c]
    if f & CF_DIRTY == 0 and f & CF_FULL == 0:
        CT[CT_FLAG, c] = f | CF_DIRTY
        cdirty[GM[GM_NCD]] = c
        GM[GM_NCD] += 1


@njit(cache=True)
def k_mark_classes(
    CT: np.ndarray,
    cdirty: np.ndarray,
    GM: np.ndarray,
    classes: np.ndarray,
) -> None:
    """Mark classes dirty (listed once in ``cdirty`` until the next refresh)."""
    for i in range(classes.size):
        _mark_class(CT, cdirty, GM, classes[i])


@njit(cache=True)
def k_mark_machines(
    m_flag: np.ndarray,
    mdirty: np.ndarray,
    GM: np.ndarray,
    machines: np.ndarray,
) -> None:
    """Mark machines dirty (listed once in ``mdirty`` until the next ``k_machines``)."""
    for i in range(machines.size):
        _mark_machine(m_flag, mdirty, GM, machines[i])


@njit(cache=True)
def _drop_target(N, A, H, M, FA, DN, CT, t_mach, t_arc, arc_pos, c, a):
    """Remove target arc ``a`` of class ``c`` (swap-remove from the class's list)."""
    t0 = CT[CT_T0, c]
    p = arc_pos[a]
    last = CT[CT_TN, c] - 1
    if p != last:
        t_mach[t0 + p] = t_mach[t0 + last]
        t_arc[t0 + p] = t_arc[t0 + last]
        arc_pos[t_arc[t0 + p]] = p
    CT[CT_TN, c] = last
    _remove_arc(N, A, H, M, FA, DN, a)


@njit(cache=True)
def k_finish(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    FN: np.ndarray,
    FA: np.ndarray,
    DN: np.ndarray,
    JT: np.ndarray,
    GM: np.ndarray,
    m_free: np.ndarray,
    m_flag: np.ndarray,
    mdirty: np.ndarray,
    machines: np.ndarray,
    jobs: np.ndarray,
) -> None:
    """Running tasks finished outside the graph: their slots are free again; empty jobs leave the graph."""
    for i in range(machines.size):
        m = machines[i]
        m_free[m] += 1
        _mark_machine(m_flag, mdirty, GM, m)
    for i in range(jobs.size):
        j = jobs[i]
        JT[JT_RUN, j] -= 1
        if JT[JT_IN, j] == 0 and JT[JT_RUN, j] == 0 and JT[JT_ALIVE, j] == 1:
            _remove_node(N, A, H, M, FN, FA, DN, JT[JT_NODE, j])
            JT[JT_ALIVE, j] = 0
            JT[JT_NODE, j] = -1
            JT[JT_ARC, j] = -1
    if jobs.size:
        GM[GM_JOBS] = 1


@njit(cache=True)
def k_machines(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    GM: np.ndarray,
    CT: np.ndarray,
    cdirty: np.ndarray,
    starved: np.ndarray,
    node_role: np.ndarray,
    node_ref: np.ndarray,
    ec_role: int,
    m_free: np.ndarray,
    m_mask: np.ndarray,
    m_arc: np.ndarray,
    m_wasfree: np.ndarray,
    m_flag: np.ndarray,
    m_fpos: np.ndarray,
    mdirty: np.ndarray,
    free_list: np.ndarray,
    freed_buf: np.ndarray,
    limit_capacity: bool,
    FA: np.ndarray,
    t_mach: np.ndarray,
    t_arc: np.ndarray,
    arc_pos: np.ndarray,
    pend: np.ndarray,
    m_pend: np.ndarray,
) -> int:
    """Apply the dirty machines: sink-arc capacities, the free list, live target counts, woken classes.

    A machine that filled up stops being a target of the classes aiming at it and makes them dirty (they may
    need another target); machines that freed up are listed in ``freed_buf`` and join the pending list of
    :func:`k_wake`. Returns their number.
    """
    nmd = GM[GM_NMD]
    freed = freed_buf
    nf = 0
    for i in range(nmd):
        m = mdirty[i]
        m_flag[m] = 0
        f = m_free[m]
        a = m_arc[m]
        if limit_capacity and A[A_CAP, a] + A[A_LOW, a] != f:
            _set_bound(N, A, H, M, DN, DA, a, 0, max(f, 0))
        now_free = 1 if f > 0 else 0
        if now_free == m_wasfree[m]:
            continue
        m_wasfree[m] = now_free
        if now_free == 1:
            m_fpos[m] = GM[GM_NFREE]
            free_list[GM[GM_NFREE]] = m
            GM[GM_NFREE] += 1
            freed[nf] = m
            nf += 1
            if m_pend[m] == 0:
                m_pend[m] = 1
                pend[GM[GM_NPEND]] = m
                GM[GM_NPEND] += 1
        else:
            p = m_fpos[m]
            last = free_list[GM[GM_NFREE] - 1]
            free_list[p] = last
            m_fpos[last] = p
            GM[GM_NFREE] -= 1
            m_fpos[m] = -1
        # classes aiming at m (their arcs into m's node): a machine that filled up stops being a target (a class
        # that needs it again is woken when it frees up), so searches through a class never scan busy targets
        h = N[N_FIRST, H[H_TO, 2 * a + 1]]
        while h >= 0:
            nxt = H[H_NEXT, h]
            if h & 1 == 1:
                u = H[H_TO, h]
                if node_role[u] == ec_role:
                    c = node_ref[u]
                    if CT[CT_FLAG, c] & CF_FULL == 0:
                        if now_free == 1:
                            CT[CT_LIVE, c] += 1
                        else:
                            CT[CT_LIVE, c] -= 1
                            _drop_target(N, A, H, M, FA, DN, CT, t_mach, t_arc, arc_pos, c, h >> 1)
                            if CT[CT_WAIT, c] > 0:
                                if CT[CT_FLAG, c] & CF_MISSED != 0:  # look at every free machine again
                                    CT[CT_FLAG, c] &= ~(CF_STARVED | CF_MISSED)
                                    GM[GM_NUNST] += 1
                                _mark_class(CT, cdirty, GM, c)
            h = nxt
    GM[GM_NMD] = 0
    GM[GM_NFREED] = nf
    return nf


NOKEY = -(np.int64(1) << np.int64(62))


@njit(cache=True)
def _class_key(N, A, H, node_role, node_ref, group_role, GT, JT, node):
    """Urgency of a class: the largest (waiting cost − placement cost) among its groups whose job may still place
    a unit under its fair share; NOKEY if none may."""
    best = NOKEY
    h = N[N_FIRST, node]
    while h >= 0:
        if h & 1 == 1:
            u = H[H_TO, h]
            if node_role[u] == group_role:
                g = node_ref[u]
                j = GT[GT_JOB, g]
                if GT[GT_N, g] > 0 and JT[JT_IN, j] > JT[JT_LOWER, j]:
                    key = A[A_COST, JT[JT_ARC, j]] - A[A_COST, h >> 1]
                    if key > best:
                        best = key
        h = H[H_NEXT, h]
    return best


KEYS_STALE = 0  # _stale_job_classes: mark the classes' urgencies stale (recomputed when next read)
KEYS_JOIN = 1  # the job's groups join their classes' urgencies (the job may place again): fold their terms in
KEYS_LEAVE = 2  # the job's groups leave them (it reached its fair share): stale only where one held the largest


@njit(cache=True)
def _group_key(N, A, H, JT, gnode, cnode, j):
    """A group's term of its class's urgency (:func:`_class_key`): its job's waiting cost minus the cost of its
    arc to the class node ``cnode``."""
    h = N[N_FIRST, gnode]
    while h >= 0:
        if h & 1 == 0 and H[H_TO, h] == cnode:
            return A[A_COST, JT[JT_ARC, j]] - A[A_COST, h >> 1]
        h = H[H_NEXT, h]
    return NOKEY


@njit(cache=True)
def _stale_job_classes(N, A, H, node_role, node_ref, group_role, GT, JT, CT, j, cdirty, GM, wake, keys):
    """The urgencies of the classes of job ``j``'s groups after its fair-share allowance changed (``keys``: see
    ``KEYS_*``; ``KEYS_JOIN``/``KEYS_LEAVE`` keep a cached urgency exact where the arc costs never change, i.e.
    with the waiting-cost clock frozen); ``wake``: the job may place again, so its starved classes look at every
    free machine (not only pending ones).
    """
    h = N[N_FIRST, JT[JT_NODE, j]]
    while h >= 0:
        if h & 1 == 1:
            u = H[H_TO, h]
            if node_role[u] == group_role:
                g = node_ref[u]
                c = GT[GT_CLASS, g]
                f = CT[CT_FLAG, c]
                if keys == KEYS_STALE:
                    CT[CT_FLAG, c] = f | CF_KEYSTALE
                elif f & CF_KEYSTALE == 0 and GT[GT_N, g] > 0:
                    gk = _group_key(N, A, H, JT, u, CT[CT_NODE, c], j)
                    if keys == KEYS_JOIN:
                        if gk > CT[CT_KEY, c]:
                            CT[CT_KEY, c] = gk
                    elif gk >= CT[CT_KEY, c]:
                        CT[CT_FLAG, c] = f | CF_KEYSTALE
                if wake and CT[CT_FLAG, c] & CF_MISSED != 0:
                    CT[CT_FLAG, c] &= ~(CF_STARVED | CF_MISSED)
                    GM[GM_NUNST] += 1
                    _mark_class(CT, cdirty, GM, c)
        h = H[H_NEXT, h]


@njit(cache=True)
def k_wake(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    FA: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    GM: np.ndarray,
    CT: np.ndarray,
    starved: np.ndarray,
    pend: np.ndarray,
    m_pend: np.ndarray,
    cmark: np.ndarray,
    node_role: np.ndarray,
    node_ref: np.ndarray,
    group_role: int,
    ec_role: int,
    GT: np.ndarray,
    JT: np.ndarray,
    t_mach: np.ndarray,
    t_arc: np.ndarray,
    arc_pos: np.ndarray,
    m_node: np.ndarray,
    m_arc: np.ndarray,
    m_mask: np.ndarray,
    m_wasfree: np.ndarray,
    m_slots: np.ndarray,
    fanout: int,
    spare: int,
    fanin: int,
    smask: np.ndarray,
) -> int:
    """Offer the pending machines (free machines that starved classes may still want) to the starved classes.

    A starved class reaches every free machine it fits through a target arc, except pending machines and, when
    it is flagged ``CF_MISSED``, machines that left the pending list while it was passed over. Each pending
    machine connects to at most ``fanin`` (0: all) of the starved classes it fits that do not aim at it yet,
    want more targets and may place a task (see :func:`_class_key`: classes whose jobs are held back by their
    fair share are passed over), the most urgent first. It stays pending while more such classes are left (the
    next pass or round offers it again), and leaves the list once it is busy or none is left; the classes it
    passed over (wanting no more targets, or held back) are flagged ``CF_MISSED``: they stop being starved when
    that may change (a target fills up, tasks arrive, the job may place again) and then look at every free
    machine. Returns the number of arcs added (room reserved by the caller: ``fanin`` per pending machine).
    """
    # the starved list without the classes that stopped being starved meanwhile (``smask[i]``: the mask of
    # ``starved[i]``, the scan's first test, kept beside the list); nothing to drop while GM_NUNST is 0
    nst = GM[GM_NST]
    if GM[GM_NUNST] != 0:
        k = 0
        for i in range(nst):
            c = starved[i]
            if CT[CT_FLAG, c] & CF_STARVED == 0:
                CT[CT_FLAG, c] &= ~CF_LISTED
                continue
            starved[k] = c
            smask[k] = smask[i]
            k += 1
        nst = k
        GM[GM_NST] = nst
        GM[GM_NUNST] = 0
    npd = GM[GM_NPEND]
    cap = fanin if fanin > 0 else max(nst, 1)
    top_c = np.empty(cap, dtype=np.int64)
    top_k = np.empty(cap, dtype=np.int64)
    skip = np.empty(nst, dtype=np.int64)  # classes passed over for the current machine
    added = 0
    kept = 0
    for x in range(npd):
        m = pend[x]
        if m_wasfree[m] == 0 or nst == 0:
            m_pend[m] = 0
            continue
        mn = m_node[m]
        mq = m_mask[m]
        stamp = GM[GM_STAMP] + 1
        GM[GM_STAMP] = stamp
        h = N[N_FIRST, mn]  # the classes aiming at m already
        while h >= 0:
            if h & 1 == 1:
                u = H[H_TO, h]
                if node_role[u] == ec_role:
                    cmark[node_ref[u]] = stamp
            h = H[H_NEXT, h]
        left = 0  # starved classes that fit m, do not aim at it, want more targets and may place
        n = 0
        ns = 0
        for i in range(nst):
            if smask[i] & ~mq != 0:
                continue
            c = starved[i]
            if cmark[c] == stamp:
                continue
            want = CT[CT_WAIT, c] + spare
            if fanout > 0 and want > fanout:
                want = fanout
            if CT[CT_LIVE, c] >= want or CT[CT_TN, c] >= CT[CT_TCAP, c]:
                skip[ns] = c
                ns += 1
                continue
            if CT[CT_FLAG, c] & CF_KEYSTALE != 0:
                CT[CT_KEY, c] = _class_key(N, A, H, node_role, node_ref, group_role, GT, JT, CT[CT_NODE, c])
                CT[CT_FLAG, c] &= ~CF_KEYSTALE
            key = CT[CT_KEY, c]
            if key == NOKEY:
                skip[ns] = c
                ns += 1
                continue
            left += 1
            if n == cap and top_k[n - 1] >= key:
                continue
            p = n if n < cap else cap - 1
            while p > 0 and top_k[p - 1] < key:
                top_k[p] = top_k[p - 1]
                top_c[p] = top_c[p - 1]
                p -= 1
            top_k[p] = key
            top_c[p] = c
            if n < cap:
                n += 1
        for y in range(n):
            c = top_c[y]
            tn = CT[CT_TN, c]
            t0 = CT[CT_T0, c]
            node = CT[CT_NODE, c]
            a = _add_arc(N, A, H, M, FA, DN, DA, node, mn, 0, max(m_slots[m], 1), 0)
            t_mach[t0 + tn] = m
            t_arc[t0 + tn] = a
            arc_pos[a] = tn
            CT[CT_TN, c] = tn + 1
            CT[CT_LIVE, c] += 1
            if N[N_FLAG, node] & F_NEW == 0 and N[N_POT, mn] > N[N_POT, node]:  # as in k_refresh
                N[N_POT, mn] = N[N_POT, node]
                _mark_arc(A, M, DA, m_arc[m])
        added += n
        if left > n:
            pend[kept] = m
            kept += 1
        else:  # the classes passed over must look at every free machine once they want more or may place
            m_pend[m] = 0
            for y in range(ns):
                CT[CT_FLAG, skip[y]] |= CF_MISSED
    GM[GM_NPEND] = kept
    return added


@njit(cache=True)
def _sorted_update(ds, nds, rem, nrem, ins, nins):
    """The sorted multiset ``ds[:nds]`` without the values ``rem[:nrem]`` (each one present) and with
    ``ins[:nins]``; returns its new size (``ds`` holds room for it)."""
    r = np.sort(rem[:nrem])
    a = np.sort(ins[:nins])
    out = np.empty(nds - nrem + nins, dtype=np.int64)
    x = 0
    y = 0
    k = 0
    for i in range(nds):
        v = ds[i]
        if x < nrem and r[x] == v:
            x += 1
            continue
        while y < nins and a[y] < v:
            out[k] = a[y]
            k += 1
            y += 1
        out[k] = v
        k += 1
    while y < nins:
        out[k] = a[y]
        k += 1
        y += 1
    ds[:k] = out
    return k


@njit(cache=True)
def _max_min_sorted(d, ds, capacity, tot, out):
    """Max-min fair shares of demands ``d`` in ``capacity`` (the algorithm of ``fairness.max_min_shares``), with
    the demands' sorted values ``ds`` and their sum ``tot`` given (the level depends on the sorted values only)."""
    n = d.size
    if tot <= capacity:
        for i in range(n):
            out[i] = d[i]
        return
    left = float(capacity)
    wsum = float(n)
    level = 0.0
    for i in range(n):
        v = ds[i]
        if float(v) * wsum <= left:
            left -= v
            wsum -= 1.0
        else:
            level = left / wsum
            break
    s = 0
    base = np.int64(np.floor(level + 1e-9))
    for i in range(n):
        out[i] = min(d[i], base)
        s += out[i]
    rest = capacity - s
    i = 0
    while rest > 0 and i < n:
        if out[i] < d[i]:
            out[i] += 1
            rest -= 1
        i += 1


@njit(cache=True)
def k_jobs(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    JT: np.ndarray,
    act: np.ndarray,
    GM: np.ndarray,
    capacity: int,
    unplaceable: np.ndarray,
    fair: bool,
    node_role: np.ndarray,
    node_ref: np.ndarray,
    group_role: int,
    GT: np.ndarray,
    CT: np.ndarray,
    cdirty: np.ndarray,
    jdem: np.ndarray,
    dsorted: np.ndarray,
    exact_keys: bool,
) -> None:
    """Fairness bounds ``[N_j − A_j, N_j]`` of ``U_j → S`` (paper eq. 1–2, shares net of running tasks).

    A job's demand is its running tasks plus its waiting units that some machine up can run: ``unplaceable[j]``
    waiting units of job ``j`` fit no machine up (their machines failed; the array is empty when none is) and take
    no share of the live slots (Quincy's fairness under placement constraints and failures: a share is not given
    to demand that cannot run, else a job could hold a share it cannot use while another job's runnable units
    wait, with no later event to end it). They stay in the graph, held on ``U_j`` by the lower bound.
    Drops jobs that left the graph from the active list (kept in job-id order) first.

    The demands' sorted values are kept between calls (``dsorted[:GM[GM_NDS]]``, ``jdem[j]``: job ``j``'s demand
    in it, −1 if none): a call re-sorts only the demands that changed (a placement leaves a demand as it was;
    completions and arrivals change a few) instead of every active job's.

    ``exact_keys`` (the waiting-cost clock is frozen): a job held back or let go by its fair share updates its
    classes' cached urgencies (see ``_stale_job_classes``) instead of marking them all stale.
    """
    k = 0
    nact = GM[GM_NACT]
    rem = np.empty(2 * nact + 1, dtype=np.int64)
    nrem = 0
    for i in range(nact):
        j = act[i]
        if JT[JT_ALIVE, j] == 1:
            act[k] = j
            k += 1
        elif jdem[j] >= 0:
            rem[nrem] = jdem[j]
            nrem += 1
            jdem[j] = -1
    GM[GM_NACT] = k
    n_in = np.empty(k, dtype=np.int64)
    lower = np.zeros(k, dtype=np.int64)
    for i in range(k):
        n_in[i] = JT[JT_IN, act[i]]
    if fair:
        d = np.empty(k, dtype=np.int64)
        ins = np.empty(k, dtype=np.int64)
        nins = 0
        tot = 0
        for i in range(k):
            j = act[i]
            v = n_in[i] + JT[JT_RUN, j]
            if unplaceable.size:
                v -= unplaceable[j]
            d[i] = v
            tot += v
            if v != jdem[j]:
                if jdem[j] >= 0:
                    rem[nrem] = jdem[j]
                    nrem += 1
                ins[nins] = v
                nins += 1
                jdem[j] = v
        nds = GM[GM_NDS]
        if nrem or nins:
            nds = _sorted_update(dsorted, nds, rem, nrem, ins, nins)
            GM[GM_NDS] = nds
        share = np.empty(k, dtype=np.int64)
        _max_min_sorted(d, dsorted[:nds], capacity, tot, share)
        for i in range(k):
            allowed = max(share[i] - JT[JT_RUN, act[i]], 0)
            lower[i] = max(n_in[i] - allowed, 0)
    for i in range(k):
        j = act[i]
        if lower[i] != JT[JT_LOWER, j] or n_in[i] != JT[JT_UPPER, j]:
            held = n_in[i] <= lower[i]
            if (n_in[i] <= JT[JT_LOWER, j]) != held:  # held back by its fair share before xor now
                keys = KEYS_STALE if not exact_keys else (KEYS_LEAVE if held else KEYS_JOIN)
                _stale_job_classes(N, A, H, node_role, node_ref, group_role, GT, JT, CT, j, cdirty, GM, not held, keys)
            _set_bound(N, A, H, M, DN, DA, JT[JT_ARC, j], lower[i], n_in[i])
            JT[JT_LOWER, j] = lower[i]
            JT[JT_UPPER, j] = n_in[i]
    GM[GM_JOBS] = 0


@njit(cache=True)
def k_tick(
    N: np.ndarray,
    A: np.ndarray,
    M: np.ndarray,
    DA: np.ndarray,
    JT: np.ndarray,
    act: np.ndarray,
    GM: np.ndarray,
    sink: int,
    m_arc: np.ndarray,
    delta: int,
) -> None:
    """Every waiting cost grew by ``delta``: raise the job arcs' costs and the sink's potential alike.

    Reduced costs of ``U_j → S`` stay as they were; only machine arcs with room left (whose reduced cost fell by
    ``delta``) are re-checked by the next solve. This keeps a growing waiting cost O(jobs + machines) per round
    instead of one repair per job.
    """
    for i in range(GM[GM_NACT]):
        j = act[i]
        if JT[JT_ALIVE, j] == 1:
            A[A_COST, JT[JT_ARC, j]] += delta
    N[N_POT, sink] += delta
    for m in range(m_arc.size):
        a = m_arc[m]
        if A[A_FLOW, a] < A[A_CAP, a]:
            _mark_arc(A, M, DA, a)


@njit(cache=True)
def k_refresh(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    FA: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    GM: np.ndarray,
    CT: np.ndarray,
    cdirty: np.ndarray,
    starved: np.ndarray,
    fit_pool: np.ndarray,
    t_mach: np.ndarray,
    t_arc: np.ndarray,
    scratch: np.ndarray,
    m_node: np.ndarray,
    m_arc: np.ndarray,
    m_mask: np.ndarray,
    m_wasfree: np.ndarray,
    m_slots: np.ndarray,
    free_list: np.ndarray,
    arc_pos: np.ndarray,
    fanout: int,
    spare: int,
    arc_room: int,
    smask: np.ndarray,
) -> int:
    """Keep each dirty partial class connected to enough free machines it fits (random ones, never twice).

    ``want = min(waiting + 8, fanout)`` live targets (``fanout`` 0: no limit); targets on busy machines are
    dropped when there are more than twice ``want`` of them or no room is left. A class that finds no free
    machine is starved until one it fits frees up. Stops early (returns −1) when fewer than ``arc_room`` arcs
    would be left; else returns the number of arcs added.
    """
    added = 0
    ncd = GM[GM_NCD]
    nm = m_node.size
    i = 0
    while i < ncd:
        c = cdirty[i]
        flag = CT[CT_FLAG, c]
        wait = CT[CT_WAIT, c]
        t0 = CT[CT_T0, c]
        node = CT[CT_NODE, c]
        if wait <= 0:
            if flag & CF_STARVED != 0:
                GM[GM_NUNST] += 1
            for x in range(CT[CT_TN, c]):
                _remove_arc(N, A, H, M, FA, DN, t_arc[t0 + x])
            CT[CT_TN, c] = 0
            CT[CT_LIVE, c] = 0
            CT[CT_FLAG, c] = flag & ~(CF_DIRTY | CF_STARVED | CF_MISSED)
            i += 1
            continue
        if flag & CF_STARVED != 0:
            CT[CT_FLAG, c] = flag & ~CF_DIRTY
            i += 1
            continue
        want = wait + spare
        if fanout > 0 and want > fanout:
            want = fanout
        have = CT[CT_LIVE, c]
        if have >= want:
            CT[CT_FLAG, c] = flag & ~CF_DIRTY
            i += 1
            continue
        k = want - have
        if (M[M_AFREE] + A.shape[1] - M[M_AHW]) < k + arc_room:
            # shift the unprocessed classes to the front; the caller grows the arc table and calls again
            for x in range(i, ncd):
                cdirty[x - i] = cdirty[x]
            GM[GM_NCD] = ncd - i
            return -1
        CT[CT_FLAG, c] = flag & ~CF_DIRTY
        tn = CT[CT_TN, c]
        tcap = CT[CT_TCAP, c]
        if tn > 2 * want or tn + k > tcap:
            x = 0
            while x < tn:
                m = t_mach[t0 + x]
                if m_wasfree[m] == 0:
                    _remove_arc(N, A, H, M, FA, DN, t_arc[t0 + x])
                    tn -= 1
                    t_mach[t0 + x] = t_mach[t0 + tn]
                    t_arc[t0 + x] = t_arc[t0 + tn]
                    arc_pos[t_arc[t0 + x]] = x
                else:
                    x += 1
            CT[CT_TN, c] = tn
        if tn + k > tcap:
            k = tcap - tn
        if k <= 0:
            i += 1
            continue
        for x in range(tn):
            scratch[t_mach[t0 + x]] = 1
        q = CT[CT_MASK, c]
        nfree = GM[GM_NFREE]
        fit0 = CT[CT_FIT0, c]
        fitn = CT[CT_FITN, c]
        found = 0
        # scan the list likely to yield k candidates sooner: the class's machines (a fraction nfree/nm of them
        # free) or the free machines (a fraction fitn/nm of them fit)
        e_fit = fitn if fitn * nfree <= k * nm else (k * nm) // max(nfree, 1)
        e_free = nfree if nfree * fitn <= k * nm else (k * nm) // max(fitn, 1)
        if e_fit <= e_free:  # scan the class's machines from a random point
            if fitn > 0:
                start = _rand(GM) % fitn
                for y in range(fitn):
                    m = fit_pool[fit0 + (start + y) % fitn]
                    if m_wasfree[m] == 1 and scratch[m] == 0:
                        scratch[m] = 1
                        t_mach[t0 + tn + found] = m
                        found += 1
                        if found == k:
                            break
        elif nfree > 0:  # scan the free machines from a random point
            start = _rand(GM) % nfree
            for y in range(nfree):
                m = free_list[(start + y) % nfree]
                if q & ~m_mask[m] == 0 and scratch[m] == 0:
                    scratch[m] = 1
                    t_mach[t0 + tn + found] = m
                    found += 1
                    if found == k:
                        break
        for x in range(tn + found):
            scratch[t_mach[t0 + x]] = 0
        if found < k:  # every free machine the class fits is a target now: wait until another frees up
            if CT[CT_FLAG, c] & CF_LISTED == 0:
                starved[GM[GM_NST]] = c
                smask[GM[GM_NST]] = q
                GM[GM_NST] += 1
            CT[CT_FLAG, c] = (CT[CT_FLAG, c] | CF_STARVED | CF_LISTED) & ~CF_MISSED
        if found == 0:
            if have == 0 and N[N_FLAG, node] & F_NEW == 0:
                # nothing free to reach: lower the aggregator's potential as far as its arcs allow, so searches
                # from the class's new tasks go straight to their unscheduled aggregator instead of through it
                lo = _lo(N, A, H, node)
                if lo < N[N_POT, node]:
                    N[N_POT, node] = lo if lo > -LOW else N[N_POT, node] - LOW
            i += 1
            continue
        priced = N[N_FLAG, node] & F_NEW == 0
        pe = N[N_POT, node]
        for x in range(found):
            m = t_mach[t0 + tn + x]
            mn = m_node[m]
            a = _add_arc(N, A, H, M, FA, DN, DA, node, mn, 0, max(m_slots[m], 1), 0)
            t_arc[t0 + tn + x] = a
            arc_pos[a] = tn + x
            if priced and N[N_POT, mn] > pe:
                # keep the new arc's reduced cost at 0 by lowering the free machine's potential (no flow enters a
                # machine between rounds, so only its sink arc may now want flow: at most its free slots, and
                # the solver's search back from the machine picks the best waiting task among all classes)
                N[N_POT, mn] = pe
                _mark_arc(A, M, DA, m_arc[m])
        CT[CT_TN, c] = tn + found
        CT[CT_LIVE, c] = have + found
        added += found
        i += 1
    GM[GM_NCD] = 0
    return added


@njit(cache=True)
def k_unserved(
    CT: np.ndarray,
    cdirty: np.ndarray,
    GM: np.ndarray,
) -> bool:
    """Some dirty class still has waiting units and is not starved (another pass may place more)."""
    for i in range(GM[GM_NCD]):
        c = cdirty[i]
        if CT[CT_WAIT, c] > 0 and CT[CT_FLAG, c] & CF_STARVED == 0:
            return True
    return False


UPD_ADDED = 0  # k_update's out: arcs added
UPD_STAGE = 1  # 0: done; 1: stopped before k_wake (arc room); 2: k_refresh stopped (arc room)
UPD_REFRESH = 2  # 1: the caller must finish with the class refresh
UPD_F = 3
assert GM_UPD + UPD_F <= GMF


@njit(cache=True)
def k_update(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    FA: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    GM: np.ndarray,
    CT: np.ndarray,
    cdirty: np.ndarray,
    starved: np.ndarray,
    smask: np.ndarray,
    node_role: np.ndarray,
    node_ref: np.ndarray,
    group_role: int,
    ec_role: int,
    GT: np.ndarray,
    JT: np.ndarray,
    m_free: np.ndarray,
    m_mask: np.ndarray,
    m_arc: np.ndarray,
    m_node: np.ndarray,
    m_slots: np.ndarray,
    m_wasfree: np.ndarray,
    m_flag: np.ndarray,
    m_fpos: np.ndarray,
    mdirty: np.ndarray,
    free_list: np.ndarray,
    freed_buf: np.ndarray,
    t_mach: np.ndarray,
    t_arc: np.ndarray,
    arc_pos: np.ndarray,
    pend: np.ndarray,
    m_pend: np.ndarray,
    cmark: np.ndarray,
    fit_pool: np.ndarray,
    scratch: np.ndarray,
    fanout: int,
    spare: int,
    fanin: int,
    refresh: int,
    out: np.ndarray,
) -> None:
    """One call for the graph update between solves: :func:`k_machines` (if a machine is dirty), :func:`k_wake`
    (if machines are pending and classes starved), then :func:`k_refresh` when ``refresh`` is 1, or, when it is 2,
    if :func:`k_unserved` held before the machines were applied (as after a pass).

    The same steps in the same order as calling them one by one; it stops where the arc table is short of room
    (``out[UPD_STAGE]`` 1: before ``k_wake``, 2: inside ``k_refresh``, which resumes where it stopped), so the
    caller grows the table and finishes with the step-by-step calls. ``out[UPD_ADDED]``: arcs added so far;
    ``out[UPD_REFRESH]``: whether the refresh is due.
    """
    do_refresh = refresh == 1 or (refresh == 2 and k_unserved(CT, cdirty, GM))
    out[UPD_REFRESH] = 1 if do_refresh else 0
    out[UPD_ADDED] = 0
    out[UPD_STAGE] = 0
    if GM[GM_NMD] != 0:
        k_machines(
            N, A, H, M, DN, DA, GM, CT, cdirty, starved, node_role, node_ref, ec_role,
            m_free, m_mask, m_arc, m_wasfree, m_flag, m_fpos, mdirty, free_list, freed_buf, True,
            FA, t_mach, t_arc, arc_pos, pend, m_pend,
        )  # fmt: skip
    npd = GM[GM_NPEND]
    nst = GM[GM_NST]
    if npd != 0 and nst != 0:
        need = npd * (min(fanin, nst) if fanin > 0 else nst) + 64
        if M[M_AFREE] + A.shape[1] - M[M_AHW] < need:
            out[UPD_STAGE] = 1
            return
        out[UPD_ADDED] += k_wake(
            N, A, H, M, FA, DN, DA, GM, CT, starved, pend, m_pend, cmark, node_role, node_ref, group_role, ec_role,
            GT, JT, t_mach, t_arc, arc_pos, m_node, m_arc, m_mask, m_wasfree, m_slots, fanout, spare, fanin, smask,
        )  # fmt: skip
    if do_refresh and GM[GM_NCD] != 0:
        r = k_refresh(
            N, A, H, M, FA, DN, DA, GM, CT, cdirty, starved, fit_pool, t_mach, t_arc, scratch,
            m_node, m_arc, m_mask, m_wasfree, m_slots, free_list, arc_pos, fanout, spare, 0, smask,
        )  # fmt: skip
        if r < 0:
            out[UPD_STAGE] = 2
            return
        out[UPD_ADDED] += r


@njit(cache=True)
def k_place(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    FN: np.ndarray,
    FA: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    GM: np.ndarray,
    CT: np.ndarray,
    cdirty: np.ndarray,
    JT: np.ndarray,
    GT: np.ndarray,
    order: np.ndarray,
    node_role: np.ndarray,
    node_ref: np.ndarray,
    group_role: int,
    cursor: np.ndarray,
    used: np.ndarray,
    touched: np.ndarray,
    m_node: np.ndarray,
    m_arc: np.ndarray,
    m_free: np.ndarray,
    m_flag: np.ndarray,
    mdirty: np.ndarray,
    gfree: np.ndarray,
    free_list: np.ndarray,
    exact_keys: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Decompose the flow on the machines into unit paths back to task groups and commit every unit.

    A committed unit leaves the graph: its flow is taken back along its path (no imbalance is left), its
    group's supply drops by one (the group node goes when it is empty), the machine's sink arc loses one slot
    of capacity, and the next task of the group (lowest id first) is the one placed. Returns (tasks, machines).

    ``exact_keys`` (the waiting-cost clock is frozen: no arc cost changes): a placement marks its class's urgency
    (:func:`_class_key`) stale only where it may lower it (its group emptied while its job could place, and the
    group's term was the largest), and a job reaching its fair share only where its groups held the largest;
    otherwise every placement marks its class stale.
    """
    nm = m_arc.size
    total = 0
    nroots = 0
    ntl = M[M_NTL]
    if ntl >= 0:
        # the flow log lists every arc whose flow a solve set or moved since the last call (and the machines left
        # carrying flow by it); with the arcs edited since the last solve, they are the only sink arcs of machines
        # that may carry flow: read those instead of every free machine's
        nda = M[M_NDA]
        cand = np.empty(ntl + nda, dtype=np.int64)
        nc = 0
        for i in range(ntl + nda):
            a = M[MF + i] if i < ntl else DA[i - ntl]
            if A[A_ALIVE, a] == 0:
                continue
            u = H[H_TO, 2 * a + 1]
            m = node_ref[u]
            if 0 <= m < nm and m_arc[m] == a and m_node[m] == u and A[A_FLOW, a] + A[A_LOW, a] > 0:
                cand[nc] = m
                nc += 1
        GM[GM_PSCAN] += ntl + nda
        GM[GM_PLOG] += 1
        cand = np.sort(cand[:nc])
        found = np.empty(nc, dtype=np.int64)
        for i in range(nc):
            m = cand[i]
            if i == 0 or m != cand[i - 1]:
                total += A[A_FLOW, m_arc[m]] + A[A_LOW, m_arc[m]]
                found[nroots] = m
                nroots += 1
    else:
        nfl = GM[GM_NFREE]  # only a machine with a free slot can carry flow to the sink
        # with most machines free, every machine in machine order (their sink arcs were added in that order: one
        # sequential pass) finds the same machines as the free list in its own order (scattered reads)
        every = 2 * nfl > nm
        n_scan = nm if every else nfl
        found = np.empty(n_scan, dtype=np.int64)  # the machines carrying flow, in one pass
        for i in range(n_scan):
            m = i if every else free_list[i]
            f = A[A_FLOW, m_arc[m]] + A[A_LOW, m_arc[m]]
            if f > 0:
                total += f
                found[nroots] = m
                nroots += 1
        GM[GM_PSCAN] += n_scan
    M[M_NTL] = 0  # a new log: the machines left carrying flow (see the end), then the next solves' arcs
    tasks = np.empty(total, dtype=np.int64)
    machines = np.empty(total, dtype=np.int64)
    if total == 0:
        return tasks, machines
    roots = np.empty(nroots, dtype=np.int64)
    for k in range(nroots):
        roots[k] = m_node[found[k]]
    roots.sort()  # machine order (machine nodes are numbered in machine order), whatever the free list's order
    out_task = np.empty(total, dtype=np.int64)
    out_root = np.empty(total, dtype=np.int64)
    out_arcs = np.empty((total, 4), dtype=np.int64)
    rows = k_decompose(N, A, H, roots, node_role, group_role, cursor, used, touched, out_task, out_root, out_arcs)
    n_empty = 0
    empty = np.empty(rows, dtype=np.int64)
    for r in range(rows):
        for x in range(4):
            a = out_arcs[r, x]
            if a >= 0:
                _add_flow(N, A, H, M, DN, DA, a, -1)
        m = node_ref[out_root[r]]
        a = m_arc[m]
        _add_flow(N, A, H, M, DN, DA, a, -1)
        _set_bound(N, A, H, M, DN, DA, a, 0, A[A_CAP, a] + A[A_LOW, a] - 1)
        m_free[m] -= 1
        _mark_machine(m_flag, mdirty, GM, m)
        gn = out_task[r]
        g = node_ref[gn]
        _set_supply(N, M, DN, gn, N[N_SUP, gn] - 1)
        GT[GT_N, g] -= 1
        tasks[r] = order[GT[GT_START, g] + GT[GT_CUR, g]]
        GT[GT_CUR, g] += 1
        machines[r] = m
        j = GT[GT_JOB, g]
        could_place = JT[JT_IN, j] > JT[JT_LOWER, j]
        JT[JT_IN, j] -= 1
        JT[JT_RUN, j] += 1
        c = GT[GT_CLASS, g]
        CT[CT_WAIT, c] -= 1
        if not exact_keys or (
            GT[GT_N, g] == 0
            and could_place
            and CT[CT_FLAG, c] & CF_KEYSTALE == 0
            and _group_key(N, A, H, JT, gn, CT[CT_NODE, c], j) >= CT[CT_KEY, c]
        ):
            CT[CT_FLAG, c] |= CF_KEYSTALE
        _mark_class(CT, cdirty, GM, c)
        if JT[JT_IN, j] == JT[JT_LOWER, j]:  # the job reached its fair share: its other classes lose urgency
            keys = KEYS_LEAVE if exact_keys else KEYS_STALE
            _stale_job_classes(N, A, H, node_role, node_ref, group_role, GT, JT, CT, j, cdirty, GM, False, keys)
        if GT[GT_N, g] == 0:
            empty[n_empty] = g
            n_empty += 1
    # machines that filled up: no flow enters them and their sink arc has no room, so nothing binds their
    # potential from below; lowering it keeps the classes aiming at them from looking closer than waiting
    low = N[N_POT, H[H_TO, 2 * m_arc[0]]] - LOW if nm else 0
    for x in range(nroots):
        m = node_ref[roots[x]]
        if m_free[m] <= 0 and A[A_FLOW, m_arc[m]] == 0:
            N[N_POT, roots[x]] = low
        if A[A_FLOW, m_arc[m]] + A[A_LOW, m_arc[m]] > 0:  # flow the decomposition left: read again next time
            _log_flow(M, m_arc[m])
    for x in range(n_empty):
        g = empty[x]
        _remove_node(N, A, H, M, FN, FA, DN, GT[GT_NODE, g])
        GT[GT_NODE, g] = -1
        gfree[GM[GM_NGFREE]] = g
        GM[GM_NGFREE] += 1
    return tasks[:rows], machines[:rows]


@njit(cache=True)
def k_place_update(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    FN: np.ndarray,
    FA: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    GM: np.ndarray,
    CT: np.ndarray,
    cdirty: np.ndarray,
    JT: np.ndarray,
    GT: np.ndarray,
    order: np.ndarray,
    node_role: np.ndarray,
    node_ref: np.ndarray,
    group_role: int,
    ec_role: int,
    cursor: np.ndarray,
    used: np.ndarray,
    touched: np.ndarray,
    m_node: np.ndarray,
    m_arc: np.ndarray,
    m_free: np.ndarray,
    m_flag: np.ndarray,
    mdirty: np.ndarray,
    gfree: np.ndarray,
    free_list: np.ndarray,
    exact_keys: bool,
    starved: np.ndarray,
    smask: np.ndarray,
    m_mask: np.ndarray,
    m_slots: np.ndarray,
    m_wasfree: np.ndarray,
    m_fpos: np.ndarray,
    freed_buf: np.ndarray,
    t_mach: np.ndarray,
    t_arc: np.ndarray,
    arc_pos: np.ndarray,
    pend: np.ndarray,
    m_pend: np.ndarray,
    cmark: np.ndarray,
    fit_pool: np.ndarray,
    scratch: np.ndarray,
    fanout: int,
    spare: int,
    fanin: int,
    out: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`k_place`, then, if it placed tasks, :func:`k_update` with ``refresh`` 2 (the update after a pass), in
    one call; ``out`` as for :func:`k_update` (all 0 when nothing was placed)."""
    tasks, machines = k_place(
        N, A, H, M, FN, FA, DN, DA, GM, CT, cdirty, JT, GT, order, node_role, node_ref, group_role,
        cursor, used, touched, m_node, m_arc, m_free, m_flag, mdirty, gfree, free_list, exact_keys,
    )  # fmt: skip
    if tasks.size == 0:
        out[UPD_ADDED] = 0
        out[UPD_STAGE] = 0
        out[UPD_REFRESH] = 0
        return tasks, machines
    k_update(
        N, A, H, M, FA, DN, DA, GM, CT, cdirty, starved, smask, node_role, node_ref, group_role, ec_role, GT, JT,
        m_free, m_mask, m_arc, m_node, m_slots, m_wasfree, m_flag, m_fpos, mdirty, free_list, freed_buf,
        t_mach, t_arc, arc_pos, pend, m_pend, cmark, fit_pool, scratch, fanout, spare, fanin, 2, out,
    )  # fmt: skip
    return tasks, machines


@njit(cache=True)
def k_take_workers(
    machines: np.ndarray, tasks: np.ndarray, ptr: np.ndarray, workers: np.ndarray, slot: np.ndarray, out: np.ndarray
) -> int:
    """One free worker of each machine (lowest index first) starts ``tasks[i]`` on the worker ledger's slots
    (``slot``: the task per worker, −1 free); returns −1 or the first row whose machine has no free worker."""
    for i in range(machines.size):
        m = machines[i]
        w = -1
        for x in range(ptr[m], ptr[m + 1]):
            if slot[workers[x]] < 0:
                w = workers[x]
                break
        if w < 0:
            return i
        slot[w] = tasks[i]
        out[i] = w
    return -1


@njit(cache=True)
def k_free_workers(workers: np.ndarray, slot: np.ndarray, of_worker: np.ndarray, free: np.ndarray) -> None:
    """Finished tasks release their workers' ledger slots (and a slot of their machines)."""
    for i in range(workers.size):
        w = workers[i]
        slot[w] = -1
        free[of_worker[w]] += 1


@njit(cache=True)
def k_new_class(
    CT: np.ndarray,
    c: int,
    mask: int,
    full: bool,
    m_mask: np.ndarray,
    fit_pool: np.ndarray,
    fit_used: int,
    t_used: int,
    fanout: int,
) -> tuple[int, int]:
    """Columns of a new class ``c`` of hard-constraint ``mask`` (no node yet: ``CT_NODE`` −1). ``full`` (every
    machine fits it and racks are configured): flagged ``CF_FULL``, no targets. Otherwise the machines it fits go
    to ``fit_pool[fit_used:]`` (room for every machine reserved by the caller) and its target slice starts at
    ``t_used``. Returns (the new ``fit_used``, the target capacity it reserves)."""
    for r in range(CTF):
        CT[r, c] = 0
    CT[CT_NODE, c] = -1
    CT[CT_MASK, c] = mask
    if full:
        CT[CT_FLAG, c] = CF_FULL
        return fit_used, 0
    k = 0
    for m in range(m_mask.size):
        if m_mask[m] & mask == mask:
            fit_pool[fit_used + k] = m
            k += 1
    CT[CT_FIT0, c] = fit_used
    CT[CT_FITN, c] = k
    want_max = k if fanout <= 0 else min(k, fanout)
    tcap = min(k, 3 * want_max + 24)
    CT[CT_T0, c] = t_used
    CT[CT_TCAP, c] = tcap
    return fit_used + k, tcap


@njit(cache=True)
def k_group(hard: np.ndarray, soft: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tasks with the same (hard, soft) masks form a group: ``order`` lists the tasks' positions group by group
    (groups in mask order, tasks in their given order within each), ``starts`` where each group begins in it."""
    n = hard.size
    key = np.empty(n, dtype=np.uint64)
    for i in range(n):
        key[i] = (np.uint64(hard[i]) << np.uint64(32)) | np.uint64(soft[i])
    order = np.argsort(key, kind="mergesort")
    ng = 0
    for x in range(n):
        if x == 0 or key[order[x]] != key[order[x - 1]]:
            ng += 1
    starts = np.empty(ng, dtype=np.int64)
    ng = 0
    for x in range(n):
        if x == 0 or key[order[x]] != key[order[x - 1]]:
            starts[ng] = x
            ng += 1
    return order.astype(np.int64), starts


@njit(cache=True)
def k_add_tasks(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    FN: np.ndarray,
    FA: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    GM: np.ndarray,
    CT: np.ndarray,
    cdirty: np.ndarray,
    JT: np.ndarray,
    GT: np.ndarray,
    gfree: np.ndarray,
    order_pool: np.ndarray,
    node_role: np.ndarray,
    node_ref: np.ndarray,
    job_role: int,
    group_role: int,
    ec_role: int,
    rack_nodes: np.ndarray,
    big: int,
    job: int,
    new_job: bool,
    job_cost: int,
    sink: int,
    tasks: np.ndarray,
    order: np.ndarray,
    starts: np.ndarray,
    classes: np.ndarray,
    tcost: np.ndarray,
    pref_group: np.ndarray,
    pref_node: np.ndarray,
    pref_cost: np.ndarray,
    n_groups: int,
    order_used: int,
) -> int:
    """Tasks of ``job`` enter the graph (room reserved by the caller): the job's unscheduled aggregator and its
    arc to the sink if ``new_job``, one node per group (``order``/``starts`` from :func:`k_group`; group ids
    recycled first), the nodes of the groups' classes that have none yet (with their arcs to the racks when every
    machine fits them), the class and job bookkeeping, then the arcs group → job, group → class (``tcost``) and
    the preference arcs (``pref_*``: group index, machine node, cost). Returns the new number of group ids.
    """
    one = np.zeros(1, dtype=np.int64)
    out1 = np.empty(1, dtype=np.int64)
    if new_job:
        k_add_nodes(N, M, FN, DN, one, out1)
        u = out1[0]
        node_role[u] = job_role
        node_ref[u] = job
        JT[JT_NODE, job] = u
        JT[JT_ARC, job] = _add_arc(N, A, H, M, FA, DN, DA, u, sink, 0, 0, job_cost)
    n = tasks.size
    ng = starts.size
    sizes = np.empty(ng, dtype=np.int64)
    for i in range(ng):
        end = starts[i + 1] if i + 1 < ng else n
        sizes[i] = end - starts[i]
    for x in range(n):
        order_pool[order_used + x] = tasks[order[x]]
    gids = np.empty(ng, dtype=np.int64)
    nfree = GM[GM_NGFREE]
    take = min(nfree, ng)
    for i in range(take):
        gids[i] = gfree[nfree - take + i]
    GM[GM_NGFREE] = nfree - take
    for i in range(take, ng):
        gids[i] = n_groups + i - take
    nodes = np.empty(ng, dtype=np.int64)
    k_add_nodes(N, M, FN, DN, sizes, nodes)
    for i in range(ng):
        node_role[nodes[i]] = group_role
        node_ref[nodes[i]] = gids[i]
    for i in range(ng):  # new classes: their nodes, in the order their first groups come
        c = classes[i]
        if CT[CT_NODE, c] < 0:
            k_add_nodes(N, M, FN, DN, one, out1)
            v = out1[0]
            node_role[v] = ec_role
            node_ref[v] = c
            CT[CT_NODE, c] = v
            N[N_FLAG, v] |= F_NOINDEX  # its targets churn: scanned through its list (see INDEX_DEGREE)
            if CT[CT_FLAG, c] & CF_FULL != 0:
                for r in range(rack_nodes.size):
                    _add_arc(N, A, H, M, FA, DN, DA, v, rack_nodes[r], 0, big, 0)
    missed = np.zeros(ng, dtype=np.bool_)
    for i in range(ng):
        g = gids[i]
        c = classes[i]
        GT[GT_NODE, g] = nodes[i]
        GT[GT_JOB, g] = job
        GT[GT_CLASS, g] = c
        GT[GT_N, g] = sizes[i]
        GT[GT_START, g] = order_used + starts[i]
        GT[GT_CUR, g] = 0
        CT[CT_WAIT, c] += sizes[i]
        CT[CT_FLAG, c] |= CF_KEYSTALE
    nmiss = 0
    for i in range(ng):
        if CT[CT_FLAG, classes[i]] & CF_MISSED != 0:
            missed[i] = True
            nmiss += 1
    for i in range(ng):  # they want more: look at every free machine
        if missed[i]:
            CT[CT_FLAG, classes[i]] &= ~(CF_STARVED | CF_MISSED)
    GM[GM_NUNST] += nmiss
    for i in range(ng):
        _mark_class(CT, cdirty, GM, classes[i])
    JT[JT_IN, job] += n
    GM[GM_JOBS] = 1
    jn = JT[JT_NODE, job]
    for i in range(ng):
        _add_arc(N, A, H, M, FA, DN, DA, nodes[i], jn, 0, sizes[i], 0)
    for i in range(ng):
        _add_arc(N, A, H, M, FA, DN, DA, nodes[i], CT[CT_NODE, classes[i]], 0, sizes[i], tcost[i])
    for k in range(pref_group.size):
        i = pref_group[k]
        _add_arc(N, A, H, M, FA, DN, DA, nodes[i], pref_node[k], 0, sizes[i], pref_cost[k])
    return n_groups + ng - take


@njit(cache=True)
def k_start_tasks(
    machines: np.ndarray,
    tasks: np.ndarray,
    ptr: np.ndarray,
    workers: np.ndarray,
    slot: np.ndarray,
    out: np.ndarray,
    free: np.ndarray,
    state: np.ndarray,
    machine: np.ndarray,
    running: int,
) -> int:
    """:func:`k_take_workers`, then each task is ``running`` on its machine (``state``/``machine`` per task), which
    has one free slot fewer (``free``); returns −1 or the first row whose machine has no free worker (then nothing
    after the workers is recorded)."""
    bad = k_take_workers(machines, tasks, ptr, workers, slot, out)
    if bad >= 0:
        return bad
    for i in range(machines.size):
        m = machines[i]
        t = tasks[i]
        free[m] -= 1
        state[t] = running
        machine[t] = m
    return -1


@njit(cache=True)
def k_finished_slots(
    tasks: np.ndarray,
    workers: np.ndarray,
    state: np.ndarray,
    machine: np.ndarray,
    done: int,
    slot: np.ndarray,
    of_worker: np.ndarray,
    free: np.ndarray,
    ms_out: np.ndarray,
) -> None:
    """Finished tasks are ``done`` and on no machine; their workers' ledger slots and a slot of their machines are
    free again (:func:`k_free_workers`); ``ms_out[i]``: the machine of ``workers[i]``."""
    for i in range(tasks.size):
        t = tasks[i]
        state[t] = done
        machine[t] = -1
    for i in range(workers.size):
        w = workers[i]
        slot[w] = -1
        m = of_worker[w]
        free[m] += 1
        ms_out[i] = m


@njit(cache=True)
def k_finished_graph(
    tasks: np.ndarray,
    workers: np.ndarray,
    state: np.ndarray,
    machine: np.ndarray,
    done: int,
    slot: np.ndarray,
    of_worker: np.ndarray,
    free: np.ndarray,
    ms_out: np.ndarray,
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    FN: np.ndarray,
    FA: np.ndarray,
    DN: np.ndarray,
    JT: np.ndarray,
    GM: np.ndarray,
    MT: np.ndarray,
    task_job: np.ndarray,
) -> None:
    """:func:`k_finished_slots` (the scheduler's side of the finished tasks), then :func:`k_finish` (the compiled
    graph's: ``MT`` its machine table, ``task_job`` its tasks' jobs) in one call."""
    k_finished_slots(tasks, workers, state, machine, done, slot, of_worker, free, ms_out)
    jobs = np.empty(tasks.size, dtype=np.int64)
    for i in range(tasks.size):
        jobs[i] = task_job[tasks[i]]
    k_finish(N, A, H, M, FN, FA, DN, JT, GM, MT[MT_FREE], MT[MT_FLAG], MT[MT_DIRTY], ms_out, jobs)


@njit(cache=True)
def k_prepare(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    FA: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    GM: np.ndarray,
    CT: np.ndarray,
    cdirty: np.ndarray,
    starved: np.ndarray,
    smask: np.ndarray,
    node_role: np.ndarray,
    node_ref: np.ndarray,
    group_role: int,
    ec_role: int,
    GT: np.ndarray,
    JT: np.ndarray,
    m_free: np.ndarray,
    m_mask: np.ndarray,
    m_arc: np.ndarray,
    m_node: np.ndarray,
    m_slots: np.ndarray,
    m_wasfree: np.ndarray,
    m_flag: np.ndarray,
    m_fpos: np.ndarray,
    mdirty: np.ndarray,
    free_list: np.ndarray,
    freed_buf: np.ndarray,
    t_mach: np.ndarray,
    t_arc: np.ndarray,
    arc_pos: np.ndarray,
    pend: np.ndarray,
    m_pend: np.ndarray,
    cmark: np.ndarray,
    fit_pool: np.ndarray,
    scratch: np.ndarray,
    fanout: int,
    spare: int,
    fanin: int,
    out: np.ndarray,
    do_jobs: bool,
    act: np.ndarray,
    capacity: int,
    unplaceable: np.ndarray,
    fair: bool,
    jdem: np.ndarray,
    dsorted: np.ndarray,
    exact_keys: bool,
) -> None:
    """The graph update before a round's first solve in one call: :func:`k_jobs` (if ``do_jobs``), then
    :func:`k_update` with ``refresh`` 1 (``out`` as for it)."""
    if do_jobs:
        k_jobs(
            N, A, H, M, DN, DA, JT, act, GM, capacity, unplaceable, fair, node_role, node_ref, group_role, GT, CT,
            cdirty, jdem, dsorted, exact_keys,
        )  # fmt: skip
    k_update(
        N, A, H, M, FA, DN, DA, GM, CT, cdirty, starved, smask, node_role, node_ref, group_role, ec_role, GT, JT,
        m_free, m_mask, m_arc, m_node, m_slots, m_wasfree, m_flag, m_fpos, mdirty, free_list, freed_buf,
        t_mach, t_arc, arc_pos, pend, m_pend, cmark, fit_pool, scratch, fanout, spare, fanin, 1, out,
    )  # fmt: skip


@njit(cache=True)
def k_update_packed(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    FA: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    GM: np.ndarray,
    CT: np.ndarray,
    CX: np.ndarray,
    NR: np.ndarray,
    GT: np.ndarray,
    JT: np.ndarray,
    MT: np.ndarray,
    TT: np.ndarray,
    arc_pos: np.ndarray,
    fit_pool: np.ndarray,
    refresh: int,
) -> None:
    """:func:`k_update` with its arrays packed (``CX``: class lists, ``NR``: node roles and refs, ``MT``: machine
    table, ``TT``: target machines and arcs; the settings and ``out`` in ``GM``): 18 arguments instead of 43, the
    same steps."""
    k_update(
        N, A, H, M, FA, DN, DA, GM, CT, CX[CX_DIRTY], CX[CX_STARVED], CX[CX_SMASK], NR[0], NR[1], GM[GM_GROLE],
        GM[GM_EROLE], GT, JT, MT[MT_FREE], MT[MT_MASK], MT[MT_ARC], MT[MT_NODE], MT[MT_SLOTS], MT[MT_WASFREE],
        MT[MT_FLAG], MT[MT_FPOS], MT[MT_DIRTY], MT[MT_FREELIST], MT[MT_FREED], TT[0], TT[1], arc_pos, MT[MT_PEND],
        MT[MT_MPEND], CX[CX_MARK], fit_pool, MT[MT_SCRATCH], GM[GM_FANOUT], GM[GM_SPARE], GM[GM_FANIN], refresh,
        GM[GM_UPD : GM_UPD + UPD_F],
    )  # fmt: skip


@njit(cache=True)
def k_prepare_packed(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    FA: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    GM: np.ndarray,
    CT: np.ndarray,
    CX: np.ndarray,
    NR: np.ndarray,
    GT: np.ndarray,
    JT: np.ndarray,
    MT: np.ndarray,
    TT: np.ndarray,
    arc_pos: np.ndarray,
    fit_pool: np.ndarray,
    do_jobs: bool,
    act: np.ndarray,
    capacity: int,
    unplaceable: np.ndarray,
    jdem: np.ndarray,
    dsorted: np.ndarray,
) -> None:
    """:func:`k_prepare` with its arrays packed as for :func:`k_update_packed` (23 arguments instead of 48)."""
    k_prepare(
        N, A, H, M, FA, DN, DA, GM, CT, CX[CX_DIRTY], CX[CX_STARVED], CX[CX_SMASK], NR[0], NR[1], GM[GM_GROLE],
        GM[GM_EROLE], GT, JT, MT[MT_FREE], MT[MT_MASK], MT[MT_ARC], MT[MT_NODE], MT[MT_SLOTS], MT[MT_WASFREE],
        MT[MT_FLAG], MT[MT_FPOS], MT[MT_DIRTY], MT[MT_FREELIST], MT[MT_FREED], TT[0], TT[1], arc_pos, MT[MT_PEND],
        MT[MT_MPEND], CX[CX_MARK], fit_pool, MT[MT_SCRATCH], GM[GM_FANOUT], GM[GM_SPARE], GM[GM_FANIN],
        GM[GM_UPD : GM_UPD + UPD_F], do_jobs, act, capacity, unplaceable, GM[GM_FAIR] != 0, jdem, dsorted,
        GM[GM_EXACT] != 0,
    )  # fmt: skip


@njit(cache=True)
def k_place_update_packed(
    N: np.ndarray,
    A: np.ndarray,
    H: np.ndarray,
    M: np.ndarray,
    FN: np.ndarray,
    FA: np.ndarray,
    DN: np.ndarray,
    DA: np.ndarray,
    GM: np.ndarray,
    CT: np.ndarray,
    CX: np.ndarray,
    NR: np.ndarray,
    GT: np.ndarray,
    JT: np.ndarray,
    MT: np.ndarray,
    TT: np.ndarray,
    order: np.ndarray,
    cursor: np.ndarray,
    used: np.ndarray,
    touched: np.ndarray,
    gfree: np.ndarray,
    arc_pos: np.ndarray,
    fit_pool: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`k_place_update` with its arrays packed as for :func:`k_update_packed` (23 arguments instead of 48)."""
    return k_place_update(
        N, A, H, M, FN, FA, DN, DA, GM, CT, CX[CX_DIRTY], JT, GT, order, NR[0], NR[1], GM[GM_GROLE], GM[GM_EROLE],
        cursor, used, touched, MT[MT_NODE], MT[MT_ARC], MT[MT_FREE], MT[MT_FLAG], MT[MT_DIRTY], gfree,
        MT[MT_FREELIST], GM[GM_EXACT] != 0, CX[CX_STARVED], CX[CX_SMASK], MT[MT_MASK], MT[MT_SLOTS], MT[MT_WASFREE],
        MT[MT_FPOS], MT[MT_FREED], TT[0], TT[1], arc_pos, MT[MT_PEND], MT[MT_MPEND], CX[CX_MARK], fit_pool,
        MT[MT_SCRATCH], GM[GM_FANOUT], GM[GM_SPARE], GM[GM_FANIN], GM[GM_UPD : GM_UPD + UPD_F],
    )  # fmt: skip


# numba cache stamp: megha.schedulers.flow._kernels=78fb17ad863d
