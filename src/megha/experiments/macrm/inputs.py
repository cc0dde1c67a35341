"""Inputs of the MACRM reproductions: the thesis's clusters, workloads and initial loads, and the service-time
measures (see :mod:`megha.experiments.macrm` for the choices made where the thesis leaves room).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from megha.config import RunConfig
from megha.errors import InputError
from megha.metrics.result import RunResult
from megha.model.constraints import NUM_CONSTRAINTS
from megha.model.topology import Datacenter
from megha.model.workload import Workload
from megha.runner import simulate_inputs as run_inputs

ALL_CONSTRAINTS = np.uint32((1 << NUM_CONSTRAINTS) - 1)

# Table 4.1 (count, platform, normalized CPU, normalized memory) and Table 4.2's units
GOOGLE_MACHINES = [
    (6732, "B", 0.50, 0.50),
    (3863, "B", 0.50, 0.25),
    (1001, "B", 0.50, 0.75),
    (795, "C", 1.00, 1.00),
    (126, "A", 0.25, 0.25),
    (52, "B", 0.50, 0.12),
    (5, "B", 0.50, 0.03),
    (5, "B", 0.50, 0.97),
    (3, "C", 1.00, 0.50),
    (1, "B", 0.50, 0.06),
]
CORES_PER_UNIT = 12.0
GB_PER_UNIT = 16.0
# Table 4.3: mean and max request per task (cores, GB)
CPU_MEAN, CPU_MAX = 0.0338, 0.5
MEM_MEAN, MEM_MAX = 0.0284, 0.955


# --- running an in-memory workload on an in-memory datacenter ----------------------------------------------------
def simulate_inputs(
    workload: Workload,
    dc: Datacenter,
    scheduler: str,
    options: dict | None = None,
    seed: int = 0,
    network_delay: float = 0.0005,
    actions: list[tuple[float, Callable]] | None = None,
    stall_timeout: float = 3600.0,
    label: str = "generated",
) -> RunResult:
    """:func:`megha.runner.simulate_inputs` for a :class:`Workload` and :class:`Datacenter` built in memory, with
    the configuration (recorded in the result) made from these arguments; workers report over the network like
    every other component (``worker_report_delay`` = ``network_delay``)."""
    cap = (
        {k: float(v) for k, v in zip(dc.resource_names, dc.capacity.max(axis=0), strict=True)}
        if dc.capacity is not None
        else {}
    )
    cfg = RunConfig(
        scheduler=scheduler,
        trace=label,
        workers=dc.n_workers,
        seed=seed,
        constraints=False,
        resources=dc.capacity is not None,
        capacity=cap or {"cpu": 1.0},
        network_delay=network_delay,
        worker_report_delay=network_delay,
        options=dict(options or {}),
        stall_timeout=stall_timeout,
    )
    return run_inputs(cfg, workload, dc, actions=actions)


# --- clusters ------------------------------------------------------------------------------------------------------
def cluster(physical: np.ndarray, background: np.ndarray, names: tuple[str, ...], name: str) -> Datacenter:
    """Unconstrained nodes whose allocatable capacity is ``physical − background`` (background in ``meta``)."""
    bg = np.minimum(np.maximum(background, 0.0), physical)
    n = physical.shape[0]
    return Datacenter(
        worker_masks=np.full(n, ALL_CONSTRAINTS, dtype=np.uint32),
        capacity=physical - bg,
        resource_names=names,
        name=name,
        meta={"background": bg, "physical": physical},
    )


def google_machines(n: int = 500) -> np.ndarray:
    """[n, 2] cores and GB of ``n`` machines with the Google cluster's mix (largest-remainder rounding)."""
    counts = np.array([m[0] for m in GOOGLE_MACHINES], dtype=np.float64)
    share = counts / counts.sum() * n
    k = np.floor(share).astype(np.int64)
    rem = share - k
    for i in np.argsort(-rem, kind="stable")[: n - int(k.sum())]:
        k[i] += 1
    rows = [
        np.tile([m[2] * CORES_PER_UNIT, m[3] * GB_PER_UNIT], (int(c), 1))
        for m, c in zip(GOOGLE_MACHINES, k, strict=True)
        if c
    ]
    return np.concatenate(rows).astype(np.float64)


def gaussian_background(
    physical: np.ndarray, load: float, rng: np.random.Generator, sd: float | None = None
) -> np.ndarray:
    """Per node and resource: a fraction from N(μ, (1 − load)/2) clipped to [0, 1] (thesis §4.2.2), with μ chosen
    (on the drawn sample) so that the clipped fractions average exactly ``load`` for each resource."""
    sd = (1.0 - load) / 2 if sd is None else sd
    z = rng.standard_normal(physical.shape)
    frac = np.empty_like(z)
    for r in range(z.shape[1]):
        lo, hi = load - 5 * sd - 1.0, load + 5 * sd + 1.0
        for _ in range(60):  # bisection on the mean of the clipped sample
            mid = (lo + hi) / 2
            if np.clip(mid + sd * z[:, r], 0.0, 1.0).mean() < load:
                lo = mid
            else:
                hi = mid
        frac[:, r] = np.clip((lo + hi) / 2 + sd * z[:, r], 0.0, 1.0)
    return frac * physical


def slot_background(n_nodes: int, cores: int, load: float, rng: np.random.Generator) -> np.ndarray:
    """``⌊load·n·cores⌋`` busy cores chosen uniformly at random among all the cluster's cores: [n, 1]."""
    total = n_nodes * cores
    busy = rng.choice(total, size=math.floor(load * total + 1e-9), replace=False)
    return np.bincount(busy // cores, minlength=n_nodes).astype(np.float64)[:, None]


# --- workloads -----------------------------------------------------------------------------------------------------
def workload_from_jobs(
    arrivals: np.ndarray,
    sizes: list[int],
    durations: np.ndarray,
    demands: np.ndarray,
    names: tuple[str, ...],
    name: str,
) -> Workload:
    """A :class:`Workload` of jobs in arrival order (``durations``/``demands`` per task, concatenated)."""
    order = np.argsort(arrivals, kind="stable")
    if not (order == np.arange(order.size)).all():
        raise InputError("workload_from_jobs: jobs must be given in arrival order")
    sizes_a = np.asarray(sizes, dtype=np.int64)
    dur = np.asarray(durations, dtype=np.float64)
    first = np.concatenate([[0], np.cumsum(sizes_a)[:-1]])
    mean = np.array([dur[f : f + s].mean() for f, s in zip(first, sizes_a, strict=True)]) if sizes else np.zeros(0)
    return Workload(
        job_arrival=np.asarray(arrivals, dtype=np.float64),
        job_num_tasks=sizes_a,
        job_mean_duration=mean,
        task_duration=dur,
        task_demand=np.asarray(demands, dtype=np.float64),
        resource_names=names,
        name=name,
    )


def poisson_jobs(
    n_jobs: int,
    rng: np.random.Generator,
    start: float = 0.0,
    mean_gap: float = 1.0,
    tasks: int = 9,
    mean_duration: float = 1.0,
) -> Workload:
    """Chapter 3's synthetic jobs: Poisson arrivals, ``tasks`` one-core tasks sharing one Exp(mean) duration."""
    arr = start + np.cumsum(rng.exponential(mean_gap, n_jobs))
    arr[0] = start
    dur = np.repeat(rng.exponential(mean_duration, n_jobs), tasks)
    dem = np.ones((n_jobs * tasks, 1))
    return workload_from_jobs(arr, [tasks] * n_jobs, dur, dem, ("cpu",), f"poisson{n_jobs}x{tasks}")


def _lognormal_mean(rng: np.random.Generator, n: int, mean: float, cap: float, sigma: float = 0.8) -> np.ndarray:
    mu = math.log(mean) - sigma * sigma / 2
    return np.minimum(rng.lognormal(mu, sigma, n), cap)


def google_requests(n_jobs: int, rng: np.random.Generator, scale: float | np.ndarray = 1.0) -> np.ndarray:
    """Per-job [cores, GB] requests with Table 4.3's means and maxima, read in the table's own units (cores and GB:
    with them, the thesis's 1,200-job sets of 36.56 tasks add about 45 % to the 3,177-core cluster, which is how
    its load went from 55 % to 90 %); lognormal, s.d. of log 0.8, capped at the maxima."""
    cpu = _lognormal_mean(rng, n_jobs, CPU_MEAN, CPU_MAX)
    mem = _lognormal_mean(rng, n_jobs, MEM_MEAN, MEM_MAX)
    return np.stack([cpu, mem], axis=1) * np.asarray(scale, dtype=np.float64)


def _google_trace() -> Workload:
    from megha.samples import resolve
    from megha.workload.tracefile import load_workload

    return load_workload(resolve("sample:GOOG_subtrace", "trace"), dephase=False)


def google_jobs(
    rng: np.random.Generator,
    n_jobs: int,
    start: float,
    gap: float,
    max_duration: float,
    total: np.ndarray,
    max_share: float = 0.03,
    trace: Workload | None = None,
    scale: float | np.ndarray = 1.0,
    jitter: float = 0.0,
) -> Workload:
    """Jobs drawn at random from the Google sub-trace every ``gap`` s, with Table 4.3 requests; jobs whose total
    request exceeds ``max_share`` of the cluster (any resource) are redrawn. ``jitter`` moves each arrival by a
    uniform offset in [−jitter, +jitter] (mean gap unchanged, order kept: ``jitter`` < ``gap``/2)."""
    if not 0.0 <= jitter < gap / 2:
        raise InputError(f"google_jobs: jitter must be in [0, gap/2), got {jitter} for gap {gap}")
    g = trace or _google_trace()
    req = google_requests(4 * n_jobs + 16, rng, scale)
    picks = rng.integers(0, g.n_jobs, 8 * n_jobs + 64)
    sizes, durs, dems = [], [], []
    r = 0
    for j in picks.tolist():
        if len(sizes) == n_jobs:
            break
        k = int(g.job_num_tasks[j])
        if ((k * req[r]) > max_share * total).any():
            continue
        lo = int(g.job_first_task[j])
        sizes.append(k)
        durs.append(np.minimum(g.task_duration[lo : lo + k], max_duration))
        dems.append(np.tile(req[r], (k, 1)))
        r += 1
    if len(sizes) < n_jobs:
        raise InputError("google_jobs: could not draw enough jobs under the size limit")
    arr = start + gap * np.arange(n_jobs)
    if jitter > 0:
        arr = arr + rng.uniform(-jitter, jitter, n_jobs)
    return workload_from_jobs(arr, sizes, np.concatenate(durs), np.concatenate(dems), ("cpu", "mem"), f"goog{n_jobs}")


def burst_jobs(
    rng: np.random.Generator,
    n_jobs: int,
    n_tasks: int,
    at: float,
    max_duration: float,
    trace: Workload | None = None,
    scale: float | np.ndarray = 1.0,
) -> Workload:
    """``n_jobs`` Google jobs with >= ``n_tasks`` tasks (extra tasks dropped at random), all arriving at ``at``."""
    g = trace or _google_trace()
    ok = np.flatnonzero(g.job_num_tasks >= n_tasks)
    jobs = rng.choice(ok, size=n_jobs, replace=ok.size < n_jobs)
    req = google_requests(n_jobs, rng, scale)
    durs, dems = [], []
    for k, j in enumerate(jobs.tolist()):
        lo = int(g.job_first_task[j])
        keep = np.sort(rng.choice(int(g.job_num_tasks[j]), size=n_tasks, replace=False))
        durs.append(np.minimum(g.task_duration[lo + keep], max_duration))
        dems.append(np.tile(req[k], (n_tasks, 1)))
    return workload_from_jobs(
        np.full(n_jobs, at),
        [n_tasks] * n_jobs,
        np.concatenate(durs),
        np.concatenate(dems),
        ("cpu", "mem"),
        f"burst{n_jobs}x{n_tasks}",
    )


def offered_load(w: Workload, dc: Datacenter, at: np.ndarray) -> np.ndarray:
    """Load (largest resource fraction) at times ``at`` if every task ran from its arrival for its duration."""
    phys = dc.meta.get("physical", dc.capacity)
    bg = dc.meta.get("background", np.zeros_like(phys)).sum(axis=0)
    tot = phys.sum(axis=0)
    start = w.task_arrival
    end = start + w.task_duration
    so = np.argsort(start, kind="stable")
    eo = np.argsort(end, kind="stable")
    zero = np.zeros((1, tot.size))
    cs = np.concatenate([zero, np.cumsum(w.task_demand[so], axis=0)])
    ce = np.concatenate([zero, np.cumsum(w.task_demand[eo], axis=0)])
    live = cs[np.searchsorted(start[so], at, side="right")] - ce[np.searchsorted(end[eo], at, side="right")]
    return ((bg + live) / tot).max(axis=1)


def service_times(res: RunResult) -> np.ndarray:
    """Per job: completion known − arrival − longest task (NaN for jobs that did not complete)."""
    from megha.metrics.summary import job_table

    with np.errstate(invalid="ignore"):
        return job_table(res.workload, res.recorder, res.feasible)["delay"]


def shift(w: Workload, by: float) -> Workload:
    """A copy of ``w`` whose jobs arrive ``by`` seconds later."""
    return replace(w, job_arrival=w.job_arrival + by)


def direct_service_times(res: RunResult, delay: float) -> np.ndarray:
    """Service times as if every task's completion reached the job's manager ``delay`` after it ended (the thesis's
    change to YARN: containers notify the job manager directly instead of at the next node heartbeat)."""
    w = res.workload
    tj = w.task_job
    end = np.where(res.feasible, res.recorder.end, -np.inf)
    comp = np.full(w.n_jobs, -np.inf)
    np.maximum.at(comp, tj, end)
    ideal = np.full(w.n_jobs, -np.inf)
    np.maximum.at(ideal, tj, np.where(res.feasible, w.task_duration, -np.inf))
    unfinished = np.zeros(w.n_jobs, dtype=bool)
    np.logical_or.at(unfinished, tj, res.feasible & np.isnan(res.recorder.end))
    out = comp + delay - w.job_arrival - ideal
    out[unfinished | ~np.isfinite(out)] = np.nan
    return out
