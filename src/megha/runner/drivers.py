"""Components the runner adds to every simulation: the trace source, the fault-injection hook and the watchdog."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

import numpy as np

from megha.metrics.recorder import TaskRecorder
from megha.model.workload import Workload
from megha.schedulers.common.messages import JobArrival
from megha.sim.component import Component
from megha.sim.engine import Engine

if TYPE_CHECKING:
    from megha.schedulers.registry import Deployment


class TraceSource(Component):
    """Feeds jobs into the scheduler at their arrival times (zero latency: arrival = entering the queue)."""

    kind = "source"

    def __init__(self, workload: Workload, feasible: np.ndarray, route: Callable[[int], str]) -> None:
        super().__init__("source")
        self.w = workload
        self.feasible = feasible
        self.route = route
        self.order = np.argsort(workload.job_arrival, kind="stable")
        self.pos = 0
        self.skipped_jobs = 0

    def on_start(self, now: float) -> None:
        if self.order.size:
            self.port.set_timer(max(0.0, float(self.w.job_arrival[self.order[0]]) - now), None)

    def on_timer(self, key: Hashable, now: float) -> None:
        w = self.w
        arr = w.job_arrival
        order = self.order
        n = order.size
        while self.pos < n and arr[order[self.pos]] <= now:
            j = int(order[self.pos])
            self.pos += 1
            lo = int(w.job_first_task[j])
            hi = lo + int(w.job_num_tasks[j])
            ok = self.feasible[lo:hi]
            if not ok.any():
                self.skipped_jobs += 1
                continue
            tasks = np.arange(lo, hi, dtype=np.int64)
            if not ok.all():
                tasks = tasks[ok]
            msg = JobArrival(
                job=j,
                tasks=tasks,
                durations=w.task_duration[tasks],
                masks=w.masks[tasks],
                demands=None if w.task_demand is None else w.task_demand[tasks],
                user=0 if w.job_user is None else int(w.job_user[j]),
                mean_duration=float(w.job_mean_duration[j]),
                priority=0 if w.job_priority is None else int(w.job_priority[j]),
            )
            self.port.send(self.route(j), msg)
        if self.pos < n:
            self.port.set_timer(float(arr[order[self.pos]]) - now, None)


class Injector(Component):
    """Runs callbacks at given simulated times (fault injection: kill a node, replace a GM, …)."""

    kind = "injector"

    def __init__(self, actions: list[tuple[float, Callable]], engine: Engine, deployment: Deployment) -> None:
        super().__init__("injector")
        self.actions = sorted(actions, key=lambda a: a[0])
        self.engine = engine
        self.deployment = deployment

    def on_start(self, now: float) -> None:
        for i, (t, _) in enumerate(self.actions):
            self.port.set_timer(max(0.0, t - now), i)

    def on_timer(self, key: Hashable, now: float) -> None:
        self.actions[key][1](self.engine, self.deployment, now)


class Watchdog(Component):
    """Stops a run that cannot finish: tasks wait but nothing has run or started for ``timeout`` seconds."""

    kind = "watchdog"

    def __init__(self, rec: TaskRecorder, engine: Engine, timeout: float, source: TraceSource) -> None:
        super().__init__("watchdog")
        self.rec = rec
        self.engine = engine
        self.timeout = timeout
        self.source = source
        self.reason: str | None = None

    def on_start(self, now: float) -> None:
        self.port.set_timer(self.timeout, None)

    def on_timer(self, key: Hashable, now: float) -> None:
        rec = self.rec
        if rec.outstanding <= 0:
            return
        idle_for = now - rec.last_progress
        if rec.running == 0 and self.source.pos >= self.source.order.size and idle_for >= self.timeout:
            self.reason = (
                f"{rec.outstanding} task(s) never completed: no task ran or started for {idle_for:.0f} s of "
                f"simulated time after t={rec.last_progress:.3f} s although tasks were waiting"
            )
            self.engine.stop()
            return
        self.port.set_timer(self.timeout, None)
