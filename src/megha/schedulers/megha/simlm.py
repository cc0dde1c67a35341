"""A simulator-only Local Master that runs its cluster's workers in-process.

In the simulator each LM's workers are a :class:`~megha.schedulers.common.workers.WorkerPool` component: a
batch costs a ``Launch`` message (LM → workers, one network delay), a timer per task end and a ``Finished``
message back (the worker report delay, 0 by default) — three engine events per task on top of the
scheduling itself. :class:`SimLocalMaster` keeps exactly that timing model but handles the pool side
in-process: the workers' state is updated when the LM commits a launch or a kill (it is the only one who
touches them), the times the pool would have recorded are recorded as such, and the completion reaches the
LM through one absolute-time timer at the instant the ``Finished`` message would have arrived. The
over-commit check of the pool is kept (a :class:`~megha.schedulers.common.ledger.WorkerLedger` of the LM's
workers: one task per worker in slot mode, demands within capacity in resource mode; the ledger's error), and
the message counts report the ``Launch``/``Finished``/``Kill``/``Killed`` messages modelled.

Only the ordering of events that fall at exactly the same simulated instant may differ from the two-component
form (an end is ordered by when its task was launched, not by when the pool's timer fired), so results are
identical unless two unrelated events coincide to the last bit. The deployment uses it only when the engine
has no processing model (per-message costs need real messages); the live runtime uses :class:`LocalMaster`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.ledger import WorkerLedger
from megha.schedulers.common.messages import Finished, Kill, Killed, Launch
from megha.schedulers.common.workers import WorkerPool
from megha.schedulers.megha.fairness import FairShare
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.lm import LocalMaster
from megha.schedulers.megha.messages import LaunchRequest, Preempted, TaskDone
from megha.schedulers.megha.messages import as_list as _as_list
from megha.sim.component import Component, Port, timer_queue_of

# a failed worker holds a pseudo task with this id + the worker's id: never a real task id
_FAILED = 1 << 62


class InProcessWorkers(Component):
    """Placeholder at the worker-pool address of a :class:`SimLocalMaster` (its workers run inside the LM).

    Registering it keeps the address taken and the engine's per-component random streams in the same order
    as with real pools, so runs give the same numbers either way.
    """

    kind = WorkerPool.kind
    crash_kind = None

    def on_message(self, msg: Any, now: float) -> None:
        raise TypeError(f"{self.address}: the workers of this LM run in-process; got {type(msg).__name__}")


class SimLocalMaster(LocalMaster):
    """:class:`LocalMaster` with its workers in-process (simulator only; uses the port's
    :class:`~megha.sim.component.SimHooks` when it has them).

    Built on the LM's hooks (docs/extending.md): :meth:`start_tasks` and :meth:`to_workers` run the workers'
    side here, :attr:`direct_updates` and :meth:`handle` (a lean handler of one-mapping launch requests); the rest
    of it reads the LM's state to inline the LM's own steps on the hot path (same package, same decisions)."""

    direct_updates = True

    def __init__(
        self,
        l: int,  # noqa: E741 - the papers' name
        layout: MeghaLayout,
        recorder: TaskRecorder,
        heartbeat: float = 5.0,
        fair: FairShare | None = None,
        reply_always: bool = False,
        launch_delay: float = 0.0005,
        report_delay: float = 0.0,
        *,
        phase: float | None = None,
    ) -> None:
        super().__init__(l, layout, recorder, heartbeat, fair, reply_always, phase=phase)
        self.launch_delay = launch_delay
        self.report_delay = report_delay
        lo, hi = self.lo, self.hi
        cap = None if layout.capacity is None else layout.capacity[lo:hi]
        #: the workers' own record (what each runs or uses; rows from worker ``lo``) and the over-commit check
        self.ledger = WorkerLedger(self.pool, hi - lo, cap, first=lo)
        self.w_task = self.ledger.task  # slot mode: the ledger's list, read on the hot paths (None in resource mode)
        self.w_used = self.ledger.used  # resource mode: the ledger's used vectors (None in slot mode)
        self._ends: dict[float, list] = {}  # end time on the worker -> [pool timer instant, task ids...]
        self._running: dict[int, tuple] = {}  # task -> (end time, worker, demand row or None)
        self._killed: dict[int, Killed] = {}  # timer key -> Killed report on its way to this LM
        self._kill_seq = 0
        self._n_launch: list | None = None  # the engine's count cells of the modelled Launch/Finished messages
        self._n_finished: list | None = None
        self._early: set[int] = set()  # resource mode: ended tasks whose resources a preemption freed already
        self._failed: dict[int, np.ndarray | None] = {}  # failed worker -> what it holds (resource mode)
        #: on a port without SimHooks (a test's RecordingPort): the counts of the modelled messages, by type name
        self.modelled: dict[str, list] = {}
        # slot mode without fairness: a launch request of one mapping, and the end of one task, take a path of
        # their own (the usual case of a busy datacenter; the same steps as the general code, inlined)
        self._one = not self.resource_mode and fair is None
        self._on_request_any = self.handle(LaunchRequest, self._on_request_one) if self._one else None
        # the simulator's recorder: the hot paths append to its lists themselves (TaskRecorder.inline_logs)
        self._logs = recorder.inline_logs() if type(recorder) is TaskRecorder else None

    def attach(self, port: Port) -> None:
        super().attach(port)  # direct_updates: self._routes and self._route are the port's (SimHooks.route)
        self._heap, self._next = timer_queue_of(port)
        self._done_keys = [(a, "on_message_done") for a in self.gm_addr]  # SimPort.route's cache keys
        self._delta_keys = [(a, "on_message_delta") for a in self.gm_addr]
        # a one-mapping launch request takes on_message_launch's inline path (else the message's)
        self._launch_inline = self._one and not self.reply_always and self._heap is not None
        self._end_timer = self._on_end  # the engine's handler of this LM's task-end timers (bound once)

    # --- the simulator's port hooks, with the plain Port's fallback ----------------------------------------------
    def _cell(self, cls: type) -> list:
        """The count cell of the modelled messages of type ``cls``: the run's (``SimHooks.message_counter``), or on a
        plain :class:`~megha.sim.component.Port` this LM's own, in :attr:`modelled`."""
        counter = getattr(self.port, "message_counter", None)
        if counter is not None:
            return counter(cls)
        return self.modelled.setdefault(cls.__name__, [0])

    def _at(self, at: float, key: object, now: float) -> None:
        """A timer at the absolute time ``at``: ``SimHooks.set_timer_at``, else the plain port's ``set_timer``."""
        set_at = getattr(self.port, "set_timer_at", None)
        if set_at is not None:
            set_at(at, key)
        else:
            self.port.set_timer(at - now, key)

    # --- the worker side, in-process ------------------------------------------------------------------------
    def to_workers(self, msg: Launch | Kill, now: float) -> None:
        """The workers' side of a launch (:meth:`start_tasks`) or a kill, in-process."""
        if type(msg) is Launch:
            self.start_tasks(_as_list(msg.tasks), _as_list(msg.workers), _as_list(msg.durations), msg.demands, now)
        else:
            self._kill(msg, now)

    def start_tasks(
        self, tasks: list[int], workers: list[int], durs: list[float], demands: np.ndarray | None, now: float
    ) -> None:
        """What the pool does when the ``Launch`` arrives, one launch delay from now; task ends are grouped by
        instant (one timer each, at the instant the pool's ``Finished`` would reach this LM)."""
        c = self._n_launch
        if c is None:
            c = self._n_launch = self._cell(Launch)
        c[0] += 1
        d = self.launch_delay
        start = now + d
        rec = self.rec
        rec.add_comm(tasks, d)
        lo = self.lo
        ledger = self.ledger
        if self.resource_mode:
            wa = np.asarray(workers, dtype=np.int64) - lo  # the ledger's rows
            np.add.at(self.w_used, wa, demands)
            over = ledger.over_rows(wa)
            if over.any():
                for i in np.unique(wa[over]).tolist():
                    self._release_ended(i + lo, start)
                ledger.check_rows(wa, start)
        else:
            slot = self.w_task
            for i, t in enumerate(tasks):
                j = workers[i] - lo
                if slot[j] >= 0 and not self._ends_by(slot[j], start):
                    ledger.over_slot(workers[i], t, start)
                slot[j] = t
        rec.started(tasks, start, workers)
        running = self._running
        ends = self._ends
        r = self.report_delay
        heap = self._heap
        if heap is None:  # not in the simulator's engine (a plain Port: tests with a recording port)
            for i, t in enumerate(tasks):
                e = start + durs[i]
                running[t] = (e, workers[i], None if demands is None else demands[i])
                g = ends.get(e)
                if g is None:
                    t1 = start + (e - start)  # the instant the pool's timer would fire
                    ends[e] = [t1, t]
                    self._at(t1 + r, e, now)
                else:
                    g.append(t)
            return
        nxt = self._next
        end = self._on_end
        push = heapq.heappush
        for i, t in enumerate(tasks):
            e = start + durs[i]
            running[t] = (e, workers[i], None if demands is None else demands[i])
            g = ends.get(e)
            if g is None:
                t1 = start + (e - start)  # the instant the pool's timer would fire
                ends[e] = [t1, t]
                when = t1 + r
                if not when >= now:
                    raise ValueError(f"{self.address}: timer at {when} is before now ({now})")
                push(heap, (when, nxt(), end, e))
            else:
                g.append(t)

    def _on_request_one(self, msg: LaunchRequest, now: float) -> None:
        """:meth:`LocalMaster._on_request` for a request of one mapping that is accepted (slot mode, no fairness),
        with :meth:`start_tasks` inlined; anything else takes the general path."""
        tasks = msg.tasks
        if type(tasks) is not list or len(tasks) != 1 or self.reply_always or self._heap is None:
            return self._on_request_any(msg, now)
        w = msg.workers[0]
        if self.cluster.task[w - self.lo] >= 0:  # rejected: the general path answers
            return self._on_request_any(msg, now)
        self.on_message_launch((msg.gm, msg.req, tasks[0], w, msg.durations[0], msg.users[0]), now)

    def on_message_launch(self, p: tuple, now: float) -> None:
        """A :class:`LaunchRequest` of one mapping delivered directly by a GM (``SimPort.route``):
        ``p = (gm, request id, task, worker, duration, user)``. Accepted: :meth:`_on_request_one`'s work inline;
        anything else takes the message path."""
        gm, req, t, w, dur, user = p
        cluster = self.cluster
        k = w - self.lo  # the cluster's and the workers' index of w (both start at self.lo)
        ctask = cluster.task
        if ctask[k] >= 0 or not self._launch_inline:
            return self.on_message(LaunchRequest(gm, req, [t], [w], [dur], [user], None), now)
        ctask[k] = t
        cluster.owner[k] = gm
        cluster.user[k] = user
        if self._part_l[w] != gm:
            self.counters["repartitions"] += 1
        seq = self._seq = self._seq + 1
        ch = self._changes
        ch.pop(w, None)
        ch[w] = (seq, gm)
        if not self._armed:
            self._arm(now)
        # start_tasks for one task
        c = self._n_launch
        if c is None:
            c = self._n_launch = self._cell(Launch)
        c[0] += 1
        d = self.launch_delay
        start = now + d
        slot = self.w_task
        if slot[k] >= 0 and not self._ends_by(slot[k], start):
            self.ledger.over_slot(w, t, start)
        slot[k] = t
        logs = self._logs
        if logs is None:
            self.rec.launched_one(t, d, start, w)  # add_comm_one and started_one
        else:  # TaskRecorder.launched_one, inlined
            logs.comm_ids.append(t)
            logs.comm_delays.append(d)
            logs.started_ids.append(t)
            logs.started_times.append(start)
            logs.started_workers.append(w)
            rec = self.rec
            rec.running += 1
            rec.last_progress = start
        e = start + dur
        self._running[t] = (e, w, None)
        g = self._ends.get(e)
        if g is None:
            t1 = start + (e - start)  # the instant the pool's timer would fire
            self._ends[e] = [t1, t]
            at = t1 + self.report_delay
            if not at >= now:
                raise ValueError(f"{self.address}: timer at {at} is before now ({now})")
            heapq.heappush(self._heap, (at, self._next(), self._end_timer, e))
        else:
            g.append(t)
        self.processed[gm] = req

    def _ends_by(self, task: int, t: float) -> bool:
        """Whether ``task`` (running) has ended on its worker by ``t``: the pool would have freed it already.

        Only a preemption launches on a worker whose task the LM has not yet seen finish (the kill's victim may
        end before the kill and the new launch arrive); the two-component pool frees it first, so does this.
        """
        entry = self._running.get(task)
        return entry is not None and self._ends[entry[0]][0] <= t

    def _release_ended(self, w: int, t: float) -> None:
        """Resource mode: free now the resources of tasks on ``w`` that end by ``t`` (see :meth:`_ends_by`)."""
        for task, (_, tw, dem) in self._running.items():
            if tw == w and task not in self._early and self._ends_by(task, t):
                self.w_used[w - self.lo] -= dem
                self._early.add(task)

    def _on_end(self, e: float, now: float) -> None:
        """The timer of the tasks ending at ``e`` (the engine calls it directly; :meth:`on_timer` also takes it)."""
        g = self._ends.pop(e)
        if len(g) != 2 or not self._one:
            return self._end_group(g, e, now)
        # one task ends: _end_group and LocalMaster._finished inlined for it
        t = g[1]
        running = self._running
        entry = running.pop(t, None)
        if entry is None or entry[0] != e:  # killed (and maybe relaunched with another end)
            if entry is not None:
                running[t] = entry
            return
        w = entry[1]
        k = w - self.lo
        slot = self.w_task
        if slot[k] == t:  # else a preemption's launch already took the worker (see _ends_by)
            slot[k] = -1
        logs = self._logs
        if logs is None:
            self.rec.finished_one(t, g[0])
        else:  # TaskRecorder.finished_one, inlined
            logs.finished_ids.append(t)
            t1 = g[0]
            logs.finished_times.append(t1)
            rec = self.rec
            rec.running -= 1
            rec.last_progress = t1
        c = self._n_finished
        if c is None:
            c = self._n_finished = self._cell(Finished)
        c[0] += 1
        if self.kill_pending or self._waiting._len:
            return self._finished([t], [w], None, now)
        cluster = self.cluster
        gm = cluster.owner[k]  # the cluster's index of w is k too
        cluster.task[k] = cluster.owner[k] = cluster.user[k] = -1
        if not self._armed:
            self._arm(now)
        seq = self._seq = self._seq + 1
        ch = self._changes
        ch.pop(w, None)
        ch[w] = (seq, gm)
        routes = self._routes
        if routes is not None:
            r = routes.get(self._done_keys[gm])
            if r is None:
                r = self._route(self.gm_addr[gm], "on_message_done", TaskDone)
            if r:  # in the simulator: the same event, a tuple instead of a TaskDone (see SimPort.route)
                append, handler, d, nxt, cell, _ = r
                cell[0] += 1
                append((now + d, nxt(), handler, (self.l, t, w, self.processed[gm])))
                return
        self.port.send(self.gm_addr[gm], TaskDone(self.l, [t], [w], None, self.processed[gm]))

    def _end(self, e: float, now: float) -> None:
        """Tasks ending at ``e`` on the workers: the pool's part (free the workers, record the end at the pool's
        instant), then the LM's (what it does with the pool's ``Finished``)."""
        self._end_group(self._ends.pop(e), e, now)

    def _end_group(self, g: list, e: float, now: float) -> None:
        running = self._running
        ts, ws, ds = [], [], []
        slot = None if self.resource_mode else self.w_task
        lo = self.lo
        for k in range(1, len(g)):
            t = g[k]
            entry = running.pop(t, None)
            if entry is None or entry[0] != e:  # killed (and maybe relaunched with another end)
                if entry is not None:
                    running[t] = entry
                continue
            ts.append(t)
            w = entry[1]
            ws.append(w)
            if slot is None:
                ds.append(entry[2])
            elif slot[w - lo] == t:  # else a preemption's launch already took the worker (see _ends_by)
                slot[w - lo] = -1
        if not ts:
            return
        d_arr = None
        if slot is None:
            d_arr = np.array(ds)
            if self._early:
                keep = [i for i, t in enumerate(ts) if t not in self._early]
                self._early.difference_update(ts)
                if keep:
                    self.ledger.release([ws[i] for i in keep], d_arr[keep])
            else:
                self.ledger.release(ws, d_arr)
        self.rec.finished(ts, g[0])
        c = self._n_finished
        if c is None:
            c = self._n_finished = self._cell(Finished)
        c[0] += 1
        self._finished(ts, ws, d_arr, now)

    def _kill(self, msg: Kill, now: float) -> None:
        """Free the victims' workers now (the LM reuses them at once); the kill takes effect on the workers one
        launch delay later, when the pool would have received it: tasks that end by then are not killed."""
        self._cell(Kill)[0] += 1
        arrive = now + self.launch_delay
        ts, ws, ds = [], [], []
        ends = self._ends
        for t in msg.tasks if isinstance(msg.tasks, list) else msg.tasks.tolist():
            entry = self._running.get(t)
            if entry is None or ends[entry[0]][0] <= arrive:  # not running, or finished before the kill arrives
                continue
            del self._running[t]
            ts.append(t)
            ws.append(entry[1])
            ds.append(entry[2])
        d_arr = None if not ds or ds[0] is None else np.array(ds)
        if ts:
            self.ledger.release(ws, d_arr)
        self._kill_seq += 1
        key = ("kill", self._kill_seq)
        self._killed[key] = Killed(np.array(ts, dtype=np.int64), np.array(ws, dtype=np.int64), d_arr)
        self._at(arrive, key, now)

    def on_timer(self, key: Hashable, now: float) -> None:
        if type(key) is float:
            self._on_end(key, now)
        elif key == "heartbeat":
            super().on_timer(key, now)
        elif key[0] == "kill":  # the kill reaches the workers: they report the killed tasks
            killed = self._killed.pop(key)
            if len(killed.tasks):
                self.rec.preempted(killed.tasks.tolist(), now)
            self._cell(Killed)[0] += 1
            key = ("killed", key[1])
            self._killed[key] = killed
            self._at(now + self.report_delay, key, now)
        else:
            self._on_killed(self._killed.pop(key), now)

    def running_tasks(self) -> int:
        """How many tasks run on this LM's workers."""
        return len(self._running)

    # --- worker failures (fault schedules) --------------------------------------------------------------------
    def fail_workers(self, workers: list[int], now: float, task_info: Callable[[int], tuple[float, int]]) -> int:
        """Workers of this LM die at ``now`` (Megha 2020 §IV-D: the LM relaunches the tasks of a failed worker).

        Each task running on them is lost (its run is recorded as lost) and handed back to the GM that placed it
        (``Preempted``), which puts it at the head of its queue and places it again on any worker its constraints
        allow; the LM marks the dead workers fully used until :meth:`restore_workers`, so every GM learns from the
        next update that they are gone. ``task_info(task)`` gives a task's (duration, constraint mask): the LM's
        active task list, from which it rebuilds the GM's queue entry. Returns the number of tasks lost.
        """
        mine = {w for w in workers if self.lo <= w < self.hi and w not in self._failed}
        if not mine:
            return 0
        cluster = self.cluster
        by_gm: dict[int, list[tuple]] = {}
        lost = [(t, e) for t, e in self._running.items() if e[1] in mine]
        for t, (_, w, dem) in lost:
            user = self._user_of(w, t)
            del self._running[t]
            if t in self._early:  # resource mode: a preemption's launch freed its resources already
                self._early.discard(t)
            else:
                self.ledger.release([w], None if dem is None else dem[None, :])
            kp = self.kill_pending.pop(t, None)
            if kp is not None:  # a preemption's victim whose kill has not reached the worker: a loss all the same
                gm = kp[0]
            else:  # off the LM's books (every GM hears of w: it is marked failed below in any case)
                gm, user = self.remove_task(w, t, dem, now)
            dur, mask = task_info(t)
            by_gm.setdefault(gm, []).append((t, dur, mask, dem, user))
        if lost:
            self.rec.lost([t for t, _ in lost], now)
        for gm, entries in by_gm.items():
            ids = np.array([e[0] for e in entries], dtype=np.int64)
            self.port.send(self.gm_addr[gm], Preempted(self.l, ids, self.processed[gm], entries))
        lo = self.lo
        for w in sorted(mine):
            fid = _FAILED + w
            if self.resource_mode:
                d = cluster.free[w - lo].copy()
                cluster.try_place(w, fid, d, -1, -1)
                self.w_used[w - lo] += d
                self._failed[w] = d
            else:
                cluster.try_place(w, fid, None, -1, -1)
                self.w_task[w - lo] = fid
                self._failed[w] = None
            self.worker_changed(w, now)
        self.counters["workers_failed"] += len(mine)
        self.counters["tasks_lost_with_workers"] += len(lost)
        return len(lost)

    def _user_of(self, w: int, t: int) -> int:
        c = self.cluster
        if self.resource_mode:
            entry = c.tasks_on[w - self.lo].get(t)
            return -1 if entry is None else int(entry[1])
        return int(c.user[w - self.lo])

    def restore_workers(self, workers: list[int], now: float) -> None:
        """Failed workers of this LM come back empty; every GM learns it from the next update."""
        lo = self.lo
        for w in workers:
            if w not in self._failed:
                continue
            d = self._failed.pop(w)
            self.cluster.remove(w, _FAILED + w, d)
            if d is None:
                self.w_task[w - lo] = -1
            else:
                self.w_used[w - lo] -= d
            self.worker_changed(w, now)
