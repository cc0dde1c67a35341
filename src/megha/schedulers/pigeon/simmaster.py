"""A simulator-only Pigeon master that runs its group's workers in-process.

With :class:`~megha.schedulers.pigeon.workers.GroupWorkers` as a separate component, every task costs a ``Start``
message (master → workers, one network delay), a timer at its end, an ``Ended`` message back (the worker report
delay, 0 by default) and a ``TaskDone`` message to its distributor — four engine events. :class:`SimPigeonMaster`
keeps exactly that timing but handles the workers' side in-process: the start and end the workers would have
recorded are recorded as such when the master commits a launch, and the end reaches the master through one
absolute-time timer at the instant the ``Ended`` message would have arrived (tasks ending at the same instant share
it). What each worker runs is kept in the group's :class:`~megha.schedulers.common.ledger.WorkerLedger`
(:func:`~megha.schedulers.pigeon.workers.group_ledger`), whose slot check and over-commit error every launch applies.
The distributor only notes when it learns that a task finished, so the master records that instant (one
network delay later) itself, except for the run's last completions, which travel as messages so that the run ends
at the same instant. The message counts report the ``Start``/``Launch``, ``Ended``/``Finished`` and
``TaskDone``/``TasksDone`` messages modelled, and the communication delay of a launch is recorded as the engine would.

Only the order of events that fall at exactly the same simulated instant may differ from the multi-component form
(an end is ordered by when its task was launched, not by when the workers' timer fired), so results are the same
unless two unrelated events coincide to the last bit. The deployment uses it when the engine has no processing
model (per-message costs need real messages).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable
from typing import Any, NoReturn

import numpy as np

from megha.errors import SimulationError
from megha.schedulers.common.ledger import FREE
from megha.schedulers.common.messages import Finished, Launch
from megha.schedulers.pigeon.master import Entry, PigeonMaster
from megha.schedulers.pigeon.messages import Ended, GroupBack, Reroute, Start, TaskDone, TasksDone
from megha.schedulers.pigeon.workers import group_ledger
from megha.sim.component import Port, timer_queue_of

_BITS = [np.uint64(1 << b) for b in range(64)]
_first_fit = None  # the queues' compiled first fit, imported on first use so the CLI starts fast


def _load_first_fit() -> Callable[[np.ndarray, np.ndarray, int, int], int]:
    global _first_fit
    from megha.model._kernels import first_fit

    _first_fit = first_fit
    return first_fit


_INF = np.iinfo(np.int64).max  # an empty WaitQueue slot's head

# a failed worker's pseudo task in the ledger: never a task id, and >= 0 so that a launch on it is an over-commit
_DEAD = 1 << 62


class SimPigeonMaster(PigeonMaster):
    """:class:`PigeonMaster` with its workers in-process (simulator only; needs ``port.set_timer_at``)."""

    def __init__(
        self,
        *args: Any,
        launch_delay: float = 0.0005,
        report_delay: float = 0.0,
        known_delay: float = 0.0005,
        **kw: Any,
    ) -> None:
        """``args``/``kw``: :class:`PigeonMaster`'s parameters (its signature is the one place they are declared).
        ``launch_delay``: master → workers; ``report_delay``: workers → master; ``known_delay``: master →
        distributor (the links' latencies in the multi-component form)."""
        super().__init__(*args, **kw)
        self.launch_delay = float(launch_delay)
        self.report_delay = float(report_delay)
        self.known_delay = float(known_delay)
        #: the workers' own record (the task each runs; rows from the group's lowest worker id) and the
        #: over-commit check
        self.ledger = group_ledger(self.pool, self.workers)
        self._slot: list[int] = self.ledger.task  # the ledger's list, claimed and freed inline on the hot paths
        self._lo = self.ledger.first
        self._ends: dict[float, list] = {}  # end on the workers -> [the workers' timer instant, (task, worker)...]
        self._heap = None
        self._next = None
        self._fast = False  # the common path of _on_end is set up (on_start, in the simulator's engine)

    def attach(self, port: Port) -> None:
        super().attach(port)
        self._heap, self._next = timer_queue_of(port)

    def on_start(self, now: float) -> None:
        super().on_start(now)
        counter = getattr(self.port, "message_counter", None)
        if counter is None or self._heap is None:  # not in the simulator's engine (tests with a recording port)
            return
        self._n_start = counter(Start)
        self._n_ended = counter(Ended)
        self._n_done = counter(TaskDone)
        # complemented constraint mask, packed word and bit of each worker of the group (the common path)
        idx = self.index
        self._inv_mask = {w: ~m & 0xFFFFFFFF for w, m in self.mask_of.items()}
        self._bit = {w: int(idx.bit_of_worker[w]) for w in self.mask_of}
        self._fast = self.reserved_vec is None

    # --- the workers' side, in-process ----------------------------------------------------------------------------
    def _launch(self, tasks: list[int], workers: list[int], durations: list[float], now: float) -> None:
        rec = self.rec
        port = self.port
        d = self.launch_delay
        start = now + d
        rec.decided(tasks, now)
        rec.add_comm(tasks, d)
        port.count_message(Start if len(tasks) == 1 else Launch)
        rec.started(tasks, start, workers)
        slot = self._slot
        lo = self._lo
        mask_of = self.mask_of
        ends = self._ends
        r = self.report_delay
        heap = self._heap
        if heap is None:  # not in the simulator's engine (tests with a recording port)
            at = port.set_timer_at
        else:
            nxt = self._next
            cb = self._on_end
        for t, w, dur in zip(tasks, workers, durations, strict=True):
            if w not in mask_of:
                self._not_mine(w, t)
            k = w - lo
            if slot[k] >= 0:  # the ledger's slot check, inline
                self.ledger.over_slot(w, t, start)
            slot[k] = t
            e = start + dur
            g = ends.get(e)
            if g is None:
                tp = start + (e - start)  # the instant the workers' timer would fire
                ends[e] = [tp, (t, w)]
                if heap is None:
                    at(tp + r, e)  # the instant their report would arrive
                else:
                    heapq.heappush(heap, (tp + r, nxt(), cb, e))
            else:
                g.append((t, w))

    def _not_mine(self, w: int, t: int) -> NoReturn:
        raise SimulationError(f"{self.pool}: worker {w} is not in this group (task {t})")

    def _freed_one(self, t: int, w: int, now: float) -> None:
        entry = self.next_task(w)
        if entry is None:
            self.index.set_worker(self.avail, w, True)
            self.n_free += 1
            return
        self._launch([entry[0]], [w], [entry[1]], now)

    def on_timer(self, key: Hashable, now: float) -> None:
        self._on_end(key, now)

    def _on_end(self, key: float, now: float) -> None:
        """The workers' report of the tasks ending at ``key`` reaches the master (the engine calls it directly)."""
        g = self._ends.pop(key, None)
        if g is None:  # every task ending then died with its worker
            return
        if len(g) != 2 or not self._fast or self.dead:
            self._end_group(g, now)
            return
        # one task ended (the common case; no reserved workers, no failures): the end, the report to its
        # distributor, weighted fair queuing and the next launch inlined
        t, w = g[1]
        slot = self._slot
        k = w - self._lo
        slot[k] = FREE
        rec = self.rec
        self._n_ended[0] += 1
        dist = self.dist_of.pop(t)
        if rec.outstanding > 1:
            self._n_done[0] += 1
            rec.finished_known_one(t, g[0], now + self.known_delay)
        else:  # the run's last completion: a real message, so the run ends when it arrives
            rec.finished_one(t, g[0])
            self.port.send(self.distributors[dist], TaskDone(t))
        # next_task (no reserved workers), with the queues' first fit called directly
        sq = self.short_q
        lq = self.long_q
        if sq._len or lq._len:
            ff = _first_fit or _load_first_fit()
            inv = self._inv_mask[w]
            q = None
            if sq._len and (self.fq_counter < self._short_turns or not lq._len):
                s = ff(sq._masks, sq._heads, sq._n_slots, inv)
                if s >= 0:
                    q = sq
                elif lq._len:
                    s = ff(lq._masks, lq._heads, lq._n_slots, inv)
                    if s >= 0:
                        q = lq
            elif lq._len:
                s = ff(lq._masks, lq._heads, lq._n_slots, inv)
                if s >= 0:
                    q = lq
                elif sq._len:
                    s = ff(sq._masks, sq._heads, sq._n_slots, inv)
                    if s >= 0:
                        q = sq
            if q is not None:
                if q is sq:
                    self.fq_counter += 1
                    self.stats["served_short"] += 1
                else:
                    self.fq_counter = 0
                    self.stats["served_long"] += 1
                # WaitQueue._take(s) of the head entry, inlined
                b = q._buckets[s]
                t, dur, _ = b.popleft()[1]
                q._len -= 1
                if b:
                    q._heads[s] = b[0][0]
                else:
                    q._heads[s] = _INF
                    q._empty_slots += 1
                    if q._empty_slots > 64 and q._empty_slots * 2 > q._n_slots:
                        q._compact()
                # _launch([t], [w], [dur], now) of the simulator's engine, inlined
                start = now + self.launch_delay
                self._n_start[0] += 1
                rec.decided_launched_one(t, now, self.launch_delay, start, w)  # decided_one, add_comm_one, started_one
                slot[k] = t  # the worker was freed above: the ledger's slot check cannot fail
                e = start + dur
                g = self._ends.get(e)
                if g is None:
                    tp = start + (e - start)  # the instant the workers' timer would fire
                    self._ends[e] = [tp, (t, w)]
                    heapq.heappush(self._heap, (tp + self.report_delay, self._next(), self._on_end, e))
                else:
                    g.append((t, w))
                return
        b = self._bit[w]
        self.avail[b >> 6] |= _BITS[b & 63]
        self.n_free += 1

    def _end_group(self, g: list, now: float) -> None:
        items = g[1:]
        slot = self._slot
        lo = self._lo
        for _, w in items:
            slot[w - lo] = FREE
        rec = self.rec
        port = self.port
        ts = [x[0] for x in items]
        rec.finished(ts, g[0])
        port.count_message(Ended if len(items) == 1 else Finished)
        self._report(ts, now)
        if len(items) == 1:
            self._freed_one(items[0][0], items[0][1], now)
            return
        lt: list[int] = []
        lw: list[int] = []
        ld: list[float] = []
        idx = self.index
        for _, w in items:
            entry = self.next_task(w)
            if entry is None:
                idx.set_worker(self.avail, w, True)
                self.n_free += 1
            else:
                lt.append(entry[0])
                lw.append(w)
                ld.append(entry[1])
        if lt:
            self._launch(lt, lw, ld, now)

    def _report(self, tasks: list[int], now: float) -> None:
        """Tell the tasks' distributors they finished (recorded at the message's arrival; see the module doc)."""
        dist_of = self.dist_of
        port = self.port
        if len(tasks) == 1:
            t = tasks[0]
            dist = dist_of.pop(t)
            if self.rec.outstanding > 1:
                port.count_message(TaskDone)
                self.rec.completion_known(tasks, now + self.known_delay)
            else:  # the run's last completion: a real message, so the run ends when it arrives
                port.send(self.distributors[dist], TaskDone(t))
            return
        by_dist: dict[int, list[int]] = {}
        for t in tasks:
            d = dist_of.pop(t)
            lst = by_dist.get(d)
            if lst is None:
                by_dist[d] = [t]
            else:
                lst.append(t)
        for d, ts in by_dist.items():
            if self.rec.outstanding > len(ts):
                port.count_message(TasksDone)
                self.rec.completion_known(ts, now + self.known_delay)
            else:
                port.send(self.distributors[d], TasksDone(np.array(ts, dtype=np.int64)))

    def running(self) -> int:
        """Tasks running on this group's workers."""
        return sum(1 for t in self._slot if 0 <= t < _DEAD)

    # --- worker failures (fault schedules) --------------------------------------------------------------------
    def fail_workers(
        self, workers: list[int], now: float, task_info: Callable[[int], tuple[float, int, bool]]
    ) -> list[int]:
        """Workers of this group die at ``now``; returns the tasks that were running on them.

        Each lost run is recorded as lost (:meth:`TaskRecorder.lost`) and its task goes back to the head of its
        class's queue (short or long), so it is the next of its class that a suitable worker takes; it starts at
        once if a suitable worker is free. A task — lost or queued — that no live worker of the group can run any
        more goes back to its distributor (:class:`Reroute`), which sends it to a master that has one.
        ``task_info(task)`` gives a task's (duration, constraint mask, short): the master's record of the tasks
        it launched.
        """
        slot = self._slot
        lo = self._lo
        mine = [w for w in dict.fromkeys(workers) if w in self.mask_of and w not in self.dead]
        if not mine:
            return []
        gone = set(mine)
        self.dead |= gone
        idx = self.index
        if self.live is None:
            self.live = idx.valid.copy()
        for w in mine:
            idx.set_worker(self.live, w, False)
        lost: list[tuple[int, float]] = []  # (task, its end)
        for e, g in list(self._ends.items()):
            if any(x[1] in gone for x in g[1:]):
                lost.extend((x[0], e) for x in g[1:] if x[1] in gone)
                keep = [g[0], *(x for x in g[1:] if x[1] not in gone)]
                if len(keep) > 1:
                    self._ends[e] = keep
                else:
                    del self._ends[e]
        for w in mine:
            if slot[w - lo] < 0:  # idle: no longer available
                idx.set_worker(self.avail, w, False)
                self.n_free -= 1
            slot[w - lo] = _DEAD  # the ledger holds it: a launch on it is an over-commit
        if lost:
            # a launch still on its way (it starts one launch delay after the decision) never began: withdrawn
            early = {t for t, e in lost if e - task_info(t)[0] > now + 1e-9}
            if early:
                self.rec.withdraw(sorted(early))
            if len(early) < len(lost):
                self.rec.lost([t for t, e in lost if t not in early], now)
        back: dict[int, list[tuple[int, float, int, bool]]] = {}
        for t, _ in reversed(lost):  # pushed to the front one by one: the first lost ends up first
            dur, mask, short = task_info(t)
            if not self.live_fit(mask):
                back.setdefault(self.dist_of.pop(t), []).append((t, dur, mask, short))
                continue
            anywhere = self.reserved_vec is not None and not short and self._only_reserved(mask)
            w = self._match(mask, short or anywhere) if self.n_free else -1
            if w >= 0:
                self._launch([t], [w], [dur], now)
            else:
                (self.short_q if short else self.long_q).push_front((t, dur, anywhere), mask)
        fits: dict[int, bool] = {}

        def unrunnable(entry: Entry) -> bool:
            m = task_info(entry[0])[1]
            ok = fits.get(m)
            if ok is None:
                ok = fits[m] = self.live_fit(m)
            return not ok

        for q, short in ((self.short_q, True), (self.long_q, False)):
            if q:
                for t, dur, _ in q.remove_where(unrunnable):
                    back.setdefault(self.dist_of.pop(t), []).append((t, dur, task_info(t)[1], short))
        for d, items in back.items():
            for short in (True, False):
                sel = [x for x in items if x[3] is short]
                if sel:
                    self.rerouted += len(sel)
                    self.port.send(
                        self.distributors[d],
                        Reroute(
                            -1,
                            np.array([x[0] for x in sel], dtype=np.int64),
                            np.array([x[1] for x in sel], dtype=np.float64),
                            np.array([x[2] for x in sel], dtype=self.index.mask_at_bit.dtype),
                            short,
                        ),
                    )
        return [t for t, _ in lost]

    def restore_workers(self, workers: list[int], now: float, number: int) -> list[int]:
        """Failed workers of this group (master ``number``) come back idle: each takes the next queued task that
        fits it, and the distributors learn that the group can run more (:class:`GroupBack`)."""
        back = [w for w in dict.fromkeys(workers) if w in self.dead]
        if not back:
            return []
        idx = self.index
        for w in back:
            self.dead.discard(w)
            idx.set_worker(self.live, w, True)
            self._slot[w - self._lo] = FREE
        lt: list[int] = []
        lw: list[int] = []
        ld: list[float] = []
        for w in back:
            entry = self.next_task(w)
            if entry is None:
                idx.set_worker(self.avail, w, True)
                self.n_free += 1
            else:
                lt.append(entry[0])
                lw.append(w)
                ld.append(entry[1])
        if lt:
            self._launch(lt, lw, ld, now)
        ws = np.array(back, dtype=np.int64)
        for d in self.distributors:
            self.port.send(d, GroupBack(number, ws))
        return back
