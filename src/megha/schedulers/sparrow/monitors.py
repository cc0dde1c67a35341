"""Sparrow node monitors: per-worker FIFO probe queues, late binding, task execution.

One component hosts the node monitors of all workers (its per-message cost, if a processing model is set,
therefore applies to all of them together). Each worker keeps a FIFO queue of probes (reservations). When the
worker has room for the probe at the head of its queue it sends the probe's scheduler a request and holds the
room until the answer arrives (one round trip): a task runs at once; a no-op frees the room and the next probe
is served. The time a probe spent queued is recorded as the task's worker queuing delay.

Slot mode: a worker holds one task or one outstanding request at a time. Resource mode: a probe reserves its
task group's demand; the head probe waits until that fits (FIFO, head-of-line blocking as in Sparrow); several
requests may be outstanding while resources allow. Any over-commit raises :class:`SimulationError`.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from megha.errors import SimulationError
from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.messages import Finished
from megha.schedulers.sparrow.messages import Done, GetTask, Grant, Probes, Request, TaskReply
from megha.sim.component import Component

_EPS = 1e-9


def _one_int(x: int) -> np.ndarray:
    a = np.empty(1, dtype=np.int64)
    a[0] = x
    return a


def _one_float(x: float) -> np.ndarray:
    a = np.empty(1)
    a[0] = x
    return a


class SparrowMonitors(Component):
    """Node monitors and executors of ``n_workers`` workers (global ids ``0..n_workers-1``)."""

    kind = "nodemonitor"
    crash_kind = None  # the workers fail one by one (a family's worker faults), not as one component

    def __init__(
        self,
        address: str,
        n_workers: int,
        recorder: TaskRecorder,
        schedulers: list[str],
        capacity: np.ndarray | None = None,
    ) -> None:
        super().__init__(address)
        self.n = int(n_workers)
        self.rec = recorder
        self.schedulers = list(schedulers)
        self.resource = capacity is not None
        if self.resource:
            self.free = np.array(capacity, dtype=np.float64)  # capacity minus running tasks and reservations
            if self.free.shape[0] != self.n:
                raise ValueError(f"{address}: capacity has {self.free.shape[0]} rows for {self.n} workers")
            self.slot_free = None
        else:
            self.free = None
            self.slot_free = [True] * self.n  # no task running and no request outstanding
        self.queues: list[deque | None] = [None] * self.n
        self.running: dict[int, tuple[float, int, int, np.ndarray | None]] = {}
        self.on_worker: list[int] = [-1] * self.n  # slot mode: task running on each worker
        self._ends: dict[float, list[int]] = {}
        self._out: list[tuple] = []  # requests made during one event, sent (batched per job) at its end
        self.max_queue = 0
        self.queued_probes = 0

    # --- messages ----------------------------------------------------------------------------------
    def on_message(self, msg, now: float) -> None:
        if type(msg) is Grant:
            if self.resource:
                self._grant_resource(msg, now)
            else:
                self._grant(msg, now)
        elif isinstance(msg, TaskReply):
            self._reply(msg, now)
        elif isinstance(msg, Probes):
            self._probes(msg, now)
        else:
            super().on_message(msg, now)
        self._flush()

    def _probes(self, msg: Probes, now: float) -> None:
        job = msg.job
        sched = msg.scheduler
        queues = self.queues
        dem = msg.demands
        if not self.resource:
            free = self.slot_free
            for w, g in zip(msg.workers.tolist(), msg.groups.tolist(), strict=True):
                q = queues[w]
                if free[w] and not q:
                    free[w] = False
                    self._request(sched, job, w, g, 0.0, None)
                    continue
                if q is None:
                    q = queues[w] = deque()
                q.append((job, sched, g, now, None))
                self.queued_probes += 1
                if len(q) > self.max_queue:
                    self.max_queue = len(q)
                if free[w]:
                    self._advance(w, now)
            return
        for w, g in zip(msg.workers.tolist(), msg.groups.tolist(), strict=True):
            q = queues[w]
            if q is None:
                q = queues[w] = deque()
            q.append((job, sched, g, now, dem[g]))
            if len(q) > 1:
                self.queued_probes += 1
            if len(q) > self.max_queue:
                self.max_queue = len(q)
            self._advance(w, now)

    def _advance(self, w: int, now: float) -> None:
        """Serve probes at the head of worker ``w``'s queue while it has room for them."""
        q = self.queues[w]
        if not q:
            return
        if not self.resource:
            if self.slot_free[w]:
                job, sched, g, t0, _ = q.popleft()
                self.slot_free[w] = False
                self._request(sched, job, w, g, now - t0, None)
            return
        free = self.free[w]
        while q:
            job, sched, g, t0, d = q[0]
            if (free + _EPS < d).any():
                return
            q.popleft()
            free -= d
            self._request(sched, job, w, g, now - t0, d)

    def _request(self, sched: int, job: int, w: int, g: int, waited: float, reserved) -> None:
        self._out.append((sched, job, w, g, waited, reserved))

    def _flush(self) -> None:
        out = self._out
        if not out:
            return
        self._out = []
        send = self.port.send
        if len(out) == 1:
            sched, job, w, g, waited, res = out[0]
            send(self.schedulers[sched], Request(job, w, g, waited, res))
            return
        groups: dict[tuple[int, int], list] = {}
        for item in out:
            key = (item[0], item[1])
            lst = groups.get(key)
            if lst is None:
                groups[key] = [item]
            else:
                lst.append(item)
        for (sched, job), items in groups.items():
            res = None if items[0][5] is None else np.array([x[5] for x in items])
            send(
                self.schedulers[sched],
                GetTask(
                    job,
                    np.array([x[2] for x in items], dtype=np.int64),
                    np.array([x[3] for x in items], dtype=np.int32),
                    np.array([x[4] for x in items], dtype=np.float64),
                    res,
                ),
            )

    def _reply(self, msg: TaskReply, now: float) -> None:
        workers = msg.workers.tolist()
        tasks = msg.tasks.tolist()
        ends = (now + msg.durations).tolist()
        sched = msg.scheduler
        groups = self._ends
        running = self.running
        started_t: list[int] = []
        started_w: list[int] = []
        started_i: list[int] = []
        resource = self.resource
        for i, (w, t, e) in enumerate(zip(workers, tasks, ends, strict=True)):
            if resource:
                res = msg.reserved[i]
                if t < 0:
                    self.free[w] += res
                    self._advance(w, now)
                    continue
                d = msg.demands[i]
                if (d > res + _EPS).any():
                    raise SimulationError(
                        f"{self.address}: task {t} needs {d.tolist()} but its probe reserved "
                        f"{res.tolist()} on worker {w}"
                    )
                self.free[w] += res - d
                running[t] = (e, w, sched, d)
            else:
                if t < 0:
                    self.slot_free[w] = True
                    self._advance(w, now)
                    continue
                if self.on_worker[w] >= 0 or self.slot_free[w]:
                    raise SimulationError(
                        f"{self.address}: worker {w} over-committed at t={now:.6f}: "
                        f"task {t} sent while it runs task {self.on_worker[w]} or holds no request"
                    )
                self.on_worker[w] = t
                running[t] = (e, w, sched, None)
            started_t.append(t)
            started_w.append(w)
            started_i.append(i)
            g = groups.get(e)
            if g is None:
                groups[e] = [t]
                self.port.set_timer(e - now, e)
            else:
                g.append(t)
        if started_t:
            self.rec.started(started_t, now, started_w)
            for t, wq in zip(started_t, msg.waited[started_i].tolist(), strict=True):  # scalar entries
                self.rec.add_worker_queue([t], wq)

    def _grant(self, msg: Grant, now: float) -> None:
        """Slot mode, one answer."""
        w = msg.worker
        t = msg.task
        if t < 0:
            self.slot_free[w] = True
            self._advance(w, now)
            return
        if self.on_worker[w] >= 0 or self.slot_free[w]:
            raise SimulationError(
                f"{self.address}: worker {w} over-committed at t={now:.6f}: "
                f"task {t} sent while it runs task {self.on_worker[w]} or holds no request"
            )
        self.on_worker[w] = t
        e = now + msg.duration
        self.running[t] = (e, w, msg.scheduler, None)
        g = self._ends.get(e)
        if g is None:
            self._ends[e] = [t]
            self.port.set_timer(e - now, e)
        else:
            g.append(t)
        rec = self.rec
        rec.started([t], now, [w])
        rec.add_worker_queue([t], msg.waited)

    def _grant_resource(self, msg: Grant, now: float) -> None:
        """Resource mode, one answer: as a batch of one."""
        res = msg.reserved[None, :]
        dem = None if msg.task < 0 else msg.demand[None, :]
        if dem is None:
            dem = np.zeros_like(res)
        self._reply(
            TaskReply(
                msg.job,
                msg.scheduler,
                _one_int(msg.worker),
                _one_int(msg.task),
                _one_float(msg.duration),
                _one_float(msg.waited),
                _one_int(msg.task) if msg.task >= 0 else np.zeros(0, dtype=np.int64),
                dem,
                res,
            ),
            now,
        )

    # --- task ends ---------------------------------------------------------------------------------
    def on_timer(self, key, now: float) -> None:
        tasks = self._ends.pop(key)
        running = self.running
        if len(tasks) == 1 and not self.resource:
            t = tasks[0]
            _, w, sched, _ = running.pop(t)
            self.on_worker[w] = -1
            self.slot_free[w] = True
            self.rec.finished([t], now)
            self.port.send(self.schedulers[sched], Done(t, w))
            self._advance(w, now)
            self._flush()
            return
        by_sched: dict[int, tuple[list, list, list]] = {}
        freed: list[int] = []
        for t in tasks:
            _, w, sched, d = running.pop(t)
            if self.resource:
                self.free[w] += d
            else:
                self.on_worker[w] = -1
                self.slot_free[w] = True
            freed.append(w)
            lst = by_sched.get(sched)
            if lst is None:
                by_sched[sched] = ([t], [w], [d])
            else:
                lst[0].append(t)
                lst[1].append(w)
                lst[2].append(d)
        for sched, (ts, ws, ds) in by_sched.items():
            t_arr = np.array(ts, dtype=np.int64)
            self.rec.finished(t_arr, now)
            self.port.send(
                self.schedulers[sched],
                Finished(t_arr, np.array(ws, dtype=np.int64), None if ds[0] is None else np.array(ds)),
            )
        for w in freed:
            self._advance(w, now)
        self._flush()

    # --- inspection --------------------------------------------------------------------------------
    def queue_length(self, w: int) -> int:
        """Probes waiting at worker ``w``."""
        q = self.queues[w]
        return 0 if q is None else len(q)
