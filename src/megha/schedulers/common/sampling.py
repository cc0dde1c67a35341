"""Probe sampling shared by Sparrow and MACRM: batch sampling without replacement, restricted to eligible workers.

For a group of ``k`` tasks sharing a constraint mask, Sparrow probes ``ceil(d·k)`` distinct workers that satisfy
the mask (all ``k·d`` of an unconstrained job = batch sampling; a single constrained task = per-task sampling).
When fewer workers are eligible, every eligible worker is probed, plus repeat probes so that a group always has
at least one probe per task (a probe yields at most one task).

Sampling is by rejection from uniform draws over all workers (a uniform ordered sample without replacement of the
eligible set), vectorized over all groups of a job; rare masks fall back to an exact draw from the eligible list.
A job's draws are made in one compiled call (:mod:`megha.schedulers.common._sampling_kernels`) that draws the same
numbers from the same generator as the NumPy form (:meth:`ProbeSampler.sample_reference`), so results are the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from megha.model.constraints import MASK_DTYPE

_sample_groups = None  # the compiled sampler, imported on first use so the CLI starts fast
_bit_source = None


def _load_kernel() -> Callable[..., Any]:
    global _sample_groups, _bit_source
    from megha.schedulers.common._sampling_kernels import bit_source, sample_groups

    _sample_groups = sample_groups
    _bit_source = bit_source
    return sample_groups


class ProbeSampler:
    """Samples probe targets among the workers that satisfy a constraint mask."""

    def __init__(self, worker_masks: np.ndarray, exact_below: float = 0.05, capacity: np.ndarray | None = None) -> None:
        self.masks = np.asarray(worker_masks, dtype=MASK_DTYPE)
        # machines of different sizes: a probe must go to a worker big enough for its group's demand (otherwise it
        # would wait there for ever); with identical machines every feasible task fits every eligible worker
        cap = None if capacity is None else np.asarray(capacity, dtype=np.float64)
        self.capacity = cap if cap is not None and cap.shape[0] and (cap != cap[0]).any() else None
        self.n = int(self.masks.size)
        self._uw, self._cw = np.unique(self.masks, return_counts=True)
        self._count: dict[int, int] = {0: self.n}
        self._eligible: dict[int, np.ndarray] = {}
        self._eligible_size = 0
        self.exact_below = exact_below
        # the compiled sampler's eligible lists: mask -> start in _flat (the list of a mask drawn exactly)
        self._flat = np.zeros(1 << 12, dtype=np.int64)
        self._flat_len = 0
        self._flat_at: dict[int, int] = {}
        self._seen = np.zeros(self.n, dtype=np.int64)  # the compiled sampler's scratch
        self._stamp = np.zeros(1, dtype=np.int64)
        self._source: tuple = (None, 0, 0)  # (generator, its next_uint32 address, its state address)

    def eligible_count(self, mask: int) -> int:
        """Workers that have every constraint in ``mask`` (cached)."""
        c = self._count.get(mask)
        if c is None:
            c = int(self._cw[(MASK_DTYPE(mask) & ~self._uw) == 0].sum())
            if len(self._count) > 1 << 17:
                self._count.clear()
            self._count[mask] = c
        return c

    def eligible(self, mask: int) -> np.ndarray:
        """Ids of the workers that satisfy ``mask`` (cached per mask, read-only)."""
        sel = self._eligible.get(mask)
        if sel is None:
            if mask == 0:
                sel = np.arange(self.n, dtype=np.int64)
            else:
                sel = np.flatnonzero((MASK_DTYPE(mask) & ~self.masks) == 0)
            sel.flags.writeable = False
            self._eligible_size += sel.size
            if self._eligible_size > 1 << 22:  # at most ~32 MB of ids
                self._eligible.clear()
                self._eligible_size = sel.size
            self._eligible[mask] = sel
        return sel

    def _eligible_fit(self, mask: int, demand: np.ndarray) -> np.ndarray:
        """Workers that satisfy ``mask`` and are big enough for ``demand`` (heterogeneous machines only)."""
        sel = self.eligible(mask)
        return sel[(self.capacity[sel] >= np.asarray(demand) - 1e-9).all(axis=1)]

    def sample(
        self,
        rng: np.random.Generator,
        gmasks: list[int],
        want: list[int],
        need: list[int],
        gdem: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Probe targets for each group: ``want[g]`` distinct eligible workers, at least ``need[g]`` probes.

        ``gdem`` (one demand row per group) restricts the eligible workers to those big enough when machines differ
        in size. Returns ``(workers, groups)``, one entry per probe.
        """
        if self.capacity is not None and gdem is not None:
            return self._sample_fit(rng, gmasks, want, need, gdem)
        if type(rng) is not np.random.Generator or self.n >= 1 << 31:
            return self.sample_reference(rng, gmasks, want, need)
        kernel = _sample_groups or _load_kernel()
        src = self._source
        if src[0] is not rng:
            src = self._source = (rng, *_bit_source(rng))
        if self._flat_len > 1 << 22:  # at most ~32 MB of ids
            self._flat_at.clear()
            self._flat_len = 0
        count = self._count
        flat_at = self._flat_at
        limit = self.exact_below * self.n
        n_groups = len(gmasks)
        counts = [0] * n_groups
        starts = [-1] * n_groups
        for g, (m, w, k) in enumerate(zip(gmasks, want, need, strict=True)):
            e = count.get(m)
            if e is None:
                e = self.eligible_count(m)
            counts[g] = e
            if e == 0:
                if k > 0:  # nothing to probe again: the NumPy form's error
                    return self.sample_reference(rng, gmasks, want, need)
                continue
            s = min(w, e)
            if e < limit or 2 * s > e or k > s:  # drawn exactly or probed again: its eligible list
                st = flat_at.get(m)
                starts[g] = self._add_flat(m) if st is None else st
        return kernel(
            src[1],
            src[2],
            self.masks,
            np.array(gmasks, dtype=MASK_DTYPE),
            np.array((want, need, counts, starts), dtype=np.int64),
            self._flat,
            limit,
            self._seen,
            self._stamp,
        )

    def _add_flat(self, mask: int) -> int:
        """Append the eligible list of ``mask`` to the compiled sampler's lists; returns where it starts."""
        sel = self.eligible(mask)
        at = self._flat_len
        end = at + sel.size
        if end > self._flat.size:
            grown = np.zeros(max(2 * self._flat.size, end), dtype=np.int64)
            grown[:at] = self._flat[:at]
            self._flat = grown
        self._flat[at:end] = sel
        self._flat_len = end
        self._flat_at[mask] = at
        return at

    def sample_reference(
        self, rng: np.random.Generator, gmasks: list[int], want: list[int], need: list[int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`sample` in NumPy calls (identical machines): the definition the compiled form reproduces draw for
        draw (tests compare them)."""
        n = self.n
        out_w: list[np.ndarray] = []
        out_g: list[np.ndarray] = []
        rej_g: list[int] = []
        rej_s: list[int] = []
        rej_r: list[int] = []
        distinct = [0] * len(gmasks)
        for g, (m, w) in enumerate(zip(gmasks, want, strict=True)):
            e = self.eligible_count(m)
            s = min(w, e)
            distinct[g] = s
            if s <= 0:
                continue
            if e < self.exact_below * n or 2 * s > e:
                sel = self.eligible(m)
                pick = sel if s == e else rng.choice(sel, s, replace=False)
                out_w.append(np.asarray(pick, dtype=np.int64))
                out_g.append(np.full(s, g, dtype=np.int32))
            else:
                rej_g.append(g)
                rej_s.append(s)
                rej_r.append(math.ceil(s * n / e * 1.3) + 8)
        if rej_g:
            self._rejection(rng, gmasks, rej_g, rej_s, rej_r, out_w, out_g)
        for g, (m, k) in enumerate(zip(gmasks, need, strict=True)):
            extra = k - distinct[g]
            if extra > 0:  # fewer eligible workers than tasks: probe some of them again
                sel = self.eligible(m)
                out_w.append(sel[rng.integers(0, sel.size, extra)].astype(np.int64))
                out_g.append(np.full(extra, g, dtype=np.int32))
        if not out_w:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
        return np.concatenate(out_w), np.concatenate(out_g)

    def _sample_fit(
        self,
        rng: np.random.Generator,
        gmasks: list[int],
        want: list[int],
        need: list[int],
        gdem: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        out_w: list[np.ndarray] = []
        out_g: list[np.ndarray] = []
        for g, m in enumerate(gmasks):
            sel = self._eligible_fit(m, gdem[g])
            if sel.size == 0:
                continue
            s = min(want[g], int(sel.size))
            pick = sel if s == sel.size else rng.choice(sel, s, replace=False)
            out_w.append(np.asarray(pick, dtype=np.int64))
            out_g.append(np.full(s, g, dtype=np.int32))
            extra = need[g] - s
            if extra > 0:
                out_w.append(sel[rng.integers(0, sel.size, extra)].astype(np.int64))
                out_g.append(np.full(extra, g, dtype=np.int32))
        if not out_w:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
        return np.concatenate(out_w), np.concatenate(out_g)

    def _rejection(
        self,
        rng: np.random.Generator,
        gmasks: list[int],
        rej_g: list[int],
        rej_s: list[int],
        rej_r: list[int],
        out_w: list[np.ndarray],
        out_g: list[np.ndarray],
    ) -> None:
        n = self.n
        k = len(rej_g)
        r = np.array(rej_r, dtype=np.int64)
        s = np.array(rej_s, dtype=np.int64)
        owner = np.repeat(np.arange(k, dtype=np.int64), r)
        cands = rng.integers(0, n, int(r.sum()))
        gm = np.array([gmasks[g] for g in rej_g], dtype=MASK_DTYPE)
        fit = (gm[owner] & ~self.masks[cands]) == 0
        cands = cands[fit]
        owner = owner[fit]
        _, first = np.unique(owner * n + cands, return_index=True)
        first.sort()
        cands = cands[first]
        owner = owner[first]
        starts = np.searchsorted(owner, np.arange(k))
        rank = np.arange(owner.size) - starts[owner]
        keep = rank < s[owner]
        cands = cands[keep]
        owner = owner[keep]
        got = np.bincount(owner, minlength=k)
        rej = np.asarray(rej_g, dtype=np.int32)
        out_w.append(cands)
        out_g.append(rej[owner])
        for i in np.flatnonzero(got < s).tolist():  # unlucky draws: complete exactly
            g = rej_g[i]
            have = cands[owner == i]
            sel = np.setdiff1d(self.eligible(gmasks[g]), have, assume_unique=True)
            more = rng.choice(sel, int(s[i] - got[i]), replace=False)
            out_w.append(np.asarray(more, dtype=np.int64))
            out_g.append(np.full(more.size, g, dtype=np.int32))
