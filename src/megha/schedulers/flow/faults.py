"""The flow scheduler under faults (fault schedules: ``megha simulate -s flow --faults FILE``).

* ``worker`` — a machine dies (Sirius §3.2: the scheduler reacts to machine failures as to any other change of
  the cluster state): the tasks running on it are lost (their runs are recorded as lost, the work done is thrown
  away) and wait again; the machine leaves the scheduling graph — no free slot, no flow through its sink arc, a
  prohibitive cost, its slots out of the fair shares' capacity — until it comes back, empty; the next round places
  the lost tasks on any machine their constraints allow. Waiting tasks that no machine up fits take no fair share
  while it is so (they wait in the graph; the others share the live slots). Launches already on their way to a
  dead machine are answered as failed and their tasks wait again too. With ``slots_per_machine`` K > 1 a machine
  is K workers: a fault on one of them takes the whole machine (all K) down. The scheduler learns of the failure at
  once (the cluster manager's detection delay is not modelled).
* ``scheduler`` — the runner's generic crash of the central scheduler (down ``down_for`` seconds, state kept: a
  standby with the replicated graph); tasks on machines keep running and their completions wait for it.
"""

from __future__ import annotations

import numpy as np

from megha.schedulers.common.workers import WorkerPool
from megha.schedulers.flow.scheduler import FlowScheduler

KINDS = {
    "worker": "the worker's machine dies: its running tasks are lost (run again) and wait for the next round; the "
    "machine leaves the scheduling graph until it comes back, empty",
}


class FlowFaults:
    """The :class:`~megha.model.faults.FaultHandler` of a flow deployment: machine failures."""

    kinds = KINDS

    def __init__(self, sched: FlowScheduler, pool: WorkerPool, slots_per_machine: int) -> None:
        self.sched = sched
        self.pool = pool
        self.k = max(1, int(slots_per_machine))
        self.n_workers = int(sched.m.of_worker.size)

    def population(self, kind: str) -> int:
        """How many targets a fault of ``kind`` picks from: the workers."""
        return self.n_workers

    def workers(self, kind: str, targets: tuple[int, ...]) -> list[int]:
        """Every worker of the targets' machines (K consecutive workers form one)."""
        k, n = self.k, self.n_workers
        blocks = sorted({int(w) // k for w in targets})
        return [w for b in blocks for w in range(b * k, min((b + 1) * k, n))]

    def _machines(self, workers: list[int]) -> np.ndarray:
        return np.unique(self.sched.m.of_worker[np.asarray(workers, dtype=np.int64)])

    def fail(self, kind: str, targets: tuple[int, ...], now: float) -> None:
        """Fail the targets' machines at ``now``: their workers die and the scheduler takes the machines out of the
        graph and requeues the tasks lost."""
        ws = self.workers(kind, targets)
        lost = self.pool.fail_workers(ws, now)
        tasks = np.array([t for t, _, _ in lost], dtype=np.int64)
        where = np.array([w for _, w, _ in lost], dtype=np.int64)
        self.sched.fail_machines(self._machines(ws), tasks, where, now)

    def restore(self, kind: str, targets: tuple[int, ...], now: float) -> None:
        """Bring the targets' machines back at ``now``: their workers rejoin the pool and the machines the graph."""
        ws = self.workers(kind, targets)
        self.pool.restore_workers(ws)
        self.sched.restore_machines(self._machines(ws), now)
