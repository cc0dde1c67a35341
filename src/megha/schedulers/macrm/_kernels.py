"""Compiled (numba) loops of MACRM's job manager.

Masks are passed in uint32 arrays; every float operation is the one the Python code it replaces does, in the same
order (no fast-math), so results are bit for bit the same.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_EPS = 1e-9
_FEW = 64  # a mask allowing at most this many responders: its tasks scan those (k_assign_masked)
_BLOCK = 64  # entries per block of the load order (k_assign_masked)


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
    ``(load, position)`` order (a list of blocks), from the least loaded on, and stop at the first their mask allows.
    A placed responder moves to its new place in the order, or leaves it when full; a load the scan never picks
    (NaN, inf) is never a candidate."""
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
    # the responders with room in (load, position) order, as a list of blocks of at most _BLOCK entries: a placed
    # responder leaves its block and goes back in at its new key, shifting entries of one block only
    nb_max = n // (_BLOCK // 2) + n + 2  # (every block holds an entry; a split leaves two half-full blocks)
    bpos = np.empty((nb_max, _BLOCK), dtype=np.int64)
    bload = np.empty((nb_max, _BLOCK))
    bcnt = np.zeros(nb_max, dtype=np.int64)
    blist = np.empty(nb_max, dtype=np.int64)  # the blocks in order
    at = np.full(k, -1, dtype=np.int64)  # the block of each responder in the order
    nbl = 0
    half = _BLOCK // 2
    for s in range(0, n, half):
        e = min(n, s + half)
        for q in range(s, e):
            o = order[q]
            bpos[nbl, q - s] = o
            bload[nbl, q - s] = load[o]
            at[o] = nbl
        bcnt[nbl] = e - s
        blist[nbl] = nbl
        nbl += 1
    n_used = nbl  # block ids handed out (ids of emptied blocks are reused)
    spare = np.empty(nb_max, dtype=np.int64)
    n_spare = 0
    out = np.full(masks.size, -1, dtype=np.int64)
    for t in range(masks.size):
        mt = masks[t]
        g = np.searchsorted(uniq, mt)
        best = -1
        if n_few[g] >= 0:  # the mask's own responders: the least loaded with room (first on ties)
            bv = np.inf
            for c in range(n_few[g]):
                j = few[g, c]
                if keep[j] and load[j] < bv:
                    bv = load[j]
                    best = j
        else:  # the first responder in the order that the mask allows
            for x in range(nbl):
                b = blist[x]
                for q in range(bcnt[b]):
                    o = bpos[b, q]
                    if (mt & ~wm[o]) == 0:
                        best = o
                        break
                if best >= 0:
                    break
        if best < 0:
            continue
        out[t] = best
        for x in range(r):
            free[best, x] = free[best, x] - d[x]
        m, fits = _load_fits(free, cap, safe, d, best)
        load[best] = m
        # out of its block ...
        b = at[best]
        c = bcnt[b]
        q = 0
        while bpos[b, q] != best:
            q += 1
        for y in range(q, c - 1):
            bpos[b, y] = bpos[b, y + 1]
            bload[b, y] = bload[b, y + 1]
        bcnt[b] = c - 1
        at[best] = -1
        if c == 1:  # the block is empty: it leaves the list
            x = 0
            while blist[x] != b:
                x += 1
            for y in range(x, nbl - 1):
                blist[y] = blist[y + 1]
            nbl -= 1
            spare[n_spare] = b
            n_spare += 1
        if one or not fits or not m < np.inf:
            keep[best] = False
            continue
        # ... and back in at its new key: the first block whose last key is not below it (else the last block)
        lo = 0
        hi = nbl
        while lo < hi:
            mid = (lo + hi) // 2
            bm = blist[mid]
            z = bcnt[bm] - 1
            if _key_below(bload[bm, z], bpos[bm, z], m, best):
                lo = mid + 1
            else:
                hi = mid
        if nbl == 0:  # no block left: a new one
            b, n_spare, n_used = _new_block(spare, n_spare, n_used)
            bcnt[b] = 0
            blist[0] = b
            nbl = 1
            x = 0
        else:
            x = lo if lo < nbl else nbl - 1
            b = blist[x]
        if bcnt[b] == _BLOCK:  # full: its upper half moves to a new block right after it
            nb, n_spare, n_used = _new_block(spare, n_spare, n_used)
            for y in range(half, _BLOCK):
                o = bpos[b, y]
                bpos[nb, y - half] = o
                bload[nb, y - half] = bload[b, y]
                at[o] = nb
            bcnt[nb] = _BLOCK - half
            bcnt[b] = half
            for y in range(nbl, x + 1, -1):
                blist[y] = blist[y - 1]
            blist[x + 1] = nb
            nbl += 1
            z = half - 1  # the new key goes to the upper half if it is above the lower half's last key
            if _key_below(bload[b, z], bpos[b, z], m, best):
                b = nb
        c = bcnt[b]
        q = c
        while q > 0 and _key_below(m, best, bload[b, q - 1], bpos[b, q - 1]):
            bpos[b, q] = bpos[b, q - 1]
            bload[b, q] = bload[b, q - 1]
            q -= 1
        bpos[b, q] = best
        bload[b, q] = m
        bcnt[b] = c + 1
        at[best] = b
    return out


@njit(cache=True, nogil=True)
def _key_below(load_a: float, pos_a: int, load_b: float, pos_b: int) -> bool:
    """Key ``(load_a, pos_a)`` comes before ``(load_b, pos_b)`` in the load order (k_assign_masked)."""
    return load_a < load_b or (load_a == load_b and pos_a < pos_b)


@njit(cache=True, nogil=True)
def _new_block(spare: np.ndarray, n_spare: int, n_used: int) -> tuple[int, int, int]:
    """A block id for k_assign_masked's load order: the last spare (emptied) block if there is one, else the next
    unused id; returns ``(block, n_spare, n_used)`` with the counts updated."""
    if n_spare:
        n_spare -= 1
        return spare[n_spare], n_spare, n_used
    return n_used, n_spare, n_used + 1


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
