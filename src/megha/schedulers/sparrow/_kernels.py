"""Compiled kernels of the Sparrow schedulers (numba); imported lazily so the CLI starts fast."""

from __future__ import annotations

import numpy as np
from numba import njit

CLOSED = 1 << 32
"""Set in a group's entry of ``open_masks`` once the group has no task left (constraint masks have 32 bits)."""


@njit(cache=True, nogil=True)
def first_open_fit(open_masks: np.ndarray, not_worker_mask: int) -> int:
    """The first task group that still has a task and whose constraint mask the worker satisfies, or -1 (what
    ``argmax`` of ``nonempty & ((gmasks & ~mask) == 0)`` finds), on one array (half the dispatch cost of two):
    ``open_masks[j]`` is group ``j``'s constraint mask, with :data:`CLOSED` set once it has no task left;
    ``not_worker_mask`` is the complement of the worker's mask (32 bits) with :data:`CLOSED` set, so only open
    groups the worker satisfies give 0."""
    nm = np.uint64(not_worker_mask)
    for j in range(open_masks.size):
        if (open_masks[j] & nm) == 0:
            return j
    return -1
