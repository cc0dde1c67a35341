"""Sparrow under worker faults, for fault schedules (``megha simulate --faults``).

The Sparrow paper (SOSP 2013) is not among the seeds, and Sparrow's recovery from a worker failure is left to the
framework above it (Spark re-submits the tasks of a lost executor); Megha's comparisons (seeds 000, 004) use a
simulator without failures. What follows is that established practice, in Sparrow's own terms:

* ``worker`` — a worker (its node monitor and executor) dies. The task running there is lost (its run recorded as
  lost, the work thrown away); the probes queued there — reservations of jobs whose tasks are not all launched —
  are dropped; the requests it had sent for a task get their answer after its death, and a task sent that way
  never starts. Nothing reaches a dead worker: a probe or a task sent there fails.
* **Detection** (``-o failure_timeout=S``, default 1 s): the schedulers learn of a death ``S`` seconds after it
  (an RPC or heartbeat timeout; Sparrow's RPCs to a dead node monitor fail only when they time out). Each then
  stops probing the dead workers (until they are back: :class:`~megha.schedulers.sparrow.messages.WorkersBack`),
  re-issues a probe on a live eligible worker for every reservation it lost there (same task group; none when the
  job has no task left to launch) and launches the lost tasks again: a fresh batch-sampled set of ``d`` probes per
  task, as for a job. A probe or a task that reaches a dead worker later fails the same way (at once once the death
  is known, else at the detection). A probe with no live eligible worker waits at its scheduler until workers come
  back; when they never do, the runner reports the tasks stranded.
* A restored worker comes back idle, once the answers to the requests it made before it died have arrived (they
  belong to the incarnation that died: normally one round trip, longer only when the scheduler that answers is down).

Scheduler crashes (kind ``scheduler``) are the runner's generic ones. There is no ``partition`` kind: Sparrow's
workers form no groups.
"""

from __future__ import annotations

import numpy as np

from megha.model.workload import Workload
from megha.schedulers.sparrow.monitors import SparrowMonitors
from megha.schedulers.sparrow.scheduler import SparrowScheduler

KINDS = {
    "worker": "the worker dies: its running task and the probes queued there are lost; the schedulers learn of it "
    "after failure_timeout and re-issue the probes and the tasks on live workers; it takes nothing until it is back",
}


class SparrowFaults:
    """The :class:`~megha.model.faults.FaultHandler` of a Sparrow deployment."""

    kinds = KINDS

    def __init__(self, monitors: SparrowMonitors, schedulers: list[SparrowScheduler], workload: Workload) -> None:
        self.monitors = monitors
        self.workload = workload
        for s in schedulers:
            s.describe_tasks = self.describe_tasks

    def describe_tasks(self, tasks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Durations, constraint masks and demands (resource mode) of tasks to launch again."""
        w = self.workload
        dem = None if w.task_demand is None or not self.monitors.resource else w.task_demand[tasks]
        return w.task_duration[tasks], w.masks[tasks], dem

    def population(self, kind: str) -> int:
        """How many workers a ``worker`` fault picks its targets among."""
        return self.monitors.n

    def workers(self, kind: str, targets: tuple[int, ...]) -> list[int]:
        """The workers a fault's targets name (worker ids themselves)."""
        return list(targets)

    def fail(self, kind: str, targets: tuple[int, ...], now: float) -> None:
        """The target workers die at ``now`` (:meth:`SparrowMonitors.fail_workers`)."""
        self.monitors.fail_workers(list(targets), now)

    def restore(self, kind: str, targets: tuple[int, ...], now: float) -> None:
        """The target workers come back (:meth:`SparrowMonitors.restore_workers`)."""
        self.monitors.restore_workers(list(targets), now)
