"""A GM job queue ordered by fewest *unfinished* tasks, re-sorted only when a job joins it
(``-o queue=fewest-remaining``).

The Megha authors' 2020 simulator (``megha_simulator``, its GM ``queue_job`` and ``unschedule_job``) keeps each GM's
job queue as a list and sorts it, stably, by ``num_tasks - len(completed_tasks)``: the tasks of the job that have
not *finished* (still queued, placed, or running), not the tasks still to place. And it sorts only when a job is
put into the queue (a job arrives, or a job whose tasks had all been placed gets one back from an inconsistency);
completions change the keys but not the order until the next such insertion. The consequence: a large job keeps
its large key while its tasks are placed, so every smaller job that arrives meanwhile is served before the rest of
its tasks — large jobs wait longer than under :class:`~megha.schedulers.megha.jobqueue.FewestTasksQueue`, whose key
is the number of tasks still queued and drops as they are placed.

Here a job's place in the order is ``(key, tie)``: ``key`` is its unfinished-task count as of the last insertion
(tasks placed from the queue stay counted until the GM learns they finished, :meth:`FewestRemainingQueue.finished`),
``tie`` its insertion order (the reference's stable sort keeps the earlier job first; a job put back by an
inconsistency goes first among equals, as the reference inserts it at the front before sorting). A rejected task of
a job still in the queue goes back to that job without moving it (the reference does not re-sort then).

Not (yet) the ``megha20`` profile's default, which keeps ``queue=fewest-tasks``: alone, this order did not bring the
profile closer to the authors' 4 GMs × 25 LMs result on GOOG_subtrace (10,000 unconstrained workers; authors p50
2.03 s, p90 42.7 s, p99 1,473 s, mean 67.7 s). Seeds 0-3 with ``-o queue=fewest-remaining``: p50 2.06 / 1.99 /
1.93 / 2.09 s, p90 131 / 39 / 76 / 248 s, p99 1,365 / 1,198 / 1,215 / 1,769 s, mean 98 / 77 / 81 / 117 s; with
the profile's default: p90 46 / 37 / 63 / 35 s, p99 1,091 / 1,339 / 1,456 / 1,204 s, mean 67 / 71 / 84 / 64 s.
The p99 is not systematically heavier and the p90 and the mean move away. Another difference of that simulator
interacts with the queue: its GM's state pull replaces its view with each LM's whole state, which also frees the
workers of its own bookings the LM has not yet processed, so a GM with many tasks ending at the same instant books
free workers several times over and wins more of them; that is not reproduced. With 1 GM × 1 LM (deterministic):
p50 0.034 s, p90 7.92 s, p99 506 s, mean 32.7 s (default: 8.08 s, 513 s, 32.8 s; authors 7.99 s, 417 s, 29.1 s).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable

from megha.schedulers.megha.fairness import E_JOB, E_MASK, E_TASK
from megha.schedulers.megha.jobqueue import FewestTasksQueue, MaskFit, _has_any, _Job, drain_queue


class FewestRemainingQueue(FewestTasksQueue):
    """:class:`FewestTasksQueue` keyed by unfinished tasks per job, re-sorted only when a job joins the queue."""

    def __init__(self) -> None:
        super().__init__()
        self._key: dict[int, int] = {}  # queued job -> its key in the order (unfinished tasks at the last sort)
        self._unfinished: dict[int, int] = {}  # job -> its tasks not known to have finished (queued or placed)
        self._placed: dict[int, int] = {}  # task placed from this queue, not known finished -> its job
        self._stale: set[int] = set()  # queued jobs whose unfinished count changed since the last sort

    def _sort(self) -> None:
        """Bring every queued job's key up to date (the reference re-sorts its whole list on insertion)."""
        order, key, unf = self._order, self._key, self._unfinished
        for job in self._stale:
            j = self._jobs.get(job)
            if j is None:
                continue
            order.remove((key[job], j.tie, job))
            key[job] = unf.get(job, 0)
            order.add((key[job], j.tie, job))
        self._stale.clear()

    def _push(self, e: tuple, front: bool) -> None:
        job = e[E_JOB]
        j = self._jobs.get(job)
        # a rejected task goes from placed back to queued (still unfinished); any other task is new to the GM
        if not front or self._placed.pop(e[E_TASK], None) is None:
            self._unfinished[job] = self._unfinished.get(job, 0) + 1
        if j is None or not front:
            # a job joins the queue (or its arrival adds a task): the reference sorts the whole queue now
            self._sort()
            if j is None:
                j = self._new_job(job, front)
            else:
                self._order.remove((self._key[job], j.tie, job))
            self._key[job] = self._unfinished[job]
            self._order.add((self._key[job], j.tie, job))
        self._enqueue(j, e, front)

    def _left(self, job: int, j: _Job, n: int) -> None:
        """``n`` tasks of ``job`` left the queue: its order key stays; the job leaves when none is queued."""
        j.count -= n
        if not j.count:
            self._order.remove((self._key.pop(job), j.tie, job))
            del self._jobs[job]
            self._stale.discard(job)

    def _taken(self, key: tuple, e: tuple) -> tuple:
        job = key[2]
        self._placed[e[E_TASK]] = job
        self._left(job, self._jobs[job], 1)
        a = self._all
        a._take(a._slot_of[int(e[E_MASK])])
        return e

    def drain(
        self,
        place: Callable[[tuple], bool],
        key: Callable[[tuple], Hashable] | None = None,
        fits: MaskFit | None = None,
    ) -> int:
        """Offer queued tasks, in service order, to ``place(entry) -> bool`` (see :func:`drain_queue`; ``fits``: as
        :meth:`FewestTasksQueue.drain`)."""
        a = self._all
        failed: set = set()
        hopeful: set | None = None
        if key is None and fits is not None:
            failed, hopeful = fits(a._masks, a._heads, a._n_slots)
        placed_total = 0
        placed = self._placed

        def place_rec(e: tuple) -> bool:
            if place(e):
                placed[e[E_TASK]] = e[E_JOB]
                return True
            return False

        order = self._order
        i = 0  # keys do not change while draining: a job that empties leaves its place to the next one
        while i < len(order):
            if key is None and len(failed) >= a._n_slots - a._empty_slots:
                break
            job = order[i][2]
            j = self._jobs[job]
            if hopeful is not None:
                hopeful = {m for m in hopeful if m not in failed}
                if not _has_any(j.q, hopeful):
                    i += 1
                    continue
            took = drain_queue(j.q, place_rec, failed, a, key, hopeful)
            if took:
                placed_total += took
                self._left(job, j, took)
                if job not in self._jobs:
                    continue
            i += 1
        return placed_total

    def finished(self, tasks: Iterable[int]) -> None:
        """The GM learned that these tasks finished: their jobs' keys drop at the next sort."""
        placed, unf, jobs, stale = self._placed, self._unfinished, self._jobs, self._stale
        for t in tasks:
            job = placed.pop(int(t), None)
            if job is None:
                continue
            n = unf[job] - 1
            if n:
                unf[job] = n
            else:
                del unf[job]
            if job in jobs:
                stale.add(job)

    def remove(self, pred: Callable[[tuple], bool]) -> list[tuple]:
        """Remove and return the entries for which ``pred`` holds; they no longer count as their jobs' unfinished
        tasks."""
        out = []
        for job, j in list(self._jobs.items()):
            gone = j.q.remove_where(pred)
            if not gone:
                continue
            n = self._unfinished[job] - len(gone)
            if n > 0:
                self._unfinished[job] = n
            else:
                del self._unfinished[job]
            self._left(job, j, len(gone))
            self._unmirror(gone)
            out.extend(gone)
        return out
