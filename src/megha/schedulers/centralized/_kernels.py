"""Compiled kernels of the YARN-like RM (numba): node scan, queue first fit; imported lazily so the CLI starts fast."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _low_bit(w: np.uint64) -> int:
    b = 0
    while not (w >> np.uint64(b)) & np.uint64(1):
        b += 1
    return b


@njit(cache=True, nogil=True)
def first_and_from(avail: np.ndarray, static: np.ndarray, start: int) -> int:
    """Index of the first set bit of ``avail & static`` at or after bit ``start``, wrapping around; -1 if none.

    The same answer as :func:`~megha.schedulers.centralized.heartbeats.first_set_from` on ``avail & static``,
    without building that vector.
    """
    n = avail.size
    if n == 0:
        return -1
    wi = start >> 6
    off = start & 63
    w = avail[wi] & static[wi]
    hi = (w >> np.uint64(off)) << np.uint64(off)
    if hi:
        return wi * 64 + _low_bit(hi)
    for i in range(wi + 1, n):
        w = avail[i] & static[i]
        if w:
            return i * 64 + _low_bit(w)
    for i in range(0, wi + 1):  # wrap around (may be the low bits of the start word)
        w = avail[i] & static[i]
        if w:
            return i * 64 + _low_bit(w)
    return -1


_INF = np.iinfo(np.int64).max


@njit(cache=True, nogil=True)
def first_fit_min(masks: np.ndarray, heads: np.ndarray, n: int, not_worker_mask: int) -> int:
    """Index of the slot with the smallest head among the first ``n`` slots of a
    :class:`~megha.model.matching.WaitQueue` whose mask fits the node, or -1.

    The same answer as :func:`megha.model._kernels.first_fit` (a queue's heads are distinct sequence numbers, empty
    slots hold the largest int64), computed as a branch-free minimum the compiler vectorizes, then located: the
    RM's queue holds hundreds of distinct constraint masks under load. ``not_worker_mask`` is the complement of the
    node's mask as a plain int.
    """
    nm = np.uint32(not_worker_mask & 0xFFFFFFFF)
    best = _INF
    for i in range(n):
        h = heads[i] if (masks[i] & nm) == 0 else _INF
        best = min(best, h)
    if best == _INF:
        return -1
    for i in range(n):
        if heads[i] == best:
            return i
    return -1


@njit(cache=True, nogil=True)
def claim_scan(
    idle: np.ndarray,
    statics: np.ndarray,
    which: np.ndarray,
    starts: np.ndarray,
    worker_at_bit: np.ndarray,
    nodes: np.ndarray,
) -> int:
    """An arriving job's node scan, task by task in order: ``nodes[i]`` is the node of the first set bit of
    ``idle & statics[which[i]]`` at or after bit ``starts[i]``, wrapping (:func:`first_and_from`), and that bit is
    cleared in ``idle`` (the task is booked there); -1 when there is none. Returns how many were booked.

    The same bookings as one :func:`first_and_from` and one cleared bit per task: a mask that found nothing finds
    nothing for the job's later tasks either (bits are only cleared), so it is not scanned again.
    """
    found = 0
    failed = np.zeros(statics.shape[0], dtype=np.bool_)
    for i in range(which.size):
        k = which[i]
        if failed[k]:
            nodes[i] = -1
            continue
        bit = first_and_from(idle, statics[k], starts[i])
        if bit < 0:
            failed[k] = True
            nodes[i] = -1
        else:
            idle[bit >> 6] &= ~(np.uint64(1) << np.uint64(bit & 63))
            nodes[i] = worker_at_bit[bit]
            found += 1
    return found
