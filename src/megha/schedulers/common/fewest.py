"""A queue of waiting tasks served job by job, the job with the fewest waiting tasks first (``queue=fewest-tasks``).

The 2020 Megha simulator keeps its job queue sorted by fewest remaining tasks; the same discipline is offered by the
central schedulers here. :class:`FewestTasksQueue` holds the tasks of many jobs, each queued with its placement
constraint mask. A freed worker takes a task of the job with the fewest tasks still waiting in the queue, among
the jobs that have a task the worker can run; ties go to the job queued first. Which of that job's fitting tasks
it takes: the oldest of the fitting tasks that share a constraint mask, masks in the order they were first queued.

The queue is indexed by constraint mask as :class:`~megha.model.matching.WaitQueue` is: one *slot* per mask, and
per slot the key of its best job (``waiting tasks << 32 | job order``). A job's key only falls while it waits
(its tasks leave), so updating the heads of the slots it occupies is one vectorized minimum; finding the best
fitting slot for a worker is the same compiled first-fit over the slots' heads as the FIFO queue's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from megha.model.constraints import MASK_DTYPE

_INF = np.iinfo(np.int64).max
_JOB_BITS = 32


def _first_fit() -> Callable[..., int]:
    from megha.model._kernels import first_fit

    return first_fit


class _Job:
    __slots__ = ("count", "key_base", "slot_arr", "slots")

    def __init__(self, order: int) -> None:
        self.count = 0  # tasks of the job waiting in the queue
        self.key_base = order  # low bits of the key: the order in which jobs were first queued
        self.slots: dict[int, deque] = {}  # slot -> the job's entries with that mask (FIFO)
        self.slot_arr: np.ndarray | None = None  # cached array of the slot ids

    def key(self) -> int:
        return (self.count << _JOB_BITS) | self.key_base

    def slot_array(self) -> np.ndarray:
        a = self.slot_arr
        if a is None:
            a = self.slot_arr = np.fromiter(self.slots, dtype=np.int64, count=len(self.slots))
        return a


class FewestTasksQueue:
    """Waiting tasks of many jobs; a worker takes a task of the job with the fewest waiting tasks that it can run."""

    def __init__(self) -> None:
        self._slot_of: dict[int, int] = {}
        self._masks = np.zeros(16, dtype=MASK_DTYPE)
        self._heads = np.full(16, _INF, dtype=np.int64)  # key of the best job per slot
        self._head_job: list[int] = []  # that job
        self._slot_jobs: list[set[int]] = []  # jobs with entries in the slot
        self._jobs: dict[int, _Job] = {}
        self._order = 0
        self._n_slots = 0
        self._empty_slots = 0
        self._len = 0
        self._ff = None

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    # --- slots -------------------------------------------------------------------------------------------
    def _slot(self, mask: int) -> int:
        s = self._slot_of.get(mask)
        if s is None:
            s = self._n_slots
            if s == self._masks.size:
                self._masks = np.resize(self._masks, 2 * s)
                heads = np.full(2 * s, _INF, dtype=np.int64)
                heads[:s] = self._heads
                self._heads = heads
            self._masks[s] = mask
            self._heads[s] = _INF
            self._head_job.append(-1)
            self._slot_jobs.append(set())
            self._slot_of[mask] = s
            self._n_slots += 1
            self._empty_slots += 1
        return s

    def _recompute_head(self, s: int) -> None:
        jobs = self._slot_jobs[s]
        if not jobs:
            self._heads[s] = _INF
            self._head_job[s] = -1
            self._empty_slots += 1
            return
        best_key, best_job = _INF, -1
        for j in jobs:
            k = self._jobs[j].key()
            if k < best_key:
                best_key, best_job = k, j
        self._heads[s] = best_key
        self._head_job[s] = best_job

    def _lower_heads(self, j: int, job: _Job) -> None:
        """The job's key fell: it may now head the slots it occupies."""
        sl = job.slot_array()
        key = job.key()
        heads = self._heads
        if sl.size == 1:
            s = int(sl[0])
            if key < heads[s]:
                heads[s] = key
                self._head_job[s] = j
            return
        better = sl[heads[sl] > key]
        if better.size:
            heads[better] = key
            hj = self._head_job
            for s in better.tolist():
                hj[s] = j

    def _compact(self) -> None:
        """Drop slots no job occupies (renumbers the slots)."""
        keep = [s for s in range(self._n_slots) if self._slot_jobs[s]]
        new_of = {s: i for i, s in enumerate(keep)}
        n = len(keep)
        masks = self._masks[keep]
        heads = self._heads[keep]
        self._masks = np.zeros(max(16, 2 * n), dtype=MASK_DTYPE)
        self._heads = np.full(max(16, 2 * n), _INF, dtype=np.int64)
        self._masks[:n] = masks
        self._heads[:n] = heads
        self._head_job = [self._head_job[s] for s in keep]
        self._slot_jobs = [self._slot_jobs[s] for s in keep]
        self._slot_of = {int(m): i for i, m in enumerate(masks.tolist())}
        for job in self._jobs.values():
            job.slots = {new_of[s]: q for s, q in job.slots.items()}
            job.slot_arr = None
        self._n_slots = n
        self._empty_slots = 0

    # --- queueing ------------------------------------------------------------------------------------------
    def push_job(self, job_id: int, entries: list, masks: list[int]) -> None:
        """Queue tasks of job ``job_id`` (``entries[i]`` with constraint mask ``masks[i]``), after its queued ones."""
        if not entries:
            return
        job = self._jobs.get(job_id)
        if job is None:
            job = self._jobs[job_id] = _Job(self._order)
            self._order += 1
            if self._order >= 1 << _JOB_BITS:
                raise OverflowError("FewestTasksQueue: too many jobs")
        had = job.count
        for e, m in zip(entries, masks, strict=True):
            s = self._slot(int(m))
            q = job.slots.get(s)
            if q is None:
                q = job.slots[s] = deque()
                job.slot_arr = None
                jobs = self._slot_jobs[s]
                if not jobs:
                    self._empty_slots -= 1
                jobs.add(job_id)
            q.append(e)
        job.count += len(entries)
        self._len += len(entries)
        if had:  # its key rose: the slots it headed may have a better job now
            for s in job.slots:
                if self._head_job[s] == job_id:
                    self._recompute_head(s)
        self._lower_heads(job_id, job)

    def _take(self, s: int, j: int, i: int = 0) -> Any:
        job = self._jobs[j]
        q = job.slots[s]
        if i == 0:
            e = q.popleft()
        else:
            e = q[i]
            del q[i]
        job.count -= 1
        self._len -= 1
        if not q:
            del job.slots[s]
            job.slot_arr = None
            self._slot_jobs[s].discard(j)
            if not job.count:
                del self._jobs[j]
            if self._head_job[s] == j:
                self._recompute_head(s)
        if job.count:
            self._lower_heads(j, job)
        if self._empty_slots > 64 and self._empty_slots * 2 > self._n_slots:
            self._compact()
        return e

    def pop_first_fitting(self, worker_mask: int) -> Any | None:
        """Remove and return a task the worker can run, of the job with the fewest waiting tasks; or None."""
        if not self._len:
            return None
        ff = self._ff
        if ff is None:
            ff = self._ff = _first_fit()
        s = ff(self._masks, self._heads, self._n_slots, ~int(worker_mask) & 0xFFFFFFFF)
        if s < 0:
            return None
        return self._take(s, self._head_job[s])

    def pop_first_fitting_where(self, worker_mask: int, accept: Callable[[Any], bool], limit: int = 64) -> Any | None:
        """Like :meth:`pop_first_fitting`, but the entry must also pass ``accept(entry)`` (e.g. resources).

        Jobs in priority order; looks at up to ``limit`` entries per job and mask. None when none is accepted.
        """
        if not self._len:
            return None
        n = self._n_slots
        compat = np.flatnonzero(((self._masks[:n] & ~np.uint32(worker_mask)) == 0) & (self._heads[:n] != _INF))
        cands = []
        for s in compat.tolist():
            for j in self._slot_jobs[s]:
                cands.append((self._jobs[j].key(), s, j))
        cands.sort()
        for _, s, j in cands:
            for i, e in enumerate(self._jobs[j].slots[s]):
                if i >= limit:
                    break
                if accept(e):
                    return self._take(s, j, i)
        return None

    def entries(self) -> list:
        """All entries, best job first (for inspection and tests; not fast)."""
        out = []
        for _, job in sorted(self._jobs.items(), key=lambda kv: kv[1].key()):
            for s in sorted(job.slots):
                out.extend(job.slots[s])
        return out
