"""Starvation remedy beyond the papers: long-waiting tasks are handed to an LM (``-o handoff_after=SECONDS``).

Why: a GM hands a worker freed by its own task to its own queue first; other GMs learn of the worker only at the
next update, by which time the owner has usually taken it again. A task that only a few workers can run (a rare
combination of placement constraints) can then wait for hours behind the owners of those workers, although it
is older than everything they run (issue 13, item 4).

The remedy: a task queued at its GM for ``handoff_after`` seconds is handed over to the LM whose cluster has the
most workers able to run it (the GM knows the workers' constraints). The LM keeps the handed-over tasks of every
GM in one queue ordered by the jobs' arrival; a worker freed in its cluster goes to the oldest handed-over task
it suits *before* its owner GM hears of it (the owner's completion notice says the worker was reused), and a
task handed over while a suitable worker is free there starts at once. The task stays its GM's: its completion
goes to that GM. Off by default; slot mode only (in the simulator and live), without fairness, FIFO queue, offer
matching.
"""

from __future__ import annotations

import bisect

import numpy as np

from megha.model.constraints import MASK_DTYPE

_INF = np.iinfo(np.int64).max


class AgedQueue:
    """Tasks waiting at an LM, by constraint mask, oldest first (by an integer age key, e.g. arrival in ns)."""

    def __init__(self) -> None:
        self._slot_of: dict[int, int] = {}
        self._masks = np.zeros(16, dtype=MASK_DTYPE)
        self._heads = np.full(16, _INF, dtype=np.int64)
        self._buckets: list[list] = []
        self._n = 0
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def push(self, key: int, seq: int, entry: object, mask: int) -> None:
        """Queue ``entry`` (constraint mask ``mask``) by age ``key``, ties by ``seq``."""
        s = self._slot_of.get(mask)
        if s is None:
            s = self._n
            if s == self._masks.size:
                self._masks = np.resize(self._masks, 2 * s)
                heads = np.full(2 * s, _INF, dtype=np.int64)
                heads[:s] = self._heads[:s]
                self._heads = heads
            self._masks[s] = mask
            self._buckets.append([])
            self._slot_of[mask] = s
            self._n += 1
        b = self._buckets[s]
        bisect.insort(b, (key, seq, entry), key=lambda x: (x[0], x[1]))
        self._heads[s] = b[0][0]
        self._len += 1

    def pop_fitting(self, worker_mask: int) -> object | None:
        """The oldest entry whose mask the worker satisfies, or None."""
        if not self._len:
            return None
        from megha.schedulers.megha._kernels import first_fit_oldest

        s = first_fit_oldest(self._masks, self._heads, self._n, ~int(worker_mask) & 0xFFFFFFFF)
        if s < 0:
            return None
        b = self._buckets[s]
        _, _, entry = b.pop(0)
        self._heads[s] = b[0][0] if b else _INF
        self._len -= 1
        return entry
