"""Sparrow node monitors: per-worker FIFO probe queues, late binding, task execution.

One component hosts the node monitors of all workers (its per-message cost, if a processing model is set,
therefore applies to all of them together). Each worker keeps a FIFO queue of probes (reservations). When the
worker has room for the probe at the head of its queue it sends the probe's scheduler a request and holds the
room until the answer arrives (one round trip): a task runs at once; a no-op frees the room and the next probe
is served. The time a probe spent queued is recorded as the task's worker queuing delay.

Slot mode: a worker holds one task or one outstanding request at a time. Resource mode: a probe reserves its
task group's demand; the head probe waits until that fits (FIFO, head-of-line blocking as in Sparrow); several
requests may be outstanding while resources allow.

What each worker holds is the family's :class:`~megha.schedulers.common.ledger.WorkerLedger`
(:attr:`SparrowMonitors.ledger`): slot mode, its task list (:attr:`SparrowMonitors.on_worker` is that list) —
a reservation is the monitors' own ``slot_free`` flag, since a worker waiting for an answer runs no task yet;
resource mode, its ``free`` vectors (``track_free``: capacity minus running tasks and reservations, subtracted
one by one; :attr:`SparrowMonitors.free` is that array). Its dead set is the monitors' (workers down, or back but
waiting for the answers to their old requests). Any over-commit — a task sent to a worker that runs one or holds
no request, or a task that needs more than its probe reserved — raises the ledger's one error
(:func:`~megha.schedulers.common.ledger.over_committed`).
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections import deque
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from megha.metrics.recorder import FLUSH_EVERY, TaskRecorder
from megha.schedulers.common.ledger import OVER_EPS, WorkerLedger
from megha.schedulers.common.messages import Finished
from megha.schedulers.sparrow.messages import Done, GetTask, Grant, Lost, Probes, Request, TaskReply, WorkersBack
from megha.sim.component import Component, Port, timer_queue_of

if TYPE_CHECKING:
    from megha.schedulers.sparrow.scheduler import SparrowScheduler


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
        failure_timeout: float = 1.0,
        done_delay: float | None = None,
    ) -> None:
        """``failure_timeout``: seconds from a worker's death until the schedulers learn of it (fault schedules).
        ``done_delay``: the one-way delay of a ``Done`` message to the schedulers, given by the builder when the run
        lets the monitors model that message instead of sending it (no processing costs, no fault schedule: see
        :meth:`on_start`); None (the default) always sends it."""
        super().__init__(address)
        self.done_delay = None if done_delay is None else float(done_delay)
        self.n = int(n_workers)
        self.rec = recorder
        self.schedulers = list(schedulers)
        self.resource = capacity is not None
        if self.resource:
            cap = np.array(capacity, dtype=np.float64)
            if cap.shape[0] != self.n:
                raise ValueError(f"{address}: capacity has {cap.shape[0]} rows for {self.n} workers")
            #: what each worker holds (module docstring)
            self.ledger = WorkerLedger(address, self.n, cap, track_free=True)
            self.free = self.ledger.free  # capacity minus running tasks and reservations (the ledger's array)
            self.capacity = self.ledger.capacity
            self.n_req = [0] * self.n  # requests outstanding per worker (a worker's death voids their answers)
            self.slot_free = None
            self.on_worker: list[int] = [-1] * self.n  # unused in resource mode
        else:
            self.ledger = WorkerLedger(address, self.n)
            self.free = None
            self.slot_free = [True] * self.n  # no task running and no request outstanding
            self.on_worker = self.ledger.task  # slot mode: the task running on each worker (the ledger's list)
        self.queues: list[deque | None] = [None] * self.n
        self.running: dict[int, tuple[float, int, int, np.ndarray | None]] = {}
        self._ends: dict[float, list[int]] = {}
        self._out: list[tuple] = []  # requests made during one event, sent (batched per job) at its end
        self.max_queue = 0
        self.queued_probes = 0
        # --- worker failures (fault schedules); all empty without faults --------------------------------------
        self.failure_timeout = float(failure_timeout)
        self.dead: set[int] = self.ledger.dead  # workers down (or back but waiting for the answers to old requests)
        self._stale: dict[int, int] = {}  # dead worker -> answers still due to requests it made before it died
        self._revive: set[int] = set()  # restored workers that come back once their stale answers have arrived
        self._detect: dict[int, tuple[float, tuple]] = {}  # dead worker -> (detection time, its detection timer key)
        self._pending: dict[tuple, tuple[list[int], dict[int, tuple[list, list]]]] = {}  # timer -> workers, notices
        self._announced: set[int] = set()  # workers the schedulers were told are dead
        self._n_detect = 0
        self.tasks_lost = 0
        self.probes_lost = 0
        # --- the simulator's common path (see on_start) ---------------------------------------------------------
        self._heap = None
        self._next = None
        self._fast = False
        self._wq = None  # (ids.append, vals.append) of the recorder's worker-queuing log, on the common path
        self._inl: tuple | None = None  # the recorder's one-task logs' appends, on the common path (on_start)
        # --- known no-ops skipped (see skip_known_noops) ---------------------------------------------------------
        self._peers: list[SparrowScheduler] | None = None
        self._skip: list | None = None  # per scheduler: its skip_noop (None: this run skips nothing)
        self._dq = self._dg = 0.0  # the delays of a request and of its answer
        self._idle_at: dict[int, float] = {}  # worker -> when its last skipped no-op answer would have arrived
        # worker -> its last skip: (when it took the first probe, how many it skipped, when it would have taken each
        # further probe, ascending: the skipped ones, then the first other one if any)
        self._chains: dict[int, tuple[float, int, list[float]]] = {}
        self._longest_skip = 0  # most probes one skip took off a queue ahead of their time
        self._settled: tuple[int, int] | None = None

    def skip_known_noops(self, schedulers: list[SparrowScheduler]) -> None:
        """Simulator-only, for the builder (the common path: slot mode, no processing costs, no fault schedule):
        ``schedulers[i]`` is the component at ``self.schedulers[i]``. A worker that reaches a probe whose answer can
        only be a no-op (:meth:`~megha.schedulers.sparrow.scheduler.SparrowScheduler.skip_noop`: its job has no task
        left that fits the worker) then skips the round trip's two events: it goes on to its next probe when the
        no-op would have arrived. Every instant, answer, count and message count stays that of the run that sends
        them (the test compares the two); only the engine's event count drops."""
        self._peers = list(schedulers)

    def attach(self, port: Port) -> None:
        super().attach(port)
        self._heap, self._next = timer_queue_of(port)

    def on_start(self, now: float) -> None:
        """In the simulator's engine, slot mode, given ``done_delay`` (the builder gives it without processing costs
        or a fault schedule: :attr:`~megha.schedulers.registry.BuildContext.faults`): a task's end takes
        the common path (:meth:`_on_end`), which models the ``Done`` message to its scheduler — whose only effect
        is to record when the scheduler learns of the completion, one network delay later — instead of sending it,
        except for the run's last completion, which travels so that the run ends when it arrives. (A fault
        schedule may crash a scheduler, which must not learn anything while it is down: the message is sent.)"""
        if self._heap is None or self.resource or self.done_delay is None:
            return
        self._done_delay = self.done_delay
        counter = getattr(self.port, "message_counter", None)
        if counter is None:
            return
        self._n_done = counter(Done)
        # the port's route cache (SimPort.route: look a route up there on every use), keyed per scheduler
        self._routes = getattr(self.port, "_routes", None)
        if self._routes is None:
            return
        self._req_keys = [(s, "on_message_request") for s in self.schedulers]
        self._fast = True
        if self._peers is not None:
            delays = set()
            for addr, peer in zip(self.schedulers, self._peers, strict=True):
                r = self.port.route(addr, "on_message_request", Request)
                delays.add((r[2] if r else None, peer.grant_delay()))
            if len(delays) == 1 and None not in (pair := delays.pop()):  # every link direct, one round trip
                self._dq, self._dg = pair
                self._skip = [peer.skip_noop for peer in self._peers]
                for peer in self._peers:
                    peer.start_answered = self.start_answered
                self._n_req = counter(Request)
                self._n_grant = counter(Grant)
        # a task's worker queuing delay as two appends to the recorder's log, as its *_one reports do (the recorder
        # has no add_worker_queue_one; add_worker_queue takes ids of any kind and was ~2 % of a run)
        wq = getattr(self.rec, "_logs", {}).get("wq")
        if wq is not None and type(getattr(wq, "ids", None)) is list and type(getattr(wq, "vals", None)) is list:
            self._wq = (wq.ids.append, wq.vals.append)
        inline = getattr(self.rec, "inline_logs", None)
        if inline is not None:
            logs = inline()
            self._inl = (
                logs.started_ids.append,
                logs.started_times.append,
                logs.finished_ids.append,
                logs.finished_times.append,
                logs.known_ids.append,
                logs.known_times.append,
                logs.started_workers.append,
            )

    # --- messages ----------------------------------------------------------------------------------
    def on_message(self, msg: Any, now: float) -> None:
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
        if self._out:
            self._flush(now)

    def _probes(self, msg: Probes, now: float) -> None:
        if self.dead:
            msg = self._live_probes(msg, now)
            if msg is None:
                return
        job = msg.job
        sched = msg.scheduler
        queues = self.queues
        dem = msg.demands
        if not self.resource:
            free = self.slot_free
            out = self._out  # (self._request inlined: _flush runs after this event)
            queued = 0
            longest = self.max_queue
            idle = self._idle_at  # workers whose skipped no-ops end at a known time (skip_known_noops)
            chains = self._chains
            lead = longest - self._longest_skip
            for w, g in zip(msg.workers.tolist(), msg.groups.tolist(), strict=True):
                q = queues[w]
                if free[w] and not q:
                    free[w] = False
                    out.append((sched, job, w, g, 0.0, None))
                    continue
                if q is None:
                    q = queues[w] = deque()
                elif not q and idle:
                    ia = idle.pop(w, None)
                    if ia is not None:
                        if now > ia:  # its last no-op answer has arrived: the worker is free (at ia: not yet)
                            out.append((sched, job, w, g, 0.0, None))
                            continue
                        heapq.heappush(self._heap, (ia, self._next(), self._wake, w))  # it reaches this probe then
                q.append((job, sched, g, now, None))
                queued += 1
                n = len(q)
                if n > lead:
                    if chains and (c := chains.get(w)) is not None:  # probes taken ahead of their time count
                        n += len(c[2]) - bisect_right(c[2], now)
                    if n > longest:
                        longest = n
                        lead = longest - self._longest_skip
                if free[w]:
                    self._advance(w, now)
            self.queued_probes += queued
            self.max_queue = longest
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
            if (free + OVER_EPS < d).any():
                return
            q.popleft()
            free -= d
            self.n_req[w] += 1
            self._request(sched, job, w, g, now - t0, d)

    def _send_request(self, sched: int, job: int, w: int, g: int, waited: float, now: float) -> None:
        """Send one slot-mode :class:`Request`; on the common path (:meth:`on_start`) straight to the scheduler's
        :meth:`~megha.schedulers.sparrow.scheduler.SparrowScheduler.on_message_request` (SimPort.route: the same
        event without the message)."""
        dst = self.schedulers[sched]
        if self._fast:
            r = self._routes.get(self._req_keys[sched])
            if r is None:
                r = self.port.route(dst, "on_message_request", Request)
            if r:
                append, handler, d, nxt, cell, _ = r
                cell[0] += 1
                append((now + d, nxt(), handler, (job, w, g, waited, None)))
                return
        self.port.send(dst, Request(job, w, g, waited, None))

    def _request(self, sched: int, job: int, w: int, g: int, waited: float, reserved: np.ndarray | None) -> None:
        self._out.append((sched, job, w, g, waited, reserved))

    def _flush(self, now: float | None = None) -> None:
        """Send the requests made during one event (batched per scheduler and job); ``now`` given: one request may
        go straight to its scheduler's handler (:meth:`_send_request`)."""
        out = self._out
        if not out:
            return
        self._out = []
        send = self.port.send
        if len(out) == 1:
            sched, job, w, g, waited, res = out[0]
            if now is not None and res is None:
                self._send_request(sched, job, w, g, waited, now)
            else:
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
        if self.dead:
            msg = self._live_reply(msg, now)
            if msg is None:
                return
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
                self.n_req[w] -= 1
                if t < 0:
                    self.free[w] += res
                    self._advance(w, now)
                    continue
                d = msg.demands[i]
                if (d > res + OVER_EPS).any():
                    self.ledger.over(w, now, f"task {t} needs {d.tolist()} but its probe reserved {res.tolist()}")
                self.free[w] += res - d
                running[t] = (e, w, sched, d)
            else:
                if t < 0:
                    self.slot_free[w] = True
                    self._advance(w, now)
                    continue
                if self.on_worker[w] >= 0 or self.slot_free[w]:
                    self._over_slot(w, t, now)
                self.on_worker[w] = t
                running[t] = (e, w, sched, None)
            started_t.append(t)
            started_w.append(w)
            started_i.append(i)
            g = groups.get(e)
            if g is None:
                groups[e] = [t]
                if self._fast:  # as in on_message_grant: the end timer with its handler
                    heapq.heappush(self._heap, (now + (e - now), self._next(), self._on_end, e))
                else:
                    self.port.set_timer(e - now, e)
            else:
                g.append(t)
        if started_t:
            self.rec.started(started_t, now, started_w)
            for t, wq in zip(started_t, msg.waited[started_i].tolist(), strict=True):  # scalar entries
                self.rec.add_worker_queue([t], wq)

    def _grant(self, msg: Grant, now: float) -> None:
        """Slot mode, one answer."""
        self.on_message_grant((msg.scheduler, msg.worker, msg.task, msg.duration, msg.waited), now)

    def on_message_grant(self, grant: tuple[int, int, int, float, float], now: float) -> None:
        """Slot mode, one answer: ``(scheduler, worker, task, duration, waited)`` (task -1: a no-op) — a
        :class:`Grant`'s fields, or the payload a scheduler routes here directly (``SparrowScheduler.direct``)."""
        sched, w, t, dur, waited = grant
        if self.dead and w in self.dead:
            self._stale_answer(w, sched, t, now)
            if self._out:
                self._flush(now)
            return
        if t < 0:  # a no-op: the worker serves its next probe (_advance, slot mode, inlined)
            q = self.queues[w]
            if q:
                if self._skip is not None and not self._out:
                    self._serve(w, q, now)
                    return
                job, s, g, t0, _ = q.popleft()
                if self._out:  # (never on the common path) batched with what this event asked already
                    self._request(s, job, w, g, now - t0, None)
                    self._flush(now)
                elif self._fast and (r := self._routes.get(self._req_keys[s])):
                    append, handler, d, nxt, cell, _ = r  # _send_request's routed event, inlined
                    cell[0] += 1
                    append((now + d, nxt(), handler, (job, w, g, now - t0, None)))
                else:
                    self._send_request(s, job, w, g, now - t0, now)
            else:
                self.slot_free[w] = True
            return
        if self.on_worker[w] >= 0 or self.slot_free[w]:
            self._over_slot(w, t, now)
        self.on_worker[w] = t
        e = now + dur
        self.running[t] = (e, w, sched, None)
        g = self._ends.get(e)
        if g is None:
            self._ends[e] = [t]
            if self._fast:  # the timer set_timer(e - now, e) sets, with the end handler itself
                heapq.heappush(self._heap, (now + (e - now), self._next(), self._on_end, e))
            else:
                self.port.set_timer(e - now, e)
        else:
            g.append(t)
        self.rec.started_one(t, now, w)
        if (wq := self._wq) is not None:
            wq[0](t)
            wq[1](waited)
        else:
            self.rec.add_worker_queue([t], waited)

    def start_answered(self, sched: int, w: int, t: int, dur: float, waited: float, at: float) -> None:
        """Simulator-only (:meth:`skip_known_noops`'s common path): task ``t`` of scheduler ``sched`` starts on worker
        ``w`` at ``at``, when the scheduler's answer reaches it — called by the scheduler as it answers (one network
        delay earlier) instead of sending the answer: what :meth:`on_message_grant` does with the task then. The
        worker waits for that answer meanwhile (no other task or request can reach it), and a decided task always
        starts before the run ends, so the start can be set up in advance."""
        if self.on_worker[w] >= 0 or self.slot_free[w]:
            self._over_slot(w, t, at)
        self.on_worker[w] = t
        e = at + dur
        self.running[t] = (e, w, sched, None)
        g = self._ends.get(e)
        if g is None:
            self._ends[e] = [t]
            heapq.heappush(self._heap, (at + (e - at), self._next(), self._on_end, e))
        else:
            g.append(t)
        if (inl := self._inl) is not None:  # rec.started_one(t, at, w), inlined (TaskRecorder.inline_logs)
            inl[0](t)
            inl[1](at)
            inl[6](w)
            rec = self.rec
            rec.running += 1
            rec.last_progress = at
        else:
            self.rec.started_one(t, at, w)
        if (wq := self._wq) is not None:
            wq[0](t)
            wq[1](waited)
        else:
            self.rec.add_worker_queue([t], waited)

    def _over_slot(self, w: int, t: int, now: float) -> NoReturn:
        """Slot mode: raise the ledger's error for task ``t`` sent to worker ``w``, which runs a task already
        (:func:`~megha.schedulers.common.ledger.slot_taken`) or holds no request (it asked for no task)."""
        if self.on_worker[w] >= 0:
            self.ledger.over_slot(w, t, now)
        self.ledger.over(w, now, f"task {t} sent while it holds no request")

    def _grant_resource(self, msg: Grant, now: float) -> None:
        """Resource mode, one answer: as a batch of one."""
        if self.dead and msg.worker in self.dead:
            self._stale_answer(msg.worker, msg.scheduler, msg.task, now)
            return
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
    def _on_end(self, key: float, now: float) -> None:
        """The end timer of the tasks ending at ``key`` (the engine calls it directly on the common path). One task
        ending (slot mode, no faults: see :meth:`on_start`) is handled here: :meth:`on_timer`, :meth:`_advance` and
        :meth:`_flush` inlined, the ``Done`` message modelled."""
        tasks = self._ends.pop(key)
        if len(tasks) != 1:
            self._end_tasks(tasks, now)
            return
        t = tasks[0]
        _, w, sched, _ = self.running.pop(t)
        self.on_worker[w] = -1
        rec = self.rec
        if (inl := self._inl) is not None:  # rec.finished_one(t, now), inlined (TaskRecorder.inline_logs)
            inl[2](t)
            inl[3](now)
            rec.running -= 1
            rec.last_progress = now
        else:
            rec.finished_one(t, now)
        if rec.outstanding > 1:
            self._n_done[0] += 1
            if inl is not None:  # rec.completion_known_one(t, now + delay), inlined (not the last: outstanding > 0)
                inl[4](t)
                inl[5](now + self._done_delay)
                rec.outstanding -= 1
                if not rec.outstanding & FLUSH_EVERY:
                    rec.known_done()
            else:
                rec.completion_known_one(t, now + self._done_delay)
        else:  # the run's last completion: a real message, so the run ends when it arrives
            self.port.send(self.schedulers[sched], Done(t, w))
        q = self.queues[w]
        if q:
            if self._skip is not None:
                self._serve(w, q, now)
                return
            job, s, g, t0, _ = q.popleft()
            r = self._routes.get(self._req_keys[s])
            if r:  # _send_request's routed event, inlined
                append, handler, d, nxt, cell, _ = r
                cell[0] += 1
                append((now + d, nxt(), handler, (job, w, g, now - t0, None)))
            else:
                self._send_request(s, job, w, g, now - t0, now)
        else:
            self.slot_free[w] = True

    def _serve(self, w: int, q: deque, now: float) -> None:
        """Worker ``w`` reaches its (non-empty) queue at ``now`` with known no-ops skipped (:meth:`skip_known_noops`):
        the probes at the head whose answer can only be a no-op are taken off at once, each as its round trip would
        have (request, no-op answer: the worker reaches the next probe two delays later); the first other probe's
        request leaves when the worker would have reached it (an event at its arrival, in the simulator's queue),
        or, the queue run out, the worker is free from when the last no-op would have arrived (:attr:`_idle_at`;
        a probe that comes earlier waits for then). The instants are kept (:attr:`_chains`): a probe queued
        meanwhile counts the probes taken ahead of their time in the queue's length, and :meth:`settle_skipped`
        takes back the round trips that the run's end would have cut off."""
        skip = self._skip
        job, s, g, t0, _ = q[0]
        if not skip[s](job, w, g):
            q.popleft()
            r = self._routes.get(self._req_keys[s])
            if r:  # _send_request's routed event, inlined
                append, handler, d, nxt, cell, _ = r
                cell[0] += 1
                append((now + d, nxt(), handler, (job, w, g, now - t0, None)))
            else:
                self._send_request(s, job, w, g, now - t0, now)
            return
        dq = self._dq
        dg = self._dg
        x = now
        n = 0
        pops: list[float] = []
        while True:
            q.popleft()
            n += 1
            x = (x + dq) + dg  # the request's arrival, then the no-op's
            if not q:
                break
            pops.append(x)
            job, s, g, t0, _ = q[0]
            if not skip[s](job, w, g):
                break
        self._n_req[0] += n
        self._n_grant[0] += n
        self._chains[w] = (now, n, pops)
        if len(pops) > self._longest_skip:
            self._longest_skip = len(pops)
        if not q:
            self._idle_at[w] = x
            return
        q.popleft()
        r = self._routes.get(self._req_keys[s]) or self.port.route(self.schedulers[s], "on_message_request", Request)
        if not r:  # (not on the common path) the worker reaches it then, by a timer
            q.appendleft((job, s, g, t0, None))
            pops.pop()
            heapq.heappush(self._heap, (x, self._next(), self._wake, w))
            return
        _, handler, d, nxt, cell, _ = r
        cell[0] += 1
        heapq.heappush(self._heap, (x + d, nxt(), handler, (job, w, g, x - t0, None)))

    def settle_skipped(self, end: float) -> tuple[int, int]:
        """At the run's end (``end``: the instant of its last event), take back the round trips of skipped no-ops
        (:meth:`_serve`) that would not have happened by then: requests not yet sent are uncounted from the
        ``Request`` messages, requests not yet answered from the ``Grant`` messages. Returns (requests not sent,
        requests not answered): the schedulers' counts of requests and no-ops are that much too high. Once only."""
        if self._settled is not None:
            return self._settled
        unsent = unanswered = 0
        dq = self._dq
        for x0, n, pops in self._chains.values():
            if (pops[-1] if pops else x0) + dq < end:
                continue
            # a request arriving at the very instant of the end comes after it: the last Done left before it did
            sends = [x0, *pops]
            unsent += sum(1 for x in sends if x > end)
            unanswered += sum(1 for x in sends[:n] if x + dq >= end)
        if unsent or unanswered:
            self._n_req[0] -= unsent
            self._n_grant[0] -= unanswered
        self._settled = (unsent, unanswered)
        return self._settled

    def _wake(self, w: int, now: float) -> None:
        """Worker ``w`` reaches its queue when its last skipped no-op would have arrived (:meth:`_serve`)."""
        q = self.queues[w]
        if q:
            self._serve(w, q, now)
        else:
            self.slot_free[w] = True

    def on_timer(self, key: Hashable, now: float) -> None:
        tasks = self._ends.pop(key, None)
        if tasks is None:  # a failure detection (fault schedules)
            self._detected(key, now)
            return
        self._end_tasks(tasks, now)

    def _end_tasks(self, tasks: list[int], now: float) -> None:
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

    # --- worker failures (fault schedules, see :mod:`megha.schedulers.sparrow.faults`) -----------------------------
    def fail_workers(self, workers: list[int], now: float) -> list[int]:
        """Workers die at ``now``: the tasks running there are lost (their runs recorded as lost), the probes queued
        there are dropped, and the answers to the requests they had made will find them dead. The schedulers learn
        of it all ``failure_timeout`` seconds later (:class:`Lost`) and re-issue the probes and the tasks. Returns
        the tasks lost."""
        for w in workers:  # restored but still waiting for old answers: it does not come back now
            self._revive.discard(w)
        new = self.ledger.fail(workers)
        if not new:
            return []
        self._n_detect += 1
        key = ("detect", self._n_detect)
        at = now + self.failure_timeout
        notices: dict[int, tuple[list, list]] = {}
        self._pending[key] = (new, notices)
        gone = set(new)
        lost: list[int] = []
        for t, (e, w, sched, _) in list(self.running.items()):
            if w in gone:
                del self.running[t]
                self._ends[e].remove(t)  # its end timer finds nothing to end
                lost.append(t)
                notices.setdefault(sched, ([], []))[1].append(t)
        for w in new:
            self._revive.discard(w)
            self._announced.discard(w)
            self._detect[w] = (at, key)
            if self.resource:
                k = self.n_req[w]
                self.n_req[w] = 0
            else:
                k = 1 if not self.slot_free[w] and self.on_worker[w] < 0 else 0
                self.slot_free[w] = False
                self.on_worker[w] = -1
            if k:
                self._stale[w] = self._stale.get(w, 0) + k
            q = self.queues[w]
            if q:
                for job, sched, g, _, _ in q:
                    notices.setdefault(sched, ([], []))[0].append((job, g))
                self.probes_lost += len(q)
                self.queues[w] = None
        if lost:
            self.rec.lost(lost, now)
            self.tasks_lost += len(lost)
        self.port.set_timer(self.failure_timeout, key)
        return lost

    def restore_workers(self, workers: list[int], now: float) -> None:
        """Failed workers come back idle; a worker whose old requests still await their answers comes back when the
        last one has arrived (the answers belong to the incarnation that died). The schedulers that were told it
        died learn it is back (:class:`WorkersBack`)."""
        back = []
        for w in dict.fromkeys(workers):
            if w not in self.dead:
                continue
            if self._stale.get(w):
                self._revive.add(w)
            else:
                back.append(w)
        self._back(back)

    def _back(self, workers: list[int]) -> None:
        told = []
        self.ledger.restore(workers)
        for w in workers:
            self._revive.discard(w)
            self._detect.pop(w, None)
            if self.resource:
                self.free[w] = self.capacity[w]
            else:
                self.slot_free[w] = True
            if w in self._announced:
                self._announced.discard(w)
                told.append(w)
        if told:
            for s in self.schedulers:
                self.port.send(s, WorkersBack(told))

    def _notice(self, w: int, sched: int, now: float) -> tuple[list, list]:
        """Where to note what a scheduler lost on dead worker ``w``: the pending detection, or (detected already:
        the scheduler's request fails at once) a notice sent at the end of this event."""
        at, key = self._detect[w]
        pending = self._pending.get(key)
        if pending is not None and now < at:
            return pending[1].setdefault(sched, ([], []))
        out = ([], [])
        self.port.send(self.schedulers[sched], Lost([], out[0], out[1]))  # filled before anything handles it
        return out

    def _live_probes(self, msg: Probes, now: float) -> Probes | None:
        """The probes of ``msg`` for live workers; those for dead ones are lost (their scheduler re-probes)."""
        dead = np.fromiter((w in self.dead for w in msg.workers.tolist()), dtype=bool, count=len(msg))
        if not dead.any():
            return msg
        notes: dict[int, tuple[list, list]] = {}
        for w, g in zip(msg.workers[dead].tolist(), msg.groups[dead].tolist(), strict=True):
            w_note = notes.get(w)
            if w_note is None:
                w_note = notes[w] = self._notice(w, msg.scheduler, now)
            w_note[0].append((msg.job, g))
        self.probes_lost += int(dead.sum())
        if dead.all():
            return None
        keep = ~dead
        return Probes(msg.job, msg.scheduler, msg.workers[keep], msg.groups[keep], msg.demands)

    def _live_reply(self, msg: TaskReply, now: float) -> TaskReply | None:
        """The answers of ``msg`` for live workers; those for dead ones are stale (see :meth:`_stale_answer`)."""
        dead = np.fromiter((w in self.dead for w in msg.workers.tolist()), dtype=bool, count=len(msg))
        if not dead.any():
            return msg
        for w, t in zip(msg.workers[dead].tolist(), msg.tasks[dead].tolist(), strict=True):
            self._stale_answer(w, msg.scheduler, t, now)
        if dead.all():
            return None
        k = ~dead
        sent = msg.tasks[k]
        return TaskReply(
            msg.job,
            msg.scheduler,
            msg.workers[k],
            sent,
            msg.durations[k],
            msg.waited[k],
            sent[sent >= 0],
            None if msg.demands is None else msg.demands[k],
            None if msg.reserved is None else msg.reserved[k],
        )

    def _stale_answer(self, w: int, sched: int, task: int, now: float) -> None:
        """The answer to a request that dead worker ``w`` made before it died: a task sent there is lost (never
        started; its scheduler launches it again); the last such answer lets a restored worker come back."""
        if task >= 0:
            self._notice(w, sched, now)[1].append(task)
            self.tasks_lost += 1
        left = self._stale.get(w, 0) - 1
        if left > 0:
            self._stale[w] = left
            return
        self._stale.pop(w, None)
        if w in self._revive:
            self._back([w])

    def _detected(self, key: tuple, now: float) -> None:
        """The failure detection of one fault: every scheduler learns which of its workers are still down, and
        each what it lost there."""
        workers, notices = self._pending.pop(key)
        dead = [w for w in workers if w in self.dead and self._detect.get(w, (0, None))[1] == key]
        self._announced.update(dead)
        for i, s in enumerate(self.schedulers):
            probes, tasks = notices.get(i, ([], []))
            if dead or probes or tasks:
                self.port.send(s, Lost(dead, probes, tasks))

    # --- inspection --------------------------------------------------------------------------------
    def queue_length(self, w: int) -> int:
        """Probes waiting at worker ``w``."""
        q = self.queues[w]
        return 0 if q is None else len(q)
