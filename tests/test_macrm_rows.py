"""MACRM's row arithmetic (macrm/rows.py): the two-resource forms give the general forms' answers bit for bit."""

from __future__ import annotations

import math

import numpy as np

from megha.schedulers.macrm.rows import GENERAL, TWO, row_ops


def _same(a: object, b: object) -> bool:
    if isinstance(a, list):
        return len(a) == len(b) and all(
            math.copysign(1, x) == math.copysign(1, y) and x == y for x, y in zip(a, b, strict=True)
        )
    return a == b


def test_two_resource_forms_match_the_general_ones() -> None:
    rng = np.random.default_rng(3)
    values = [0.0, -0.0, 1e-9, 2e-9, 1e-7, 0.25, 0.5, 1.0, -0.25]
    for _ in range(5000):
        a, b, c = ([float(x) for x in rng.choice(values, 2) + rng.choice([0.0, 1e-12, 0.1], 2)] for _ in range(3))
        for name in ("diff", "plus", "minus_clip", "over", "has_free"):
            assert _same(getattr(TWO, name)(a, b), getattr(GENERAL, name)(a, b)), (name, a, b)
        for name in ("room_for", "room_min"):
            assert getattr(TWO, name)(a, b, c) == getattr(GENERAL, name)(a, b, c), (name, a, b, c)
        assert _same(TWO.place(a, b, c), GENERAL.place(a, b, c)), ("place", a, b, c)
        d = [float(x) for x in rng.choice(values, 2)]
        two, gen = TWO.beat(a, b, c, d), GENERAL.beat(a, b, c, d)
        assert all(_same(x, y) for x, y in zip(two, gen, strict=True)), ("beat", a, b, c, d)


def test_fused_forms_are_the_single_steps() -> None:
    """``beat`` is (diff, plus, has_free) and ``place`` is room_for then plus, for both forms."""
    cap, bg, used, need, d = [1.0, 2.0], [0.5, 0.25], [0.25, 1.5], [0.1, 0.1], [0.5, 0.5]
    for ops in (TWO, GENERAL):
        free = ops.diff(cap, used)
        assert ops.beat(cap, bg, used, need) == (free, ops.plus(bg, used), ops.has_free(free, need))
        assert ops.place(cap, used, d) == ops.plus(used, d)
        assert ops.place(cap, used, [0.5, 0.6]) is None


def test_max_keeps_the_first_of_equal_values() -> None:
    assert math.copysign(1, TWO.minus_clip([0.0, 1.0], [0.0, 1.0])[0]) == math.copysign(1, max(0.0 - 0.0, 0.0))
    assert TWO.minus_clip([0.25, 0.5], [0.5, 0.25]) == [0.0, 0.25]


def test_row_ops_by_length() -> None:
    assert row_ops(2) is TWO
    assert row_ops(1) is GENERAL and row_ops(3) is GENERAL
