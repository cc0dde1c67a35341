"""A GM task queue ordered by job, fewest queued tasks first (``-o queue=fewest-tasks``).

A shortest-job-first variant of the Megha authors' 2020 simulator's job order (REFERENCE_SIMULATORS.md §3b; the
papers' text describes a FIFO queue). That simulator's own key is a job's *unfinished* tasks, re-sorted only when a
job joins the queue: ``queue=fewest-remaining`` (:mod:`.remaining`). Here a job's key is
``(number of its tasks in this queue, tie)``: the key drops as its tasks are placed and rises when a rejected
task comes back. Ties go to the earlier job; a job that gets a task back from an inconsistency goes before the
jobs with the same count (the reference moves it to the front, then re-sorts). Within a job, tasks keep their
order (a returned task goes first).

A freed worker goes to the first job in this order that has a task the worker satisfies (its first such task).
Without placement constraints that is always the head job; with constraints a count of queued tasks per
constraint mask answers "does anything fit at all?" before jobs are scanned.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterator

import numpy as np
from sortedcontainers import SortedList

from megha.schedulers.megha.fairness import E_DEMAND, E_JOB, E_MASK, MaskQueue, _lower, first_fit_kernel


class _Job:
    __slots__ = ("count", "q", "tie")

    def __init__(self, tie: int) -> None:
        self.count = 0
        self.tie = tie
        self.q = MaskQueue()


class FewestTasksQueue:
    """Drop-in for :class:`~megha.schedulers.megha.fairness.SingleQueue` with job-level fewest-tasks order."""

    def __init__(self) -> None:
        self._jobs: dict[int, _Job] = {}
        self._order = SortedList()  # (count, tie, job)
        self._tie_back = 0
        self._tie_front = 0
        self._all = MaskQueue()  # one placeholder per queued task, by mask: "does any queued task fit?"
        self.dmin: np.ndarray | None = None  # resource mode: lower bound of every queued demand

    def __len__(self) -> int:
        return len(self._all)

    def _new_job(self, job: int, front: bool) -> _Job:
        """A job joins the queue: before every job (``front``, a task back from an inconsistency) or after all."""
        if front:
            self._tie_front -= 1
            tie = self._tie_front
        else:
            self._tie_back += 1
            tie = self._tie_back
        j = self._jobs[job] = _Job(tie)
        return j

    def _enqueue(self, j: _Job, e: tuple, front: bool) -> None:
        """Task entry ``e`` into its job's queue and the all-tasks mirror (the job's place in the order aside)."""
        j.count += 1
        mask = e[E_MASK]
        if front:
            j.q.push_front(e, mask)
            self._all.push_front(None, mask)
        else:
            j.q.push_back(e, mask)
            self._all.push_back(None, mask)
        if e[E_DEMAND] is not None:
            self.dmin = _lower(self.dmin, e[E_DEMAND])

    def _unmirror(self, entries: list[tuple]) -> None:
        """Entries that left their job's queue leave the all-tasks mirror too."""
        a = self._all
        for e in entries:
            a._take(a._slot_of[int(e[E_MASK])])

    def _job(self, job: int, front: bool) -> _Job:
        j = self._jobs.get(job)
        if j is None:
            j = self._new_job(job, front)
        else:
            self._order.remove((j.count, j.tie, job))
            if front:
                self._tie_front -= 1
                j.tie = self._tie_front
        return j

    def _push(self, e: tuple, front: bool) -> None:
        job = e[E_JOB]
        j = self._job(job, front)
        self._enqueue(j, e, front)
        self._order.add((j.count, j.tie, job))

    def push_back(self, e: tuple) -> None:
        """Queue task entry ``e`` at the tail of its job's tasks (its job's key rises by one)."""
        self._push(e, False)

    def push_front(self, e: tuple) -> None:
        """Queue task entry ``e`` at the head of its job's tasks (a task that comes back; its job's key rises by
        one)."""
        self._push(e, True)

    def _taken(self, key: tuple, e: tuple) -> tuple:
        _, tie, job = key
        self._order.remove(key)
        j = self._jobs[job]
        j.count -= 1
        if j.count:
            self._order.add((j.count, tie, job))
        else:
            del self._jobs[job]
        a = self._all
        a._take(a._slot_of[int(e[E_MASK])])
        return e

    def pop_fitting(
        self,
        wmask: int,
        accept: Callable[[tuple], bool] | None = None,
        usage: np.ndarray | None = None,
        inv: int | None = None,
    ) -> tuple | None:
        """The first task, in job order, that a worker with mask ``wmask`` satisfies (and ``accept`` takes)."""
        a = self._all
        if not len(a):
            return None
        if inv is None:
            inv = ~int(wmask) & 0xFFFFFFFF
        if first_fit_kernel()(a._masks, a._heads, a._n_slots, inv) < 0:
            return None
        for key in self._order:
            q = self._jobs[key[2]].q
            e = q.pop_first_fitting_inv(inv) if accept is None else q.pop_first_fitting_where(wmask, accept)
            if e is not None:
                return self._taken(key, e)
        return None

    def pop_front(self) -> tuple | None:
        """The first task of the first job."""
        if not self._order:
            return None
        key = self._order[0]
        return self._taken(key, self._jobs[key[2]].q.pop_front())

    def drain(
        self,
        place: Callable[[tuple], bool],
        key: Callable[[tuple], Hashable] | None = None,
        fits: MaskFit | None = None,
    ) -> int:
        """Offer queued tasks, in service order, to ``place(entry) -> bool`` (see :func:`drain_queue`).

        ``fits`` (slot mode, see :data:`MaskFit`): the masks no free worker satisfies start as failed, and a job with
        none of the others queued is passed over without a look at its tasks. Without it a drain offers every queued
        mask once and looks at every job, so a long constrained queue costs about the product of updates, jobs and
        masks (the ``megha20`` profile's scan)."""
        a = self._all
        failed: set = set()
        hopeful: set | None = None
        if key is None and fits is not None:
            failed, hopeful = fits(a._masks, a._heads, a._n_slots)
        placed = 0
        for k in list(self._order):
            if key is None and len(failed) >= a._n_slots - a._empty_slots:
                break
            job = k[2]
            j = self._jobs[job]
            if hopeful is not None:
                hopeful = {m for m in hopeful if m not in failed}
                if not _has_any(j.q, hopeful):
                    continue
            took = drain_queue(j.q, place, failed, a, key, hopeful)
            if took:
                placed += took
                self._order.remove(k)
                j.count -= took
                if j.count:
                    self._order.add((j.count, j.tie, job))
                else:
                    del self._jobs[job]
        return placed

    def in_order(self) -> Iterator[tuple]:
        """Queued tasks in service order (job by job); for inspection and tests."""
        for key in list(self._order):
            yield from self._jobs[key[2]].q.entries()

    def masks(self) -> set[int]:
        """Distinct constraint masks of the queued tasks."""
        a = self._all
        return {int(m) for m, s in a._slot_of.items() if a._buckets[s]}

    def heads(self, k: int) -> list[tuple]:
        """The first ``k`` entries in queue order (jobs by fewest queued tasks), not removed."""
        out = []
        for e in self.in_order():
            if len(out) >= k:
                break
            out.append(e)
        return out

    def remove(self, pred: Callable[[tuple], bool]) -> list[tuple]:
        """Remove and return the entries for which ``pred`` holds; their jobs' keys drop accordingly."""
        out = []
        for job, j in list(self._jobs.items()):
            gone = j.q.remove_where(pred)
            if not gone:
                continue
            self._order.remove((j.count, j.tie, job))
            j.count -= len(gone)
            if j.count:
                self._order.add((j.count, j.tie, job))
            else:
                del self._jobs[job]
            self._unmirror(gone)
            out.extend(gone)
        return out


# A slot-mode drain's view of the queued constraint masks: ``fits(masks, heads, n) -> (hopeless, hopeful)``, the
# masks of the first ``n`` wait-queue slots with a task (``heads`` not INF) that no free worker of the caller's view
# satisfies, and the others. The caller promises that ``place`` refuses every task with a hopeless mask without any
# side effect: the drain then starts with them as failed and offers them nothing (same placements, same order).
MaskFit = Callable[[np.ndarray, np.ndarray, int], tuple[set, set]]


def _has_any(q: MaskQueue, masks: set) -> bool:
    """Whether ``q`` holds a task with one of ``masks``."""
    slot_of = q._slot_of
    buckets = q._buckets
    for m in masks:
        s = slot_of.get(m)
        if s is not None and buckets[s]:
            return True
    return False


def drain_queue(
    q: MaskQueue,
    place: Callable[[tuple], bool],
    failed: set,
    mirror: MaskQueue | None = None,
    key: Callable[[tuple], Hashable] | None = None,
    hopeful: set | None = None,
) -> int:
    """Offer the tasks of ``q`` in FIFO order to ``place(entry) -> bool``; placed tasks leave ``q``.

    In slot mode (``key`` None) placement depends on a task's mask alone, so once a mask finds nothing (it joins
    ``failed``), later tasks with it are skipped, and the scan stops when every mask queued in ``mirror``
    (default ``q``) has failed — without constraints, at the first failure. In resource mode ``key(entry)``
    (mask and demand) is what fails, and the whole queue is scanned. ``mirror`` holds a placeholder per task of
    a larger queue that ``q`` is part of; placed tasks leave it too. ``hopeful`` (slot mode): a set holding every
    mask of ``q``'s tasks that is not in ``failed`` (it may hold more), so only those buckets are looked at.
    Returns the number of tasks placed.
    """
    a = q if mirror is None else mirror
    by_mask = key is None
    if by_mask and hopeful is not None:
        slot_of = q._slot_of
        buckets = q._buckets
        heap = [(b[0][0], m, 0) for m in hopeful if (s := slot_of.get(m)) is not None and (b := buckets[s])]
    else:
        heap = [(b[0][0], int(q._masks[s]), 0) for s, b in enumerate(q._buckets[: q._n_slots]) if b]
        if by_mask:
            heap = [h for h in heap if h[1] not in failed]
    heapq.heapify(heap)
    took = 0
    while heap:
        _, m, i = heapq.heappop(heap)
        b = q._buckets[q._slot_of[m]]
        e = b[i][1]
        k = m if by_mask else key(e)
        if k not in failed and place(e):
            q._take(q._slot_of[m], i)
            if mirror is not None:
                mirror._take(mirror._slot_of[m])
            took += 1
            s = q._slot_of.get(m)  # taking may have compacted the slots
            if s is not None and len(q._buckets[s]) > i:
                heapq.heappush(heap, (q._buckets[s][i][0], m, i))
            continue
        failed.add(k)
        if by_mask:
            if len(failed) >= a._n_slots - a._empty_slots:
                break
        elif len(b) > i + 1:
            heapq.heappush(heap, (b[i + 1][0], m, i + 1))
    return took
