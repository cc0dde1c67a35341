"""A PigeonC/Pigeon master: owns a fixed group of workers, places the tasks it receives, queues the rest.

The master keeps an exact availability vector of its group (it is the only scheduler of those workers) and
matches a task against it with the shared packed-constraint index (Algorithm 1 of the IoT 2023 paper):
Random or Minimum-Constraints choice among the suitable free workers. A task that finds no suitable free
worker waits in one of two FIFO queues — short (high-priority) jobs or long jobs — indexed by constraint mask
(:class:`~megha.model.matching.WaitQueue`), so handing a freed worker to the first queued task that fits costs a
few vector operations.

Weighted fair queuing (Pigeon): when a worker frees, the master serves up to ``fqw`` short tasks for every long
task; a long task is served when its turn comes or when no queued short task fits the worker (PigeonC), and a
short task is served when no long task fits. A task never leaves its master. ``fq_inclusive`` is the authors'
code's counter test (``counter <= fqw``: ``fqw + 1`` short tasks per long one).

Pigeon (unconstrained original) also *reserves* some workers of each group for short tasks: a long task does not
run on them and, when one frees, it takes short tasks only. New short tasks prefer free reserved workers. With
placement constraints, a long task that no unreserved worker of its group can run may use reserved workers (else
it would starve forever — the problem that made PigeonC drop the reservation).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from megha.metrics.recorder import TaskRecorder
from megha.model.matching import FastRandom, Policy, SegmentedIndex, WaitQueue
from megha.schedulers.common.messages import Finished, Launch
from megha.schedulers.pigeon.messages import Ended, Reroute, Start, TaskBatch, TaskDone, TasksDone
from megha.sim.component import Component

#: a queued task: ``(task, duration, may use a reserved worker)``
Entry = tuple[int, float, bool]

_take_random = None  # the compiled random pick, imported on first use so the CLI starts fast


def _load_take() -> Callable[[np.ndarray, np.ndarray, float], int]:
    global _take_random
    from megha.schedulers.pigeon._kernels import take_random

    _take_random = take_random
    return take_random


def _may_use_reserved(entry: Entry) -> bool:
    return entry[2]


class PigeonMaster(Component):
    """Master of one worker group (sans-I/O)."""

    kind = "master"

    def __init__(
        self,
        address: str,
        workers: np.ndarray,
        worker_masks: np.ndarray,
        pool: str,
        recorder: TaskRecorder,
        distributors: list[str],
        policy: Policy = Policy.RANDOM,
        fqw: int = 20,
        reserved: np.ndarray | None = None,
        fq_inclusive: bool = False,
    ) -> None:
        """``workers``: global ids of the group; ``reserved``: global ids reserved for short tasks (Pigeon);
        ``fq_inclusive``: serve short tasks while the counter is ``<= fqw`` (the authors' code) instead of ``<``."""
        super().__init__(address)
        workers = np.asarray(workers, dtype=np.int64)
        if workers.size == 0:
            raise ValueError(f"{address}: a master needs at least one worker")
        self.workers = workers
        self.pool = pool
        self.rec = recorder
        self.distributors = list(distributors)
        self.policy = Policy(policy)
        self.fqw = int(fqw)
        self._short_turns = self.fqw + 1 if fq_inclusive else self.fqw  # short tasks served in a row at most
        self.index = SegmentedIndex([workers], worker_masks, cache_size=1 << 14)
        self.avail = self.index.all_available()
        self._worker_at: list[int] = self.index.worker_at_bit.tolist()
        self.n_free = int(workers.size)
        self.mask_of: dict[int, int] = dict(zip(workers.tolist(), worker_masks[workers].tolist(), strict=True))
        self.reserved: set[int] = set()
        self.reserved_vec: np.ndarray | None = None
        self.general_vec: np.ndarray | None = None
        if reserved is not None and len(reserved):
            reserved = np.asarray(reserved, dtype=np.int64)
            if not np.isin(reserved, workers).all():
                raise ValueError(f"{address}: reserved workers must belong to the group")
            flags = np.zeros(worker_masks.size, dtype=bool)
            flags[reserved] = True
            self.reserved = set(reserved.tolist())
            self.reserved_vec = self.index.pack_workers(flags)
            self.general_vec = self.index.valid & ~self.reserved_vec
        self._only_res: dict[int, bool] = {}
        self.short_q = WaitQueue()
        self.long_q = WaitQueue()
        self.fq_counter = 0  # short tasks served from the queues since the last long task
        self.dist_of: dict[int, int] = {}
        self.rnd: FastRandom | None = None
        self.stats = {"queued_short": 0, "queued_long": 0, "served_short": 0, "served_long": 0}
        self.rerouted = 0  # tasks handed back to a distributor (no live worker of the group fits them)
        self.dead: set[int] = set()  # failed workers of the group (fault schedules; empty otherwise)
        self.live: np.ndarray | None = None  # the group's live workers (packed), once a worker has failed

    def on_start(self, now: float) -> None:
        self.rnd = FastRandom(self.port.rng)

    # --- messages -------------------------------------------------------------------------------------
    def on_message(self, msg: Any, now: float) -> None:
        if type(msg) is Ended:
            self._freed_one(msg.task, msg.worker, now)
        elif isinstance(msg, Finished):
            self._freed(msg, now)
        elif isinstance(msg, TaskBatch):
            self._arrive(msg, now)
        else:
            super().on_message(msg, now)

    def on_message_batch(self, batch: tuple, now: float) -> None:
        """A :class:`TaskBatch` as the payload a distributor routes here directly in the simulator (SimPort.route):
        ``(job, tasks, durations, masks, short, distributor)`` with lists for the arrays."""
        if self.dead:
            job, tasks, durs, masks, short, dist = batch
            self._arrive(
                TaskBatch(
                    job,
                    np.array(tasks, dtype=np.int64),
                    np.array(durs, dtype=np.float64),
                    np.array(masks, dtype=self.index.mask_at_bit.dtype),
                    short,
                    dist,
                ),
                now,
            )
            return
        self._arrive_lists(batch[1], batch[2], batch[3], batch[4], batch[5], now)

    def _arrive(self, msg: TaskBatch, now: float) -> None:
        if self.dead:
            msg = self._runnable(msg)
            if msg is None:
                return
        self._arrive_lists(
            msg.tasks.tolist(), msg.durations.tolist(), msg.masks.tolist(), msg.short, msg.distributor, now
        )

    def _arrive_lists(
        self, tasks: list[int], durations: list[float], masks: list[int], short: bool, distributor: int, now: float
    ) -> None:
        if self.rnd is None:
            self.rnd = FastRandom(self.port.rng)
        self.dist_of.update(dict.fromkeys(tasks, distributor))
        q = self.short_q if short else self.long_q
        lt: list[int] = []
        lw: list[int] = []
        ld: list[float] = []
        queued = 0
        reserve_check = self.reserved_vec is not None and not short
        slot_of = q._slot_of
        buckets = q._buckets
        for t, d, m in zip(tasks, durations, masks, strict=True):
            # a long task that no unreserved worker of the group can ever run may use reserved ones
            anywhere = reserve_check and self._only_reserved(m)
            w = self._match(m, short or anywhere) if self.n_free else -1
            if w < 0:
                # q.push_back((t, d, anywhere), m), inlined
                s = slot_of.get(m)
                if s is None:
                    s = q._slot(m)
                    buckets = q._buckets
                q._back += 1
                b = buckets[s]
                if not b:
                    q._heads[s] = q._back
                    q._empty_slots -= 1
                b.append((q._back, (t, d, anywhere)))
                q._len += 1
                queued += 1
            else:
                lt.append(t)
                lw.append(w)
                ld.append(d)
        if queued:
            self.stats["queued_short" if short else "queued_long"] += queued
        if lt:
            self._launch(lt, lw, ld, now)

    # --- worker failures (fault schedules, see :mod:`megha.schedulers.pigeon.faults`) ------------------------------
    def live_fit(self, mask: int) -> bool:
        """Whether a live worker of the group satisfies ``mask``."""
        live = self.index.valid if self.live is None else self.live
        return bool((self.index.static_vector(mask) & live).any())

    def _runnable(self, msg: TaskBatch) -> TaskBatch | None:
        """The part of a batch the group's live workers can run; the rest goes back to its distributor."""
        ok = np.array([self.live_fit(m) for m in msg.masks.tolist()], dtype=bool)
        if ok.all():
            return msg
        bad = ~ok
        self.port.send(
            self.distributors[msg.distributor],
            Reroute(msg.job, msg.tasks[bad], msg.durations[bad], msg.masks[bad], msg.short),
        )
        self.rerouted += int(bad.sum())
        if not ok.any():
            return None
        return TaskBatch(msg.job, msg.tasks[ok], msg.durations[ok], msg.masks[ok], msg.short, msg.distributor)

    def _only_reserved(self, mask: int) -> bool:
        """No unreserved worker of the group satisfies ``mask`` (cached)."""
        r = self._only_res.get(mask)
        if r is None:
            r = self._only_res[mask] = not (self.index.static_vector(mask) & self.general_vec).any()
        return r

    def _match(self, mask: int, short: bool) -> int:
        """A suitable free worker for a new task (marked busy), or -1; only short tasks may use reserved workers."""
        idx = self.index
        static = idx.static_vector(mask)
        if self.reserved_vec is None and self.policy is Policy.RANDOM:
            # the pick and the busy mark in one compiled call (the same worker and draws as idx.pick)
            rnd = self.rnd
            b = (_take_random or _load_take())(self.avail, static, rnd.peek())
            if b < 0:
                return -1
            rnd.skip()
            self.n_free -= 1
            return self._worker_at[b]
        if self.reserved_vec is None:
            cand = np.bitwise_and(self.avail, static)
        elif short:
            cand = self.avail & static & self.reserved_vec
            if not cand.any():
                cand = np.bitwise_and(self.avail, static)
        else:
            cand = self.avail & static & self.general_vec
        w = idx.pick(cand, 0, self.policy, self.rnd)
        if w >= 0:
            idx.set_worker(self.avail, w, False)
            self.n_free -= 1
        return w

    def _freed(self, msg: Finished, now: float) -> None:
        tasks = msg.tasks.tolist()
        dist_of = self.dist_of
        by_dist: dict[int, list[int]] = {}
        for t in tasks:
            d = dist_of.pop(t)
            lst = by_dist.get(d)
            if lst is None:
                by_dist[d] = [t]
            else:
                lst.append(t)
        for d, ts in by_dist.items():
            self.port.send(self.distributors[d], TasksDone(np.array(ts, dtype=np.int64)))
        lt: list[int] = []
        lw: list[int] = []
        ld: list[float] = []
        idx = self.index
        for w in msg.workers.tolist():
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

    def _freed_one(self, t: int, w: int, now: float) -> None:
        """One task ended (the common case): no temporary arrays."""
        self.port.send(self.distributors[self.dist_of.pop(t)], TaskDone(t))
        entry = self.next_task(w)
        if entry is None:
            self.index.set_worker(self.avail, w, True)
            self.n_free += 1
            return
        self.rec.decided(entry[0], now)
        self.port.send(self.pool, Start(entry[0], w, entry[1]))

    def next_task(self, worker: int) -> Entry | None:
        """Weighted fair queuing: the queued ``(task, duration, _)`` the freed ``worker`` runs next, or None."""
        sq = self.short_q
        lq = self.long_q
        if not sq and not lq:
            return None
        wm = self.mask_of[worker]
        if worker in self.reserved:
            e = sq.pop_first_fitting(wm) if sq else None
            if e is not None:
                self.stats["served_short"] += 1
            elif lq:
                e = lq.pop_first_fitting_where(wm, _may_use_reserved)
                if e is not None:
                    self.stats["served_long"] += 1
            return e
        tried_short = False
        if sq and (self.fq_counter < self._short_turns or not lq):
            tried_short = True
            e = sq.pop_first_fitting(wm)
            if e is not None:
                self.fq_counter += 1
                self.stats["served_short"] += 1
                return e
        if lq:
            e = lq.pop_first_fitting(wm)
            if e is not None:
                self.fq_counter = 0
                self.stats["served_long"] += 1
                return e
        if sq and not tried_short:
            e = sq.pop_first_fitting(wm)
            if e is not None:
                self.fq_counter += 1
                self.stats["served_short"] += 1
                return e
        return None

    def _launch(self, tasks: list[int], workers: list[int], durations: list[float], now: float) -> None:
        if len(tasks) == 1:
            self.rec.decided(tasks[0], now)
            self.port.send(self.pool, Start(tasks[0], workers[0], durations[0]))
            return
        t = np.array(tasks, dtype=np.int64)
        self.rec.decided(t, now)
        self.port.send(
            self.pool,
            Launch(t, np.array(workers, dtype=np.int64), np.array(durations, dtype=np.float64), self.address),
        )

    # --- inspection -----------------------------------------------------------------------------------
    def queued(self) -> int:
        """Tasks waiting in this master's queues."""
        return len(self.short_q) + len(self.long_q)
