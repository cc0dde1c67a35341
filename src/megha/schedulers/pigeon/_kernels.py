"""Compiled kernels of the PigeonC/Pigeon masters (numba); imported lazily so the CLI starts fast."""

from __future__ import annotations

import numpy as np
from numba import njit

from megha.model._kernels import popcount64 as _popcount

_ONE = np.uint64(1)


@njit(cache=True, nogil=True)
def take_random(avail: np.ndarray, static: np.ndarray, u: float) -> int:
    """A uniformly random set bit of ``avail & static``, cleared in ``avail``; -1 (nothing changed) when none.

    The ``r``-th set bit in bit order for ``r = min(int(u * total), total - 1)``: what
    :meth:`~megha.model.matching.SegmentedIndex.pick` with the random policy chooses on a one-segment index when
    :class:`~megha.model.matching.FastRandom` draws ``u`` (the caller consumes ``u`` only when a bit is found, as
    ``pick`` draws only then), without building the candidate vector.
    """
    return take_random_in(avail, static, 0, avail.size, u)


@njit(cache=True, nogil=True)
def take_random_in(avail: np.ndarray, static: np.ndarray, lo: int, hi: int, u: float) -> int:
    """:func:`take_random` on the words ``lo:hi`` of ``avail`` and ``static``: the position (from word ``lo``) of
    the chosen bit, cleared in ``avail``; -1 (nothing changed) when none. The compiled Pigeon loop keeps every
    master's bit vector in rows of one table and calls this on a master's row."""
    total = 0
    for i in range(lo, hi):
        total += _popcount(avail[i] & static[i])
    if total == 0:
        return -1
    r = min(int(u * total), total - 1)
    for i in range(lo, hi):
        w = avail[i] & static[i]
        c = _popcount(w)
        if r < c:
            for _ in range(r):
                w &= w - _ONE
            b = 0
            while not (w >> np.uint64(b)) & _ONE:
                b += 1
            avail[i] &= ~(_ONE << np.uint64(b))
            return (i - lo) * 64 + b
        r -= c
    return -1


# numba cache stamp: megha.model._kernels=36d6c6c71883
