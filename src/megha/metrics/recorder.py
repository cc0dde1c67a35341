"""Per-task records, kept as numpy columns (one slot per task of the workload, no per-task objects).

Components report what happens to tasks — started on a worker, finished, completion learned by the
scheduler, preempted — and where allocation time goes (communication, processing, worker queuing). The
engine attributes message latency automatically for messages that carry ``alloc_tasks``.

Reports are cheap to make: each call appends ``(task ids, time, …)`` to a log (ids may be a list, a numpy
array or an int), and the columns are materialized in one vectorized pass when they are read. Only the
counters a run needs while it runs (running tasks, outstanding completions) are kept live.
Summaries and tables are derived at the end (:mod:`megha.metrics.summary`).
"""

from __future__ import annotations

from collections import Counter
from itertools import chain

import numpy as np


def _ids(x) -> np.ndarray:
    return np.atleast_1d(np.asarray(x, dtype=np.int64))


def _count(x) -> int:
    try:
        return len(x)
    except TypeError:  # a single task id
        return 1


def _flat(seqs: list) -> tuple[np.ndarray, list[int]]:
    """Concatenate task-id sequences (lists, arrays or single ids) into one array, with their lengths."""
    parts = []
    lens = []
    for x in seqs:
        if isinstance(x, np.ndarray):
            parts.append(x.ravel().tolist())
            lens.append(x.size)
        elif isinstance(x, list | tuple):
            parts.append(x)
            lens.append(len(x))
        else:
            parts.append((int(x),))
            lens.append(1)
    total = sum(lens)
    return np.fromiter(chain.from_iterable(parts), dtype=np.int64, count=total), lens


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
        # logs, applied in order by _flush(): (kind, ids, value, workers)
        self._log: list[tuple] = []
        self.counters: Counter = Counter()
        # runs cut short by preemption: (tasks, their starts, their workers, time they were stopped)
        self.preempted_runs: list[tuple[np.ndarray, np.ndarray, np.ndarray, float]] = []
        self.running = 0
        self.outstanding = 0  # feasible tasks whose completion the scheduler has not learned yet
        self.last_progress = 0.0
        self.on_all_done = None  # callback set by the runner

    # --- materialization ------------------------------------------------------------------------------
    def _flush(self) -> None:
        log, self._log = self._log, []
        if not log:
            return
        by_kind: dict[str, list] = {}
        for entry in log:
            by_kind.setdefault(entry[0], []).append(entry)
        # "set" kinds: later entries win, so apply in log order with one fancy assignment per kind
        for kind, col in (("decided", self._scheduled), ("finished", self._end), ("known", self._known)):
            entries = by_kind.get(kind)
            if entries:
                ids, lens = _flat([e[1] for e in entries])
                col[ids] = np.repeat(np.fromiter((e[2] for e in entries), dtype=np.float64, count=len(entries)), lens)
                if kind == "finished":
                    self._finishes += np.bincount(ids, minlength=self.n).astype(np.int32)
        for kind, col in (("comm", self._comm), ("proc", self._proc), ("wq", self._wq)):
            entries = by_kind.get(kind)
            if entries:
                ids, lens = _flat([e[1] for e in entries])
                if all(np.ndim(e[2]) == 0 for e in entries):
                    vals = np.repeat(np.fromiter((e[2] for e in entries), dtype=np.float64, count=len(entries)), lens)
                else:
                    vals = np.concatenate([np.broadcast_to(np.asarray(e[2], dtype=np.float64), (n,))
                                           for e, n in zip(entries, lens, strict=True)])
                col += np.bincount(ids, weights=vals, minlength=self.n)
        entries = by_kind.get("started")
        if entries:
            ids, lens = _flat([e[1] for e in entries])
            times = np.fromiter((e[2] for e in entries), dtype=np.float64, count=len(entries))
            self._start[ids] = np.repeat(times, lens)
            self._worker[ids], _ = _flat([e[3] for e in entries])
            self._launches += np.bincount(ids, minlength=self.n).astype(np.int32)

    def _col(self, name: str) -> np.ndarray:
        if self._log:
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

    def decided(self, ids, t: float) -> None:
        """The scheduler decided where the tasks go (recorded on every attempt; the last one wins)."""
        self._log.append(("decided", ids, t, None))

    def started(self, ids, t: float, workers) -> None:
        """Tasks started executing on ``workers``."""
        self._log.append(("started", ids, t, workers))
        self.running += _count(ids)
        self.last_progress = t

    def finished(self, ids, t: float) -> None:
        """Tasks finished executing on their worker."""
        self._log.append(("finished", ids, t, None))
        self.running -= _count(ids)
        self.last_progress = t

    def completion_known(self, ids, t: float) -> None:
        """The scheduler learned the tasks finished (job response time ends at the last such time)."""
        self._log.append(("known", ids, t, None))
        self.outstanding -= _count(ids)
        if self.outstanding <= 0 and self.on_all_done is not None:
            self.on_all_done()

    def preempted(self, ids, t: float) -> None:
        """Tasks were killed on their worker before finishing; they will be launched again."""
        ids = _ids(ids)
        self._flush()
        self.preempted_runs.append((ids.copy(), self._start[ids].copy(), self._worker[ids].copy(), t))
        self.preemptions[ids] += 1
        self.running -= ids.size
        self._start[ids] = np.nan
        self._worker[ids] = -1
        self.last_progress = t

    # --- allocation-time components ----------------------------------------------------------------
    def add_comm(self, ids, d: float) -> None:
        self._log.append(("comm", ids, d, None))

    def add_proc(self, ids, d: float) -> None:
        self._log.append(("proc", ids, d, None))

    def add_worker_queue(self, ids, d) -> None:
        """Worker queuing delay (a number, or one number per task)."""
        self._log.append(("wq", ids, d, None))

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n
