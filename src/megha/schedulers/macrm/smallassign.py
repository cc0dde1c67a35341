"""A job manager's placement of a small sampling round in plain Python (simulation speed).

A round usually places a few tasks on a few responders, where NumPy's per-call cost (and a compiled call's argument
conversions) outweighs the work. These are the same placements, step for step and with the same float operations in
the same order, on lists: :func:`assign_alike` is ``JobManager._assign_alike`` (one demand, one mask) and
:func:`assign_scan` is the reference of :func:`~megha.schedulers.macrm._kernels.k_assign_masked`
(``_kernels._assign_scan``: one demand, several masks). Rows are lists of floats (one per resource), masks and
worker masks ints below 2**32.
"""

from __future__ import annotations

import heapq
import math

_EPS = 1e-9


def _load_fits(f: list[float], c: list[float], s: list[float], d: list[float]) -> tuple[float, bool]:
    """A responder's load (its largest used fraction, the first of equal ones) and whether ``d`` fits its free ``f``
    (``_kernels._load_fits``)."""
    m = -math.inf
    fits = True
    first = True
    for cx, fx, sx, dx in zip(c, f, s, d, strict=True):
        v = (cx - fx) / sx
        if first or v > m:
            m = v
            first = False
        if not fx + _EPS >= dx:
            fits = False
    return m, fits


def assign_scan(
    free: list[list[float]],
    cap: list[list[float]],
    safe: list[list[float]],
    wm: list[int],
    d: list[float],
    masks: list[int],
    one: bool,
) -> list[int]:
    """Tasks of one demand ``d`` and masks ``masks``, in order: each to the least loaded responder (lowest position on
    ties) its mask allows and that has room; ``free`` rows change as tasks are placed. Returns each task's responder
    position, or -1 (``_kernels._assign_scan``)."""
    k = len(free)
    load = [0.0] * k
    gone = [False] * k
    for j in range(k):
        load[j], fits = _load_fits(free[j], cap[j], safe[j], d)
        gone[j] = not fits
    out = []
    for mt in masks:
        best = -1
        bv = math.inf
        for j in range(k):
            if mt and mt & ~wm[j]:
                continue
            if gone[j]:
                continue
            if load[j] < bv:
                bv = load[j]
                best = j
        out.append(best)
        if best < 0:
            continue
        fb = free[best] = [f - x for f, x in zip(free[best], d, strict=True)]
        load[best], fits = _load_fits(fb, cap[best], safe[best], d)
        if one or not fits:
            gone[best] = True
    return out


def assign_alike(
    todo: list[int],
    free: list[list[float]],
    cap: list[list[float]],
    safe: list[list[float]],
    wm: list[int],
    d: list[float],
    mask: int,
    one: bool,
    assigned: dict[int, int],
) -> None:
    """``JobManager._assign_alike`` on lists: tasks ``todo`` of one demand ``d`` and mask ``mask`` to the least loaded
    responders with room (then lowest position), each task's position in ``assigned``; ``free`` rows change."""
    cand = [
        j
        for j, f in enumerate(free)
        if all(a + _EPS >= b for a, b in zip(f, d, strict=True)) and not (mask and mask & ~wm[j])
    ]
    if not cand:
        return
    load = [max([(c - f) / s for c, f, s in zip(cap[j], free[j], safe[j], strict=True)]) for j in cand]
    if one:  # each responder takes one task: the least loaded responders, in order (a stable sort)
        order = sorted(range(len(cand)), key=load.__getitem__)
        for i, q in zip(todo, order, strict=False):
            assigned[i] = cand[q]
        return
    heap = list(zip(load, cand, strict=True))
    heapq.heapify(heap)
    for i in todo:
        if not heap:
            break
        _, j = heapq.heappop(heap)
        fj = free[j] = [a - b for a, b in zip(free[j], d, strict=True)]
        assigned[i] = j
        if all(a + _EPS >= b for a, b in zip(fj, d, strict=True)):  # still fits another: back with its new load
            heapq.heappush(heap, (max((c - f) / s for c, f, s in zip(cap[j], fj, safe[j], strict=True)), j))
