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
from typing import Any

import numpy as np

from megha.config import RunConfig
from megha.errors import InputError, SimulationError
from megha.metrics.processing import effective_costs
from megha.metrics.recorder import TaskRecorder
from megha.metrics.result import RunResult
from megha.model.topology import Datacenter
from megha.model.workload import Workload, eligible_worker_counts
from megha.runner.drivers import Injector, TraceSource, Watchdog
from megha.runner.inputs import STREAM_SCHEDULER, engine_seed, load_inputs, stream
from megha.schedulers import registry
from megha.sim.engine import DelayModel, Engine, ProcessingModel


def simulate(
    cfg: RunConfig,
    progress: Callable[[float, int, int], None] | None = None,
    actions: list[tuple[float, Callable]] | None = None,
    *,
    instrument: Callable[[Engine], None] | None = None,
) -> RunResult:
    """Run one simulation. ``progress(now, done, total)`` is called periodically during long runs.

    ``actions`` are ``(time, fn(engine, deployment, now))`` callbacks run at simulated times — the hook for
    fault injection in tests and experiments. ``instrument(engine)`` is called once the scheduler is built, before
    anything runs (profilers: :class:`megha.metrics.processing.Profiler`).
    """
    t_wall = time.perf_counter()
    spec = registry.get(cfg.scheduler)
    mode = "resource" if cfg.resources else "slot"
    if mode not in spec.modes:
        raise InputError(f"scheduler {cfg.scheduler!r} does not support {mode} mode (supports {spec.modes})")
    options = registry.parse_options(spec, cfg.options)  # bad options fail before the inputs are loaded
    if cfg.faults is not None:
        from megha.runner.faults import load_faults  # only a run with faults pays for importing the fault machinery

        load_faults(cfg.faults)  # so does a bad fault schedule
    implied = options.implied_config() if hasattr(options, "implied_config") else {}
    if implied:  # e.g. a fidelity profile that loads the trace as its reference simulator did
        cfg = cfg.model_copy(update=implied)
    workload, dc = load_inputs(cfg)
    return simulate_inputs(cfg, workload, dc, progress, actions, t_wall, instrument=instrument)


def simulate_inputs(
    cfg: RunConfig,
    workload: Workload,
    dc: Datacenter,
    progress: Callable[[float, int, int], None] | None = None,
    actions: list[tuple[float, Callable]] | None = None,
    t_wall: float | None = None,
    *,
    instrument: Callable[[Engine], None] | None = None,
) -> RunResult:
    """:func:`simulate` for a workload and datacenter already in memory (``cfg``'s trace and datacenter fields
    are then only labels): the scheduler, options, seed, delays and timeouts still come from ``cfg``."""
    t_wall = time.perf_counter() if t_wall is None else t_wall
    t_cpu = time.process_time()
    engine, rec, deployment, feasible, options, eligible = _build(cfg, workload, dc)
    source = TraceSource(workload, feasible, deployment.route)
    engine.add(source)
    n_feasible = int(feasible.sum())
    rec.expect(n_feasible)
    rec.on_all_done = engine.stop
    watchdog = Watchdog(rec, engine, cfg.stall_timeout, source)
    engine.add(watchdog)
    if actions:
        engine.add(Injector(actions, engine, deployment))
    faults = None
    if cfg.faults is not None:
        from megha.runner.faults import Strand, load_faults
        from megha.runner.faults import install as install_faults

        arrivals = workload.job_arrival
        start, end = (float(arrivals.min()), float(arrivals.max())) if arrivals.size else (0.0, 0.0)
        strand = Strand(rec, workload, dc, feasible)
        faults = install_faults(
            load_faults(cfg.faults), cfg.scheduler, engine, deployment, start, end, dc.n_workers, strand
        )

    cb = None
    if progress is not None:

        def cb(now: float) -> None:
            progress(now, n_feasible - rec.outstanding, n_feasible)

    if instrument is not None:
        instrument(engine)
    if n_feasible:
        fast = deployment.run if not actions and faults is None and instrument is None else None
        if fast is None or not fast(engine, source, cfg.stall_timeout):
            engine.run(progress=cb)
        elif cb is not None:
            cb(engine.now)
    reason = watchdog.reason
    if reason is None and rec.outstanding > 0:
        reason = f"{rec.outstanding} task(s) never completed: the simulation ran out of events"
    if reason is None:
        expected = feasible if faults is None or faults.strand is None else feasible & ~faults.strand.stranded
        fin = rec.finishes[expected]
        if (fin != 1).any():
            bad = np.flatnonzero(expected)[np.flatnonzero(fin != 1)[:5]].tolist()
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
        cpu_seconds=time.process_time() - t_cpu,
        options=options.model_dump(),
        describe=deployment.describe,
        unfinished_reason=reason,
        extras=deployment.extras,
        faults=None if faults is None else faults.log,
        stranded=None if faults is None else np.flatnonzero(faults.strand.stranded),
        counter_sets=registry.get(cfg.scheduler).counter_sets(),
        eligible=eligible,
    )


def build(cfg: RunConfig, workload: Workload, dc: Datacenter) -> tuple[Engine, TaskRecorder, Any, np.ndarray, Any]:
    """Wire ``cfg``'s scheduler for a workload and datacenter in memory, without running anything: the engine, the
    task recorder, the family's deployment (its components, routing and fault handler), the feasible-task mask and
    the validated options."""
    return _build(cfg, workload, dc)[:5]


def _build(
    cfg: RunConfig, workload: Workload, dc: Datacenter
) -> tuple[Engine, TaskRecorder, Any, np.ndarray, Any, np.ndarray]:
    """:func:`build`, and each task's count of eligible workers (``feasible`` is ``eligible > 0``), counted once
    for the run and its summary."""
    spec = registry.get(cfg.scheduler)
    mode = "resource" if dc.capacity is not None else "slot"
    if mode not in spec.modes:
        raise InputError(f"scheduler {cfg.scheduler!r} does not support {mode} mode (supports {spec.modes})")
    options = registry.parse_options(spec, cfg.options)
    eligible = eligible_worker_counts(workload.masks, workload.task_demand, dc.worker_masks, dc.capacity)
    feasible = eligible > 0  # feasible_tasks(workload, dc)

    rec = TaskRecorder(workload.task_arrival, workload.task_demand)
    links = {("source", "*"): 0.0, ("watchdog", "*"): 0.0, ("injector", "*"): 0.0}
    if cfg.worker_report_delay != cfg.network_delay:
        links[("worker", "*")] = cfg.worker_report_delay
    delay_model = DelayModel(network_delay=cfg.network_delay, links=links)
    try:
        base, per_item, _ = effective_costs(cfg, dc.n_workers)
    except KeyError:
        raise InputError(
            f"processing_model='measured': no measured costs for {cfg.scheduler!r} "
            "(benchmarks/measure_processing.py measures them)"
        ) from None
    processing = ProcessingModel(base=base, per_item=per_item)
    engine = Engine(
        seed=engine_seed(cfg.seed),
        delay_model=delay_model,
        processing=processing,
        recorder=rec,
    )
    ctx = registry.BuildContext(
        host=engine,
        recorder=rec,
        workload=workload,
        datacenter=dc,
        feasible=feasible,
        options=options,
        rng=stream(cfg.seed, STREAM_SCHEDULER),
        n_gms=cfg.gms,
        n_lms=cfg.lms,
        faults=cfg.faults is not None,
        seed=cfg.seed,
    )
    deployment = spec.build(ctx)
    return engine, rec, deployment, feasible, options, eligible


def fault_kinds_of(scheduler: str, options: dict | None = None) -> dict[str, str]:
    """The fault kinds a scheduler offers (component crashes and its family's faults) -> what happens on each,
    found by wiring it on a tiny datacenter (what ``megha schedulers`` lists). Its slot mode when it has one."""
    from megha.runner.faults import fault_kinds  # the fault machinery only when asked

    spec = registry.get(scheduler)
    cfg = RunConfig(
        scheduler=scheduler,
        trace="sample:YH_small",
        workers=16,
        gms=2,
        lms=2,
        max_jobs=1,
        resources="slot" not in spec.modes,
        options=options or {},
    )
    workload, dc = load_inputs(cfg)
    _, _, deployment, _, _ = build(cfg, workload, dc)
    return fault_kinds(deployment.components, deployment.faults)
