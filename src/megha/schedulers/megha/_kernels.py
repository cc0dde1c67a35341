"""Compiled kernels (numba) for Megha's hot loops; imported lazily so the CLI starts fast."""

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
