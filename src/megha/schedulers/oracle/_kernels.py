"""Compiled worker choice over packed bit vectors (numba): no temporary vector per decision.

Each kernel looks at ``avail & static`` word by word (the free workers that have every constraint a task needs)
and returns the chosen bit, or -1 when there is none. Imported lazily so the CLI starts fast.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from megha.model._kernels import popcount64 as _popcount


@njit(cache=True, nogil=True)
def _low_bit(w: np.uint64) -> int:
    b = 0
    while not (w >> np.uint64(b)) & np.uint64(1):
        b += 1
    return b


@njit(cache=True, nogil=True)
def pick_first(avail: np.ndarray, static: np.ndarray) -> int:
    """The lowest set bit of ``avail & static``."""
    for i in range(avail.size):
        w = avail[i] & static[i]
        if w:
            return i * 64 + _low_bit(w)
    return -1


@njit(cache=True, nogil=True)
def pick_random(avail: np.ndarray, static: np.ndarray, u: float) -> int:
    """The ``floor(u · k)``-th of the ``k`` set bits of ``avail & static`` (``u`` uniform in [0, 1))."""
    total = 0
    for i in range(avail.size):
        w = avail[i] & static[i]
        if w:
            total += _popcount(w)
    if total == 0:
        return -1
    r = min(int(u * total), total - 1)
    for i in range(avail.size):
        w = avail[i] & static[i]
        if w:
            c = _popcount(w)
            if r < c:
                for _ in range(r):
                    w &= w - np.uint64(1)
                return i * 64 + _low_bit(w)
            r -= c
    return -1


@njit(cache=True, nogil=True)
def pick_min_weight(avail: np.ndarray, static: np.ndarray, weight_at_bit: np.ndarray) -> int:
    """The set bit of ``avail & static`` with the smallest weight (lowest bit on ties)."""
    best = -1
    best_w = 1 << 30
    for i in range(avail.size):
        w = avail[i] & static[i]
        while w:
            b = i * 64 + _low_bit(w)
            if weight_at_bit[b] < best_w:
                best_w = weight_at_bit[b]
                best = b
            w &= w - np.uint64(1)
    return best


# numba cache stamp: megha.model._kernels=36d6c6c71883
