"""Compiled kernel (numba) for the ``matching=scan`` drains: which queued constraint masks can fit at all.

Imported lazily by :class:`~megha.schedulers.megha.gm.GlobalMaster` in slot mode with ``matching=scan``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from megha.schedulers.megha._kernels import _static_word

INF = np.iinfo(np.int64).max


@njit(cache=True, nogil=True)
def queued_mask_fit(
    masks: np.ndarray,
    heads: np.ndarray,
    n: int,
    avail: np.ndarray,
    valid: np.ndarray,
    cvs: np.ndarray,
    out_masks: np.ndarray,
    out_fit: np.ndarray,
) -> int:
    """For each of the first ``n`` wait-queue slots with a task (``heads`` not INF), its mask and whether some set
    bit of ``avail`` has every constraint of it (the static vector of :meth:`SegmentedIndex.static_vector`, word by
    word, stopping at the first hit). Written to ``out_masks`` / ``out_fit`` in slot order; returns their count."""
    n_constraints = cvs.shape[0]
    c = 0
    for s in range(n):
        if heads[s] == INF:
            continue
        m = np.int64(masks[s])
        fit = False
        if (m >> n_constraints) == 0:
            for i in range(avail.size):
                if avail[i] & _static_word(valid, cvs, m, i):
                    fit = True
                    break
        out_masks[c] = m
        out_fit[c] = fit
        c += 1
    return c


# numba cache stamp: megha.schedulers.megha._kernels=660b87b18083
