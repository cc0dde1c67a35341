"""Compiled kernels (numba) for Megha's hot loops; imported lazily so the CLI starts fast.

:func:`place_tasks` and :func:`_pick_masked` are compiled into the lean simulation's loop
(:func:`._lean_kernel.run_lean`), whose numba cache does not notice a change here: change ``_lean_kernel.py`` too
(any edit) when you change them, or a stale cached loop keeps the old code.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from megha.model._kernels import popcount64 as _popcount

INF = np.iinfo(np.int64).max


@njit(cache=True, nogil=True)
def first_fit_min(masks: np.ndarray, heads: np.ndarray, n: int, not_worker_mask: int) -> int:
    """Index of the slot with the smallest head among the first ``n`` slots whose mask fits the worker, or -1.

    The same answer as :func:`megha.model._kernels.first_fit` (heads are distinct), computed as a branch-free
    minimum that the compiler vectorizes (about 6x faster over a thousand slots), then located.
    """
    nm = np.uint32(not_worker_mask & 0xFFFFFFFF)
    best = INF
    for i in range(n):
        h = heads[i] if (masks[i] & nm) == 0 else INF
        best = min(best, h)
    if best == INF:
        return -1
    for i in range(n):
        if heads[i] == best:
            return i
    return -1


@njit(cache=True, nogil=True)
def first_fit_oldest(masks: np.ndarray, heads: np.ndarray, n: int, not_worker_mask: int) -> int:
    """Index of the slot with the smallest head among the first ``n`` slots whose mask fits the worker, or -1
    (heads may tie; the first such slot wins)."""
    nm = np.uint32(not_worker_mask & 0xFFFFFFFF)
    best = INF
    bi = -1
    for i in range(n):
        if (masks[i] & nm) == 0 and heads[i] < best:
            best = heads[i]
            bi = i
    return bi


@njit(cache=True, nogil=True)
def first_segment_with(avail: np.ndarray, static: np.ndarray, order: np.ndarray, seg_start: np.ndarray) -> int:
    """Position ``k`` in ``order`` of the first segment where ``avail & static`` has a set bit, or -1.

    Placement looks at one segment (partition) at a time in the GM's search order and stops at the first hit,
    instead of ANDing the whole datacenter's vectors and reducing every segment for every task.
    """
    for k in range(order.size):
        s = order[k]
        for i in range(seg_start[s], seg_start[s + 1]):
            if avail[i] & static[i]:
                return k
    return -1


_ONE = np.uint64(1)


@njit(cache=True, nogil=True)
def first_segment_pick(
    avail: np.ndarray, static: np.ndarray, order: np.ndarray, seg_start: np.ndarray, u: float
) -> tuple[int, int]:
    """:func:`first_segment_with`, then a uniformly random set bit of ``avail & static`` in that segment.

    Returns ``(k, bit)``: the position in ``order`` of the first segment with a set bit, and the global bit index of
    the ``r``-th set bit there, ``r = min(int(u * total), total - 1)`` (:class:`FastRandom.below` of ``u``, then
    the ``r``-th set bit in word order, as :func:`megha.model.matching._random_bit`); ``(-1, -1)`` when no segment
    of ``order`` has one.
    """
    for k in range(order.size):
        s = order[k]
        lo = seg_start[s]
        hi = seg_start[s + 1]
        total = 0
        for i in range(lo, hi):
            x = avail[i] & static[i]
            if x:
                total += _popcount(x)
        if total:
            r = min(int(u * total), total - 1)
            for i in range(lo, hi):
                x = avail[i] & static[i]
                c = _popcount(x) if x else 0
                if r < c:
                    for _ in range(r):
                        x &= x - _ONE
                    low = x & (~x + _ONE)
                    return k, i * 64 + _popcount(low - _ONE)
                r -= c
    return -1, -1


@njit(cache=True, nogil=True, inline="always")
def _static_word(valid: np.ndarray, cvs: np.ndarray, mask: int, i: int):
    """Word ``i`` of the static vector of ``mask`` (:meth:`SegmentedIndex.static_vector`, one word, computed)."""
    x = valid[i]
    m = mask
    k = 0
    while m:
        if m & 1:
            x &= cvs[k, i]
        m >>= 1
        k += 1
    return x


@njit(cache=True, nogil=True)
def _pick_masked(
    avail: np.ndarray, valid: np.ndarray, cvs: np.ndarray, mask: int, order: np.ndarray, seg_start: np.ndarray, u: float
) -> tuple[int, int]:
    """:func:`first_segment_pick` with the static vector of ``mask`` computed word by word (no cached vector)."""
    for k in range(order.size):
        s = order[k]
        lo = seg_start[s]
        hi = seg_start[s + 1]
        total = 0
        for i in range(lo, hi):
            x = avail[i]
            if x:
                x &= _static_word(valid, cvs, mask, i)
                if x:
                    total += _popcount(x)
        if total:
            r = min(int(u * total), total - 1)
            for i in range(lo, hi):
                x = avail[i]
                if x:
                    x &= _static_word(valid, cvs, mask, i)
                c = _popcount(x) if x else 0
                if r < c:
                    for _ in range(r):
                        x &= x - _ONE
                    low = x & (~x + _ONE)
                    return k, i * 64 + _popcount(low - _ONE)
                r -= c
    return -1, -1


@njit(cache=True, nogil=True)
def place_tasks(
    avail: np.ndarray,
    valid: np.ndarray,
    cvs: np.ndarray,
    n_constraints: int,
    masks: np.ndarray,
    start: int,
    out: np.ndarray,
    failed: np.ndarray,
    n_failed: int,
    int_orders: np.ndarray,
    ext_orders: np.ndarray,
    seg_start: np.ndarray,
    n_gms: int,
    n_lms: int,
    repartition: bool,
    rr_int: int,
    rr_ext: int,
    n_free: int,
    ubuf: np.ndarray,
    upos: int,
) -> tuple[int, int, int, int, int, int, int]:
    """A GM places the tasks of one job on its view (slot mode, round-robin partitions, policy random): for each task
    ``i >= start`` in order, what :meth:`GlobalMaster._place_slot` does — its internal partitions from ``rr_int``,
    then (``repartition``) the external ones from ``rr_ext``, one segment at a time, the worker drawn with the next
    uniform number ``ubuf[upos]`` (consumed only when a worker is found) — and books it (its bit cleared in ``avail``,
    ``n_free`` less one). ``out[i]`` is the worker's bit, or -1: the task queues. A mask that found nothing (or found
    nothing free at all) is not searched again in this job (``failed[:n_failed]``).

    Stops early, at the first task that needs a uniform number beyond ``ubuf`` (the caller draws the next block and
    calls again from there). Returns ``(next task, rr_int, rr_ext, n_free, upos, repartitions, n_failed)``.
    """
    n = masks.size
    n_rep = 0
    i = start
    while i < n:
        m = np.int64(masks[i])
        seen = False
        for j in range(n_failed):
            if failed[j] == m:
                seen = True
                break
        if seen:
            out[i] = -1
            i += 1
            continue
        if n_free <= 0:
            failed[n_failed] = m
            n_failed += 1
            out[i] = -1
            i += 1
            continue
        if upos >= ubuf.size:
            break
        u = ubuf[upos]
        b = -1
        k = -1
        order = int_orders[rr_int]
        if not (m >> n_constraints):  # else a constraint no worker has: its static vector is empty
            k, b = _pick_masked(avail, valid, cvs, m, order, seg_start, u)
        if k >= 0:
            rr_int = (order[k] // n_gms + 1) % n_lms
        elif repartition and n_gms > 1 and not (m >> n_constraints):
            order = ext_orders[rr_ext]
            k, b = _pick_masked(avail, valid, cvs, m, order, seg_start, u)
            if k >= 0:
                rr_ext = (order[k] // n_gms + 1) % n_lms
                n_rep += 1
        if k < 0:
            failed[n_failed] = m
            n_failed += 1
            out[i] = -1
            i += 1
            continue
        upos += 1
        avail[b >> 6] &= ~(_ONE << np.uint64(b & 63))
        n_free -= 1
        out[i] = b
        i += 1
    return i, rr_int, rr_ext, n_free, upos, n_rep, n_failed


# numba cache stamp: megha.model._kernels=36d6c6c71883
