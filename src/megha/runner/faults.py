"""Fault injection in a simulated run: a :class:`~megha.model.faults.FaultSchedule` applied at its times.

Two sorts of fault kinds:

* **crashes of components**, for every scheduler without any code of its own: each component a deployment lists
  can crash under its ``crash_kind`` (by default its ``kind``: ``gm``, ``lm``, ``master``, ``distributor``,
  ``scheduler``, ``rm``, ...; targets are numbered in the order the deployment lists them). A crashed component
  is down for ``down_for`` seconds: the messages and timers that reach it meanwhile wait
  (:meth:`megha.sim.engine.Engine.suspend`), then it recovers — by default with the state it had, the model of a
  standby taking over from replicated state or a restart from a persisted log; a component whose paper says it
  restarts without state drops it in :meth:`~megha.sim.component.Component.on_recover` — and what waited reaches
  it. Tasks already running on workers keep running. ``down_for`` omitted or 0: it restarts at once.
* **family faults** (``worker``, ``partition``, ...) that a family implements in its ``Deployment.faults``
  (:class:`~megha.model.faults.FaultHandler`), because what happens to the tasks on a failed worker is the
  scheduler's business.

Every fault is logged with the time it was injected and the time it recovered; :func:`fault_log` gives the log
that ``summary.json`` reports under ``faults`` (see :func:`megha.metrics.summary.fault_summary`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import numpy as np

from megha.metrics.recorder import TaskRecorder
from megha.model.faults import FaultEvent, FaultHandler, FaultSchedule, load_schedule, parse_schedule
from megha.model.topology import Datacenter
from megha.model.workload import Workload, fits_some_worker
from megha.sim.component import Address, Component
from megha.sim.engine import Engine

if TYPE_CHECKING:
    from megha.schedulers.registry import Deployment

CRASH = (
    "down for down_for seconds (what reaches it waits), then it recovers and handles what waited; tasks on "
    "workers keep running"
)


def load_faults(faults: str | dict | FaultSchedule) -> FaultSchedule:
    """A schedule from a TOML path, its dict form, or itself."""
    if isinstance(faults, FaultSchedule):
        return faults
    if isinstance(faults, dict):
        return parse_schedule(faults, "faults")
    return load_schedule(faults)


def crash_targets(components: list[Component]) -> dict[str, list[Address]]:
    """The components a schedule can crash, by fault kind, in the order the deployment lists them."""
    out: dict[str, list[Address]] = {}
    for c in components:
        kind = c.crash_kind
        if kind:
            out.setdefault(kind, []).append(c.address)
    return out


def fault_kinds(components: list[Component], handler: FaultHandler | None) -> dict[str, str]:
    """Every fault kind a deployment offers -> what happens on such a fault."""
    kinds = {k: CRASH for k in crash_targets(components)}
    if handler is not None:
        kinds.update(handler.kinds)
    return kinds


class FaultDriver(Component):
    """Injects a run's faults at their times and brings the targets back after ``down_for``."""

    kind = "faults"
    crash_kind = None

    def __init__(
        self,
        events: list[FaultEvent],
        engine: Engine,
        crashes: dict[str, list[Address]],
        handler: FaultHandler | None,
        strand: Strand | None = None,
    ) -> None:
        super().__init__("faults")
        self.events = events
        self.engine = engine
        self.crashes = crashes
        self.handler = handler
        self.strand = strand
        self._down: Counter = Counter()  # (kind, target) -> faults holding it down
        self.log: list[dict[str, Any]] = []

    def on_start(self, now: float) -> None:
        for i, ev in enumerate(self.events):
            self.port.set_timer(max(0.0, ev.at - now), ("down", i))

    def on_timer(self, key: Hashable, now: float) -> None:
        what, i = key[0], key[1]
        ev = self.events[i]
        kind, units = self._units(ev)
        if what == "down":
            fresh = tuple(u for u in units if self._hold(kind, u) == 1)
            self._apply(kind, fresh, now, fail=True)
            crash = self._is_crash(ev.kind)
            down_for = math.inf if ev.kind in getattr(self.handler, "permanent", ()) else ev.down_for
            self.log.append(
                {
                    "at": now,
                    "kind": ev.kind,
                    "targets": list(ev.targets),
                    "down_for": down_for,
                    "recovered_at": None,
                    "source": ev.source,
                    "crash": crash,
                    "workers": list(units) if kind == "worker" else [],  # the workers it took down
                }
            )
            if math.isfinite(down_for):
                self.port.set_timer(down_for, ("up", i, len(self.log) - 1))
            elif self.strand is not None and kind == "worker":
                self.strand.workers_gone(list(units))
        else:
            back = tuple(u for u in units if self._release(kind, u) == 0)
            self._apply(kind, back, now, fail=False)
            self.log[key[2]]["recovered_at"] = now

    def _units(self, ev: FaultEvent) -> tuple[str, tuple[int, ...]]:
        """What a fault holds down: workers for every family fault that takes workers down (a worker is up only
        when no fault holds it: a partition's recovery does not revive a worker another fault still holds), else
        its own targets."""
        if not self._is_crash(ev.kind):
            ws = self.handler.workers(ev.kind, ev.targets)
            if ws:
                return "worker", tuple(ws)
        return ev.kind, ev.targets

    def _hold(self, kind: str, target: int) -> int:
        self._down[(kind, target)] += 1
        return self._down[(kind, target)]

    def _release(self, kind: str, target: int) -> int:
        self._down[(kind, target)] -= 1
        return self._down[(kind, target)]

    def _is_crash(self, kind: str) -> bool:
        return kind in self.crashes and (self.handler is None or kind not in self.handler.kinds)

    def _apply(self, kind: str, targets: tuple[int, ...], now: float, fail: bool) -> None:
        if not targets:
            return
        if self._is_crash(kind):
            addrs = self.crashes[kind]
            for t in targets:
                if fail:
                    self.engine.suspend(addrs[t])
                else:
                    self.engine.resume(addrs[t])
        elif fail:
            self.handler.fail(kind, targets, now)
        else:
            self.handler.restore(kind, targets, now)


class Strand:
    """Tasks that no worker left alive can run: workers that fail for good (``down_for`` omitted) may take with them
    the only workers a task's constraints (or, with requests, capacities) allow. Such a task is *stranded*: reported
    (``faults.tasks_stranded``) instead of waited for, so the run ends when every other task is done."""

    def __init__(self, rec: TaskRecorder, workload: Workload, dc: Datacenter, feasible: np.ndarray) -> None:
        self.rec = rec
        self.workload = workload
        self.dc = dc
        self.alive = np.ones(dc.n_workers, dtype=bool)
        self.feasible = feasible
        self.stranded = np.zeros(workload.n_tasks, dtype=bool)

    def workers_gone(self, workers: list[int]) -> None:
        """Workers died for good: strand the unfinished tasks none of the live workers can run."""
        self.alive[np.asarray(workers, dtype=np.int64)] = False
        rec = self.rec
        # a task that finished on its worker is done even if its scheduler (down) has not learned it yet
        ids = np.flatnonzero(self.feasible & ~self.stranded & np.isnan(rec.known) & np.isnan(rec.end))
        if not ids.size:
            return
        w, dc, alive = self.workload, self.dc, self.alive
        ok = fits_some_worker(
            w.masks[ids],
            None if w.task_demand is None else w.task_demand[ids],
            dc.worker_masks[alive],
            None if dc.capacity is None else dc.capacity[alive],
        )
        new = ids[~ok]
        if new.size:
            self.stranded[new] = True
            rec.count("tasks_stranded", int(new.size))
            rec.expect(rec.outstanding - int(new.size))
            if rec.outstanding <= 0 and rec.on_all_done is not None:
                rec.on_all_done()


def install(
    schedule: FaultSchedule,
    scheduler: str,
    engine: Engine,
    deployment: Deployment,
    start: float,
    end: float,
    n_workers: int,
    strand: Strand | None = None,
) -> FaultDriver:
    """Check the schedule against what the deployment offers, expand it over the arrival window ``[start, end]``
    and add its driver to the engine."""
    handler = deployment.faults
    crashes = crash_targets(deployment.components)
    kinds = fault_kinds(deployment.components, handler)
    schedule.check_kinds(scheduler, kinds)
    population = {k: len(v) for k, v in crashes.items()}
    if handler is not None:
        population.update({k: handler.population(k) for k in handler.kinds})
    population.setdefault("worker", n_workers if "worker" in kinds else 0)
    events = schedule.expand(start, end, population)  # random processes may draw none: injected 0
    driver = FaultDriver(events, engine, crashes, handler, strand)
    engine.add(driver)
    return driver


def fault_log(driver: FaultDriver | None) -> list[dict[str, Any]] | None:
    """The faults a run injected (None when it had no schedule)."""
    return None if driver is None else list(driver.log)
