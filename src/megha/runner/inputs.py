"""The inputs of a run: its workload and datacenter, loaded and prepared as a :class:`~megha.config.RunConfig` says,
and the independent random streams derived from its seed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from megha.config import RunConfig
from megha.errors import InputError
from megha.model import topology
from megha.model.topology import Datacenter
from megha.model.workload import Workload
from megha.samples import resolve
from megha.sim.seeding import named_stream
from megha.workload.tracefile import load_workload

# the purposes of a run, each its own random stream under the run's seed (megha.sim.seeding.named_stream);
# components' streams are named by their addresses (megha.sim.engine.Engine.add)
STREAM_TASK_CONSTRAINTS = 1
STREAM_DATACENTER = 2
STREAM_SCHEDULER = 3
STREAM_ENGINE = 4


def stream(seed: int, which: int | str) -> np.random.Generator:
    """A generator for one purpose of a run (task constraints, datacenter, …), independent of the others."""
    return named_stream(seed, which)


def engine_seed(seed: int) -> int:
    """The seed the engine of a run with seed ``seed`` gets; each component draws from the stream named by it and
    the component's address (:class:`megha.sim.engine.Engine`). The live deployment hosts its components with the
    same seed, so a live GM or LM draws what its simulated twin draws."""
    return int(stream(seed, STREAM_ENGINE).integers(2**63))


def load_inputs(cfg: RunConfig) -> tuple[Workload, Datacenter]:
    """Workload and datacenter of a run, with constraints and resources as configured."""
    w = load_workload(
        resolve(cfg.trace, "trace"), truncate=cfg.truncate_durations, dephase=cfg.dephase, max_jobs=cfg.max_jobs
    )
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
            w = w.with_constraints(stream(cfg.seed, STREAM_TASK_CONSTRAINTS))
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
            stream(cfg.seed, STREAM_DATACENTER),
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
