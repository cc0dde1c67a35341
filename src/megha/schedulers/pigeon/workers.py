"""The workers of one Pigeon master's group: single-slot executors reporting to their master.

A lean, slot-mode counterpart of :class:`~megha.schedulers.common.workers.WorkerPool` for the single-task
messages a master sends under load (:class:`Start` / :class:`Ended`), also accepting batches (``Launch`` /
``Finished``). What each worker runs is kept in a :class:`~megha.schedulers.common.ledger.WorkerLedger`
(:func:`group_ledger`, shared in form with :class:`~megha.schedulers.pigeon.simmaster.SimPigeonMaster`): a worker
runs at most one task, and a launch on a busy worker raises the ledger's over-commit error; a launch on a worker
of another group raises :class:`SimulationError` too. Task ends that fall at the same instant share one timer.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from megha.errors import SimulationError
from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.ledger import FREE, WorkerLedger
from megha.schedulers.common.messages import Finished, Launch
from megha.schedulers.pigeon.messages import Ended, Start
from megha.sim.component import Component


def group_ledger(owner: str, workers: np.ndarray) -> WorkerLedger:
    """The slot-mode ledger of one group's workers (global ids): one row per id from the group's lowest to its
    highest. Every datacenter the simulator builds gives each group a contiguous range of ids (an even split, or
    a datacenter file's groups in order); a group with gaps keeps the gaps' rows free (its owner checks that a
    worker belongs to the group before it claims it)."""
    ws = np.asarray(workers, dtype=np.int64)
    lo = int(ws.min())
    return WorkerLedger(owner, int(ws.max()) - lo + 1, first=lo)


class GroupWorkers(Component):
    """Single-slot workers of one group (worker ids are global; ``master`` receives the completions)."""

    kind = "worker"
    crash_kind = None  # the workers fail one by one (a family's worker faults), not as one component

    def __init__(self, address: str, master: str, workers: np.ndarray, recorder: TaskRecorder) -> None:
        super().__init__(address)
        self.master = master
        self.rec = recorder
        #: what each worker runs and the over-commit check (rows from the group's lowest worker id)
        self.ledger = group_ledger(address, workers)
        self._slot: list[int] = self.ledger.task  # the ledger's list, claimed and freed inline
        self._lo = self.ledger.first
        self._members = frozenset(np.asarray(workers, dtype=np.int64).tolist())
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
        if w not in self._members:
            raise SimulationError(f"{self.address}: worker {w} is not in this group (task {t})")
        k = w - self._lo
        if self._slot[k] >= 0:  # the ledger's slot check, inline
            self.ledger.over_slot(w, t, now)
        self._slot[k] = t
        lst = self._ends.get(end)
        if lst is None:
            self._ends[end] = [(t, w)]
            self.port.set_timer(end - now, end)
        else:
            lst.append((t, w))

    def on_timer(self, key: Hashable, now: float) -> None:
        items = self._ends.pop(key)
        slot = self._slot
        lo = self._lo
        if len(items) == 1:
            t, w = items[0]
            slot[w - lo] = FREE
            self.rec.finished([t], now)
            self.port.send(self.master, Ended(t, w))
            return
        for _, w in items:
            slot[w - lo] = FREE
        tasks = np.array([x[0] for x in items], dtype=np.int64)
        self.rec.finished(tasks, now)
        self.port.send(self.master, Finished(tasks, np.array([x[1] for x in items], dtype=np.int64)))

    def running(self) -> int:
        """Tasks running on this group's workers."""
        return self.ledger.busy()
