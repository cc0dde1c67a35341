"""A small sampling round's placement in plain Python (macrm/smallassign.py): the same placements as the NumPy and
compiled forms (JobManager._assign_alike, _kernels.k_assign_masked and its reference _assign_scan), on random rounds
with equal loads, full responders and masks."""

from __future__ import annotations

import numpy as np
import pytest

from megha.schedulers.macrm._kernels import _assign_scan, k_assign_masked
from megha.schedulers.macrm.jobmanager import JobManager
from megha.schedulers.macrm.smallassign import assign_alike, assign_scan


def _round(rng: np.random.Generator, k: int, n_res: int) -> tuple[np.ndarray, ...]:
    cap = rng.choice([0.0, 0.25, 0.5, 1.0], size=(k, n_res))  # (a zero capacity: safe is 1)
    free = np.minimum(cap, rng.choice([0.0, 0.0625, 0.125, 0.25, 0.5], size=(k, n_res)))
    safe = np.where(cap > 0, cap, 1.0)
    wm = rng.integers(0, 8, size=k).astype(np.uint32)
    d = rng.choice([0.0, 0.03125, 0.0625, 0.1], size=n_res)
    return free, cap, safe, wm, d


@pytest.mark.parametrize("one", [False, True])
def test_assign_scan_matches_the_compiled_forms(one: bool) -> None:
    rng = np.random.default_rng(3)
    for _ in range(400):
        k = int(rng.integers(1, 12))
        free, cap, safe, wm, d = _round(rng, k, int(rng.integers(1, 4)))
        masks = rng.integers(0, 8, size=int(rng.integers(1, 10))).astype(np.uint32)
        ref = _assign_scan(free.copy(), cap, safe, wm, d, masks, one).tolist()
        fast = k_assign_masked(free.copy(), cap, safe, wm, d, masks, one).tolist()
        got = assign_scan(free.tolist(), cap.tolist(), safe.tolist(), wm.tolist(), d.tolist(), masks.tolist(), one)
        assert got == ref == fast


@pytest.mark.parametrize("one", [False, True])
def test_assign_alike_matches_numpy(one: bool) -> None:
    rng = np.random.default_rng(4)
    placed = 0
    for _ in range(400):
        k = int(rng.integers(1, 12))
        free, cap, safe, wm, d = _round(rng, k, int(rng.integers(1, 4)))
        mask = int(rng.integers(0, 8))
        todo = list(range(int(rng.integers(1, 10))))
        nodes = np.arange(k, dtype=np.int64)
        ref: dict[int, int] = {}
        JobManager._assign_alike(todo, nodes, free.copy(), cap, safe, wm, d, mask, one, ref)
        got: dict[int, int] = {}
        assign_alike(todo, free.tolist(), cap.tolist(), safe.tolist(), wm.tolist(), d.tolist(), mask, one, got)
        assert got == ref
        placed += len(got)
    assert placed > 300
