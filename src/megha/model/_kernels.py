"""Small compiled kernels (numba) for hot loops; imported lazily so the CLI starts fast."""

from __future__ import annotations

import numpy as np
from numba import njit

INF = np.iinfo(np.int64).max

_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_ONE = np.uint64(1)


@njit(cache=True, nogil=True, inline="always")
def popcount64(x: np.uint64) -> int:
    """Set bits of one 64-bit word (branch-free SWAR count), for the families' bit-vector kernels."""
    x = x - ((x >> _ONE) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return int((x * _H01) >> np.uint64(56))


@njit(cache=True, nogil=True)
def first_fit(masks: np.ndarray, heads: np.ndarray, n: int, not_worker_mask: int) -> int:
    """Index of the slot with the smallest head among slots whose mask fits the worker, or -1.

    ``not_worker_mask`` is the complement of the worker's mask as a plain int (numpy scalars would send every
    call through numba's slow dispatch path).
    """
    best = INF
    bi = -1
    nm = np.uint32(not_worker_mask & 0xFFFFFFFF)
    for i in range(n):
        if (masks[i] & nm) == 0 and heads[i] < best:
            best = heads[i]
            bi = i
    return bi


@njit(cache=True, nogil=True)
def suited_slots(masks: np.ndarray, heads: np.ndarray, n: int, not_worker_masks: np.ndarray) -> np.ndarray:
    """Which of the first ``n`` non-empty slots fit at least one of the workers (given as complemented masks)."""
    out = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        if heads[i] == INF:
            continue
        m = masks[i]
        for nm in not_worker_masks:
            if (m & nm) == 0:
                out[i] = True
                break
    return out
