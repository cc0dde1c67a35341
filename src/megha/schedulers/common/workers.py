"""A pool of simulated workers: runs launched tasks for their duration and reports completion.

One :class:`WorkerPool` component hosts many workers (all workers of an LM's cluster, of a Pigeon master,
or the whole datacenter). It enforces the allocation invariant — in slot mode a worker runs at most one
task, in resource mode the demands of its tasks never exceed its capacity — and raises if a scheduler
ever over-commits a worker, so every simulation doubles as a check of the scheduler's correctness.
Task ends that fall at the same instant share one timer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from megha.metrics.recorder import Recorder
from megha.schedulers.common.ledger import FREE, WorkerLedger
from megha.schedulers.common.messages import Finished, Kill, Killed, Launch, LaunchFailed
from megha.sim.component import Component


class WorkerPool(Component):
    """Simulated workers; ``capacity`` is ``None`` for single-slot workers, ``unlimited`` disables checks.

    Task ids, workers and durations may come as numpy arrays or as Python lists (cheaper for the small batches
    of a busy datacenter); :class:`Finished` answers use the same kind the launcher used.
    """

    kind = "worker"
    crash_kind = None  # the workers fail one by one (a family's worker faults), not as one component

    def __init__(
        self,
        address: str,
        n_workers: int,
        recorder: Recorder,
        capacity: np.ndarray | None = None,
        unlimited: bool = False,
    ) -> None:
        super().__init__(address)
        self.rec = recorder
        self.unlimited = unlimited
        #: what each worker holds (slot mode: its task; resource mode: its used vector) and the workers down
        self.ledger = WorkerLedger(address, n_workers, capacity, unlimited=unlimited)
        # slot mode: the ledger's list, claimed and freed inline (no call per batch); None otherwise
        self._slot = None if unlimited else self.ledger.task
        self._ends: dict[float, list] = {}  # end time -> tasks ending then
        self._running: dict[int, tuple[float, int, str, np.ndarray | None]] = {}
        self._as_list: dict[str, bool] = {}  # reply address -> launcher used lists

    def on_message(self, msg: Any, now: float) -> None:
        if isinstance(msg, Launch):
            self._launch(msg, now)
        elif isinstance(msg, Kill):
            self._kill(msg, now)
        else:
            super().on_message(msg, now)

    def _launch(self, msg: Launch, now: float) -> None:
        if self.ledger.dead:
            msg = self._bounce(msg)
            if msg is None:
                return
        as_list = isinstance(msg.tasks, list)
        tasks = msg.tasks if as_list else msg.tasks.tolist()
        workers = msg.workers if isinstance(msg.workers, list) else msg.workers.tolist()
        durs = msg.durations if isinstance(msg.durations, list) else msg.durations.tolist()
        demands = msg.demands
        slot = self._slot
        if slot is not None:  # the ledger's slot claim, inline
            for t, w in zip(tasks, workers, strict=True):
                if slot[w] >= 0:
                    self.ledger.over_slot(w, t, now)
                slot[w] = t
        elif not self.unlimited:
            self.ledger.claim(tasks, workers, now, demands)
        self.rec.started(msg.tasks, now, msg.workers)
        reply = msg.reply_to
        self._as_list[reply] = as_list
        running = self._running
        groups = self._ends
        for i, t in enumerate(tasks):
            e = now + durs[i]
            running[t] = (e, workers[i], reply, None if demands is None else demands[i])
            g = groups.get(e)
            if g is None:
                groups[e] = [t]
                self.port.set_timer(e - now, e)
            else:
                g.append(t)

    def on_timer(self, key: float, now: float) -> None:
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
            d_arr = None if ds[0] is None else np.array(ds)
            self._release(ts, ws, d_arr)
            self.rec.finished(ts, now)
            if self._as_list.get(reply, False):
                self.port.send(reply, Finished(ts, ws, d_arr))
            else:
                self.port.send(reply, Finished(np.array(ts, dtype=np.int64), np.array(ws, dtype=np.int64), d_arr))

    def _release(self, tasks: list[int], workers: list[int], demands: np.ndarray | None) -> None:
        slot = self._slot
        if slot is not None:  # the ledger's slot release, inline
            for w in workers:
                slot[w] = FREE
        elif not self.unlimited:
            self.ledger.release(workers, demands)

    def _kill(self, msg: Kill, now: float) -> None:
        ts, ws, ds = [], [], []
        for t in msg.tasks if isinstance(msg.tasks, list) else msg.tasks.tolist():
            entry = self._running.pop(t, None)
            if entry is None:
                continue
            _, w, _, d = entry
            ts.append(t)
            ws.append(w)
            ds.append(d)
        d_arr = None if not ds or ds[0] is None else np.array(ds)
        if ts:
            self._release(ts, ws, d_arr)
            self.rec.preempted(ts, now)
        self.port.send(msg.reply_to, Killed(np.array(ts, dtype=np.int64), np.array(ws, dtype=np.int64), d_arr))

    # --- faults (a family's worker faults, megha.model.faults.FaultHandler) ---------------------------------
    def fail_workers(self, workers: list[int], now: float) -> list[tuple[int, int, str]]:
        """Workers die at ``now``: the tasks running on them stop (their runs are recorded as lost) and their
        resources are released; launches that reach a dead worker later are answered :class:`LaunchFailed`
        until :meth:`restore_workers`. Returns ``(task, worker, launcher)`` of every task lost."""
        self.ledger.fail(workers)
        dead = self.ledger.dead
        lost = [(t, e[1], e[2], e[3]) for t, e in self._running.items() if e[1] in dead]
        if not lost:
            return []
        for t, *_ in lost:
            del self._running[t]  # its end timer finds no entry and ignores it
        ds = [d for *_, d in lost]
        self._release([t for t, *_ in lost], [w for _, w, _, _ in lost], None if ds[0] is None else np.array(ds))
        self.rec.lost([t for t, *_ in lost], now)
        return [(t, w, r) for t, w, r, _ in lost]

    def restore_workers(self, workers: list[int]) -> None:
        """Dead workers are back (empty)."""
        self.ledger.restore(workers)

    def _bounce(self, msg: Launch) -> Launch | None:
        """Answer the part of a launch aimed at dead workers with :class:`LaunchFailed`; the rest to start (None:
        nothing)."""
        workers = msg.workers if isinstance(msg.workers, list) else msg.workers.tolist()
        ok, bad = self.ledger.split_dead(workers)
        if not bad:
            return msg
        as_list = isinstance(msg.tasks, list)
        tasks = np.asarray(msg.tasks, dtype=np.int64)
        wa = np.asarray(workers, dtype=np.int64)
        durs = np.asarray(msg.durations, dtype=np.float64)
        dem = None if msg.demands is None else np.asarray(msg.demands)

        def part(a: np.ndarray, idx: list[int]) -> list | np.ndarray:
            return a[idx].tolist() if as_list else a[idx]

        bad_dem = None if dem is None else dem[bad]
        self.port.send(msg.reply_to, LaunchFailed(part(tasks, bad), part(wa, bad), bad_dem))
        if not ok:
            return None
        ok_dem = None if dem is None else dem[ok]
        return Launch(part(tasks, ok), part(wa, ok), part(durs, ok), msg.reply_to, ok_dem)

    def running_tasks(self) -> int:
        """Tasks running on the workers."""
        return len(self._running)
