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
