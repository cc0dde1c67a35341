"""Compiled (numba) loops of MACRM's job manager.

Masks are passed in uint32 arrays; every float operation is the one the Python code it replaces does, in the same
order (no fast-math), so results are bit for bit the same.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_EPS = 1e-9
_FEW = 64  # a mask allowing at most this many responders: its tasks scan those (k_assign_masked)


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
    ``one`` a responder takes one task. Returns each task's responder position, or -1.

    Instead of a scan of every responder per task (:func:`_assign_scan`, the reference): a mask that allows at most
    ``_FEW`` responders has their list, which its tasks scan; the others look at the responders with room kept in
    ``(load, position)`` order, from the least loaded on, and stop at the first their mask allows. A placed responder
    moves to its new place in the order, or leaves it when full; a load the scan never picks (NaN, inf) is never
    a candidate."""
    k, r = free.shape
    load = np.empty(k)
    keep = np.zeros(k, dtype=np.bool_)
    for j in range(k):
        m, fits = _load_fits(free, cap, safe, d, j)
        load[j] = m
        keep[j] = fits and m < np.inf
    cand = np.flatnonzero(keep)
    order = cand[np.argsort(load[cand], kind="mergesort")]  # stable: equal loads stay in position order
    n = order.size
    uniq = np.unique(masks)
    few = np.empty((uniq.size, _FEW), dtype=np.int64)  # the responders a mask allows, in position order ...
    n_few = np.full(uniq.size, -1, dtype=np.int64)  # ... and how many (-1: more than _FEW)
    for g in range(uniq.size):
        mg = uniq[g]
        c = 0
        for j in range(k):
            if mg == 0 or (mg & ~wm[j]) == 0:
                if c == _FEW:
                    c = -1
                    break
                few[g, c] = j
                c += 1
        n_few[g] = c
    # a responder leaves the order by losing ``keep`` (its entry stays, with its key then: the order stays sorted);
    # ``oload`` holds each entry's load as it was sorted, ``head`` the first entry still kept
    oload = load[order]
    head = 0
    out = np.full(masks.size, -1, dtype=np.int64)
    for t in range(masks.size):
        mt = masks[t]
        g = np.searchsorted(uniq, mt)
        p = -1
        if n_few[g] >= 0:  # the mask's own responders: the least loaded with room (first on ties)
            best = -1
            bv = np.inf
            for c in range(n_few[g]):
                j = few[g, c]
                if keep[j] and load[j] < bv:
                    bv = load[j]
                    best = j
            if best < 0:
                continue
        else:
            while head < n and not keep[order[head]]:
                head += 1
            p = head
            while p < n:
                o = order[p]
                if keep[o] and (mt & ~wm[o]) == 0:
                    break
                p += 1
            if p == n:
                continue
            best = order[p]
        out[t] = best
        was = load[best]
        for x in range(r):
            free[best, x] = free[best, x] - d[x]
        m, fits = _load_fits(free, cap, safe, d, best)
        load[best] = m
        if one or not fits or not m < np.inf:
            keep[best] = False
            continue
        if p < 0:  # its entry: the one with its key before this placement (keys are distinct: positions)
            p = _first_not_below(oload, order, 0, n, was, best)
        # to its new key's place: after every smaller (load, position), before every larger one (the order is
        # sorted: a binary search on each side, then one shift, in place)
        if p + 1 < n and (oload[p + 1] < m or (oload[p + 1] == m and order[p + 1] < best)):
            lo = _first_not_below(oload, order, p + 1, n, m, best)
            for q in range(p, lo - 1):  # (element by element: a slice copy of overlapping ranges allocates)
                order[q] = order[q + 1]
                oload[q] = oload[q + 1]
            p = lo - 1
        elif p > 0 and (oload[p - 1] > m or (oload[p - 1] == m and order[p - 1] > best)):
            lo = _first_not_below(oload, order, 0, p, m, best)
            for q in range(p, lo, -1):
                order[q] = order[q - 1]
                oload[q] = oload[q - 1]
            p = lo
        order[p] = best
        oload[p] = m
        if p < head:
            head = p
    return out


@njit(cache=True, nogil=True)
def _first_not_below(oload: np.ndarray, order: np.ndarray, lo: int, hi: int, key: float, pos: int) -> int:
    """The first entry in ``lo .. hi - 1`` of the sorted order whose ``(load, position)`` is not below ``(key, pos)``
    (``hi`` if none): a binary search."""
    while lo < hi:
        mid = (lo + hi) // 2
        if oload[mid] < key or (oload[mid] == key and order[mid] < pos):
            lo = mid + 1
        else:
            hi = mid
    return lo


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
        m, fits = _load_fits(free, cap, safe, d, j)
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
        for x in range(r):
            free[best, x] = free[best, x] - d[x]
        m, fits = _load_fits(free, cap, safe, d, best)
        load[best] = m
        if one or not fits:
            gone[best] = True
    return out
