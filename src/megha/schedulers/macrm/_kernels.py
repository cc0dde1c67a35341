"""Compiled (numba) loops of MACRM's job manager.

Masks are passed in uint32 arrays; every float operation is the one the Python code it replaces does, in the same
order (no fast-math), so results are bit for bit the same.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_EPS = 1e-9
_TREE_MASKS = 16  # up to this many distinct masks in one call: tournament trees (_assign_trees)


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
    ``one`` a responder takes one task. Returns each task's responder position, or -1.

    With few distinct masks, each mask's least loaded eligible responder is kept in a tournament tree
    (:func:`_assign_trees`: O(log k) per task and mask instead of a scan of every responder); the answers are the
    same as the scan's (:func:`_assign_scan`, the reference, used with many distinct masks)."""
    k = free.shape[0]
    if k == 0 or masks.size == 0:
        return np.full(masks.size, -1, dtype=np.int64)
    uniq = np.unique(masks)
    if uniq.size <= _TREE_MASKS:
        return _assign_trees(free, cap, safe, wm, d, masks, uniq, one)
    return _assign_scan(free, cap, safe, wm, d, masks, one)


@njit(cache=True, nogil=True)
def _load_fits(free: np.ndarray, cap: np.ndarray, safe: np.ndarray, d: np.ndarray, j: int) -> tuple[float, bool]:
    """Responder ``j``'s load (its largest used fraction) and whether ``d`` fits its free resources."""
    m = -np.inf
    fits = True
    for x in range(free.shape[1]):
        v = (cap[j, x] - free[j, x]) / safe[j, x]
        if x == 0 or v > m:
            m = v
        if not free[j, x] + _EPS >= d[x]:
            fits = False
    return m, fits


@njit(cache=True, nogil=True)
def _tree_pull(val: np.ndarray, pos: np.ndarray, g: int, p: int) -> None:
    """Inner node ``p`` of tree ``g`` takes the better of its children (the smaller value, ties the lower position)."""
    a = 2 * p
    b = a + 1
    if val[g, b] < val[g, a] or (val[g, b] == val[g, a] and pos[g, b] < pos[g, a]):
        val[g, p] = val[g, b]
        pos[g, p] = pos[g, b]
    else:
        val[g, p] = val[g, a]
        pos[g, p] = pos[g, a]


@njit(cache=True, nogil=True)
def _assign_trees(
    free: np.ndarray,
    cap: np.ndarray,
    safe: np.ndarray,
    wm: np.ndarray,
    d: np.ndarray,
    masks: np.ndarray,
    uniq: np.ndarray,
    one: bool,
) -> np.ndarray:
    """:func:`k_assign_masked` with one tournament tree per distinct mask (``uniq``, sorted) over the responders it
    allows: a leaf holds the responder's load while the responder can take the demand, inf otherwise (as a load
    the scan never picks: NaN or inf)."""
    k = free.shape[0]
    n_g = uniq.size
    size = 1
    while size < k:
        size *= 2
    val = np.full((n_g, 2 * size), np.inf)
    pos = np.full((n_g, 2 * size), k, dtype=np.int64)
    allowed = np.zeros((n_g, k), dtype=np.bool_)
    for g in range(n_g):
        mg = uniq[g]
        for j in range(k):
            allowed[g, j] = mg == 0 or (mg & ~wm[j]) == 0
            pos[g, size + j] = j
    for j in range(k):
        m, fits = _load_fits(free, cap, safe, d, j)
        v = m if fits and m < np.inf else np.inf
        for g in range(n_g):
            if allowed[g, j]:
                val[g, size + j] = v
    for g in range(n_g):
        for p in range(size - 1, 0, -1):
            _tree_pull(val, pos, g, p)
    out = np.full(masks.size, -1, dtype=np.int64)
    for t in range(masks.size):
        g = np.searchsorted(uniq, masks[t])
        if not val[g, 1] < np.inf:
            continue
        best = pos[g, 1]
        out[t] = best
        for x in range(free.shape[1]):
            free[best, x] = free[best, x] - d[x]
        m, fits = _load_fits(free, cap, safe, d, best)
        v = m if not one and fits and m < np.inf else np.inf
        for h in range(n_g):
            if allowed[h, best]:
                p = size + best
                val[h, p] = v
                p >>= 1
                while p >= 1:
                    _tree_pull(val, pos, h, p)
                    p >>= 1
    return out


@njit(cache=True, nogil=True)
def _assign_scan(
    free: np.ndarray,
    cap: np.ndarray,
    safe: np.ndarray,
    wm: np.ndarray,
    d: np.ndarray,
    masks: np.ndarray,
    one: bool,
) -> np.ndarray:
    """:func:`k_assign_masked` by a scan of every responder for each task (the reference)."""
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
