"""Per-task records, kept as numpy columns (one slot per task of the workload, no per-task objects).

Components report what happens to tasks — started on a worker, finished, completion learned by the
scheduler, preempted — and where allocation time goes (communication, processing, worker queuing). The
engine attributes message latency automatically for messages that carry ``alloc_tasks``.

Reports are cheap: each call extends flat per-kind lists of task ids (ids may be a list, a numpy array or an
int) and of each id's value (one task: two list appends, the ``*_one`` reports); the columns are materialized in
one vectorized pass when they are read. Only the counters a run needs while it runs (running tasks, outstanding
completions) are kept live. Summaries and tables are derived at the end (:mod:`megha.metrics.summary`).
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple, Protocol, TypeAlias, runtime_checkable

import numpy as np

TaskIds: TypeAlias = int | list[int] | tuple[int, ...] | np.ndarray
"""Task ids a component reports: one id, a list or tuple of ids, or an integer array."""
WorkerIds: TypeAlias = int | list[int] | np.ndarray
"""The workers of reported tasks: one for all, or one per task."""


class _Log:
    """Flat task ids of one kind of report, with the reported value of each id (and its worker, for starts).

    Values are kept per id (the same float object repeated: a list slot, no new object), so a report of one task
    is two appends and the columns are one array conversion each.
    """

    __slots__ = ("ids", "vals", "workers")

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.vals: list[float] = []
        self.workers: list[int] = []

    def add(self, ids: TaskIds, val: float | np.ndarray, workers: WorkerIds | None = None) -> int:
        if isinstance(ids, list):
            pass
        elif isinstance(ids, np.ndarray):
            ids = ids.ravel().tolist()
        elif isinstance(ids, tuple):
            ids = list(ids)
        else:
            ids = [int(ids)]
        n = len(ids)
        self.ids.extend(ids)
        if isinstance(val, np.ndarray) and val.ndim:
            self.vals.extend(np.broadcast_to(np.asarray(val, dtype=np.float64), (n,)).tolist())
        else:
            self.vals.extend([val] * n)
        if workers is not None:
            if isinstance(workers, list):
                self.workers.extend(workers)
            elif isinstance(workers, np.ndarray):
                self.workers.extend(workers.ravel().tolist())
            else:
                self.workers.extend([int(workers)] * n)
        return n

    def take(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, one value per id, workers) — and empties the log."""
        ids = np.array(self.ids, dtype=np.int64)
        vals = np.array(self.vals, dtype=np.float64)
        workers = np.array(self.workers, dtype=np.int64)
        self.ids.clear()  # in place: the recorder keeps references to these lists
        self.vals.clear()
        self.workers.clear()
        return ids, vals, workers

    def __bool__(self) -> bool:
        return bool(self.ids)


_KINDS = ("decided", "started", "finished", "known", "comm", "proc", "wq")
# the logs of times and workers are materialized into the columns whenever the count of outstanding completions is
# a multiple of 2**18 (a bitmask of the count): a long run then holds at most a few hundred thousand tasks' time
# reports as Python lists (a 2M-task run otherwise holds every report until the end). The same columns: flushing in
# between keeps "later reports win". The delay logs (sums) wait for the end: a flush would regroup their additions.
_FLUSH_EVERY = (1 << 18) - 1


FLUSH_EVERY = _FLUSH_EVERY


class InlineLogs(NamedTuple):
    """The per-kind lists :class:`TaskRecorder`'s one-task reports append to (see :meth:`TaskRecorder.inline_logs`)."""

    decided_ids: list
    decided_times: list
    started_ids: list
    started_times: list
    started_workers: list
    finished_ids: list
    finished_times: list
    known_ids: list
    known_times: list
    comm_ids: list
    comm_delays: list


@runtime_checkable
class Recorder(Protocol):
    """What scheduler components report task events to: :class:`TaskRecorder` in the simulator (columns of
    per-task times), :class:`megha.live.runtime.ForwardingRecorder` in the live runtime (events sent to clients).
    A component calls only these; ``ids`` are task ids (a list or an array), ``t`` the component's ``now``."""

    counters: Counter

    def decided(self, ids: TaskIds, t: float) -> None:
        """The scheduler decided where the tasks go (every attempt; the last one counts)."""

    def started(self, ids: TaskIds, t: float, workers: WorkerIds) -> None:
        """Tasks started on ``workers``."""

    def finished(self, ids: TaskIds, t: float) -> None:
        """Tasks finished on their workers."""

    def completion_known(self, ids: TaskIds, t: float) -> None:
        """The scheduler learned that the tasks finished."""

    def preempted(self, ids: TaskIds, t: float) -> None:
        """Tasks were killed on their workers (preemption); they run again later."""

    def lost(self, ids: TaskIds, t: float, note: str = "worker failed") -> None:
        """Task runs were cut short by a fault (their worker died); they run again later."""

    def add_comm(self, ids: TaskIds, d: float) -> None:
        """Communication delay on the tasks' allocation path (modelled in the simulator only)."""

    def add_proc(self, ids: TaskIds, d: float) -> None:
        """Processing delay on the tasks' allocation path (modelled in the simulator only)."""

    def add_worker_queue(self, ids: TaskIds, d: float | np.ndarray) -> None:
        """Worker queuing delay (modelled in the simulator only)."""

    def count(self, name: str, n: int = 1) -> None:
        """Add ``n`` to the counter ``name``."""


class TaskRecorder:
    """Columns of per-task timestamps and counters for one run."""

    def __init__(self, task_arrival: np.ndarray, task_demand: np.ndarray | None = None) -> None:
        n = task_arrival.size
        self.n = n
        self.arrival = np.asarray(task_arrival, dtype=np.float64)
        self.demand = task_demand  # [T, R] or None (one slot per task)
        nan = np.full(n, np.nan)
        self._scheduled = nan.copy()  # time of the placement decision that led to the (last) launch
        self._start = nan.copy()  # time the task started on a worker (last launch)
        self._end = nan.copy()  # time the task finished on its worker
        self._known = nan.copy()  # time the scheduler learned the task finished (job completion uses this)
        self._worker = np.full(n, -1, dtype=np.int64)
        self._comm = np.zeros(n)  # communication delay on the allocation path
        self._proc = np.zeros(n)  # processing delay on the allocation path
        self._wq = np.zeros(n)  # worker queuing delay
        self._launches = np.zeros(n, dtype=np.int32)
        self._finishes = np.zeros(n, dtype=np.int32)
        self.preemptions = np.zeros(n, dtype=np.int32)
        self.fault_kills = np.zeros(n, dtype=np.int32)  # runs of each task cut short by a fault (worker lost)
        self.work_lost = 0.0  # task-seconds of those runs, thrown away
        self._logs = {k: _Log() for k in _KINDS}
        self._decided = self._logs["decided"]
        self._started = self._logs["started"]
        self._finished = self._logs["finished"]
        self._knownlog = self._logs["known"]
        self._commlog = self._logs["comm"]
        # the lists the one-task reports append to (bound once: an append is then one attribute load)
        self._decided_ids, self._decided_vals = self._decided.ids, self._decided.vals
        self._finished_ids, self._finished_vals = self._finished.ids, self._finished.vals
        self._known_ids, self._known_vals = self._knownlog.ids, self._knownlog.vals
        self._comm_ids, self._comm_vals = self._commlog.ids, self._commlog.vals
        self.counters: Counter = Counter()
        # runs cut short by preemption: (tasks, their starts, their workers, time they were stopped)
        self.preempted_runs: list[tuple[np.ndarray, np.ndarray, np.ndarray, float]] = []
        self.running = 0
        self.outstanding = 0  # feasible tasks whose completion the scheduler has not learned yet
        self.last_progress = 0.0
        self.on_all_done = None  # callback set by the runner

    def inline_logs(self) -> InlineLogs:
        """The lists behind the one-task reports, for a simulator component that inlines them on its hot path.

        ``decided_one(t, now)`` is ``decided_ids.append(t); decided_times.append(now)``; ``add_comm_one(t, d)``,
        the ``comm`` pair; ``finished_one`` and ``launched_one`` also update :attr:`running` and
        :attr:`last_progress`, ``completion_known_one`` :attr:`outstanding` (with :meth:`known_done` when it hits a
        multiple of the flush period or zero): a component that inlines them does the same.
        """
        return InlineLogs(
            self._decided_ids,
            self._decided_vals,
            self._started.ids,
            self._started.vals,
            self._started.workers,
            self._finished_ids,
            self._finished_vals,
            self._known_ids,
            self._known_vals,
            self._comm_ids,
            self._comm_vals,
        )

    def known_done(self) -> None:
        """What :meth:`completion_known_one` does after counting down :attr:`outstanding` (for components that
        inline it: call it when ``outstanding & FLUSH_EVERY == 0`` or ``outstanding <= 0``)."""
        if not self.outstanding & _FLUSH_EVERY:
            self._flush_times()
        if self.outstanding <= 0 and self.on_all_done is not None:
            self.on_all_done()

    # --- materialization ------------------------------------------------------------------------------
    def _flush(self) -> None:
        logs = self._logs
        if not any(logs.values()):
            return
        self._flush_times()
        for kind, col in (("comm", self._comm), ("proc", self._proc), ("wq", self._wq)):
            if logs[kind]:
                ids, vals, _ = logs[kind].take()
                col += np.bincount(ids, weights=vals, minlength=self.n)

    def _flush_times(self) -> None:
        """Materialize the logs of times and workers (later reports win; counts are exact): what a run may flush at
        any moment without changing a column. The sums of the delay logs are left to :meth:`_flush` (their float
        additions are grouped by flush)."""
        logs = self._logs
        for kind, col in (("decided", self._scheduled), ("finished", self._end), ("known", self._known)):
            if logs[kind]:
                ids, vals, _ = logs[kind].take()
                col[ids] = vals  # later reports win
                if kind == "finished":
                    self._finishes += np.bincount(ids, minlength=self.n).astype(np.int32)
        if logs["started"]:
            ids, vals, workers = logs["started"].take()
            self._start[ids] = vals
            self._worker[ids] = workers
            self._launches += np.bincount(ids, minlength=self.n).astype(np.int32)

    def absorb(
        self,
        decided: tuple[np.ndarray, np.ndarray],
        comm: tuple[np.ndarray, np.ndarray],
        started: tuple[np.ndarray, np.ndarray, np.ndarray],
        finished: tuple[np.ndarray, np.ndarray],
        known: tuple[np.ndarray, np.ndarray],
    ) -> None:
        """Whole logs of a run's reports as arrays (ids and values in report order; ``started`` with workers), for a
        compiled simulation that made them all: the columns come out as if each report had been made by the
        one-task calls, without a Python object per report. Only at the start of a run (nothing reported yet);
        updates :attr:`running`, :attr:`outstanding` and :attr:`last_progress` (the later of the last start and
        the last end)."""
        if any(self._logs.values()) or self._launches.any() or self._finishes.any():
            raise RuntimeError("TaskRecorder.absorb: reports were made already")
        n = self.n
        for (ids, vals), col in ((decided, self._scheduled), (finished, self._end), (known, self._known)):
            col[ids] = vals  # later reports win
        self._finishes += np.bincount(finished[0], minlength=n).astype(np.int32)
        ids, vals, workers = started
        self._start[ids] = vals
        self._worker[ids] = workers
        self._launches += np.bincount(ids, minlength=n).astype(np.int32)
        self._comm += np.bincount(comm[0], weights=comm[1], minlength=n)  # one sum over the log, as _flush
        self.running += started[0].size - finished[0].size
        self.outstanding -= known[0].size
        last = [float(x[1][-1]) for x in (started, finished) if x[0].size]
        if last:
            self.last_progress = max(last)

    def _col(self, name: str) -> np.ndarray:
        self._flush()
        return getattr(self, name)

    scheduled = property(lambda self: self._col("_scheduled"))
    start = property(lambda self: self._col("_start"))
    end = property(lambda self: self._col("_end"))
    known = property(lambda self: self._col("_known"))
    worker = property(lambda self: self._col("_worker"))
    comm = property(lambda self: self._col("_comm"))
    proc = property(lambda self: self._col("_proc"))
    wq = property(lambda self: self._col("_wq"))
    launches = property(lambda self: self._col("_launches"))
    finishes = property(lambda self: self._col("_finishes"))

    # --- lifecycle -------------------------------------------------------------------------------
    def expect(self, n_tasks: int) -> None:
        """Declare how many task completions the run waits for."""
        self.outstanding = n_tasks

    # The reports below take a fast path for the usual ids, a list (what the schedulers' messages carry): the
    # same effect as _Log.add, without its call and type dispatch. The ``*_one`` forms report a single task (an
    # int): the hot path of a busy simulation, where almost every message carries one task.
    def decided(self, ids: TaskIds, t: float) -> None:
        """The scheduler decided where the tasks go (recorded on every attempt; the last one wins)."""
        log = self._decided
        if type(ids) is list:
            log.ids.extend(ids)
            log.vals.extend([t] * len(ids))
        else:
            log.add(ids, t)

    def decided_one(self, task: int, t: float) -> None:
        """:meth:`decided` for one task id."""
        self._decided_ids.append(task)
        self._decided_vals.append(t)

    def started(self, ids: TaskIds, t: float, workers: WorkerIds) -> None:
        """Tasks started executing on ``workers``."""
        log = self._started
        if type(ids) is list and type(workers) is list:
            n = len(ids)
            log.ids.extend(ids)
            log.vals.extend([t] * n)
            log.workers.extend(workers)
            self.running += n
        else:
            self.running += log.add(ids, t, workers)
        self.last_progress = t

    def started_one(self, task: int, t: float, worker: int) -> None:
        """:meth:`started` for one task id on one worker."""
        log = self._started
        log.ids.append(task)
        log.vals.append(t)
        log.workers.append(worker)
        self.running += 1
        self.last_progress = t

    def launched_one(self, task: int, d: float, t: float, worker: int) -> None:
        """:meth:`add_comm_one` (``d``) then :meth:`started_one` (at ``t`` on ``worker``): a simulator's in-process
        workers starting one task one launch delay ``d`` after its launch (one call on the hot path)."""
        self._comm_ids.append(task)
        self._comm_vals.append(d)
        log = self._started
        log.ids.append(task)
        log.vals.append(t)
        log.workers.append(worker)
        self.running += 1
        self.last_progress = t

    def decided_launched_one(self, task: int, now: float, d: float, t: float, worker: int) -> None:
        """:meth:`decided_one` (at ``now``) then :meth:`launched_one` (``d``, at ``t`` on ``worker``): a simulator's
        in-process workers starting one task the scheduler just placed (one call on the hot path)."""
        self._decided_ids.append(task)
        self._decided_vals.append(now)
        self._comm_ids.append(task)
        self._comm_vals.append(d)
        log = self._started
        log.ids.append(task)
        log.vals.append(t)
        log.workers.append(worker)
        self.running += 1
        self.last_progress = t

    def finished(self, ids: TaskIds, t: float) -> None:
        """Tasks finished executing on their worker."""
        log = self._finished
        if type(ids) is list:
            n = len(ids)
            log.ids.extend(ids)
            log.vals.extend([t] * n)
            self.running -= n
        else:
            self.running -= log.add(ids, t)
        self.last_progress = t

    def finished_one(self, task: int, t: float) -> None:
        """:meth:`finished` for one task id."""
        self._finished_ids.append(task)
        self._finished_vals.append(t)
        self.running -= 1
        self.last_progress = t

    def completion_known(self, ids: TaskIds, t: float) -> None:
        """The scheduler learned the tasks finished (job response time ends at the last such time)."""
        log = self._knownlog
        if type(ids) is list:
            n = len(ids)
            log.ids.extend(ids)
            log.vals.extend([t] * n)
            self.outstanding -= n
        else:
            self.outstanding -= log.add(ids, t)
        if self.outstanding <= 0 and self.on_all_done is not None:
            self.on_all_done()

    def completion_known_one(self, task: int, t: float) -> None:
        """:meth:`completion_known` for one task id."""
        self._known_ids.append(task)
        self._known_vals.append(t)
        self.outstanding -= 1
        if not self.outstanding & _FLUSH_EVERY:
            self._flush_times()  # bounds the logs' memory (see _FLUSH_EVERY)
        if self.outstanding <= 0 and self.on_all_done is not None:
            self.on_all_done()

    def finished_known_one(self, task: int, t: float, known: float) -> None:
        """:meth:`finished_one` (at ``t``) then :meth:`completion_known_one` (at ``known``) for one task (one call on
        the hot path of a simulator whose in-process workers report to the scheduler)."""
        self._finished_ids.append(task)
        self._finished_vals.append(t)
        self.running -= 1
        self.last_progress = t
        self._known_ids.append(task)
        self._known_vals.append(known)
        self.outstanding -= 1
        if not self.outstanding & _FLUSH_EVERY:
            self._flush_times()  # bounds the logs' memory (see _FLUSH_EVERY)
        if self.outstanding <= 0 and self.on_all_done is not None:
            self.on_all_done()

    def preempted(self, ids: TaskIds, t: float) -> None:
        """Tasks were killed on their worker before finishing; they will be launched again."""
        ids = self._cut(ids, t)
        self.preemptions[ids] += 1

    def lost(self, ids: TaskIds, t: float, note: str = "worker failed") -> None:
        """Tasks died with their worker (a fault) before finishing; the work done is lost and they run again."""
        ids = self._cut(ids, t)
        self.fault_kills[ids] += 1
        self.work_lost += float(np.nansum(t - self.preempted_runs[-1][1]))

    def withdraw(self, ids: TaskIds) -> None:
        """Launches recorded ahead of time (a simulator's in-process workers record a start when the launch is
        committed) that never began: their worker died before the launch reached it. They run again later."""
        ids = np.atleast_1d(np.asarray(ids, dtype=np.int64))
        self._flush()
        self.running -= ids.size
        self._start[ids] = np.nan
        self._worker[ids] = -1
        self._launches[ids] -= 1

    def _cut(self, ids: TaskIds, t: float) -> np.ndarray:
        ids = np.atleast_1d(np.asarray(ids, dtype=np.int64))
        self._flush()
        self.preempted_runs.append((ids.copy(), self._start[ids].copy(), self._worker[ids].copy(), t))
        self.running -= ids.size
        self._start[ids] = np.nan
        self._worker[ids] = -1
        self.last_progress = t
        return ids

    def withdraw_start(self, ids: TaskIds) -> None:
        """Withdraw the last recorded start of ``ids``: launches a simulator-only component recorded ahead of time
        (at the instant they would reach the worker) that never started, because the worker died before they
        arrived. No run is recorded; the tasks will be launched again."""
        ids = np.atleast_1d(np.asarray(ids, dtype=np.int64))
        self._flush()
        self._start[ids] = np.nan
        self._worker[ids] = -1
        self._launches[ids] -= 1
        self.running -= ids.size

    # --- allocation-time components ----------------------------------------------------------------
    def add_comm(self, ids: TaskIds, d: float) -> None:
        """Communication delay of the tasks ``ids`` at allocation time (one number for all of them)."""
        log = self._commlog
        if type(ids) is list:
            log.ids.extend(ids)
            log.vals.extend([d] * len(ids))
        else:
            log.add(ids, d)

    def add_comm_one(self, task: int, d: float) -> None:
        """:meth:`add_comm` for one task id."""
        self._comm_ids.append(task)
        self._comm_vals.append(d)

    def add_proc(self, ids: TaskIds, d: float) -> None:
        """Scheduler processing delay of the tasks ``ids`` at allocation time (one number for all of them)."""
        self._logs["proc"].add(ids, d)

    def add_worker_queue(self, ids: TaskIds, d: float | np.ndarray) -> None:
        """Worker queuing delay (a number, or one number per task)."""
        self._logs["wq"].add(ids, d)

    def count(self, name: str, n: int = 1) -> None:
        """Add ``n`` to the run-level counter ``name``."""
        self.counters[name] += n
