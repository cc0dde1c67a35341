"""The binary heap of the compiled event loops (numba): entries ordered by (time, sequence number), like the engine's.

The compiled Sparrow and Pigeon loops keep their timers in one such heap: ``ht[i]`` is the time of the heap's entry
``i`` and ``hq[i]`` its sequence number (column 0) and payload slot (column 1); the rows of ``hq`` past ``ht.size``
hold the free payload slots. ``st[0]`` is the heap's size and ``st[1]`` the number of free slots; the loops keep
their other counters in the rest of ``st``. Ties in time are broken by the sequence number, so events run in the
order the simulator's engine would run them. Each loop fills its payload tables itself; these two functions only
order the entries (plain ``@njit`` functions, inlined by LLVM into the loops that call them).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def heap_insert(hq: np.ndarray, ht: np.ndarray, st: np.ndarray, t: float, q: int, slot: int) -> None:
    """Add the entry (time ``t``, sequence number ``q``, payload slot ``slot``) to the heap."""
    i = st[0]
    st[0] = i + 1
    while i > 0:
        p = (i - 1) >> 1
        tp = ht[p]
        if t < tp or (t == tp and q < hq[p, 0]):
            ht[i] = tp
            hq[i, 0] = hq[p, 0]
            hq[i, 1] = hq[p, 1]
            i = p
        else:
            break
    ht[i] = t
    hq[i, 0] = q
    hq[i, 1] = slot


@njit(cache=True)
def heap_pop(hq: np.ndarray, ht: np.ndarray, st: np.ndarray) -> int:
    """Take the heap's first entry (its time: ``ht[0]`` before the call); returns its payload slot, which is free
    again (listed among the free slots) once the caller has read it."""
    top = hq[0, 1]
    n = st[0] - 1
    st[0] = n
    if n > 0:
        lt = ht[n]
        lq = hq[n, 0]
        ls = hq[n, 1]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hq[c + 1, 0] < hq[c, 0])):
                c += 1
            if ht[c] < lt or (ht[c] == lt and hq[c, 0] < lq):
                ht[i] = ht[c]
                hq[i, 0] = hq[c, 0]
                hq[i, 1] = hq[c, 1]
                i = c
            else:
                break
        ht[i] = lt
        hq[i, 0] = lq
        hq[i, 1] = ls
    hq[ht.size + st[1], 1] = top
    st[1] += 1
    return top
