"""``random-fifo``: one central FIFO queue; each task starts on a free worker, drawn at random among those that
have every placement constraint of the task. A small scheduler written against Megha's plug-in contract.

The contract (``megha.schedulers.registry``):

* an options model (a :class:`~megha.schedulers.registry.SchedulerOptions`, i.e. a pydantic model that rejects
  unknown keys) whose fields carry ``Field(description=...)`` — ``megha schedulers`` shows them;
* a builder ``build(ctx: BuildContext) -> Deployment`` registered with ``@register(name, help, options=...)``; it
  adds the scheduler's components with ``ctx.add`` and returns where each job enters (``route``) and what it
  counted (``counters``: the names declared with ``register(counters=CounterSet(...))``, each with its meaning;
  ``summary.json`` lists them under the set's namespace);
* components are sans-I/O (:class:`megha.sim.component.Component`): messages and timers in, messages and timers out
  through ``self.port``, randomness only from the seeded ``self.port.rng``, time passed in as ``now``;
* the vocabulary of :mod:`megha.schedulers.common`: the runner sends :class:`JobArrival`; a :class:`WorkerPool`
  runs :class:`Launch` batches and answers :class:`Finished`; the scheduler tells the recorder when it
  ``decided`` a task's placement and when it learned of its completion (``completion_known``).
"""

from __future__ import annotations

from collections import deque

import numpy as np
from pydantic import Field

from megha.schedulers.common.messages import Finished, JobArrival, Launch
from megha.schedulers.common.workers import WorkerPool
from megha.schedulers.registry import BuildContext, CounterSet, Deployment, SchedulerOptions, register
from megha.sim.component import Component

__all__ = ["RandomFifo", "RandomFifoOptions", "build"]


class RandomFifoOptions(SchedulerOptions):
    """Options of ``random-fifo`` (``-o scan=8``)."""

    scan: int = Field(
        0, ge=0, description="queued tasks looked at past a blocked head task (0: strict FIFO, head-of-line blocking)"
    )


class RandomFifo(Component):
    """The central scheduler: a FIFO of waiting tasks and the free/busy state of every worker."""

    kind = "scheduler"

    def __init__(self, address: str, pool: str, worker_masks: np.ndarray, recorder, scan: int) -> None:
        super().__init__(address)
        self.pool = pool
        self.masks = worker_masks
        self.free = np.ones(worker_masks.size, dtype=bool)
        self.rec = recorder
        self.scan = scan
        self.queue: deque[tuple[int, float, int]] = deque()  # (task, duration, constraint mask)

    def on_message(self, msg, now: float) -> None:
        if isinstance(msg, JobArrival):
            for t, d, m in zip(msg.tasks.tolist(), msg.durations.tolist(), msg.masks.tolist(), strict=True):
                self.queue.append((t, d, m))
            self._dispatch(now)
        elif isinstance(msg, Finished):
            workers = np.asarray(msg.workers, dtype=np.int64)
            self.free[workers] = True
            self.rec.completion_known(msg.tasks, now)
            self._dispatch(now)
        else:
            super().on_message(msg, now)

    def _dispatch(self, now: float) -> None:
        tasks, workers, durations = [], [], []
        looked = 0
        i = 0
        while i < len(self.queue) and self.free.any():
            t, d, m = self.queue[i]
            suits = np.flatnonzero(self.free & ((self.masks & m) == m))
            if suits.size == 0:  # blocked: strict FIFO stops, else look a little further
                looked += 1
                if looked > self.scan:
                    break
                i += 1
                continue
            w = int(suits[self.port.rng.integers(suits.size)])
            self.free[w] = False
            del self.queue[i]
            tasks.append(t)
            workers.append(w)
            durations.append(d)
        if tasks:
            ids = np.array(tasks, dtype=np.int64)
            self.rec.decided(ids, now)
            self.port.send(self.pool, Launch(ids, np.array(workers, dtype=np.int64), np.array(durations), self.address))


#: what the deployment counts (flat keys without a prefix); ``summary.json``: ``counters.random_fifo``
COUNTERS = CounterSet("random_fifo", {"queued_at_end": "tasks still queued at the end (0 in a finished run)"}, "")


@register(
    "random-fifo",
    "example plug-in: one central FIFO queue, each task on a random free worker that suits it",
    options=RandomFifoOptions,
    modes=("slot",),
    in_compare=False,
    counters=COUNTERS,
)
def build(ctx: BuildContext) -> Deployment:
    """Wire the scheduler and a worker pool for the whole datacenter."""
    dc = ctx.datacenter
    pool = WorkerPool("random-fifo/pool", dc.n_workers, ctx.recorder)
    sched = RandomFifo(
        "random-fifo/scheduler", pool.address, dc.worker_masks.astype(np.int64), ctx.recorder, ctx.options.scan
    )
    ctx.add(pool)
    ctx.add(sched)
    return Deployment(
        route=lambda job: sched.address,
        counters=lambda: {"queued_at_end": len(sched.queue)},
        describe={"workers": dc.n_workers, "scan": ctx.options.scan},
        components=[pool, sched],
    )
