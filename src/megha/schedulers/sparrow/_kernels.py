"""Compiled kernels of the Sparrow schedulers (numba); imported lazily so the CLI starts fast."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def first_fitting_group(nonempty: np.ndarray, gmasks: np.ndarray, not_worker_mask: int) -> int:
    """The first task group that still has a task and whose constraint mask the worker satisfies, or -1.

    ``not_worker_mask`` is the complement of the worker's mask as a plain int (32 bits), so a group fits when
    ``gmasks[j] & not_worker_mask == 0``: what ``argmax`` of ``nonempty & ((gmasks & ~mask) == 0)`` finds.
    """
    for j in range(gmasks.size):
        if nonempty[j] and (gmasks[j] & not_worker_mask) == 0:
            return j
    return -1
