"""Max-min fair shares (water-filling) for the Quincy fairness bounds of the flow graph (paper eq. 1–2)."""

from __future__ import annotations

import numpy as np

from megha.errors import InputError


def max_min_shares(demand: np.ndarray, capacity: int, weights: np.ndarray | None = None) -> np.ndarray:
    """Integer max-min fair allocation of ``capacity`` slots among jobs demanding ``demand`` slots.

    Every job gets ``min(demand, level)`` for the highest water level the capacity allows; slots left by the
    integer rounding go one each to the unsatisfied jobs in index order (earlier jobs first), so the result
    is deterministic and sums to ``min(capacity, Σ demand)``. ``weights`` (optional, > 0) gives weighted
    shares: job j's level is ``weight_j × level``.

    >>> max_min_shares(np.array([3, 4]), 4).tolist()
    [2, 2]
    """
    d = np.asarray(demand, dtype=np.int64)
    if (d < 0).any():
        raise InputError("max-min shares: demands must be >= 0")
    if capacity < 0:
        raise InputError("max-min shares: capacity must be >= 0")
    n = d.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if d.sum() <= capacity:
        return d.copy()
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.size != n or (w <= 0).any():
        raise InputError("max-min shares: weights must be positive, one per job")
    # find the real water level: Σ min(d, w·L) = capacity
    ratio = d / w
    order = np.argsort(ratio, kind="stable")
    left = float(capacity)
    wsum = float(w.sum())
    level = 0.0
    for i in order:
        if ratio[i] * wsum <= left:
            left -= d[i]
            wsum -= w[i]
        else:
            level = left / wsum
            break
    share = np.minimum(d, np.floor(w * level + 1e-9).astype(np.int64))
    rest = int(capacity - share.sum())
    if rest > 0:
        open_ = np.flatnonzero(share < d)
        share[open_[:rest]] += 1
    return share
