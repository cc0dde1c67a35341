"""The packing scheduler with its workers in-process: one engine event per slot pass and per job arrival.

With a separate :class:`~megha.schedulers.common.workers.WorkerPool` every task costs four engine events: the slot
pass that places it, the ``Launch`` reaching the pool (one network delay ``d_sw`` later), the pool's timer at the
task's end, and the ``Finished`` report reaching the scheduler (``d_ws`` after the end). The scheduler is the only
component that ever touches those workers, so :class:`InProcessPackingScheduler` keeps the pool's state itself — a
:class:`~megha.schedulers.common.ledger.WorkerLedger` (the one over-commit check) and the in-flight task ends,
:class:`InFlight` — and applies each report when the scheduler would next act on it: before the job arrival or the
slot pass that follows it in the engine's order. The times are the pool's own, computed with the same float
operations (a launch reaches the workers at ``t + d_sw``; a task of duration ``s`` ends at ``(t + d_sw) + s``;
tasks ending at the same instant share one end timer, fired at the first one's ``start + (end - start)``; the report
arrives ``d_ws`` later), and the ``Launch`` and ``Finished`` messages are counted as sent.

**Order.** The engine runs events by time, then by the order their sequence numbers were drawn. Of the pool's
events only the reports (``Finished``) change the scheduler, and their order against the scheduler's own events is
fixed by these rules (``T_F`` is a report's arrival, ``at`` its end timer's time):

* reports among themselves: by ``(T_F, at, order of their end timers' creation)`` — the order they were sent;
* a report and a job arrival at the same instant: the report first (the arrival is sent by the trace source at that
  very instant, the report one delay earlier);
* a report and a slot pass at the same instant ``T``: the pass was armed by the first scheduler event after the
  previous pass, at time ``a`` (a job arrival or a report); the report comes first iff ``at <= a``. At ``at == a``
  the end timer's number was drawn when the launch reached the pool, before the arming event's (an arrival's is
  drawn at ``a`` itself; a report's at its own end timer, ``a - d_ws``, which is later than the launch whenever
  durations exceed ``d_ws``).

These hold when every task lasts longer than :func:`min_duration` (``2 (d_sw + d_ws)``, with room for rounding):
then an end timer never fires before a later launch with the same end instant reaches the pool, and the last rule's
tie is decided as stated. The builder uses this component only then, and only without processing costs (each
message would have a cost) or a fault schedule (a crashed scheduler holds its messages); otherwise the pool runs as
a component. ``tests/test_packing_inprocess.py`` compares both forms event by event on traces full of ties.

The run stops, as with the pool, when the last report reaches the scheduler: once nothing is queued and every
outstanding task is in flight, one event is set at the last report's instant (after the slot pass at that instant
when the rules above say so). The slot passes are those the reports would have armed (each is set when the previous
pass ends, at the instant the first outstanding report would arm it, and moved when a job arrives earlier).

Simulator only: it needs the port's :class:`~megha.sim.component.TimerQueue`. What differs from the two-component
form is only what no result depends on: the engine's event count (about one event per slot pass and per job instead
of four per task), and the recorder's ``running`` count and last-progress time between a report's instant and the
next scheduler event that applies it (read only by the stall watchdog).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable
from typing import Any

import numpy as np

from megha.errors import SimulationError
from megha.metrics.recorder import FLUSH_EVERY, TaskRecorder
from megha.schedulers.common.ledger import FREE, WorkerLedger
from megha.schedulers.common.messages import Finished, JobArrival, Launch
from megha.schedulers.packing.component import PackingScheduler, TaskSizer
from megha.schedulers.packing.policies import PackingPolicy
from megha.sim.component import Port, timer_queue_of

_INF = math.inf


def min_duration(d_sw: float, d_ws: float) -> float:
    """Tasks must last longer than this for the in-process workers to order events as the pool does (see the module
    docstring): twice the round trip, plus a microsecond for the rounding of times up to about 10^9 s."""
    return 2.0 * (d_sw + d_ws) + 1e-6


class InFlight:
    """The in-flight tasks of in-process workers, grouped by end instant as the pool's end timers group them.

    A group is a list ``[T_F, at, seq, end, tasks, workers, next]``: the report's arrival time, the end timer's time,
    the group's creation number, the end instant (the pool's timer key), its tasks and their workers in launch order,
    and the next group with the same ``T_F`` (None). The groups reach the scheduler in ``(T_F, at, seq)`` order:
    :attr:`heap` holds each distinct ``T_F`` once (plain floats: a heap of floats compares far faster than one of
    lists) and :attr:`due` the first group of each ``T_F``, chained to the others of that ``T_F`` in ``(at, seq)``
    order (almost always none); :attr:`open` finds a group by end instant. Sans-I/O: times are passed in.
    """

    def __init__(self, d_sw: float, d_ws: float) -> None:
        self.d_sw = float(d_sw)
        self.d_ws = float(d_ws)
        self.heap: list[float] = []
        self.due: dict[float, list] = {}
        self.open: dict[float, list] = {}
        self.seq = 0
        self.tasks = 0  # tasks in flight

    def file(self, g: list) -> None:
        """Queue a new group by its report's arrival ``g[0]``, after the groups of the same ``T_F`` whose end timer
        comes first (its ``seq`` is the newest)."""
        tf = g[0]
        h = self.due.get(tf)
        if h is None:
            self.due[tf] = g
            heapq.heappush(self.heap, tf)
            return
        if g[1] < h[1]:  # an earlier end timer created later (rounding): it goes first
            g[6] = h
            self.due[tf] = g
            return
        while h[6] is not None and h[6][1] <= g[1]:
            h = h[6]
        g[6] = h[6]
        h[6] = g

    def launch(self, tasks: list[int], workers: list[int], durations: list[float], now: float) -> float:
        """Tasks sent to their workers at ``now``: they start at ``now + d_sw`` (returned) and join their end groups."""
        start = now + self.d_sw
        open_ = self.open
        self.tasks += len(tasks)
        for i, t in enumerate(tasks):
            e = start + durations[i]
            g = open_.get(e)
            if g is None:
                at = start + (e - start)  # the instant the pool's end timer would fire
                self.seq += 1
                g = open_[e] = [at + self.d_ws, at, self.seq, e, [t], [workers[i]], None]
                self.file(g)
            else:
                g[4].append(t)
                g[5].append(workers[i])
        return start

    def first(self) -> list | None:
        """The group whose report comes first (None if nothing is in flight)."""
        return self.due[self.heap[0]] if self.heap else None

    def pop(self) -> list:
        """Remove and return the group whose report comes first."""
        tf = self.heap[0]
        g = self.due[tf]
        if g[6] is None:
            del self.due[tf]
            heapq.heappop(self.heap)
        else:
            self.due[tf] = g[6]
        del self.open[g[3]]
        self.tasks -= len(g[4])
        return g

    def last(self) -> list | None:
        """The group whose report comes last (None if nothing is in flight)."""
        if not self.heap:
            return None
        g = self.due[max(self.heap)]
        while g[6] is not None:
            g = g[6]
        return g


class InProcessPackingScheduler(PackingScheduler):
    """:class:`PackingScheduler` whose workers run in-process (see the module docstring). ``pool`` names the owner in
    the over-commit error; ``capacity`` (resource mode) the workers' capacities; ``d_sw``/``d_ws`` the one-way delays
    scheduler → workers and workers → scheduler."""

    def __init__(
        self,
        address: str,
        pool: str,
        recorder: TaskRecorder,
        policy: PackingPolicy | None,
        sizer: TaskSizer,
        n_tasks: int,
        slot: float,
        worker_masks: np.ndarray | None = None,
        *,
        n_workers: int,
        capacity: np.ndarray | None = None,
        d_sw: float = 0.0005,
        d_ws: float = 0.0005,
    ) -> None:
        super().__init__(address, pool, recorder, policy, sizer, n_tasks, slot, worker_masks)
        self.ledger = WorkerLedger(pool, n_workers, capacity)
        self.flight = InFlight(d_sw, d_ws)
        self.d_sw = float(d_sw)
        self._pending: tuple[float, int, float] | None = None  # the armed slot pass: (arming time a, handle, T)
        self._last_set = False
        self._heap: list | None = None
        self._next = None
        self._n_launch: list = [0]
        self._n_finished: list = [0]
        self._stops = False  # the run stops when the last completion is known (set in on_start)
        self._logs = None  # the recorder's lists, appended to inline (TaskRecorder.inline_logs)
        self._pass = self._on_pass  # the engine's handler of this scheduler's slot passes (bound once)

    def attach(self, port: Port) -> None:
        super().attach(port)
        self._heap, self._next = timer_queue_of(port)
        counter = getattr(port, "message_counter", None)
        if counter is not None:
            self._n_launch = counter(Launch)
            self._n_finished = counter(Finished)

    def on_start(self, now: float) -> None:
        if self._heap is None:
            raise SimulationError(f"{self.address}: in-process workers need the simulator's timer queue")
        rec = self.rec
        self._stops = getattr(rec, "on_all_done", None) is not None
        self._logs = rec.inline_logs() if type(rec) is TaskRecorder else None

    def on_recover(self, now: float) -> None:
        """A crashed scheduler would hold its workers' reports until it is back; this form cannot (the builder uses the
        two-component form under a fault schedule): refuse rather than give other results."""
        raise SimulationError(f"{self.address}: in-process workers cannot model a crashed scheduler (use a pool)")

    # --- reports ------------------------------------------------------------------------------------------------
    def _report(self, until: float, a: float) -> None:
        """Apply, in order, the reports that reach the scheduler before an event at ``until`` armed at ``a`` (a slot
        pass; ``a = inf`` for a job arrival, which every report at the same instant precedes): the workers' side
        (ledger release, end recorded at the end timer's time) and the scheduler's (departures, completion known at
        the report's arrival)."""
        fl = self.flight
        heap = fl.heap
        due = fl.due
        open_ = fl.open
        rec = self.rec
        logs = self._logs
        dep = self.policy.depart
        cons = self.constraints
        slot = self.ledger.task
        cell = self._n_finished
        pop = heapq.heappop
        while heap:
            tf = heap[0]
            if tf > until:
                return
            g = due[tf]
            if tf == until and g[1] > a:
                return
            _, at, _, e, ts, ws, nxt = g
            if nxt is None:
                pop(heap)
                del due[tf]
            else:
                due[tf] = nxt
            del open_[e]
            fl.tasks -= len(ts)
            cell[0] += 1
            if slot is not None:
                for w in ws:
                    slot[w] = FREE
            else:
                self.ledger.release(ws, self.dem[ts])
            if len(ts) == 1:
                t = ts[0]
                dep(t, ws[0])
                if cons is not None:
                    cons.mask.pop(t, None)
                if logs is None:
                    rec.finished_known_one(t, at, tf)
                    continue
                # TaskRecorder.finished_known_one, inline
                logs.finished_ids.append(t)
                logs.finished_times.append(at)
                logs.known_ids.append(t)
                logs.known_times.append(tf)
                rec.running -= 1
                rec.last_progress = at
                n = rec.outstanding = rec.outstanding - 1
                if not n & FLUSH_EVERY or n <= 0:
                    rec.known_done()
            else:
                for t, w in zip(ts, ws, strict=True):
                    dep(t, w)
                if cons is not None:
                    forget = cons.mask.pop
                    for t in ts:
                        forget(t, None)
                rec.finished(ts, at)
                rec.completion_known(ts, tf)

    # --- arming -------------------------------------------------------------------------------------------------
    def _arm_at(self, a: float) -> None:
        """Set the slot pass an event at time ``a`` arms: the next slot boundary after ``a``, computed as
        :meth:`PackingScheduler._arm` does at ``now = a``."""
        k = math.floor(a / self.slot + 1e-9) + 1
        at = a + max(0.0, k * self.slot - a)
        seq = self._next()
        heapq.heappush(self._heap, (at, seq, self._pass, a))
        self._pending = (a, seq, at)

    def _rearm(self) -> None:
        """After a pass: arm the pass the first outstanding report will arm; once nothing waits and every outstanding
        task is in flight, set the event at the last report's instant."""
        fl = self.flight
        if not fl.heap:
            return
        self._arm_at(fl.heap[0])
        if not self._last_set and self._stops and fl.tasks >= self.rec.outstanding and not self.policy.queue_len():
            self._last_set = True
            heapq.heappush(self._heap, (fl.last()[0], self._next(), self._on_last, None))

    # --- events -------------------------------------------------------------------------------------------------
    def on_message(self, msg: Any, now: float) -> None:
        """A job's tasks join the queue; the reports that precede it are applied first."""
        if not isinstance(msg, JobArrival):
            super().on_message(msg, now)
            return
        heap = self.flight.heap
        if heap and heap[0] <= now:
            self._report(now, _INF)
        self._admit(msg, now)
        p = self._pending
        if p is None:
            self._arm_at(now)
        elif p[0] > now:  # armed for a later report: this arrival arms it first
            self.port.cancel_timer(p[1])
            self._arm_at(now)

    def on_timer(self, key: Hashable, now: float) -> None:
        """A slot pass moved to :meth:`on_timer` (the engine rebinds handlers by name only on a replaced component)."""
        self._on_pass(key, now)

    def _on_pass(self, a: float, now: float) -> None:
        """A slot boundary armed at ``a``: the reports before it, the policy's decisions launched in-process, the
        queue size, and the pass the first report still in flight arms."""
        self._pending = None
        fl = self.flight
        heap = fl.heap
        if heap and heap[0] <= now:
            self._report(now, a)
            if self._stops and self.rec.outstanding <= 0:
                return  # the last completion is known: the run ends here
        self.slots += 1
        policy = self.policy
        placed = policy.schedule()
        if placed:
            if len(placed) == 1:
                self._launch_one(placed[0][0], placed[0][1], now)
            else:
                self._launch(placed, now)
        # _q_mark, inline
        q = policy.queue_len()
        if self.q_last_t is None:
            self.q_first_t = now
        else:
            self.q_integral += self._q_prev * (now - self.q_last_t)
        self.q_last_t = now
        self._q_prev = q
        if q > self.q_max:
            self.q_max = q
        if heap:  # _rearm's common case, inline
            if not self._last_set and self._stops and fl.tasks >= self.rec.outstanding and not q:
                self._rearm()
                return
            a = heap[0]
            k = math.floor(a / self.slot + 1e-9) + 1
            at = a + max(0.0, k * self.slot - a)
            seq = self._next()
            heapq.heappush(self._heap, (at, seq, self._pass, a))
            self._pending = (a, seq, at)

    def _launch_one(self, t: int, w: int, now: float) -> None:
        """:meth:`_launch` of one task on worker ``w``, inline."""
        self._n_launch[0] += 1
        self.placements += 1
        fl = self.flight
        start = now + fl.d_sw
        e = start + self.dur.item(t)
        g = fl.open.get(e)
        if g is None:
            at = start + (e - start)
            fl.seq += 1
            tf = at + fl.d_ws
            g = fl.open[e] = [tf, at, fl.seq, e, [t], [w], None]
            if tf in fl.due:
                fl.file(g)
            else:  # InFlight.file's common case, inline
                fl.due[tf] = g
                heapq.heappush(fl.heap, tf)
        else:
            g[4].append(t)
            g[5].append(w)
        fl.tasks += 1
        slot = self.ledger.task
        if slot is not None:  # the ledger's slot claim, inline
            if slot[w] >= 0:
                self.ledger.over_slot(w, t, start)
            slot[w] = t
        else:
            self.ledger.claim([t], [w], start, self.dem[[t]])
        logs = self._logs
        if logs is None:
            self.rec.decided_launched_one(t, now, fl.d_sw, start, w)
            return
        # TaskRecorder.decided_launched_one, inline
        logs.decided_ids.append(t)
        logs.decided_times.append(now)
        logs.comm_ids.append(t)
        logs.comm_delays.append(fl.d_sw)
        logs.started_ids.append(t)
        logs.started_times.append(start)
        logs.started_workers.append(w)
        rec = self.rec
        rec.running += 1
        rec.last_progress = start

    def _launch(self, placed: list[tuple[int, int]], now: float) -> None:
        """What the ``Launch`` message and the pool did: record the decision and the start, claim the workers on the
        ledger, and file the task ends."""
        rec = self.rec
        self._n_launch[0] += 1
        d = self.d_sw
        tasks = [j for j, _ in placed]
        workers = [s for _, s in placed]
        self.placements += len(tasks)
        durs = list(map(self.dur.item, tasks))
        start = self.flight.launch(tasks, workers, durs, now)
        slot = self.ledger.task
        if slot is not None:
            for t, w in zip(tasks, workers, strict=True):
                if slot[w] >= 0:
                    self.ledger.over_slot(w, t, start)
                slot[w] = t
        else:
            self.ledger.claim(tasks, workers, start, self.dem[tasks])
        rec.decided(tasks, now)
        rec.add_comm(tasks, d)
        rec.started(tasks, start, workers)

    def _on_last(self, key: Any, now: float) -> None:
        """The last report's instant: the reports due now, but after the slot pass due now for those it precedes."""
        p = self._pending
        if p is not None and p[2] == now:
            self._report(now, p[0])
            heap = self.flight.heap
            if heap and heap[0] <= now:  # reports after the pass: once it has run
                heapq.heappush(self._heap, (now, self._next(), self._on_last, key))
            return
        self._report(now, _INF)

    def running_tasks(self) -> int:
        """Tasks in flight on the in-process workers."""
        return self.flight.tasks
