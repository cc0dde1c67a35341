"""MACRM's compiled placement of a round's tasks: the responders kept in load order give the scan's answers."""

from __future__ import annotations

import numpy as np
import pytest

from megha.schedulers.macrm._kernels import _assign_scan, k_assign_masked


def _case(rng: np.random.Generator, k: int, t: int, n_masks: int) -> tuple:
    r = 2
    cap = rng.choice([0.0, 0.5, 1.0, 2.0], size=(k, r), p=[0.05, 0.25, 0.5, 0.2])
    free = cap * rng.choice([0.0, 0.25, 0.5, 1.0], size=(k, r))  # coarse values: many ties in load
    safe = np.where(cap > 0, cap, 1.0)
    wm = rng.integers(0, 64, size=k).astype(np.uint32)
    pool = np.concatenate([[0], rng.integers(1, 64, size=max(0, n_masks - 1)) & rng.integers(0, 64)]).astype(np.uint32)
    masks = rng.choice(pool, size=t).astype(np.uint32)
    d = np.array([0.25, 0.25]) * rng.integers(1, 3)
    return free, cap, safe, wm, d, masks


@pytest.mark.parametrize("one", [False, True])
def test_load_order_places_as_the_scan_does(one: bool) -> None:
    rng = np.random.default_rng(7)
    for _ in range(600):
        k = int(rng.integers(1, 200))  # beyond 64: masks allowing many responders use the load order
        t = int(rng.integers(1, 120))
        free, cap, safe, wm, d, masks = _case(rng, k, t, int(rng.integers(1, 40)))
        f1, f2 = free.copy(), free.copy()
        ref = _assign_scan(f1, cap, safe, wm, d, masks, one)
        got = k_assign_masked(f2, cap, safe, wm, d, masks, one)
        assert got.tolist() == ref.tolist()
        assert np.array_equal(f1, f2)


def test_no_responders_or_no_tasks() -> None:
    e = np.zeros((0, 2))
    out = k_assign_masked(e, e, e, np.zeros(0, np.uint32), np.ones(2), np.zeros(3, np.uint32), False)
    assert out.tolist() == [-1, -1, -1]
    f = np.ones((2, 2))
    out = k_assign_masked(f, f, f, np.zeros(2, np.uint32), np.ones(2), np.zeros(0, np.uint32), False)
    assert out.tolist() == []


def test_many_responders_and_tasks_place_as_the_scan_does() -> None:
    """Rounds large enough for the load order's blocks to fill, split and empty."""
    rng = np.random.default_rng(11)
    for _ in range(60):
        k = int(rng.integers(100, 1200))
        t = int(rng.integers(100, 1500))
        free, cap, safe, wm, d, masks = _case(rng, k, t, int(rng.integers(1, 8)))
        free = free * 8.0  # room for several tasks per responder: placed responders move along the order
        cap = cap * 8.0
        safe = np.where(cap > 0, cap, 1.0)
        for one in (False, True):
            f1, f2 = free.copy(), free.copy()
            ref = _assign_scan(f1, cap, safe, wm, d, masks, one)
            got = k_assign_masked(f2, cap, safe, wm, d, masks, one)
            assert got.tolist() == ref.tolist()
            assert np.array_equal(f1, f2)
