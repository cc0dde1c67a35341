"""Per-task records, kept as numpy columns (one slot per task of the workload, no per-task objects).

Components report what happens to tasks — started on a worker, finished, completion learned by the
scheduler, preempted — and where allocation time goes (communication, processing, worker queuing). The
engine attributes message latency automatically for messages that carry ``alloc_tasks``.
Summaries and tables are derived at the end (:mod:`megha.metrics.summary`).
"""

from __future__ import annotations

from collections import Counter

import numpy as np


class TaskRecorder:
    """Columns of per-task timestamps and counters for one run."""

    def __init__(self, task_arrival: np.ndarray, task_demand: np.ndarray | None = None) -> None:
        n = task_arrival.size
        self.n = n
        self.arrival = np.asarray(task_arrival, dtype=np.float64)
        self.demand = task_demand  # [T, R] or None (one slot per task)
        nan = np.full(n, np.nan)
        self.scheduled = nan.copy()  # time of the placement decision that led to the (last) launch
        self.start = nan.copy()  # time the task started on a worker (last launch)
        self.end = nan.copy()  # time the task finished on its worker
        self.known = nan.copy()  # time the scheduler learned the task finished (job completion uses this)
        self.worker = np.full(n, -1, dtype=np.int64)
        self._comm = np.zeros(n)  # communication delay on the allocation path (see the comm property)
        self._comm_log: list = []  # (task ids, seconds) pairs applied lazily, in one vectorized pass
        self.proc = np.zeros(n)  # processing delay on the allocation path
        self.wq = np.zeros(n)  # worker queuing delay
        self.launches = np.zeros(n, dtype=np.int32)
        self.finishes = np.zeros(n, dtype=np.int32)
        self.preemptions = np.zeros(n, dtype=np.int32)
        self.counters: Counter = Counter()
        # runs cut short by preemption: (tasks, their starts, their workers, time they were stopped)
        self.preempted_runs: list[tuple[np.ndarray, np.ndarray, np.ndarray, float]] = []
        self.running = 0
        self.outstanding = 0  # feasible tasks whose completion the scheduler has not learned yet
        self.last_progress = 0.0
        self.on_all_done = None  # callback set by the runner

    # --- lifecycle -------------------------------------------------------------------------------
    def expect(self, n_tasks: int) -> None:
        """Declare how many task completions the run waits for."""
        self.outstanding = n_tasks

    def decided(self, ids, t: float) -> None:
        """The scheduler decided where the tasks go (recorded on every attempt; the last one wins)."""
        self.scheduled[ids] = t

    def started(self, ids, t: float, workers) -> None:
        """Tasks started executing on ``workers``."""
        self.start[ids] = t
        self.worker[ids] = workers
        self.launches[ids] += 1
        self.running += np.size(ids)
        self.last_progress = t

    def finished(self, ids, t: float) -> None:
        """Tasks finished executing on their worker."""
        self.end[ids] = t
        self.finishes[ids] += 1
        self.running -= np.size(ids)
        self.last_progress = t

    def completion_known(self, ids, t: float) -> None:
        """The scheduler learned the tasks finished (job response time ends at the last such time)."""
        self.known[ids] = t
        self.outstanding -= np.size(ids)
        if self.outstanding <= 0 and self.on_all_done is not None:
            self.on_all_done()

    def preempted(self, ids, t: float) -> None:
        """Tasks were killed on their worker before finishing; they will be launched again."""
        ids = np.atleast_1d(np.asarray(ids, dtype=np.int64))
        self.preempted_runs.append((ids.copy(), self.start[ids].copy(), self.worker[ids].copy(), t))
        self.preemptions[ids] += 1
        self.running -= ids.size
        self.start[ids] = np.nan
        self.worker[ids] = -1
        self.last_progress = t

    # --- allocation-time components ----------------------------------------------------------------
    def add_comm(self, ids, d: float) -> None:
        self._comm_log.append((ids, d))

    @property
    def comm(self) -> np.ndarray:
        """Communication delay per task (applies the pending log first)."""
        if self._comm_log:
            log, self._comm_log = self._comm_log, []
            ids = np.concatenate([np.atleast_1d(np.asarray(i, dtype=np.int64)) for i, _ in log])
            ds = np.repeat([d for _, d in log], [np.size(i) for i, _ in log])
            self._comm += np.bincount(ids, weights=ds, minlength=self.n)
        return self._comm

    def add_proc(self, ids, d: float) -> None:
        self.proc[ids] += d

    def add_worker_queue(self, ids, d) -> None:
        self.wq[ids] += d

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n
