"""Arithmetic on a node's resource rows kept as lists of floats (MACRM's node managers and trackers).

Each operation has a general form (any number of resources) and an unrolled form for two resources (CPU and
memory, the usual resource mode), several times faster in CPython than chains of ``map``. Both do the same IEEE
operations in the same order per resource, so results are bit for bit the same; ``max(x, 0.0)`` is written as
``0.0 if 0.0 > x else x``, which is what the builtin returns. :func:`row_ops` picks the forms for a row length.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat
from operator import add, ge, gt, sub

EPS = 1e-9  # the room a fit check allows (free + EPS >= demand)
OVER = 1e-7  # the tolerance of the over-commit check


def diff_n(a: list[float], b: list[float]) -> list[float]:
    """``a - b`` (e.g. free = capacity - used)."""
    return list(map(sub, a, b))


def plus_n(a: list[float], b: list[float]) -> list[float]:
    """``a + b`` (e.g. used + demand)."""
    return list(map(add, a, b))


def minus_clip_n(a: list[float], b: list[float]) -> list[float]:
    """``max(a - b, 0.0)`` per resource (used - demand, never below zero)."""
    return list(map(max, map(sub, a, b), repeat(0.0)))


def room_for_n(cap: list[float], used: list[float], d: list[float]) -> bool:
    """``cap - used + EPS >= d`` for every resource (a container fits)."""
    return all(map(ge, map(add, map(sub, cap, used), repeat(EPS)), d))


def room_min_n(cap: list[float], used: list[float], need: list[float]) -> bool:
    """``cap - used >= need`` for every resource (``need`` already lowered by EPS)."""
    return all(map(ge, map(sub, cap, used), need))


def over_n(used: list[float], cap: list[float]) -> bool:
    """Some resource's ``used > cap + OVER`` (an over-commit)."""
    return any(map(gt, used, map(add, cap, repeat(OVER))))


def has_free_n(free: list[float], need: list[float]) -> bool:
    """``free >= need`` for every resource and something free (``max(free) > EPS``)."""
    return all(map(ge, free, need)) and max(free) > EPS


def beat_n(cap: list[float], bg: list[float], used: list[float], need: list[float]) -> tuple[list, list, bool]:
    """What a node's heartbeat carries: ``(free, used row, has_free)`` — :func:`diff_n` of ``cap`` and ``used``,
    :func:`plus_n` of ``bg`` and ``used``, and :func:`has_free_n` of the free row (one call instead of three)."""
    free = diff_n(cap, used)
    return free, plus_n(bg, used), has_free_n(free, need)


def place_n(cap: list[float], used: list[float], d: list[float]) -> list[float] | None:
    """``used + d`` if ``d`` fits (:func:`room_for_n`), else None (a container starting on a node)."""
    return plus_n(used, d) if room_for_n(cap, used, d) else None


def diff_2(a: list[float], b: list[float]) -> list[float]:
    """:func:`diff_n` of two resources."""
    return [a[0] - b[0], a[1] - b[1]]


def plus_2(a: list[float], b: list[float]) -> list[float]:
    """:func:`plus_n` of two resources."""
    return [a[0] + b[0], a[1] + b[1]]


def minus_clip_2(a: list[float], b: list[float]) -> list[float]:
    """:func:`minus_clip_n` of two resources."""
    x = a[0] - b[0]
    y = a[1] - b[1]
    return [0.0 if x < 0.0 else x, 0.0 if y < 0.0 else y]


def room_for_2(cap: list[float], used: list[float], d: list[float]) -> bool:
    """:func:`room_for_n` of two resources."""
    return (cap[0] - used[0]) + EPS >= d[0] and (cap[1] - used[1]) + EPS >= d[1]


def room_min_2(cap: list[float], used: list[float], need: list[float]) -> bool:
    """:func:`room_min_n` of two resources."""
    return cap[0] - used[0] >= need[0] and cap[1] - used[1] >= need[1]


def over_2(used: list[float], cap: list[float]) -> bool:
    """:func:`over_n` of two resources."""
    return used[0] > cap[0] + OVER or used[1] > cap[1] + OVER


def has_free_2(free: list[float], need: list[float]) -> bool:
    """:func:`has_free_n` of two resources (``max`` keeps the first of equal or unordered values)."""
    a, b = free
    return a >= need[0] and b >= need[1] and (b if b > a else a) > EPS


def beat_2(cap: list[float], bg: list[float], used: list[float], need: list[float]) -> tuple[list, list, bool]:
    """:func:`beat_n` of two resources."""
    u0, u1 = used
    a = cap[0] - u0
    b = cap[1] - u1
    return [a, b], [bg[0] + u0, bg[1] + u1], a >= need[0] and b >= need[1] and (b if b > a else a) > EPS


def place_2(cap: list[float], used: list[float], d: list[float]) -> list[float] | None:
    """:func:`place_n` of two resources."""
    u0, u1 = used
    d0, d1 = d
    if (cap[0] - u0) + EPS >= d0 and (cap[1] - u1) + EPS >= d1:
        return [u0 + d0, u1 + d1]
    return None


@dataclass(frozen=True, slots=True)
class RowOps:
    """The row operations for one row length."""

    diff: Callable[[list[float], list[float]], list[float]]
    plus: Callable[[list[float], list[float]], list[float]]
    minus_clip: Callable[[list[float], list[float]], list[float]]
    room_for: Callable[[list[float], list[float], list[float]], bool]
    room_min: Callable[[list[float], list[float], list[float]], bool]
    over: Callable[[list[float], list[float]], bool]
    has_free: Callable[[list[float], list[float]], bool]
    beat: Callable[[list[float], list[float], list[float], list[float]], tuple[list, list, bool]]
    place: Callable[[list[float], list[float], list[float]], list[float] | None]


GENERAL = RowOps(diff_n, plus_n, minus_clip_n, room_for_n, room_min_n, over_n, has_free_n, beat_n, place_n)
TWO = RowOps(diff_2, plus_2, minus_clip_2, room_for_2, room_min_2, over_2, has_free_2, beat_2, place_2)


def row_ops(n_res: int) -> RowOps:
    """The operations for rows of ``n_res`` resources (the unrolled ones for two)."""
    return TWO if n_res == 2 else GENERAL
