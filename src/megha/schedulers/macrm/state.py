"""MACRM's per-node state in packed numpy arrays, for compiled handlers (simulation speed plan, step 1).

A deployment shares one :class:`NodeState` (:func:`share`, ``Cadence.use_state``): the node managers' scalars, the
trackers' view and undo rings, the calm bound, the rank counter, the kernels' counts (``GR_NM_HB``, ``GR_TR_HB``,
``GR_TR_ANSWERED``, ``C_HB_CELL``, ``C_REP_CELL``: added to the Python counters when they are read,
``Cadence.fold_counts``) and, with a power-of-two heartbeat period, the free wheels (:class:`PackedWheel`,
``C_PYWHEEL`` 0; else the node managers keep them as sets) live there, and the simulation runs :func:`k_deliver`,
:func:`k_wake_news`, :func:`k_container_end`, :func:`k_container_start`, :func:`k_inquiry` and :func:`k_vf_arm` on it
(``NodeManagers._deliver``, ``_wake``, ``_ends_at``, ``_start``, ``_inquiry``, ``ResourceTracker._vf_arm``) through
their compiled entry points (:meth:`NodeState.bind_kernels`). :func:`pack` copies the state of a running deployment
(every node-manager group, its tracker, the cadence) into a :class:`NodeState` of its own, with the free wheel as linked
lists, for the tests. The kernels are handlers on that state, step for step and with the same float operations in the
same order: :func:`k_deliver` (``_deliver``, a news heartbeat reaching its tracker), :func:`k_wake_news` (``_wake`` with
news), :func:`k_container_end` and :func:`k_container_start` (the node's side of ``_ends_at`` and ``_start``),
:func:`k_inquiry` (``_inquiry``, a whole message), :func:`k_vf_arm` (the tracker's scan of the free wheel for the next
virtual heartbeat to forward). Each covers the common case (forwarding off and nothing armed at the tracker, no dead
node, a calm bound that stays below the threshold, distributed mode, a power-of-two period or the cached binade) and
otherwise returns :data:`FALLBACK` (or stops at the node it does not cover) without changing anything; the events a
handler makes (news deliveries, timers, cancellations) come back for the caller to make, in order, with the engine's
sequence numbers. ``tests/test_macrm_state.py`` runs each beside the Python handler on a packed copy at every call in
whole simulations and compares the states and the events.

Layout (global node index ``node``; ``R`` resources; a few arrays, since every array argument costs a compiled call
about 0.4 us):

* ``f`` float64 ``[n, F_COLS + 4 R]``: the float columns below, then capacity, background, used and the tracker's
  view of used (``CAP``, ``BG``, ``USED``, ``TR_USED`` + resource);
* ``k`` int64 ``[n, K_COLS]``: the int columns below (flags as bits of ``K_FLAGS``);
* ``g`` float64: run-wide floats (``G_*``; the smallest allocation minus EPS from ``G_NEED``, the calm bound's sum
  from ``G_BSUM``, the total capacity from ``G_TOTAL``, a container's demand from ``G_DEM``: the caller's input to
  :func:`k_container_end` and :func:`k_container_start`);
* ``c`` int64: run-wide counters and switches (``C_*``);
* ``gr`` int64 ``[groups, GR_COLS]``: per group (node managers and their tracker) counters and switches;
* ``wheel`` int64 ``[groups, buckets]``: the first node of each free-wheel bucket (-1: empty); nodes are linked
  through ``K_WNEXT`` / ``K_WPREV``, ``K_WB`` is a node's bucket (-1: not in the wheel);
* ``undo`` float64 ``[groups, cap, 3 + R]``: each tracker's undo log of the calm bound as a ring buffer of
  ``(time, node, known, old row...)`` (``GR_UHEAD``, ``GR_ULEN``).
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from numba import njit

from megha.schedulers.macrm.rows import EPS, OVER

# float columns of f
F_ANCHOR, F_MEMO_T, F_FWD_TICK, F_VWAIT, F_WAIT_SINCE, F_LAST_SEEN, F_CLEAN = range(7)
F_VR = 7  # VR_SLOTS columns: when the tracker's virtual replies arrive (the first K_VR_N in use)
VR_SLOTS = 4
F_COLS = F_VR + VR_SLOTS
# int columns of k
K_MEMO_K, K_RANK, K_FWD_COUNT, K_WAITING, K_NEWS, K_FLAGS, K_WB, K_WNEXT, K_WPREV, K_GROUP, K_ARB_SEQ = range(11)
K_PENDING = 11  # the pending sampling's token number (-1: none; pack's tokens)
K_VR_N = 12
# 0/1 columns the node managers read and write through memoryviews (NodeManagers.bind_state)
K_HALVED, K_MISSED, K_DORMANT, K_LIGHT = 13, 14, 15, 16
# 0/1 columns the tracker reads and writes through memoryviews (ResourceTracker.bind_state)
K_KNOWN, K_FWD_FREE = 17, 18
K_COLS = 19
# bits of K_FLAGS (B_VR: more virtual replies due than VR_SLOTS, B_DEAD: the node is down)
B_VR, B_DEAD = 64, 128
# g
G_HB, G_D_NT, G_D_TN, G_WHEEL_H, G_STATS_H, G_LIM, G_THR, G_MARGIN, G_FAST_LO, G_FAST_HI, G_FAST_D, G_OUT = range(12)
G_HOLD, G_HB_REPLY = 12, 13  # the response timeout, the heartbeat reply timeout
G_POW2 = 14  # 1.0: the heartbeat period is a power of two (ticks are walked exactly by _last_le_pow2)
G_NEED = 15  # then R values, G_BSUM(R) = G_NEED + R, G_TOTAL(R) = G_NEED + 2 R
# and G_DEM(R) = G_NEED + 3 R: a container's demand, the caller's input to k_container_end and k_container_start
# c
C_RANK, C_HB_CELL, C_REP_CELL, C_CALM, C_METRIC, C_NB, C_NEWS_OK, C_EAGER = range(8)
C_PYWHEEL = 8  # 1: the caller keeps the free wheel (k_deliver leaves it alone and returns DELIVER_FREE)
C_SENT, C_ANSWERED = 9, 10  # k_wake_news's WAKE_PUSH: the virtual heartbeats it counted as sent and answered
C_COLS = 11
METRIC_MAX, METRIC_CPU, METRIC_MEAN = 0, 1, 2
# gr
GR_NM_HB, GR_TR_HB, GR_TR_ANSWERED, GR_WSIZE, GR_FORWARD, GR_VF, GR_DEAD, GR_UHEAD, GR_ULEN, GR_LO, GR_NB = range(11)
GR_CENTRAL = 11
GR_COLS = 12

# the node managers' columns (NodeManagers.bind_state) and their values before the run
NM_F_COLS = [F_ANCHOR, F_MEMO_T, F_FWD_TICK, F_VWAIT, F_WAIT_SINCE]
NM_F_INIT = [0.0, 0.0, math.nan, -math.inf, 0.0]
NM_K_COLS = [K_MEMO_K, K_RANK, K_FWD_COUNT, K_WAITING, K_NEWS, K_ARB_SEQ, K_HALVED, K_MISSED, K_DORMANT, K_LIGHT]
NM_K_INIT = [0, 0, 0, 0, -1, 0, 0, 0, 0, 0]

WAKE_QUIET = 0  # k_wake_news: done, no event to make
WAKE_PUSH = 2  # k_wake_news: done; push the news delivery of the tick g[G_OUT] (k_wake_news)
# k_container_start's result bits (with WAKE_PUSH = 2)
S_DEAD, S_REJECT, S_OVER = 4, 8, 16
FALLBACK = 1  # k_deliver: not covered, nothing changed (run the Python handler)
DELIVER_FREE = 2  # k_deliver with C_PYWHEEL: done; the node has free resources (the caller adds it to its wheel)
UNDO_CAP = 4096  # entries of each tracker's undo ring (a full ring falls back)


class NodeState:
    """The packed arrays (module docstring) and their shape parameters."""

    def __init__(self, n: int, n_res: int, groups: int, buckets: int) -> None:
        self.n_res = n_res
        self.f = np.zeros((n, F_COLS + 4 * n_res))
        self.k = np.zeros((n, K_COLS), dtype=np.int64)
        self.g = np.zeros(G_NEED + 4 * n_res)
        self.c = np.zeros(C_COLS, dtype=np.int64)
        self.gr = np.zeros((groups, GR_COLS), dtype=np.int64)
        self.wheel = np.full((groups, buckets), -1, dtype=np.int64)
        self.undo = np.zeros((groups, UNDO_CAP, 3 + n_res))
        self.kargs = self.args()  # (kept current: grow_undo)

    def grow_undo(self) -> None:
        """Twice the undo rings' capacity (each ring's live entries moved to its start)."""
        cap = self.undo.shape[1]
        new = np.zeros((self.undo.shape[0], 2 * cap, self.undo.shape[2]))
        for gi in range(self.undo.shape[0]):
            h, n = int(self.gr[gi, GR_UHEAD]), int(self.gr[gi, GR_ULEN])
            new[gi, :n] = self.undo[gi, (h + np.arange(n)) % cap]
            self.gr[gi, GR_UHEAD] = 0
        self.undo = new
        self.kargs = self.args()

    def args(self) -> tuple:
        """The arrays in the order the kernels take them."""
        return self.f, self.k, self.g, self.c, self.gr, self.wheel, self.undo

    def bind_kernels(self) -> None:
        """The wired kernels' compiled entry points for this state's argument types, as attributes ``deliver``,
        ``wake_news``, ``container_end``, ``container_start``, ``inquiry`` and ``vf_arm`` (compiled, or loaded from
        numba's cache, now): a call without the dispatcher's type resolution, about 0.8 us less per call. The
        arguments must have exactly the types of the signature (the state's arrays, ints, floats, a bool;
        C-contiguous int64 and float64 arrays for :func:`k_inquiry` and :func:`k_vf_arm`): nothing converts or checks
        them."""
        ty = tuple(numba.typeof(a) for a in self.kargs)
        i64, f64, b1 = numba.int64, numba.float64, numba.boolean
        ai = numba.typeof(np.zeros(1, dtype=np.int64))
        af = numba.typeof(np.zeros(1))
        af2 = numba.typeof(np.zeros((1, 3)))
        self.deliver = k_deliver.compile((*ty, i64, f64))
        self.wake_news = k_wake_news.compile((*ty, i64, f64))
        self.container_end = k_container_end.compile((*ty, i64, f64))
        self.container_start = k_container_start.compile((*ty, i64, i64, b1, f64))
        self.inquiry = k_inquiry.compile((*ty, ai, af, i64, f64, ai, ai, af2))
        self.vf_arm = k_vf_arm.compile((*ty, i64, f64, i64, f64, f64, af))


def share(groups: list) -> NodeState:
    """One :class:`NodeState` for every node-manager group of a deployment (global node ``lo + i`` for the group's
    local node ``i``): each group's per-node scalars move there (``NodeManagers.bind_state``)."""
    n = sum(nm.n for nm in groups)
    st = NodeState(n, groups[0].cap.shape[1], len(groups), 1)
    for gi, nm in enumerate(groups):
        nm.bind_state(st, nm.lo)
        st.k[nm.lo : nm.lo + nm.n, K_GROUP] = gi
        st.gr[gi, GR_LO] = nm.lo
    st.k[:, K_WB] = -1  # (the node managers keep their free wheels: C_PYWHEEL)
    return st


def _col(base: int, n_res: int, which: int) -> int:
    """First column of row block ``which`` (0 capacity, 1 background, 2 used, 3 tracker's view) in ``f``."""
    return base + which * n_res


def pack(cad: Any, tokens: dict | None = None) -> NodeState:
    """A :class:`NodeState` copied from a running deployment's cadence (its node-manager groups and trackers);
    sampling tokens (tuples) are numbered through ``tokens`` (token -> number, extended as needed)."""
    if tokens is None:
        tokens = {}
    groups = cad.groups
    n = sum(nm.n for nm in groups)
    n_res = groups[0].cap.shape[1]
    nb = max(nm.wheel.nb for nm in groups)
    st = NodeState(n, n_res, len(groups), nb)
    f, k, g, c, gr, wheel, undo = st.args()
    cap0, bg0, us0, tu0 = (_col(F_COLS, n_res, w) for w in range(4))
    g[G_HB] = groups[0].hb
    g[G_D_NT] = cad.d_nt
    g[G_D_TN] = cad.d_tn
    g[G_WHEEL_H] = groups[0].wheel.h
    g[G_STATS_H] = cad.stats_period.h if cad.stats_period is not None else math.nan
    g[G_LIM] = math.nan if cad._lim_max is None else cad._lim_max
    g[G_THR] = cad.threshold
    g[G_MARGIN] = cad.margin
    g[G_NEED : G_NEED + n_res] = groups[0]._need
    if cad._bound_sum is not None:
        g[G_NEED + n_res : G_NEED + 2 * n_res] = cad._bound_sum
    if cad._total_sum is not None:
        g[G_NEED + 2 * n_res : G_NEED + 3 * n_res] = cad._total_sum
    c[C_RANK] = cad.cv[C_RANK]
    c[C_CALM] = int(cad.calm)
    metric = cad.arbitrator.load_metric if cad.arbitrator is not None else "max"
    c[C_METRIC] = METRIC_MAX if metric == "max" else METRIC_CPU if metric == "cpu" else METRIC_MEAN
    c[C_NB] = nb
    c[C_NEWS_OK] = int(groups[0]._news_ok)
    c[C_EAGER] = int(cad.eager)
    g[G_HOLD] = groups[0].hold_timeout
    g[G_POW2] = 1.0 if math.frexp(cad.hb.h)[0] == 0.5 else 0.0
    g[G_HB_REPLY] = groups[0].hb_reply_timeout
    fast = cad.hb._fast
    g[G_FAST_LO], g[G_FAST_HI], g[G_FAST_D] = (math.nan, math.nan, math.nan) if fast is None else fast
    for gi, nm in enumerate(groups):
        tr = cad.trackers[gi]
        lo = nm.lo
        gr[gi, GR_NM_HB] = nm.stats["heartbeats"]
        gr[gi, GR_TR_HB] = tr.stats["heartbeats"]
        gr[gi, GR_TR_ANSWERED] = tr.stats["answered"]
        gr[gi, GR_WSIZE] = nm.wheel.size
        gr[gi, GR_FORWARD] = int(tr.forward)
        gr[gi, GR_VF] = int(tr._vf is not None)
        gr[gi, GR_DEAD] = tr.n_dead
        gr[gi, GR_LO] = lo
        gr[gi, GR_NB] = nm.wheel.nb
        gr[gi, GR_CENTRAL] = int(nm.central)
        entries = tr.undo_entries()
        if len(entries) > UNDO_CAP:
            raise ValueError("undo log longer than the ring")
        for q, (t, node, row, kn) in enumerate(entries):
            undo[gi, q, 0] = t
            undo[gi, q, 1] = node
            undo[gi, q, 2] = float(kn)
            undo[gi, q, 3 : 3 + n_res] = row
        gr[gi, GR_UHEAD] = 0
        gr[gi, GR_ULEN] = len(entries)
        for b, members in enumerate(nm.wheel.buckets):
            for i in sorted(members):  # (the order within a bucket is not state: lookups take a minimum)
                x = lo + i
                k[x, K_WB] = b
                head = wheel[gi, b]
                k[x, K_WNEXT] = head
                k[x, K_WPREV] = -1
                if head >= 0:
                    k[head, K_WPREV] = x
                wheel[gi, b] = x
        for i in range(nm.n):
            x = lo + i
            if i not in nm.wheel.where:
                k[x, K_WB] = -1
            f[x, F_ANCHOR] = nm.anchor[i]
            mk, mt = nm.memo_k[i], nm.memo_t[i]
            k[x, K_MEMO_K] = mk
            f[x, F_MEMO_T] = mt
            f[x, F_FWD_TICK] = nm.fwd_tick[i]
            f[x, F_VWAIT] = nm.vwait[i]
            f[x, F_WAIT_SINCE] = nm.wait_since[i]
            f[x, F_CLEAN] = nm._clean.get(i, math.nan)
            j = x - tr.lo
            f[x, F_LAST_SEEN] = tr.last_seen[j]
            f[x, cap0 : cap0 + n_res] = nm.capl[i]
            f[x, bg0 : bg0 + n_res] = nm.bgl[i]
            f[x, us0 : us0 + n_res] = nm.used[i]
            f[x, tu0 : tu0 + n_res] = tr.used[j]
            k[x, K_RANK] = nm.rank[i]
            k[x, K_FWD_COUNT] = nm.fwd_count[i]
            k[x, K_WAITING] = nm.waiting[i]
            k[x, K_NEWS] = nm.news[i]
            k[x, K_GROUP] = gi
            k[x, K_ARB_SEQ] = nm.arb_seq[i]
            p = nm.pending[i]
            k[x, K_PENDING] = -1 if p is None else tokens.setdefault(p, len(tokens))
            flags = 0
            k[x, K_HALVED] = int(nm.halved[i])
            k[x, K_MISSED] = int(nm.missed[i])
            k[x, K_KNOWN] = int(tr.known[j])
            k[x, K_FWD_FREE] = int(tr.fwd_free[j])
            k[x, K_DORMANT] = int(nm.dormant[i])
            k[x, K_LIGHT] = int(nm.light[i])
            vr = nm._vr[i]
            if len(vr) > VR_SLOTS:
                flags |= B_VR
            else:
                f[x, F_VR : F_VR + VR_SLOTS] = math.nan
                f[x, F_VR : F_VR + len(vr)] = vr
                k[x, K_VR_N] = len(vr)
            if not nm.alive[i]:
                flags |= B_DEAD
            k[x, K_FLAGS] = flags
    return st


@njit(cache=True, nogil=True)
def _bound_crosses(g: np.ndarray, c: np.ndarray, bsum: np.ndarray, n_res: int) -> bool:
    """``Cadence.content_change``'s test after a raise: the bound sum ``bsum`` is not below the threshold."""
    tot0 = G_NEED + 2 * n_res
    lim = g[G_LIM]
    if not math.isnan(lim):  # the largest fraction: every fraction below the limit
        for r in range(n_res):
            t = g[tot0 + r]
            v = bsum[r] / t if t > 0 else 0.0
            if not v < lim:
                return True
        return False
    if g[G_THR] == math.inf:
        return False
    m = c[C_METRIC]
    load = 0.0
    for r in range(n_res):
        t = g[tot0 + r]
        v = bsum[r] / t if t > 0 else 0.0
        if m == METRIC_MAX:
            if r == 0 or v > load:  # max() keeps the first of equal values
                load = v
        elif m == METRIC_CPU:
            if r == 0:
                load = v
        else:
            load = v if r == 0 else load + v
    if m == METRIC_MEAN:
        load = load / n_res
    return not load < g[G_THR] - g[G_MARGIN]


@njit(cache=True, nogil=True)
def k_deliver(
    f: np.ndarray,
    k: np.ndarray,
    g: np.ndarray,
    c: np.ndarray,
    gr: np.ndarray,
    wheel: np.ndarray,
    undo: np.ndarray,
    x: int,
    now: float,
) -> int:
    """``NodeManagers._deliver`` of global node ``x`` at ``now`` (module docstring); 0 when done, or
    :data:`FALLBACK` with nothing changed."""
    n_res = (f.shape[1] - F_COLS) // 4
    cap0 = F_COLS
    bg0 = F_COLS + n_res
    us0 = F_COLS + 2 * n_res
    tu0 = F_COLS + 3 * n_res
    gi = k[x, K_GROUP]
    if gr[gi, GR_DEAD] or gr[gi, GR_FORWARD] or gr[gi, GR_VF]:
        return FALLBACK
    # what the heartbeat carries (rows.beat): free = cap - used, row = bg + used, has_free
    has_free = True
    big = 0.0
    for r in range(n_res):
        a = f[x, cap0 + r] - f[x, us0 + r]
        if not a >= g[G_NEED + r]:
            has_free = False
        if r == 0 or a > big:
            big = a
    if not big > EPS:
        has_free = False
    calm = c[C_CALM] != 0
    change = False
    bsum = np.empty(n_res)
    if calm:
        known = k[x, K_KNOWN] != 0
        if not known:
            change = True
        else:
            for r in range(n_res):
                if f[x, tu0 + r] != f[x, bg0 + r] + f[x, us0 + r]:
                    change = True
        if change:
            raised = False
            for r in range(n_res):
                bsum[r] = g[G_NEED + n_res + r]
                a = f[x, bg0 + r] + f[x, us0 + r]
                if not known:
                    bsum[r] += a
                    raised = True
                elif a > f[x, tu0 + r]:
                    bsum[r] += a - f[x, tu0 + r]
                    raised = True
            if raised and _bound_crosses(g, c, bsum, n_res):
                return FALLBACK
            if gr[gi, GR_ULEN] >= undo.shape[1]:
                return FALLBACK
    # --- committed from here on
    k[x, K_NEWS] = -1
    t = f[x, F_ANCHOR]
    f[x, F_CLEAN] = np.nan
    k[x, K_HALVED] = 0
    k[x, K_MISSED] = 0
    gr[gi, GR_NM_HB] += 1
    c[C_HB_CELL] += 1
    a = t + g[G_HB]
    f[x, F_ANCHOR] = a
    k[x, K_MEMO_K] = 0
    f[x, F_MEMO_T] = a
    c[C_RANK] += 1
    k[x, K_RANK] = c[C_RANK]
    f[x, F_FWD_TICK] = np.nan
    k[x, K_FWD_COUNT] = 0
    if has_free and c[C_PYWHEEL] == 0:  # wheel.add(i, a)
        h = g[G_WHEEL_H]
        nb = gr[gi, GR_NB]
        b = int((np.fmod(a, h) / h) * nb) % nb  # (fmod is exact: any correct one gives math.fmod's)
        head = wheel[gi, b]
        k[x, K_WNEXT] = head
        k[x, K_WPREV] = -1
        if head >= 0:
            k[head, K_WPREV] = x
        wheel[gi, b] = x
        k[x, K_WB] = b
        gr[gi, GR_WSIZE] += 1
    # the tracker hears it (ResourceTracker.heard, forwarding off)
    gr[gi, GR_TR_HB] += 1
    f[x, F_LAST_SEEN] = now
    if change:  # Cadence.content_change: log the old row, keep what the last two ticks need, raise the bound
        cap = undo.shape[1]
        q = (gr[gi, GR_UHEAD] + gr[gi, GR_ULEN]) % cap
        undo[gi, q, 0] = now
        undo[gi, q, 1] = x - gr[gi, GR_LO]
        undo[gi, q, 2] = 1.0 if k[x, K_KNOWN] != 0 else 0.0
        for r in range(n_res):
            undo[gi, q, 3 + r] = f[x, tu0 + r]
        gr[gi, GR_ULEN] += 1
        if gr[gi, GR_ULEN] > 64:
            horizon = now - 3 * g[G_STATS_H]
            while undo[gi, gr[gi, GR_UHEAD], 0] < horizon:
                gr[gi, GR_UHEAD] = (gr[gi, GR_UHEAD] + 1) % cap
                gr[gi, GR_ULEN] -= 1
        for r in range(n_res):
            g[G_NEED + n_res + r] = bsum[r]
    for r in range(n_res):
        f[x, tu0 + r] = f[x, bg0 + r] + f[x, us0 + r]
    k[x, K_KNOWN] = 1
    k[x, K_FWD_FREE] = 1 if has_free else 0
    gr[gi, GR_TR_ANSWERED] += 1
    f[x, F_VWAIT] = now + g[G_D_TN]
    c[C_REP_CELL] += 1
    return DELIVER_FREE if has_free and c[C_PYWHEEL] != 0 else 0


@njit(cache=True, nogil=True)
def k_wake_news(
    f: np.ndarray,
    k: np.ndarray,
    g: np.ndarray,
    c: np.ndarray,
    gr: np.ndarray,
    wheel: np.ndarray,
    undo: np.ndarray,
    x: int,
    now: float,
) -> int:
    """``NodeManagers._wake(i, now, news=True)`` of dormant global node ``x`` (its content is about to change) for
    the case it covers: news heartbeats in use, at most VR_SLOTS virtual replies due, forwarding off and nothing
    armed at its tracker, the tick lookup in the cached binade (``Period._fast``) or with a power-of-two period,
    no virtual heartbeat in flight. Returns
    :data:`WAKE_QUIET` (its next heartbeat carries the news anyway), :data:`WAKE_PUSH` (its next tick is ``g[G_OUT]``,
    the caller's ``_next_tick``: the caller cancels the pending news delivery whose sequence number is in ``K_NEWS``
    if there is one, pushes the new one at ``g[G_OUT] + d_nt`` with the engine's next sequence number and records
    that in ``K_NEWS``) or :data:`FALLBACK` with nothing changed."""
    return _wake_news(f, k, g, c, gr, wheel, x, now)


@njit(cache=True, nogil=True)
def _wake_news(
    f: np.ndarray, k: np.ndarray, g: np.ndarray, c: np.ndarray, gr: np.ndarray, wheel: np.ndarray, x: int, now: float
) -> int:
    """:func:`k_wake_news` (the kernels that wake a node call this)."""
    gi = k[x, K_GROUP]
    flags = k[x, K_FLAGS]
    pend = k[x, K_NEWS]
    a = f[x, F_ANCHOR]
    if pend >= 0 and a > now:
        k[x, K_LIGHT] = 0
        return WAKE_QUIET
    if c[C_NEWS_OK] == 0 or (flags & B_VR) != 0 or gr[gi, GR_FORWARD] or gr[gi, GR_VF]:
        return FALLBACK
    hb = g[G_HB]
    d_nt = g[G_D_NT]
    if a > now:  # no virtual heartbeat yet: the news heartbeat at the anchor
        _replies_in(f, k, x, now)
        if k[x, K_WB] >= 0:
            _wheel_remove(k, gr, wheel, x, gi)
        f[x, F_FWD_TICK] = np.nan
        k[x, K_FWD_COUNT] = 0
        k[x, K_LIGHT] = 0
        k[x, K_DORMANT] = 1
        k[x, K_MEMO_K] = 0
        f[x, F_MEMO_T] = a
        g[G_OUT] = a
        c[C_SENT] = 0
        c[C_ANSWERED] = 0
        return WAKE_PUSH
    mk = k[x, K_MEMO_K]
    mt = f[x, F_MEMO_T]
    ok, kk, tv = _tick_le(f, k, g, x, now)  # (the memo it sets is replaced below)
    if not ok:
        return FALLBACK
    sent = kk + 1
    arrival = tv + d_nt
    arrived = sent if arrival <= now and pend < 0 else kk
    if arrived < sent:  # the latest virtual heartbeat is in flight: a message of its own (not covered)
        k[x, K_MEMO_K] = mk
        f[x, F_MEMO_T] = mt
        return FALLBACK
    # --- committed from here on
    _replies_in(f, k, x, now)
    if k[x, K_WB] >= 0:
        _wheel_remove(k, gr, wheel, x, gi)
    answered = arrived - k[x, K_FWD_COUNT]
    gr[gi, GR_NM_HB] += sent
    c[C_HB_CELL] += sent
    gr[gi, GR_TR_HB] += answered
    gr[gi, GR_TR_ANSWERED] += answered
    c[C_REP_CELL] += answered
    c[C_SENT] = sent
    c[C_ANSWERED] = answered
    f[x, F_LAST_SEEN] = arrival
    if f[x, F_FWD_TICK] == tv:  # forwarded: the arbitrator's (real) reply is to come
        k[x, K_WAITING] += 1
        f[x, F_WAIT_SINCE] = tv
    else:
        f[x, F_VWAIT] = arrival + g[G_D_TN]
    f[x, F_FWD_TICK] = np.nan
    k[x, K_FWD_COUNT] = 0
    nxt = tv + hb
    k[x, K_LIGHT] = 0
    k[x, K_DORMANT] = 1
    f[x, F_ANCHOR] = nxt
    k[x, K_MEMO_K] = 0
    f[x, F_MEMO_T] = nxt
    g[G_OUT] = nxt
    return WAKE_PUSH


@njit(cache=True, nogil=True)
def _replies_in(f: np.ndarray, k: np.ndarray, x: int, now: float) -> None:
    """``NodeManagers._replies_in``: the tracker's virtual replies to node ``x`` that arrived by ``now`` end a wait
    each (while it waits)."""
    n = k[x, K_VR_N]
    q = 0
    while q < n and f[x, F_VR + q] <= now:
        q += 1
        if k[x, K_WAITING]:
            k[x, K_WAITING] -= 1
    if q:
        for r in range(n - q):
            f[x, F_VR + r] = f[x, F_VR + q + r]
        for r in range(n - q, n):
            f[x, F_VR + r] = np.nan
        k[x, K_VR_N] = n - q


@njit(cache=True, nogil=True)
def _wheel_remove(k: np.ndarray, gr: np.ndarray, wheel: np.ndarray, x: int, gi: int) -> None:
    """Node ``x`` leaves its group's free wheel (``FreeWheel.discard``)."""
    b = k[x, K_WB]
    nx = k[x, K_WNEXT]
    pv = k[x, K_WPREV]
    if pv >= 0:
        k[pv, K_WNEXT] = nx
    else:
        wheel[gi, b] = nx
    if nx >= 0:
        k[nx, K_WPREV] = pv
    k[x, K_WB] = -1
    k[x, K_WNEXT] = -1
    k[x, K_WPREV] = -1
    gr[gi, GR_WSIZE] -= 1


@njit(cache=True, nogil=True)
def k_container_end(
    f: np.ndarray,
    k: np.ndarray,
    g: np.ndarray,
    c: np.ndarray,
    gr: np.ndarray,
    wheel: np.ndarray,
    undo: np.ndarray,
    x: int,
    now: float,
) -> int:
    """A container of demand ``d`` (the caller puts it in ``g`` from ``G_DEM``) ends on global node ``x``
    (``NodeManagers._ends_at`` of one task, the node's side: the sampling-clean mark goes, a dormant node whose news
    heartbeat is not still to come wakes with news (:func:`k_wake_news`), ``used`` drops by ``d``, never below zero;
    distributed mode). Returns what :func:`k_wake_news` returns (:data:`WAKE_QUIET` when the node needed no wake),
    :data:`FALLBACK` with nothing changed."""
    if gr[k[x, K_GROUP], GR_CENTRAL]:  # an event-driven heartbeat follows (centralized mode): not covered
        return FALLBACK
    code = WAKE_QUIET
    if k[x, K_DORMANT] != 0 and (k[x, K_NEWS] < 0 or f[x, F_ANCHOR] <= now):
        code = _wake_news(f, k, g, c, gr, wheel, x, now)
        if code == FALLBACK:
            return FALLBACK
    f[x, F_CLEAN] = np.nan
    n_res = (f.shape[1] - F_COLS) // 4
    us0 = F_COLS + 2 * n_res
    d0 = G_NEED + 3 * n_res
    for r in range(n_res):
        v = f[x, us0 + r] - g[d0 + r]
        f[x, us0 + r] = 0.0 if v < 0.0 else v
    return code


@njit(cache=True, nogil=True)
def k_container_start(
    f: np.ndarray,
    k: np.ndarray,
    g: np.ndarray,
    c: np.ndarray,
    gr: np.ndarray,
    wheel: np.ndarray,
    undo: np.ndarray,
    x: int,
    seq: int,
    fenced: bool,
    now: float,
) -> int:
    """The node's side of one container of ``NodeManagers._start`` on global node ``x`` (demand ``d``: the caller
    puts it in ``g`` from ``G_DEM``; arbitrator allocation number ``seq``; ``fenced``: a stale job-manager attempt or
    a task already running here, which the caller looks up): the sampling-clean mark goes, a light node wakes with
    news, a dead node loses it (:data:`S_DEAD`), a newer allocation number wakes a dormant node and is recorded, a
    fenced container or one that does not fit is rejected (:data:`S_REJECT`), else a dormant node whose news
    heartbeat is not still to come wakes with news and ``used`` grows by ``d`` (:data:`S_OVER`: over its capacity,
    the ledger's error). Returns those bits with :data:`WAKE_PUSH` when a wake asks for a news delivery (of tick
    ``g[G_OUT]``; at most one per call), or :data:`FALLBACK` with nothing changed (a wake not covered,
    :func:`k_wake_news`). With :data:`WAKE_PUSH`, ``c[C_SENT]`` and ``c[C_ANSWERED]`` are the virtual
    heartbeats its wakes counted, all together."""
    hb0 = c[C_HB_CELL]
    rep0 = c[C_REP_CELL]
    code = _container_start(f, k, g, c, gr, wheel, x, seq, fenced, now)
    if code != FALLBACK and code & WAKE_PUSH:  # (each wake set them to its own counts)
        c[C_SENT] = c[C_HB_CELL] - hb0
        c[C_ANSWERED] = c[C_REP_CELL] - rep0
    return code


@njit(cache=True, nogil=True)
def _container_start(
    f: np.ndarray,
    k: np.ndarray,
    g: np.ndarray,
    c: np.ndarray,
    gr: np.ndarray,
    wheel: np.ndarray,
    x: int,
    seq: int,
    fenced: bool,
    now: float,
) -> int:
    """:func:`k_container_start` but for the counted virtual heartbeats."""
    n_res = (f.shape[1] - F_COLS) // 4
    cap0 = F_COLS
    us0 = F_COLS + 2 * n_res
    d = g[G_NEED + 3 * n_res : G_NEED + 4 * n_res]
    clean = f[x, F_CLEAN]
    arb = k[x, K_ARB_SEQ]
    f[x, F_CLEAN] = np.nan
    code = 0
    if k[x, K_LIGHT] != 0:
        r = _wake_news(f, k, g, c, gr, wheel, x, now)
        if r == FALLBACK:  # (the first wake of the call: nothing else changed yet)
            f[x, F_CLEAN] = clean
            return FALLBACK
        code |= r
    if (k[x, K_FLAGS] & B_DEAD) != 0:
        return code | S_DEAD
    if seq > arb:
        if k[x, K_DORMANT] != 0:
            r = _wake_news(f, k, g, c, gr, wheel, x, now)
            if r == FALLBACK:  # (a wake after an earlier one of this call is quiet: this is the first)
                f[x, F_CLEAN] = clean
                return FALLBACK
            code |= r
        k[x, K_ARB_SEQ] = seq
    if fenced:
        return code | S_REJECT
    for r in range(n_res):
        if not (f[x, cap0 + r] - f[x, us0 + r]) + EPS >= d[r]:
            return code | S_REJECT
    if k[x, K_DORMANT] != 0 and (k[x, K_NEWS] < 0 or f[x, F_ANCHOR] <= now):
        r = _wake_news(f, k, g, c, gr, wheel, x, now)
        if r == FALLBACK:
            f[x, F_CLEAN] = clean
            k[x, K_ARB_SEQ] = arb
            return FALLBACK
        code |= r
    for r in range(n_res):
        u = f[x, us0 + r] + d[r]
        f[x, us0 + r] = u
        if u > f[x, cap0 + r] + OVER:
            code |= S_OVER
    return code


# k_inquiry's node outcomes
Q_DEAD, Q_WAITING, Q_PENDING, Q_FULL, Q_ANSWERED = 0, 1, 2, 3, 4
# k_inquiry's counters (cnt)
N_WAITING, N_PENDING, N_FULL, N_TIMEOUTS, N_ANSWERED = 0, 1, 2, 3, 4
# k_inquiry's events (ev rows: kind, local position, time)
E_HB_TIMER, E_HOLD_TIMER, E_CANCEL_NEWS = 1, 2, 3


@njit(cache=True, nogil=True)
def _tick_le(f: np.ndarray, k: np.ndarray, g: np.ndarray, x: int, now: float) -> tuple[bool, int, float]:
    """``(covered, k, t_k)``: dormant node ``x``'s last virtual tick at or before ``now`` (``anchor <= now``) in the
    cached binade, the memo updated (``NodeManagers._last_tick``); not covered outside it (nothing changed)."""
    k0 = k[x, K_MEMO_K]
    t0 = f[x, F_MEMO_T]
    if t0 > now:
        k0 = 0
        t0 = f[x, F_ANCHOR]
    if g[G_FAST_LO] <= t0 and now + g[G_HB] < g[G_FAST_HI]:  # Period.last_le's first case
        delta = g[G_FAST_D]
        j = int((now - t0) / delta)
        while j > 0 and t0 + j * delta > now:
            j -= 1
        while t0 + (j + 1) * delta <= now:
            j += 1
        tv = t0 + j * delta
    elif g[G_POW2] == 1.0:
        ok, j, tv = _last_le_pow2(t0, now, g[G_HB])
        if not ok:
            return False, 0, 0.0
    else:
        return False, 0, 0.0
    k[x, K_MEMO_K] = k0 + j
    f[x, F_MEMO_T] = tv
    return True, k0 + j, tv


@njit(cache=True, nogil=True)
def _last_le_pow2(t: float, at: float, h: float) -> tuple[bool, int, float]:
    """``(covered, k, t_k)``: ``Period(h).last_le(t, at)`` for a power-of-two period ``h``, the same walk over
    binades with the same float operations: within a binade whose ulp ``u`` is at most ``h`` every tick adds ``h``
    exactly (``δ = h``) until the one that leaves it, a rounded ``t + h``; the count of exact steps is the integer
    arithmetic of ``Period._in_binade`` done exactly in floats (every quantity a power of two times an integer
    below 2^53). Not covered when ``h`` is below a binade's ulp (ticks would not advance)."""
    k = 0
    while True:
        n = 0
        if t > 0.0:
            e = math.frexp(t)[1]
            lo = math.ldexp(1.0, e - 1)
            u = math.ldexp(1.0, e - 53)
            if h < u:
                return False, 0, 0.0
            if h < lo:
                c = h / u
                num = (9007199254740992.0 - t / u) - c  # (2^53 - t/u) - h/u
                if num > 0.0:
                    n = math.ceil(num / c)
        if n == 0:  # one rounded step
            nt = t + h
            if nt > at:
                return True, k, t
            t = nt
            k += 1
            continue
        last = t + n * h
        if at < last:
            j = int((at - t) / h)
            while j > 0 and t + j * h > at:
                j -= 1
            while j < n and t + (j + 1) * h <= at:
                j += 1
            return True, k + j, t + j * h
        t = last
        k += n
        nt = t + h  # the step that leaves the binade
        if nt > at:
            return True, k, t
        t = nt
        k += 1


@njit(cache=True, nogil=True)
def _wake_plain(
    f: np.ndarray, k: np.ndarray, g: np.ndarray, c: np.ndarray, gr: np.ndarray, wheel: np.ndarray, x: int, now: float
) -> float:
    """``NodeManagers._wake(i, now)`` (back to a real heartbeat timer) of dormant node ``x`` for the covered case
    (as :func:`k_wake_news`, and the pending news delivery, if any, is not in flight): returns the tick of its real
    timer (the caller cancels the pending news delivery first, then sets the timer), or NaN with nothing changed."""
    gi = k[x, K_GROUP]
    flags = k[x, K_FLAGS]
    if (flags & B_VR) != 0 or gr[gi, GR_FORWARD] or gr[gi, GR_VF]:
        return np.nan
    pend = k[x, K_NEWS]
    a = f[x, F_ANCHOR]
    hb = g[G_HB]
    d_nt = g[G_D_NT]
    if a > now:
        _replies_in(f, k, x, now)
        if k[x, K_WB] >= 0:
            _wheel_remove(k, gr, wheel, x, gi)
        k[x, K_NEWS] = -1
        k[x, K_LIGHT] = 0
        k[x, K_DORMANT] = 0
        f[x, F_FWD_TICK] = np.nan
        k[x, K_FWD_COUNT] = 0
        return a
    mk = k[x, K_MEMO_K]
    mt = f[x, F_MEMO_T]
    ok, kk, tv = _tick_le(f, k, g, x, now)
    if not ok:
        return np.nan
    sent = kk + 1
    arrival = tv + d_nt
    arrived = sent if arrival <= now and pend < 0 else kk
    if arrived < sent:  # in flight: a message of its own (not covered)
        k[x, K_MEMO_K] = mk
        f[x, F_MEMO_T] = mt
        return np.nan
    _replies_in(f, k, x, now)
    if k[x, K_WB] >= 0:
        _wheel_remove(k, gr, wheel, x, gi)
    k[x, K_NEWS] = -1
    k[x, K_LIGHT] = 0
    k[x, K_DORMANT] = 0
    answered = arrived - k[x, K_FWD_COUNT]
    gr[gi, GR_NM_HB] += sent
    c[C_HB_CELL] += sent
    gr[gi, GR_TR_HB] += answered
    gr[gi, GR_TR_ANSWERED] += answered
    c[C_REP_CELL] += answered
    f[x, F_LAST_SEEN] = arrival
    if f[x, F_FWD_TICK] == tv:
        k[x, K_WAITING] += 1
        f[x, F_WAIT_SINCE] = tv
    else:
        f[x, F_VWAIT] = arrival + g[G_D_TN]
    f[x, F_FWD_TICK] = np.nan
    k[x, K_FWD_COUNT] = 0
    return tv + hb


@njit(cache=True, nogil=True)
def k_inquiry(
    f: np.ndarray,
    k: np.ndarray,
    g: np.ndarray,
    c: np.ndarray,
    gr: np.ndarray,
    wheel: np.ndarray,
    undo: np.ndarray,
    xs: np.ndarray,
    need: np.ndarray,
    token: int,
    now: float,
    out: np.ndarray,
    cnt: np.ndarray,
    ev: np.ndarray,
) -> int:
    """``NodeManagers._inquiry`` on global nodes ``xs`` in order (heartbeats block sampling, no per-user usage;
    ``need`` is the inquiry's need minus EPS): each node's outcome in ``out`` (``Q_*``), the counters in ``cnt``
    (``N_*``) and, in ``ev``, the events to make in order (``E_*`` rows ``(kind, position, time)``: a woken node's
    pending news delivery cancelled and its real heartbeat timer, the shared response timeout at the first answer).
    Returns the number of events, or ``-(p + 1)`` when node ``p`` is not covered: the nodes before it are done
    (their events are the first ``cnt[5]`` rows of ``ev``), node ``p`` (at most its due virtual replies applied,
    which the caller's pass repeats as a no-op) and the later ones are left to the caller. ``cnt`` has six entries,
    ``ev`` at least ``2 len(xs) + 1`` rows."""
    n_ev = 0
    hb = g[G_HB]
    d_nt = g[G_D_NT]
    d_tn = g[G_D_TN]
    n_res = (f.shape[1] - F_COLS) // 4
    cap0 = F_COLS
    us0 = F_COLS + 2 * n_res
    for p in range(xs.size):
        x = xs[p]
        flags = k[x, K_FLAGS]
        if (flags & B_DEAD) != 0:
            out[p] = Q_DEAD
            continue
        if (flags & B_VR) != 0:  # more virtual replies to apply than the slots hold (not covered)
            cnt[5] = n_ev
            return -(p + 1)
        _replies_in(f, k, x, now)
        dormant = k[x, K_DORMANT] != 0
        have_tv = False
        tv = 0.0
        if dormant and f[x, F_ANCHOR] <= now:
            ok, _, tv = _tick_le(f, k, g, x, now)
            if not ok:
                cnt[5] = n_ev
                return -(p + 1)
            have_tv = True
            if f[x, F_FWD_TICK] == tv or now < tv + d_nt + d_tn:
                cnt[N_WAITING] += 1
                out[p] = Q_WAITING
                continue
        elif now < f[x, F_VWAIT]:
            cnt[N_WAITING] += 1
            out[p] = Q_WAITING
            continue
        if k[x, K_WAITING]:
            if now - f[x, F_WAIT_SINCE] > g[G_HB_REPLY]:
                k[x, K_WAITING] = 0
                cnt[N_TIMEOUTS] += 1
            else:
                cnt[N_WAITING] += 1
                out[p] = Q_WAITING
                continue
        if k[x, K_PENDING] >= 0:
            cnt[N_PENDING] += 1
            out[p] = Q_PENDING
            continue
        room = True
        for r in range(n_res):
            if not f[x, cap0 + r] - f[x, us0 + r] >= need[r]:
                room = False
        if not room:
            cnt[N_FULL] += 1
            out[p] = Q_FULL
            continue
        if dormant:
            stays = False
            if c[C_EAGER] == 0 and math.isnan(f[x, F_FWD_TICK]):
                a = f[x, F_ANCHOR]
                if a > now:
                    nxt = a
                else:
                    if not have_tv:  # (not reached: the wait check looked it up)
                        cnt[5] = n_ev
                        return -(p + 1)
                    nxt = tv + hb if not tv + d_nt > now else -np.inf
                if nxt > now + 2 * g[G_HOLD]:
                    k[x, K_LIGHT] = 1
                    stays = True
            if not stays:
                was_news = k[x, K_NEWS] >= 0
                pend = k[x, K_NEWS]
                tick = _wake_plain(f, k, g, c, gr, wheel, x, now)
                if math.isnan(tick):
                    cnt[5] = n_ev
                    return -(p + 1)
                if pend >= 0:
                    ev[n_ev, 0] = E_CANCEL_NEWS
                    ev[n_ev, 1] = p
                    ev[n_ev, 2] = pend
                    n_ev += 1
                ev[n_ev, 0] = E_HB_TIMER
                ev[n_ev, 1] = p
                ev[n_ev, 2] = tick
                n_ev += 1
                if not was_news:
                    f[x, F_CLEAN] = tick
        k[x, K_PENDING] = token
        if cnt[N_ANSWERED] == 0:
            ev[n_ev, 0] = E_HOLD_TIMER
            ev[n_ev, 1] = p
            ev[n_ev, 2] = now + g[G_HOLD]
            n_ev += 1
        cnt[N_ANSWERED] += 1
        out[p] = Q_ANSWERED
    cnt[5] = n_ev
    return n_ev


class PackedWheel:
    """A group's free wheel (``cadence.FreeWheel``: the dormant nodes with free resources, bucketed by heartbeat
    phase) kept in the packed state as per-bucket linked lists (``wheel``, ``K_WB``, ``K_WNEXT``, ``K_WPREV``,
    ``GR_WSIZE``), so that the kernels keep it themselves (``C_PYWHEEL`` 0) and :func:`k_vf_arm` scans it; Python
    adds and removes nodes (local indices) through memoryviews, the same list operations as the kernels."""

    def __init__(self, st: NodeState, gi: int, lo: int, h: float, nb: int) -> None:
        self.h = h
        self.nb = nb
        self.gi = gi
        self.lo = lo
        self._st = st
        self._head = memoryview(st.wheel[gi])
        self._wb = memoryview(st.k[:, K_WB])
        self._next = memoryview(st.k[:, K_WNEXT])
        self._prev = memoryview(st.k[:, K_WPREV])
        self._gr = memoryview(st.gr[gi])

    @property
    def size(self) -> int:
        """Nodes in the wheel."""
        return self._gr[GR_WSIZE]

    def bucket(self, t: float) -> int:
        """The phase bucket of a heartbeat tick at ``t`` (``FreeWheel.bucket``)."""
        return int((math.fmod(t, self.h) / self.h) * self.nb) % self.nb

    def has(self, node: int) -> bool:
        """Local node ``node`` is in the wheel."""
        return self._wb[self.lo + node] >= 0

    def add(self, node: int, tick: float) -> None:
        """Local node ``node`` joins the wheel in the bucket of its next virtual tick ``tick``."""
        x = self.lo + node
        b = int((math.fmod(tick, self.h) / self.h) * self.nb) % self.nb
        head = self._head[b]
        self._next[x] = head
        self._prev[x] = -1
        if head >= 0:
            self._prev[head] = x
        self._head[b] = x
        self._wb[x] = b
        self._gr[GR_WSIZE] += 1

    def discard(self, node: int) -> bool:
        """Remove local node ``node`` from the wheel if it is there (whether it was)."""
        x = self.lo + node
        b = self._wb[x]
        if b < 0:
            return False
        nx = self._next[x]
        pv = self._prev[x]
        if pv >= 0:
            self._next[pv] = nx
        else:
            self._head[b] = nx
        if nx >= 0:
            self._prev[nx] = pv
        self._wb[x] = -1
        self._next[x] = -1
        self._prev[x] = -1
        self._gr[GR_WSIZE] -= 1
        return True

    def members(self, b: int) -> list[int]:
        """The local nodes of bucket ``b``, in list order."""
        out = []
        x = self._head[b]
        while x >= 0:
            out.append(x - self.lo)
            x = self._next[x]
        return out

    @property
    def buckets(self) -> list[set[int]]:
        """Each bucket's local nodes (a copy: inspection and the tests' packing)."""
        return [set(self.members(b)) for b in range(self.nb)]

    @property
    def where(self) -> dict[int, int]:
        """Local node -> its bucket (a copy: inspection and the tests' packing)."""
        return {i: b for b in range(self.nb) for i in self.members(b)}


VF_NONE = 0  # k_vf_arm: the wheel has no candidate
VF_FOUND = 2  # k_vf_arm: out holds (arrival, rank, local node, tick)


@njit(cache=True, nogil=True)
def k_vf_arm(
    f: np.ndarray,
    k: np.ndarray,
    g: np.ndarray,
    c: np.ndarray,
    gr: np.ndarray,
    wheel: np.ndarray,
    undo: np.ndarray,
    gi: int,
    after: float,
    after_rank: int,
    y: float,
    d: float,
    out: np.ndarray,
) -> int:
    """``ResourceTracker._vf_arm`` of group ``gi`` on its packed wheel: the smallest key ``(arrival, rank, node,
    tick)`` of a wheel node's first virtual heartbeat arriving after ``(after, after_rank)`` (``y`` is ``after - d -
    8 ulp(after)``, ``d`` the node-to-tracker delay), the same bucket scan, prefilter, tick lookups (memos updated)
    and float operations. Returns :data:`VF_FOUND` with the key in ``out`` (the node local to the group),
    :data:`VF_NONE`, or :data:`FALLBACK` when a tick lookup is not covered (only memos changed)."""
    if gr[gi, GR_WSIZE] == 0:
        return VF_NONE
    lo = gr[gi, GR_LO]
    nb = gr[gi, GR_NB]
    wh = g[G_WHEEL_H]
    h = g[G_HB]
    width = wh / nb
    b0 = ((int((np.fmod(y, wh) / wh) * nb) % nb) - 2) % nb  # (fmod is exact: np's is math's)
    pow2 = g[G_POW2] == 1.0
    margin = 1e-6 if pow2 and h < 16.0 else np.inf
    limit = np.inf if margin < np.inf else -np.inf
    yph = np.fmod(y, h)
    flo = g[G_FAST_LO]
    fhi = g[G_FAST_HI]
    fd = g[G_FAST_D]
    found = False
    ba = np.inf
    br = 0
    bi = 0
    bt = 0.0
    for j in range(nb + 4):
        if (j - 4) * width > ba - y:
            break
        x = wheel[gi, (b0 + j) % nb]
        while x >= 0:
            nxt = k[x, K_WNEXT]
            i = x - lo
            t = f[x, F_ANCHOR]
            if not t > y:
                if ba < limit:  # its next tick (its anchor's phase) arrives clearly after the best: skip it
                    gap = np.fmod(t, h) - yph
                    if gap <= 0.0:
                        gap += h
                    if margin < gap < h - margin and y + gap + d > ba + margin:
                        x = nxt
                        continue
                k0 = k[x, K_MEMO_K]
                t0 = f[x, F_MEMO_T]
                if t0 > y:
                    k0 = 0
                    t0 = t
                if flo <= t0 and y + h < fhi:  # Period.last_le's first case
                    kk = int((y - t0) / fd)
                    while kk > 0 and t0 + kk * fd > y:
                        kk -= 1
                    while t0 + (kk + 1) * fd <= y:
                        kk += 1
                    tt = t0 + kk * fd
                elif pow2:
                    ok, kk, tt = _last_le_pow2(t0, y, h)
                    if not ok:
                        return FALLBACK
                else:
                    return FALLBACK
                k[x, K_MEMO_K] = k0 + kk
                f[x, F_MEMO_T] = tt
                t = tt + h
            arr = t + d
            if arr > ba:
                x = nxt
                continue
            r = k[x, K_RANK]
            while arr < after or (arr == after and r <= after_rank):
                t = t + h
                arr = t + d
            if not found or arr < ba or (arr == ba and (r < br or (r == br and (i < bi or (i == bi and t < bt))))):
                found = True
                ba = arr
                br = r
                bi = i
                bt = t
            x = nxt
    if not found:
        return VF_NONE
    out[0] = ba
    out[1] = br
    out[2] = bi
    out[3] = bt
    return VF_FOUND
