"""The packing policies as a central scheduler of the event engine (``megha simulate -s bf-js …``).

One :class:`PackingScheduler` holds the central queue and decides once per slot (``slot`` seconds, 1 ms by
default as in the paper's Google experiment) over a :class:`~megha.schedulers.common.workers.WorkerPool`
of the whole datacenter. It wraps the *same* policy objects as the slotted core
(:mod:`~megha.schedulers.packing.policies`): a task is a packing job, a worker a server.

Sizes: in slot mode every task fills a worker (size 1, so every policy degenerates to "any free worker");
in resource mode a task's size is ``max_r demand_r / capacity_r`` (the paper's reduction, ``multi="max"``)
or, with ``multi="tetris"``, the vector of per-resource fractions scored by alignment (Best-Fit family
only). Placement constraints are honoured (a task only goes to a worker that has all its constraints);
the policies then skip incompatible candidates (server-side queries as one numpy scan of the queue), which
costs more per decision than the paper's unconstrained model.

The scheduler only wakes up at a slot boundary when something changed (an arrival or a completion), so
idle slots cost nothing. It records the queue size over time (time-average and maximum in the run's
counters and ``deployment``).

The deployment runs this two-component form (scheduler + pool) only when processing costs, a fault schedule or
very short tasks need it; otherwise :class:`~megha.schedulers.packing.inprocess.InProcessPackingScheduler` keeps
the pool inside the scheduler, with the same results.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

import numpy as np

from megha.errors import InputError
from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.messages import Finished, JobArrival, Launch
from megha.schedulers.packing.multires import max_reduce, vector_units
from megha.schedulers.packing.policies import PackingPolicy
from megha.schedulers.packing.structures import UNIT, Constraints, quantize_array
from megha.sim.component import Component


class TaskSizer:
    """Maps a JobArrival's tasks to policy sizes (units or unit vectors)."""

    def __init__(self, capacity: np.ndarray | None, multi: str) -> None:
        self.multi = multi
        self.cap = None
        if capacity is not None:
            cap = np.asarray(capacity, dtype=np.float64)
            if cap.size and (cap != cap[0]).any():
                raise InputError(
                    "packing schedulers need identical workers (the paper's servers all have "
                    "capacity 1): the datacenter's worker capacities differ"
                )
            self.cap = cap[0]
        elif multi == "tetris":
            raise InputError("multi='tetris' needs resource mode (--resources)")

    @property
    def vector(self) -> int:
        """The number of resources of a vector size (``multi="tetris"`` in resource mode), else 0 (scalar sizes)."""
        return 0 if self.cap is None or self.multi != "tetris" else int(self.cap.size)

    def sizes(self, msg: JobArrival) -> list:
        """The policy size of each task of ``msg``: ``UNIT`` in slot mode, the largest demand share in units, or a
        tuple of units per resource (tetris)."""
        n = msg.tasks.size
        if self.cap is None or msg.demands is None:
            return [UNIT] * n
        if self.multi == "tetris":
            return [tuple(r) for r in vector_units(msg.demands, self.cap).tolist()]
        return quantize_array(max_reduce(msg.demands, self.cap), "task size").tolist()


class PackingScheduler(Component):
    """Central queue + one packing policy, deciding at slot boundaries."""

    kind = "scheduler"

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
    ) -> None:
        super().__init__(address)
        if slot <= 0 or not math.isfinite(slot):
            raise InputError(f"packing: slot must be a positive number of seconds, got {slot}")
        self.pool = pool
        self.rec = recorder
        self.policy = policy
        self.sizer = sizer
        self.slot = slot
        self.dur = np.zeros(n_tasks)
        self.dem = None
        self.constraints = None if worker_masks is None else Constraints(worker_masks.tolist())
        self._armed = False
        # queue-size statistics
        self.q_integral = 0.0
        self._q_prev = 0
        self.q_last_t: float | None = None
        self.q_first_t: float | None = None
        self.q_max = 0
        self.slots = 0
        self.placements = 0

    # --- queue statistics ---------------------------------------------------------------------------
    def _q_mark(self, now: float) -> None:
        q = self.policy.queue_len()
        if self.q_last_t is None:
            self.q_first_t = now
        else:
            self.q_integral += self._q_prev * (now - self.q_last_t)
        self.q_last_t = now
        self._q_prev = q
        if q > self.q_max:
            self.q_max = q

    def mean_queue(self) -> float:
        """Time-average queue size between the first and the last change recorded."""
        if self.q_first_t is None or self.q_last_t is None or self.q_last_t <= self.q_first_t:
            return 0.0
        return self.q_integral / (self.q_last_t - self.q_first_t)

    # --- events -------------------------------------------------------------------------------------
    def _admit(self, msg: JobArrival, now: float) -> None:
        """A job's arrival: its tasks' durations, demands and constraints, the policy's queue, the queue size."""
        tasks = msg.tasks
        self.dur[tasks] = msg.durations
        if msg.demands is not None:
            if self.dem is None:
                self.dem = np.zeros((self.dur.size, msg.demands.shape[1]))
            self.dem[tasks] = msg.demands
        if self.constraints is not None:  # Constraints.set, with the masks already Python ints
            self.constraints.mask.update(zip(tasks.tolist(), msg.masks.tolist(), strict=True))
        self.policy.arrive(tasks.tolist(), self.sizer.sizes(msg))
        self._q_mark(now)

    def on_message(self, msg: Any, now: float) -> None:
        """A job's tasks join the queue (:class:`JobArrival`) or tasks left their workers (:class:`Finished`); either
        arms the next slot boundary."""
        if type(msg) is Finished:  # the common message: one per completion batch
            ts = msg.tasks
            dep = self.policy.depart
            if len(ts) == 1:
                dep(ts[0], msg.workers[0])
            else:
                for t, w in zip(ts, msg.workers, strict=True):
                    dep(t, w)
            if self.constraints is not None:
                forget = self.constraints.mask.pop
                for t in ts:
                    forget(t, None)
            self.rec.completion_known(ts, now)
            if not self._armed:
                self._arm(now)
        elif isinstance(msg, JobArrival):
            self._admit(msg, now)
            self._arm(now)
        elif isinstance(msg, Finished):  # lists: the pool answers in the kind it was launched with
            dep = self.policy.depart
            ts = msg.tasks
            for t, w in zip(ts, msg.workers, strict=True):
                dep(t, w)
            if self.constraints is not None:
                forget = self.constraints.forget
                for t in ts:
                    forget(t)
            self.rec.completion_known(ts, now)
            self._arm(now)
        else:
            super().on_message(msg, now)

    def _arm(self, now: float) -> None:
        if self._armed:
            return
        k = math.floor(now / self.slot + 1e-9) + 1
        self._armed = True
        self.port.set_timer(max(0.0, k * self.slot - now), k)

    def on_timer(self, key: Hashable, now: float) -> None:
        """A slot boundary: the policy decides and the slot's placements go to the pool in one launch."""
        self._armed = False
        self.slots += 1
        placed = self.policy.schedule()
        if placed:
            tasks = [j for j, _ in placed]
            workers = [s for _, s in placed]
            self.placements += len(tasks)
            self.rec.decided(tasks, now)
            dem = None if self.dem is None else self.dem[tasks]
            durs = list(map(self.dur.item, tasks))  # a slot places few tasks: no fancy indexing
            self.port.send(self.pool, Launch(tasks, workers, durs, self.address, dem))
        self._q_mark(now)
