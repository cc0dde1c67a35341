"""Compiled (numba) loops of MACRM's job manager.

Masks are passed in uint32 arrays; every float operation is the one the Python code it replaces does, in the same
order (no fast-math), so results are bit for bit the same.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_EPS = 1e-9


@njit(cache=True, nogil=True)
def k_assign_masked(
    free: np.ndarray,
    cap: np.ndarray,
    safe: np.ndarray,
    wm: np.ndarray,
    d: np.ndarray,
    masks: np.ndarray,
    one: bool,
) -> np.ndarray:
    """Tasks of one demand ``d`` and several placement masks, in order: each to the least loaded responder (lowest
    position on ties) that its mask allows and that has room (``free + eps >= d``); a responder's load is its largest
    used fraction ``(cap - free) / safe``, kept up to date as tasks are placed (``free`` is changed in place). With
    ``one`` a responder takes one task. Returns each task's responder position, or -1."""
    k, r = free.shape
    load = np.empty(k)
    gone = np.zeros(k, dtype=np.bool_)
    for j in range(k):
        m = -np.inf
        fits = True
        for x in range(r):
            v = (cap[j, x] - free[j, x]) / safe[j, x]
            if x == 0 or v > m:
                m = v
            if not free[j, x] + _EPS >= d[x]:
                fits = False
        load[j] = m
        gone[j] = not fits
    out = np.full(masks.size, -1, dtype=np.int64)
    for t in range(masks.size):
        mt = masks[t]
        best = -1
        bv = np.inf
        for j in range(k):
            if mt != 0 and (mt & ~wm[j]) != 0:
                continue
            if gone[j]:
                continue
            if load[j] < bv:
                bv = load[j]
                best = j
        if best < 0:
            continue
        out[t] = best
        m = -np.inf
        fits = True
        for x in range(r):
            f = free[best, x] - d[x]
            free[best, x] = f
            v = (cap[best, x] - f) / safe[best, x]
            if x == 0 or v > m:
                m = v
            if not f + _EPS >= d[x]:
                fits = False
        load[best] = m
        if one or not fits:
            gone[best] = True
    return out
