"""Compiled kernels (numba) for Megha's hot loops; imported lazily so the CLI starts fast."""

from __future__ import annotations

import numpy as np
from numba import njit

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
