"""The ``ideal`` scheduler: unlimited capacity, every task starts one network delay after it arrives.

It ignores capacity and placement constraints altogether (a task never waits, and runs on no particular
worker), so no real scheduler can reach it: it is a lower bound, and the end-to-end check of the pipeline
(trace → engine → metrics → reports): its job delay is exactly one network delay. The best a centralized
scheduler can do on a *finite* datacenter that honours constraints is ``oracle``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from megha.metrics.recorder import Recorder
from megha.schedulers.common.messages import Finished, JobArrival, Launch
from megha.schedulers.common.workers import WorkerPool
from megha.schedulers.registry import BuildContext, CounterSet, Deployment, register
from megha.sim.component import Component


class IdealScheduler(Component):
    """Launches every task at once on an unlimited worker pool."""

    kind = "scheduler"

    def __init__(self, address: str, pool: str, recorder: Recorder) -> None:
        super().__init__(address)
        self.pool = pool
        self.rec = recorder

    def on_message(self, msg: Any, now: float) -> None:
        if isinstance(msg, JobArrival):
            self.rec.decided(msg.tasks, now)
            workers = np.full(msg.tasks.size, -1, dtype=np.int64)
            self.port.send(self.pool, Launch(msg.tasks, workers, msg.durations, self.address, msg.demands))
        elif isinstance(msg, Finished):
            self.rec.completion_known(msg.tasks, now)
        else:
            super().on_message(msg, now)


@register(
    "ideal",
    "unlimited capacity, constraints ignored: each task starts one network delay after arrival (a lower bound no "
    "real scheduler reaches; see oracle for the best on finite capacity)",
    modes=("slot", "resource"),
    unbounded=True,
    counters=CounterSet("ideal"),  # counts nothing
)
def build(ctx: BuildContext) -> Deployment:
    """Wire the ``ideal`` bound: one scheduler and a worker pool without capacity limits."""
    pool = WorkerPool("ideal/pool", 0, ctx.recorder, unlimited=True)
    sched = IdealScheduler("ideal/scheduler", pool.address, ctx.recorder)
    ctx.add(pool)
    ctx.add(sched)
    return Deployment(route=lambda job: sched.address, describe={"workers": "unlimited"}, components=[pool, sched])
