"""The workers of one Pigeon master's group: single-slot executors reporting to their master.

A lean, slot-mode counterpart of :class:`~megha.schedulers.common.workers.WorkerPool` for the single-task
messages a master sends under load (:class:`Start` / :class:`Ended`), also accepting batches (``Launch`` /
``Finished``). Same invariant: a worker runs at most one task, anything else raises :class:`SimulationError`.
Task ends that fall at the same instant share one timer.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from megha.errors import SimulationError
from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.messages import Finished, Launch
from megha.schedulers.pigeon.messages import Ended, Start
from megha.sim.component import Component


class GroupWorkers(Component):
    """Single-slot workers of one group (worker ids are global; ``master`` receives the completions)."""

    kind = "worker"
    crash_kind = None  # the workers fail one by one (a family's worker faults), not as one component

    def __init__(self, address: str, master: str, workers: np.ndarray, recorder: TaskRecorder) -> None:
        super().__init__(address)
        self.master = master
        self.rec = recorder
        self.task_on: dict[int, int] = dict.fromkeys(np.asarray(workers, dtype=np.int64).tolist(), -1)
        self._ends: dict[float, list[tuple[int, int]]] = {}

    def on_message(self, msg: Any, now: float) -> None:
        if type(msg) is Start:
            self._start(msg.task, msg.worker, now + msg.duration, now)
            self.rec.started([msg.task], now, [msg.worker])
        elif isinstance(msg, Launch):
            for t, w, e in zip(msg.tasks.tolist(), msg.workers.tolist(), (now + msg.durations).tolist(), strict=True):
                self._start(t, w, e, now)
            self.rec.started(msg.tasks, now, msg.workers)
        else:
            super().on_message(msg, now)

    def _start(self, t: int, w: int, end: float, now: float) -> None:
        cur = self.task_on.get(w)
        if cur is None:
            raise SimulationError(f"{self.address}: worker {w} is not in this group (task {t})")
        if cur >= 0:
            raise SimulationError(
                f"{self.address}: worker {w} over-committed at t={now:.6f}: it already runs task {cur}"
            )
        self.task_on[w] = t
        lst = self._ends.get(end)
        if lst is None:
            self._ends[end] = [(t, w)]
            self.port.set_timer(end - now, end)
        else:
            lst.append((t, w))

    def on_timer(self, key: Hashable, now: float) -> None:
        items = self._ends.pop(key)
        task_on = self.task_on
        if len(items) == 1:
            t, w = items[0]
            task_on[w] = -1
            self.rec.finished([t], now)
            self.port.send(self.master, Ended(t, w))
            return
        for _, w in items:
            task_on[w] = -1
        tasks = np.array([x[0] for x in items], dtype=np.int64)
        self.rec.finished(tasks, now)
        self.port.send(self.master, Finished(tasks, np.array([x[1] for x in items], dtype=np.int64)))

    def running(self) -> int:
        """Tasks running on this group's workers."""
        return sum(1 for t in self.task_on.values() if t >= 0)
