"""Probe sampling shared by Sparrow and MACRM: batch sampling without replacement, restricted to eligible workers.

For a group of ``k`` tasks sharing a constraint mask, Sparrow probes ``ceil(d·k)`` distinct workers that satisfy
the mask (all ``k·d`` of an unconstrained job = batch sampling; a single constrained task = per-task sampling).
When fewer workers are eligible, every eligible worker is probed, plus repeat probes so that a group always has
at least one probe per task (a probe yields at most one task).

Sampling is by rejection from uniform draws over all workers (a uniform ordered sample without replacement of the
eligible set), vectorized over all groups of a job; rare masks fall back to an exact draw from the eligible list.
"""

from __future__ import annotations

import math

import numpy as np

from megha.model.constraints import MASK_DTYPE


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

    def _sample_fit(self, rng, gmasks, want, need, gdem) -> tuple[np.ndarray, np.ndarray]:
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

    def _rejection(self, rng, gmasks, rej_g, rej_s, rej_r, out_w, out_g) -> None:
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
