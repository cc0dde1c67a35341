"""Run one simulation from a :class:`~megha.config.RunConfig`.

Steps: load the workload (and synthesize placement constraints / resource requests when asked), build or
import the datacenter, set aside tasks no worker can run (reported, never scheduled), wire the scheduler's
components into an :class:`~megha.sim.engine.Engine`, feed jobs at their arrival times, run until the
scheduler has learned of every task's completion, then check that every feasible task ran to completion
exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from megha.config import RunConfig
from megha.errors import InputError, SimulationError
from megha.metrics.recorder import TaskRecorder
from megha.model import topology
from megha.model.topology import Datacenter
from megha.model.workload import Workload, feasible_tasks
from megha.samples import resolve
from megha.schedulers import registry
from megha.schedulers.common.messages import JobArrival
from megha.sim.component import Component
from megha.sim.engine import DelayModel, Engine, ProcessingModel
from megha.workload.tracefile import load_workload

# independent random streams of a run, derived from its seed
_STREAM_TASK_CONSTRAINTS = 1
_STREAM_DATACENTER = 2
_STREAM_SCHEDULER = 3
_STREAM_ENGINE = 4


def stream(seed: int, which: int) -> np.random.Generator:
    """A generator for one purpose of a run (task constraints, datacenter, …), independent of the others."""
    return np.random.default_rng(np.random.SeedSequence([seed, which]))


@dataclass
class RunResult:
    """Everything a run produced; :mod:`megha.metrics.report` turns it into files and tables."""

    config: RunConfig
    workload: Workload
    datacenter: Datacenter
    recorder: TaskRecorder
    feasible: np.ndarray
    counters: dict[str, int]
    message_counts: dict[str, int]
    end_time: float
    events: int
    wall_seconds: float
    options: dict
    describe: dict = field(default_factory=dict)
    unfinished_reason: str | None = None
    extras: dict = field(default_factory=dict)

    @property
    def scheduler(self) -> str:
        return self.config.scheduler


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

    def on_timer(self, key, now: float) -> None:
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

    def __init__(self, actions: list[tuple[float, Callable]], engine: Engine, deployment) -> None:
        super().__init__("injector")
        self.actions = sorted(actions, key=lambda a: a[0])
        self.engine = engine
        self.deployment = deployment

    def on_start(self, now: float) -> None:
        for i, (t, _) in enumerate(self.actions):
            self.port.set_timer(max(0.0, t - now), i)

    def on_timer(self, key, now: float) -> None:
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

    def on_timer(self, key, now: float) -> None:
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


def load_inputs(cfg: RunConfig) -> tuple[Workload, Datacenter]:
    """Workload and datacenter of a run, with constraints and resources as configured."""
    w = load_workload(resolve(cfg.trace, "trace"), truncate=cfg.truncate_durations, dephase=cfg.dephase)
    if cfg.max_jobs is not None and cfg.max_jobs < w.n_jobs:
        n_t = int(w.job_num_tasks[: cfg.max_jobs].sum())
        w = replace(
            w,
            job_arrival=w.job_arrival[: cfg.max_jobs],
            job_num_tasks=w.job_num_tasks[: cfg.max_jobs],
            job_mean_duration=w.job_mean_duration[: cfg.max_jobs],
            task_duration=w.task_duration[:n_t],
            task_mask=None if w.task_mask is None else w.task_mask[:n_t],
            task_demand=None if w.task_demand is None else w.task_demand[:n_t],
            job_user=None if w.job_user is None else w.job_user[: cfg.max_jobs],
            job_priority=None if w.job_priority is None else w.job_priority[: cfg.max_jobs],
        )
    if cfg.load_scale != 1.0:
        t0 = float(w.job_arrival.min())
        w = replace(w, job_arrival=t0 + (w.job_arrival - t0) / cfg.load_scale)
    if cfg.constraints:
        if w.task_mask is None:
            w = w.with_constraints(stream(cfg.seed, _STREAM_TASK_CONSTRAINTS))
    else:
        w = replace(w, task_mask=None)
    if cfg.cluster is not None:
        if cfg.workers is not None:
            raise InputError("give either --cluster or --workers, not both")
        dc = _load_cluster(resolve(cfg.cluster, "cluster"))
    else:
        if cfg.workers is None:
            raise InputError("give a datacenter: --cluster FILE or --workers N")
        dc = topology.generate(
            cfg.workers,
            stream(cfg.seed, _STREAM_DATACENTER),
            fractions=None if cfg.machine_fractions is None else np.asarray(cfg.machine_fractions),
            profiles=None if cfg.machine_profiles is None else [np.asarray(p) for p in cfg.machine_profiles],
            n_clusters=cfg.lms or 1,
            constrained=cfg.constraints,
        )
    if cfg.resources:
        dc = _resource_capacities(dc, cfg)
        if w.task_demand is None:
            names = dc.resource_names
            missing = [k for k in names if k not in cfg.demand]
            if missing:
                raise InputError(f"resource mode: no task demand given for {missing}")
            dem = np.tile(np.array([cfg.demand[k] for k in names]), (w.n_tasks, 1))
            w = w.with_demands(dem, names)
        elif tuple(w.resource_names) != dc.resource_names:
            idx = []
            for k in dc.resource_names:
                if k not in w.resource_names:
                    raise InputError(f"resource mode: the trace has no '{k}' requests (has {w.resource_names})")
                idx.append(w.resource_names.index(k))
            w = w.with_demands(w.task_demand[:, idx], dc.resource_names)
    else:
        w = replace(w, task_demand=None, resource_names=())
        if dc.capacity is not None:  # slot mode: one task per worker whatever the machine file says
            dc = replace(dc, capacity=None, resource_names=())
    return w, dc


def _load_cluster(path: str) -> Datacenter:
    """A cluster file; one written by ``megha import-trace --machines`` also brings its machines' capacities."""
    from megha.workload.converters.machines import load_machines

    return load_machines(path)


def _default_capacity() -> dict[str, float]:
    return RunConfig.model_fields["capacity"].get_default(call_default_factory=True)


def _resource_capacities(dc: Datacenter, cfg: RunConfig) -> Datacenter:
    """The datacenter in resource mode; ``dc.capacity`` ([N, R]) is where the capacities live.

    A cluster file with per-machine capacities (``megha import-trace --machines``) keeps them, unless the
    configuration sets ``capacity`` to something other than its default: that uniform capacity then overrides
    the file's for every worker. Any other datacenter gets ``cfg.capacity`` on every worker.
    """
    if dc.capacity is not None and cfg.capacity == _default_capacity():
        return dc
    return dc.with_resources(cfg.capacity)


def simulate(
    cfg: RunConfig,
    progress: Callable[[float, int, int], None] | None = None,
    actions: list[tuple[float, Callable]] | None = None,
) -> RunResult:
    """Run one simulation. ``progress(now, done, total)`` is called periodically during long runs.

    ``actions`` are ``(time, fn(engine, deployment, now))`` callbacks run at simulated times — the hook for
    fault injection in tests and experiments.
    """
    t_wall = time.perf_counter()
    spec = registry.get(cfg.scheduler)
    mode = "resource" if cfg.resources else "slot"
    if mode not in spec.modes:
        raise InputError(f"scheduler {cfg.scheduler!r} does not support {mode} mode (supports {spec.modes})")
    registry.parse_options(spec, cfg.options)  # bad options fail before the inputs are loaded
    workload, dc = load_inputs(cfg)
    return simulate_inputs(cfg, workload, dc, progress, actions, t_wall)


def simulate_inputs(
    cfg: RunConfig,
    workload: Workload,
    dc: Datacenter,
    progress: Callable[[float, int, int], None] | None = None,
    actions: list[tuple[float, Callable]] | None = None,
    t_wall: float | None = None,
) -> RunResult:
    """:func:`simulate` for a workload and datacenter already in memory (``cfg``'s trace and datacenter fields
    are then only labels): the scheduler, options, seed, delays and timeouts still come from ``cfg``."""
    t_wall = time.perf_counter() if t_wall is None else t_wall
    spec = registry.get(cfg.scheduler)
    mode = "resource" if dc.capacity is not None else "slot"
    if mode not in spec.modes:
        raise InputError(f"scheduler {cfg.scheduler!r} does not support {mode} mode (supports {spec.modes})")
    options = registry.parse_options(spec, cfg.options)
    feasible = feasible_tasks(workload, dc)

    rec = TaskRecorder(workload.task_arrival, workload.task_demand)
    links = {("source", "*"): 0.0, ("watchdog", "*"): 0.0, ("injector", "*"): 0.0}
    if cfg.worker_report_delay != cfg.network_delay:
        links[("worker", "*")] = cfg.worker_report_delay
    delay_model = DelayModel(network_delay=cfg.network_delay, links=links)
    processing = ProcessingModel(base=dict(cfg.processing), per_item=dict(cfg.processing_per_item))
    engine = Engine(
        seed=int(stream(cfg.seed, _STREAM_ENGINE).integers(2**63)),
        delay_model=delay_model,
        processing=processing,
        recorder=rec,
    )
    ctx = registry.BuildContext(
        engine=engine,
        recorder=rec,
        workload=workload,
        datacenter=dc,
        feasible=feasible,
        options=options,
        rng=stream(cfg.seed, _STREAM_SCHEDULER),
        n_gms=cfg.gms,
        n_lms=cfg.lms,
    )
    deployment = spec.build(ctx)
    source = TraceSource(workload, feasible, deployment.route)
    engine.add(source)
    n_feasible = int(feasible.sum())
    rec.expect(n_feasible)
    rec.on_all_done = engine.stop
    watchdog = Watchdog(rec, engine, cfg.stall_timeout, source)
    engine.add(watchdog)
    if actions:
        engine.add(Injector(actions, engine, deployment))

    cb = None
    if progress is not None:

        def cb(now: float) -> None:
            progress(now, n_feasible - rec.outstanding, n_feasible)

    if n_feasible:
        engine.run(progress=cb)
    reason = watchdog.reason
    if reason is None and rec.outstanding > 0:
        reason = f"{rec.outstanding} task(s) never completed: the simulation ran out of events"
    if reason is None:
        fin = rec.finishes[feasible]
        if (fin != 1).any():
            bad = np.flatnonzero(feasible)[np.flatnonzero(fin != 1)[:5]].tolist()
            raise SimulationError(f"tasks did not finish exactly once (e.g. task ids {bad})")
    counters = dict(rec.counters)
    counters.update(deployment.counters())
    counters["tasks_infeasible"] = int((~feasible).sum())
    counters["jobs_without_feasible_tasks"] = source.skipped_jobs
    return RunResult(
        config=cfg,
        workload=workload,
        datacenter=dc,
        recorder=rec,
        feasible=feasible,
        counters=counters,
        message_counts=engine.message_counts(),
        end_time=engine.now if n_feasible else 0.0,
        events=engine.events,
        wall_seconds=time.perf_counter() - t_wall,
        options=options.model_dump(),
        describe=deployment.describe,
        unfinished_reason=reason,
        extras=deployment.extras,
    )
