"""A pool of simulated workers: runs launched tasks for their duration and reports completion.

One :class:`WorkerPool` component hosts many workers (all workers of an LM's cluster, of a Pigeon master,
or the whole datacenter). It enforces the allocation invariant — in slot mode a worker runs at most one
task, in resource mode the demands of its tasks never exceed its capacity — and raises if a scheduler
ever over-commits a worker, so every simulation doubles as a check of the scheduler's correctness.
Task ends that fall at the same instant share one timer.
"""

from __future__ import annotations

import numpy as np

from megha.errors import SimulationError
from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.messages import Finished, Kill, Killed, Launch
from megha.sim.component import Component


class WorkerPool(Component):
    """Simulated workers; ``capacity`` is ``None`` for single-slot workers, ``unlimited`` disables checks."""

    kind = "worker"

    def __init__(
        self,
        address: str,
        n_workers: int,
        recorder: TaskRecorder,
        capacity: np.ndarray | None = None,
        unlimited: bool = False,
    ) -> None:
        super().__init__(address)
        self.rec = recorder
        self.unlimited = unlimited
        self.capacity = capacity
        self.slot_task = np.full(n_workers, -1, dtype=np.int64)  # slot mode: task running on each worker
        self.used = None if capacity is None else np.zeros_like(capacity)
        self._ends: dict[float, list] = {}  # end time -> [tasks..., ], [workers...], reply_to, demands
        self._running: dict[int, tuple[float, int, str, np.ndarray | None]] = {}

    def on_message(self, msg, now: float) -> None:
        if isinstance(msg, Launch):
            self._launch(msg, now)
        elif isinstance(msg, Kill):
            self._kill(msg, now)
        else:
            super().on_message(msg, now)

    def _launch(self, msg: Launch, now: float) -> None:
        tasks = msg.tasks
        workers = msg.workers
        if not self.unlimited:
            if self.used is None:
                busy = self.slot_task[workers]
                self.slot_task[workers] = tasks
                if (busy >= 0).any() or (tasks.size > 1 and (self.slot_task[workers] != tasks).any()):
                    bad = busy >= 0 if (busy >= 0).any() else self.slot_task[workers] != tasks
                    w = int(workers[np.flatnonzero(bad)[0]])
                    raise SimulationError(
                        f"{self.address}: worker {w} over-committed at t={now:.6f}: it already runs a task"
                    )
            else:
                np.add.at(self.used, workers, msg.demands)
                over = (self.used[workers] > self.capacity[workers] + 1e-9).any(axis=1)
                if over.any():
                    w = int(workers[np.flatnonzero(over)[0]])
                    raise SimulationError(
                        f"{self.address}: worker {w} over-committed at t={now:.6f}: "
                        f"used {self.used[w].tolist()} > capacity {self.capacity[w].tolist()}"
                    )
        self.rec.started(tasks, now, workers)
        ends = now + msg.durations
        running = self._running
        groups = self._ends
        demands = msg.demands
        reply = msg.reply_to
        for i, (t, w, e) in enumerate(zip(tasks.tolist(), workers.tolist(), ends.tolist(), strict=True)):
            d = None if demands is None else demands[i]
            running[t] = (e, w, reply, d)
            g = groups.get(e)
            if g is None:
                groups[e] = [t]
                self.port.set_timer(e - now, e)
            else:
                g.append(t)

    def on_timer(self, key, now: float) -> None:
        tasks = self._ends.pop(key)
        running = self._running
        by_reply: dict[str, tuple[list, list, list]] = {}
        for t in tasks:
            entry = running.pop(t, None)
            if entry is None or entry[0] != key:  # killed (and maybe relaunched with another end)
                if entry is not None:
                    running[t] = entry
                continue
            _, w, reply, d = entry
            lst = by_reply.get(reply)
            if lst is None:
                lst = by_reply[reply] = ([], [], [])
            lst[0].append(t)
            lst[1].append(w)
            lst[2].append(d)
        for reply, (ts, ws, ds) in by_reply.items():
            t_arr = np.array(ts, dtype=np.int64)
            w_arr = np.array(ws, dtype=np.int64)
            d_arr = None if ds[0] is None else np.array(ds)
            self._release(t_arr, w_arr, d_arr)
            self.rec.finished(t_arr, now)
            self.port.send(reply, Finished(t_arr, w_arr, d_arr))

    def _release(self, tasks: np.ndarray, workers: np.ndarray, demands: np.ndarray | None) -> None:
        if self.unlimited:
            return
        if self.used is None:
            self.slot_task[workers] = -1
        else:
            np.subtract.at(self.used, workers, demands)

    def _kill(self, msg: Kill, now: float) -> None:
        ts, ws, ds = [], [], []
        for t in msg.tasks.tolist():
            entry = self._running.pop(t, None)
            if entry is None:
                continue
            _, w, _, d = entry
            ts.append(t)
            ws.append(w)
            ds.append(d)
        t_arr = np.array(ts, dtype=np.int64)
        w_arr = np.array(ws, dtype=np.int64)
        d_arr = None if not ds or ds[0] is None else np.array(ds)
        if t_arr.size:
            self._release(t_arr, w_arr, d_arr)
            self.rec.preempted(t_arr, now)
        self.port.send(msg.reply_to, Killed(t_arr, w_arr, d_arr))

    def running_tasks(self) -> int:
        return len(self._running)
