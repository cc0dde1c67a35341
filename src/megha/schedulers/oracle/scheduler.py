"""The oracle: one central scheduler that sees the whole datacenter exactly and at once.

It places a task the instant it arrives on a free worker that has every constraint the task needs (and, in
resource mode, room for its request), chosen by ``policy``; a task that finds none waits in the one queue, and a
worker is handed to a waiting task the instant it frees (``queue``: ``fifo`` — the oldest waiting task that fits
the worker — or ``fewest-tasks`` — a task of the job with the fewest waiting tasks that fits). There is no message
latency and no decision cost: decision, start and the scheduler's knowledge of an end all happen at the instant of
the event that caused them. Capacity is finite (a worker runs one task at a time in slot mode; the requests of
its tasks stay within its capacity in resource mode) — the best a centralized design can do, and a bound for every
scheduler that honours the same constraints. (``ideal`` ignores capacity and constraints altogether.)

The workers run inside the component (they have nothing to decide): a task's end is a timer at its end instant,
one per distinct instant.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from megha.metrics.recorder import Recorder
from megha.model import bitset
from megha.model.matching import Policy, SegmentedIndex, WaitQueue
from megha.schedulers.common.fewest import FewestTasksQueue
from megha.schedulers.common.ledger import OVER_EPS, WorkerLedger
from megha.schedulers.common.messages import JobArrival
from megha.sim.component import Component

_EPS = OVER_EPS  # the fit tolerance: a task fits where the workers' ledger lets it run


class Oracle(Component):
    """The oracle scheduler and its workers (sans-I/O; timers only)."""

    kind = "oracle"

    def __init__(
        self,
        address: str,
        worker_masks: np.ndarray,
        recorder: Recorder,
        capacity: np.ndarray | None = None,
        policy: Policy = Policy.RANDOM,
        queue: str = "fifo",
    ) -> None:
        super().__init__(address)
        if queue not in ("fifo", "fewest-tasks"):
            raise ValueError(f"{address}: queue must be 'fifo' or 'fewest-tasks', got {queue!r}")
        n = int(worker_masks.size)
        if n == 0:
            raise ValueError(f"{address}: the datacenter has no workers")
        self.rec = recorder
        self.policy = Policy(policy)
        self.queue_policy = queue
        self.index = SegmentedIndex([np.arange(n, dtype=np.int64)], worker_masks, cache_size=1 << 15)
        # slot mode: idle workers; resource mode: workers with some room left
        self.avail = self.index.all_available()
        self.mask_of: list[int] = worker_masks.tolist()
        self.resource = capacity is not None
        #: the workers: the task each runs (slot mode) or its free resources (resource mode: the oracle places on
        #: them, so the ledger keeps the free vector itself) and the over-commit check
        self.ledger = WorkerLedger(address, n, capacity, track_free=True)
        self.capacity = self.ledger.capacity
        self.free = self.ledger.free  # resource mode: the ledger's free vectors
        self.running_on: list[int] | None = self.ledger.task  # slot mode: the ledger's list
        self.queue = FewestTasksQueue() if queue == "fewest-tasks" else WaitQueue()
        self._ends: dict[float, list] = {}  # end instant -> [(task, worker, demand row or None)]
        self._u: list[float] = []
        self._ui = 0
        self._k = None
        self.stats = {"placed_at_arrival": 0, "queued": 0, "placed_from_queue": 0, "max_queue": 0}

    def on_start(self, now: float) -> None:
        from megha.schedulers.oracle import _kernels

        self._k = _kernels

    # --- choice ---------------------------------------------------------------------------------------------
    def _uniform(self) -> float:
        if self._ui >= len(self._u):
            self._u = self.port.rng.random(4096).tolist()
            self._ui = 0
        u = self._u[self._ui]
        self._ui += 1
        return u

    def _pick_slot(self, mask: int) -> int:
        """A free worker with every constraint in ``mask`` (slot mode), or -1."""
        static = self.index.static_vector(mask)
        k = self._k
        if self.policy is Policy.RANDOM:
            return k.pick_random(self.avail, static, self._uniform())
        if self.policy is Policy.MIN_CONSTRAINTS:
            return k.pick_min_weight(self.avail, static, self.index.weight_at_bit)
        return k.pick_first(self.avail, static)

    def _pick_resource(self, mask: int, demand: np.ndarray) -> int:
        """A worker with every constraint in ``mask`` and room for ``demand`` (resource mode), or -1."""
        nodes = bitset.set_indices(self.index.candidates(self.avail, mask))
        if nodes.size == 0:
            return -1
        ok = nodes[(self.free[nodes] + _EPS >= demand).all(axis=1)]
        if ok.size == 0:
            return -1
        if self.policy is Policy.RANDOM:
            return int(ok[min(int(self._uniform() * ok.size), ok.size - 1)])
        if self.policy is Policy.MIN_CONSTRAINTS:
            return int(ok[np.argmin(self.index.weight_at_bit[ok])])
        return int(ok[0])

    # --- events ---------------------------------------------------------------------------------------------
    def on_message(self, msg: Any, now: float) -> None:
        if isinstance(msg, JobArrival):
            self._arrive(msg, now)
        else:
            super().on_message(msg, now)

    def _arrive(self, msg: JobArrival, now: float) -> None:
        tasks = msg.tasks.tolist()
        durs = msg.durations.tolist()
        masks = msg.masks.tolist()
        demands = msg.demands
        lt: list[int] = []
        lw: list[int] = []
        ld: list[float] = []
        lm: list = []
        qe: list = []
        qm: list[int] = []
        if self.resource:
            for i, t in enumerate(tasks):
                dem = demands[i]
                w = self._pick_resource(masks[i], dem)
                if w < 0:
                    qe.append((t, durs[i], dem))
                    qm.append(masks[i])
                else:
                    self._take_resource(w, dem, now)
                    lt.append(t)
                    lw.append(w)
                    ld.append(durs[i])
                    lm.append(dem)
        else:
            avail = self.avail
            pick = self._pick_slot
            for i, t in enumerate(tasks):
                w = pick(masks[i])
                if w < 0:
                    qe.append((t, durs[i], None))
                    qm.append(masks[i])
                else:
                    avail[w >> 6] &= ~np.uint64(1 << (w & 63))
                    lt.append(t)
                    lw.append(w)
                    ld.append(durs[i])
                    lm.append(None)
        if qe:
            q = self.queue
            if self.queue_policy == "fewest-tasks":
                q.push_job(msg.job, qe, qm)
            else:
                for e, m in zip(qe, qm, strict=True):
                    q.push_back(e, m)
            self.stats["queued"] += len(qe)
            if len(q) > self.stats["max_queue"]:
                self.stats["max_queue"] = len(q)
        if lt:
            self.stats["placed_at_arrival"] += len(lt)
            self._start(lt, lw, ld, lm, now)

    def _take_resource(self, w: int, dem: np.ndarray, now: float) -> None:
        f = self.free[w]
        f -= dem
        if (f < -OVER_EPS).any():
            self.ledger.over_row(w, now)
        if not (f > _EPS).all():
            self.avail[w >> 6] &= ~np.uint64(1 << (w & 63))

    def _start(self, tasks: list[int], workers: list[int], durs: list[float], dems: list, now: float) -> None:
        rec = self.rec
        rec.decided(tasks, now)
        rec.started(tasks, now, workers)
        ends = self._ends
        running = self.running_on
        slot = not self.resource
        for t, w, d, dem in zip(tasks, workers, durs, dems, strict=True):
            if slot:
                if running[w] >= 0:
                    self.ledger.over_slot(w, t, now)
                running[w] = t
            e = now + d
            lst = ends.get(e)
            if lst is None:
                ends[e] = [(t, w, dem)]
                self.port.set_timer(d, e)
            else:
                lst.append((t, w, dem))

    def on_timer(self, key: float, now: float) -> None:
        items = self._ends.pop(key)
        tasks = [x[0] for x in items]
        rec = self.rec
        rec.finished(tasks, key)  # the end on the workers (later than ``key`` only if this component was down)
        rec.completion_known(tasks, now)
        lt: list[int] = []
        lw: list[int] = []
        ld: list[float] = []
        lm: list = []
        q = self.queue
        if self.resource:
            for _, w, dem in items:
                self.free[w] += dem
            for w in dict.fromkeys(x[1] for x in items):
                f = self.free[w]
                wm = self.mask_of[w]
                while len(q):
                    e = q.pop_first_fitting_where(wm, lambda x, f=f: bool((x[2] <= f + _EPS).all()))
                    if e is None:
                        break
                    f -= e[2]
                    lt.append(e[0])
                    lw.append(w)
                    ld.append(e[1])
                    lm.append(e[2])
                if (f > _EPS).all():
                    self.avail[w >> 6] |= np.uint64(1 << (w & 63))
                else:
                    self.avail[w >> 6] &= ~np.uint64(1 << (w & 63))
        else:
            running = self.running_on
            avail = self.avail
            mask_of = self.mask_of
            for _, w, _ in items:
                running[w] = -1
                e = q.pop_first_fitting(mask_of[w]) if len(q) else None
                if e is None:
                    avail[w >> 6] |= np.uint64(1 << (w & 63))
                else:
                    lt.append(e[0])
                    lw.append(w)
                    ld.append(e[1])
                    lm.append(None)
        if lt:
            self.stats["placed_from_queue"] += len(lt)
            self._start(lt, lw, ld, lm, now)

    def queued(self) -> int:
        """Tasks waiting in the queue."""
        return len(self.queue)
