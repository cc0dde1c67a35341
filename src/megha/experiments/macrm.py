"""MACRM thesis (seed 001) reproductions: sampling techniques (ch. 3) and MACRM vs YARN vs Sparrow (ch. 4).

* ``macrm-sampling`` — Figs 3.4, 3.5, 3.7, 3.8: 200 four-core machines, one-way delay 0.5 ms (1 ms RTT), Poisson jobs
  (mean inter-arrival 1 s) of 9 one-core tasks sharing one exponential duration (mean 1 s), sampling timeout 5 ms,
  heartbeat 1 s; average service time (job span − task duration) vs cluster load 60–95 % for the power of two
  choices, doubling the rate after a failure, the adaptive initial rate (+ doubling), and adaptive + the switch to
  centralized mode. The load is background occupancy: ``⌊L·800⌋`` of the 800 cores, chosen at random, stay busy.
* ``macrm-service-time`` — Fig. 4.2: 500 nodes with Google's machine mix (Table 4.1 as Table 4.2 interprets it:
  1.0 CPU = 12 cores, 1.0 memory = 16 GB; 3,177 cores and 3,772 GB in all), an initial random load (per node and
  resource normal with s.d. (1 − start)/2, clipped), then jobs drawn at random from the Google sub-trace (task
  counts and durations) every 500 ms with per-job CPU and memory requests drawn to match Table 4.3 (lognormal,
  means 0.0338 and 0.0284, capped at 0.5 and 0.955). The jobs raise the load; as in the thesis, a job counts in
  load group L (70 … 90 %) when the load at its arrival is within L ± 5 %. The load used is the *offered* load
  (background + every arrived task until its duration has passed), identical for all schedulers. MACRM (heartbeat
  2 s, sampling timeout 3 ms) vs ``yarn`` (heartbeat 2 s) vs two Sparrows: the registered ``sparrow`` (worker
  queues, late binding; label "Sparrow") and the thesis's own Sparrow (label "Sparrow-thesis", :data:`SPARROW_THESIS`).
  The table also gives, for the two MACRM-built systems, the mean wait from a job's arrival to its job manager's
  start, the share of sampling inquiries nodes answered, and failed sampling rounds per job.
* ``macrm-burst`` — Fig. 4.3 / Appendix A: bursts of 5–20 jobs of 10–40 tasks (Google jobs with at least that many
  tasks, extra tasks dropped) submitted at once on the same cluster at initial loads 70–90 % (per node and resource
  normal with mean L and s.d. (100 − L)/2, as the thesis describes); maximum service time per burst, averaged over
  the sets of a group.

Reading the thesis — the choices made here, where the text leaves room (``--set key=value`` overrides each):

* **Request units** (``request_units``, default ``absolute``): Table 4.3's per-task requests (0.0338 "cores",
  0.0284 "GB") are the trace's normalized numbers under the table's labels. They are used as cores and GB: with
  them the thesis's sets (1,200 jobs of 36.56 tasks, tasks of 3,000 s on average) add about 47 % CPU to the
  3,177-core cluster — how its load went from 55 % to the 70–90 % groups — and Appendix A's 20-job × 40-task bursts
  at 90 % fit in the ~10 % free. Read as fractions of the largest machine (``normalized``: 12x larger, ~0.4 cores),
  the sets would ask for five clusters' worth, and bursts of 20 × 40 at 80–90 % no longer fit: every system then
  waits seconds for running tasks to end, against Appendix A's milliseconds.
* **One task per responder** (``per_responder``, default ``one``): "a job manager places the n tasks of the job on
  the least loaded of d × n randomly selected nodes" (§3.1.3), as Sparrow's batch sampling does; for MACRM and the
  thesis's Sparrow alike.
* **Network** (``net``): chapter 4 uses its measured "mean Round Trip Time ... 0.8 millisecond" (§4.1.2): 0.4 ms
  one way; chapter 3 its "network round trip to one millisecond" (§3.1.4).
* **Arrival jitter** (``jitter``, default 50 ms): the thesis submits a job every 500 ms against 2 s heartbeats. In a
  deterministic simulation that grid is phase-locked to the heartbeat timers: every set samples the same four
  heartbeat phases, and the jobs' own samplings shift the heartbeats near those phases: a job manager's wait for a
  heartbeat (MACRM, YARN) becomes a lottery over four gaps, biased upwards (MACRM at 70 %, six seeds: 8.2–17.0 ms,
  11.3 ms on average, job-manager wait 8.7 ms; with the jitter 7.5–8.7 ms, wait 5.4 ms — one node heartbeats every
  4 ms). In the thesis's real-time emulation, timer and processing jitter decorrelate them; here each arrival moves
  by up to ±50 ms (mean gap 500 ms). Bursts (``macrm-burst``) already come at a random heartbeat phase.
* **Initial load** (``start``/``start_below``): the thesis starts every set at 55 % and lets the jobs raise the load.
  With this sub-trace (shorter tasks than the thesis's trace: 1,400 s on average) a set needs 1,400–2,900 jobs to
  reach 85 % from 55 % and 4,300–5,000 (~150,000 tasks) to pass 95 %, so by default each group starts at L − 4 %
  (``start_below``) and its jobs carry it through L ± 5 %; ``--set start=0.55 --set jobs=5000`` runs the thesis's
  start (slowly). Nodes' full share is the same either way: with s.d. (1 − start)/2 about 2.3 % of nodes per
  resource are clipped full at any start.
* **When a sampling round ends** (``round_end``, default ``all``): see :data:`megha.schedulers.macrm.policy.ROUND_ENDS`.

What this model does not reproduce (see the reproductions' ``sampler_diagnostics``): the thesis's Sparrow grows
steeply with load (Appendix A: ~11 ms at 70 %, 14–23 ms at 80 %, 28–60 ms at 90 %), which it blames on "a reduction
in the chance of finding free resources with random sampling" (§4.2.1). With Table 4.3's requests a task needs
about 0.5 % of a node, and the thesis's initial-load model (s.d. (100 − L)/2) keeps the share of nodes without
that much room at about 5 % at every L: in ``macrm-service-time`` nodes answer 89–94 % of the inquiries from 70 to
85 % and the thesis's Sparrow stays near 4 ms; only the 90 % group, whose jobs push the offered load towards 95 %,
sees answers drop (69 %) and rounds fail (0.27 per job) — 5.3 ms, 1.4x its 70 % value against the thesis's 2.6x. In
``macrm-burst`` (load = the initial load) it is flat at ~9 ms; bursts make it grow with their size (collisions at
nodes holding another sampler's inquiry, Fig. 3.3), not with load. Requests large against a node's free space (the
``normalized`` reading) do make it load-sensitive — and that reading contradicts the thesis's load curves and burst
results above. The same literal rules make MACRM's adaptive rate costly in bursts: 20 job managers placed by one
heartbeat sample 5–8 x n nodes each at once, most inquiries find nodes held for another sampler, rounds fail and
leftovers wait for heartbeats in the central queue (85 %: 20 x 40 tasks in 70 ms, Sparrow-thesis 14 ms).

Initial load is the same for every scheduler: it is taken out of the nodes' allocatable capacity and, for MACRM,
also passed as ``datacenter.meta["background"]`` so its node managers report it and its load estimate counts it.
Durations are capped (``max_duration``) so runs end; service time never includes a job's longest task, so the cap
only matters through the load. Runs use :func:`simulate_inputs`, the runner's steps with an in-memory workload and
datacenter (heterogeneous machines are not expressible in a :class:`~megha.config.RunConfig`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from megha.config import RunConfig
from megha.errors import InputError
from megha.experiments.registry import ReproContext, experiment
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

PAPER = {
    "service_time_ms_70": {"MACRM": 12.19, "Sparrow": 10.96},
    "macrm_vs_yarn": "32 % lower at 70 % load, 56 % lower at 90 % load",
    "macrm_vs_sparrow": "up to 49 % lower at 90 % load (behind Sparrow at 70 %)",
    "sparrow_growth": "Sparrow's service time grows steeply with load (Fig. 4.2; Appendix A, 5 jobs x 10 tasks: "
    "11.05 ms at 70 %, 14.47 at 80 %, 19.41 at 85 %, 28.68 at 90 %: x2.6 from 70 to 90 %), MACRM's "
    "does not (12.30 -> 14.55 ms)",
    "sampling": "doubling cuts service time > 25 % at 95 %; adaptive rate up to 21 % / 43 % better than doubling / "
    "power of two at 95 %; the switch to centralized mode lowers it further at >= 90 %",
    "burst_ms_appendix_A": {
        "Sparrow": {
            70: [[11.051, 11.330], [11.432, 12.594]],
            80: [[14.474, 15.888], [16.204, 22.760]],
            90: [[28.683, 33.108], [34.589, 59.986]],
        },
        "MACRM": {
            70: [[12.299, 12.681], [12.792, 14.489]],
            80: [[13.807, 14.975], [15.307, 21.280]],
            90: [[14.548, 14.973], [15.043, 16.698]],
        },
        "YARN": {
            70: [[19.240, 40.958], [43.758, 121.033]],
            80: [[24.029, 56.607], [58.158, 175.120]],
            90: [[37.219, 102.374], [78.323, 254.792]],
        },
        "layout": "[[5 jobs x 10 tasks, 5 x 40], [20 x 10, 20 x 40]] (20 x * at 90 % for YARN: 15 jobs)",
    },
}


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


# --- shared experiment plumbing ------------------------------------------------------------------------------------
NET = 0.0005  # chapter 3's one-way delay: "network round trip to one millisecond" (thesis §3.1.4)
NET_CH4 = 0.0004  # chapter 4's: "the mean Round Trip Time (RTT) between actual machines ... is 0.8 millisecond"
PER_RESPONDER = "one"  # "places the n tasks of the job on the least loaded of d x n randomly selected nodes" (§3.1.3)
ARRIVAL_JITTER = 0.05  # s: breaks the lock between 500 ms arrivals and 2 s heartbeats (see the module docstring)
WARMUP = 4.5  # every node heartbeats at least twice before the first job (thesis §4.1.2, step c)
CH4_HEARTBEAT = 2.0
MACRM_CH4 = {
    "heartbeat": CH4_HEARTBEAT,
    "sampling_timeout": 0.003,
    "jm_demand": {"cpu": 0.05, "mem": 0.05},
    "jm_heartbeat": CH4_HEARTBEAT,
}


SPARROW_THESIS = {
    **MACRM_CH4,
    "rate": "fixed",
    "initial_rate": 2.0,
    "doubling": False,
    "centralized": False,
    "max_retries": 100000,
    "jm_placement": "sampling",
    "hb_blocks_sampling": False,
}
"""The Sparrow of the thesis's chapter 4, built from MACRM's own agents with the rules the thesis gives it:

* "the jobs are submitted to a queue that allocates containers for their schedulers (like job managers in YARN) by
  random sampling, and then the schedulers try to allocate resources for the tasks again by the means of random
  sampling" (§4 intro): ``jm_placement="sampling"`` (two nodes per container, the least loaded responder);
* "the timeout for sampling retry in both MACRM and Sparrow is 3ms" (Fig. 4.2): the same sampling timeout, a
  failed round is sampled again, without end (``max_retries`` unbounded, no central fallback);
* Sparrow's growth is blamed on the chance of finding free resources, "not the case for MACRM ... the result of
  using adaptive initial sampling rate and doubling sampling rate after each failure" (§4.2.1): a fixed d = 2, no
  doubling;
* a sampled node answers under Fig. 3.3's rules — one pending sampling at a time, only with free resources (a
  timeout is needed only because nodes stay silent) — but the thesis's Sparrow "does not monitor cluster nodes"
  (§4.2.3) and "does not require heartbeats from nodes" (§4.2.3): no waiting for heartbeat replies
  (``hb_blocks_sampling=False``; our trackers still receive heartbeats, for liveness and statistics only).

The registered ``sparrow`` (worker queues, late binding, long-lived schedulers) is reported beside it as
"Sparrow"."""


def ch4_schedulers(
    n_nodes: int, per_responder: str = PER_RESPONDER, round_end: str = "all", net: float = NET_CH4
) -> list[tuple[str, str, dict, str]]:
    """(label, scheduler, options, how completion is timed) for chapter 4's comparisons."""
    am = CH4_HEARTBEAT / n_nodes + net  # an AM container waits for the next heartbeat of some node, then starts
    pr = {"per_responder": per_responder, "round_end": round_end}
    return [
        ("MACRM", "macrm", {**MACRM_CH4, **pr}, "known"),
        ("YARN", "yarn", {"heartbeat": CH4_HEARTBEAT}, "direct"),
        ("YARN+AM", "yarn", {"heartbeat": CH4_HEARTBEAT, "am_overhead": round(am, 6)}, "direct"),
        ("Sparrow", "sparrow", {}, "known"),
        ("Sparrow-thesis", "macrm", {**SPARROW_THESIS, **pr}, "known"),
    ]


def request_scale(ctx: ReproContext) -> np.ndarray:
    """``--set request_units=normalized`` reads Table 4.3's requests as fractions of the largest machine (x 12 cores,
    x 16 GB: about 12x larger tasks, nodes fill up task by task); the default reads them as cores and GB."""
    units = str(ctx.extra.get("request_units", "absolute"))
    if units not in ("absolute", "normalized"):
        raise InputError(f"request_units must be 'absolute' or 'normalized', got {units!r}")
    return np.array([CORES_PER_UNIT, GB_PER_UNIT]) if units == "normalized" else np.ones(2)


def _service(res: RunResult, how: str) -> np.ndarray:
    return direct_service_times(res, res.config.network_delay) if how == "direct" else service_times(res)


def sampler_diagnostics(res: RunResult, sel: np.ndarray | None = None) -> dict:
    """For a ``macrm`` run: per selected job the wait from arrival to its (first) job manager's start, and the run's
    sampling counters (inquiries and answers at the nodes, job managers' rounds and failed rounds, jobs)."""
    w = res.workload
    start = np.full(w.n_jobs, np.nan)
    for jm in res.extras["runtime"].jms:
        if jm.attempt == 0:
            start[jm.job] = jm.started_at
    wait = start - w.job_arrival
    c = res.counters
    return {
        "jm_wait": wait if sel is None else wait[sel],
        "inquiries": c.get("macrm_nm_inquiries", 0),
        "answered": c.get("macrm_nm_answered", 0),
        "rounds": c.get("macrm_jm_rounds", 0),
        "failed_rounds": c.get("macrm_jm_sampling_failures", 0),
        "jobs": w.n_jobs,
    }


def _diag_summary(ds: list[dict]) -> dict:
    """Pooled :func:`sampler_diagnostics` of several runs."""
    tot = {k: sum(d[k] for d in ds) for k in ("inquiries", "answered", "rounds", "failed_rounds", "jobs")}
    wait = np.concatenate([d["jm_wait"] for d in ds]) if ds else np.zeros(0)
    wait = wait[np.isfinite(wait)]
    return {
        "jm_wait": float(wait.mean()) if wait.size else None,
        "answer_rate": tot["answered"] / tot["inquiries"] if tot["inquiries"] else None,
        "failed_rounds_per_job": tot["failed_rounds"] / tot["jobs"] if tot["jobs"] else None,
        "rounds_per_job": tot["rounds"] / tot["jobs"] if tot["jobs"] else None,
    }


def _stats(v: np.ndarray) -> dict:
    v = np.asarray(v, dtype=np.float64)
    ok = v[np.isfinite(v)]
    return {
        "mean": float(ok.mean()) if ok.size else None,
        "p50": float(np.median(ok)) if ok.size else None,
        "n": int(v.size),
        "incomplete": int(v.size - ok.size),
    }


def _fmt_check(k: str, v) -> str:
    if isinstance(v, float):
        return f"{k} {v:.2f}x" if k.endswith("_over_70") else f"{k} {v:.0f} %"
    return f"{k} {v}"


def _ratio(a, b) -> float | None:
    return None if a is None or b is None or b <= 0 else float(a / b)


def _pct(better, worse) -> float | None:
    if better is None or worse is None or worse <= 0:
        return None
    return float(100.0 * (1.0 - better / worse))


TIME_COLS = ("_mean", "_p50", "service_mean", "service_p50", "_jm_wait")


def _cell(col: str, v) -> str:
    if isinstance(v, float) and not math.isfinite(v):
        return "-"
    if isinstance(v, float) and (col.endswith(TIME_COLS) or col == "max_service_mean"):
        return f"{1000 * v:.2f} ms"
    if isinstance(v, float):
        return f"{v:.3g}"
    return "-" if v is None else str(v)


def _table(rows: list[dict], path, cols: list[str]) -> None:
    """CSV (raw values, seconds) and a Markdown copy (times in ms, counts as numbers)."""
    import csv

    with path.with_suffix(".csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c) for c in cols})
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(c, r.get(c)) for c in cols) + " |" for r in rows]
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# --- macrm-sampling: thesis Figs 3.4, 3.5, 3.7, 3.8 ----------------------------------------------------------------
SAMPLING_VARIANTS = {
    "power of two": {"rate": "fixed", "doubling": False, "centralized": False, "max_retries": 50},
    "doubling": {"rate": "fixed", "doubling": True, "centralized": False, "max_retries": 50},
    "adaptive": {"rate": "adaptive", "doubling": True, "centralized": False, "max_retries": 50},
    "adaptive + centralized": {"rate": "adaptive", "doubling": True, "centralized": True},
}


@experiment(
    "macrm-sampling",
    "Figs 3.4/3.5/3.7/3.8: average service time vs load for power-of-two sampling, doubling, "
    "the adaptive rate, and adaptive + the switch to centralized mode (200 four-core machines)",
    "MACRM thesis (seed 001)",
    quick_note="6 loads, 60 jobs per point",
)
def run_sampling(ctx: ReproContext) -> dict:
    loads = [0.6, 0.7, 0.8, 0.85, 0.9, 0.95] if ctx.quick else [0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]
    n_jobs = int(ctx.extra.get("jobs", 60 if ctx.quick else 100))
    n_nodes, cores = 200, 4
    base = {
        "heartbeat": 1.0,
        "sampling_timeout": 0.005,
        "jm_demand": {"cpu": 1.0},
        "trackers": 1,
        "per_responder": str(ctx.extra.get("per_responder", PER_RESPONDER)),
        "round_end": str(ctx.extra.get("round_end", "all")),
    }
    rows, res_doc = [], {}
    for load in loads:
        rng = np.random.default_rng([ctx.seed, round(load * 100)])
        dc = cluster(
            np.full((n_nodes, 1), float(cores)),
            slot_background(n_nodes, cores, load, rng),
            ("cpu",),
            f"ch3-{n_nodes}x{cores}",
        )
        w = shift(poisson_jobs(n_jobs, rng), WARMUP)
        for name, opts in SAMPLING_VARIANTS.items():
            r = simulate_inputs(
                w, dc, "macrm", {**base, **opts}, seed=ctx.seed, network_delay=NET, label=f"poisson{n_jobs}"
            )
            st = service_times(r)
            c = r.counters
            row = {
                "load": f"{round(load * 100)} %",
                "variant": name,
                **{f"service_{k}": v for k, v in _stats(st).items()},
                "failed_rounds_per_job": c.get("macrm_jm_sampling_failures", 0) / n_jobs,
                "samples_per_job": c.get("macrm_jm_samples", 0) / n_jobs,
                "leftover_to_central": c.get("macrm_jm_leftover_to_central", 0),
                "central_s": c.get("macrm_arb_time_central_ms", 0) / 1000.0,
                "completed": r.unfinished_reason is None,
            }
            rows.append(row)
            res_doc.setdefault(name, {})[f"{load:.2f}"] = row
        ctx.log(
            f"  load {100 * load:.0f} %: "
            + ", ".join(
                f"{r['variant']} {fmt_ms(r['service_mean'])} ({r['failed_rounds_per_job']:.2f} failed rounds/job)"
                for r in rows[-len(SAMPLING_VARIANTS) :]
            )
        )
    _table(
        rows,
        ctx.out / "sampling",
        [
            "load",
            "variant",
            "service_mean",
            "service_p50",
            "failed_rounds_per_job",
            "samples_per_job",
            "leftover_to_central",
            "central_s",
            "completed",
        ],
    )
    _plot_sampling(res_doc, loads, ctx.out / "fig3_4-3_8_service_time.png")

    def at(name, load, key="service_mean"):
        return res_doc[name][f"{load:.2f}"][key]

    hi = [x for x in loads if x >= 0.85]
    checks = {
        "doubling_cuts_failed_rounds_at_high_load": all(
            at("doubling", x, "failed_rounds_per_job") <= at("power of two", x, "failed_rounds_per_job") for x in hi
        ),
        "adaptive_cuts_failed_rounds_at_high_load": all(
            at("adaptive", x, "failed_rounds_per_job") <= at("doubling", x, "failed_rounds_per_job") for x in hi
        ),
        "doubling_vs_power_of_two_at_95_pct": _pct(at("doubling", 0.95), at("power of two", 0.95)),
        "adaptive_vs_doubling_at_95_pct": _pct(at("adaptive", 0.95), at("doubling", 0.95)),
        "adaptive_vs_power_of_two_at_95_pct": _pct(at("adaptive", 0.95), at("power of two", 0.95)),
        "centralized_vs_adaptive_at_90_pct": _pct(at("adaptive + centralized", 0.9), at("adaptive", 0.9)),
        "centralized_vs_adaptive_at_95_pct": _pct(at("adaptive + centralized", 0.95), at("adaptive", 0.95)),
    }
    ctx.log("  " + ", ".join(_fmt_check(k, v) for k, v in checks.items()))
    return {
        "cluster": f"{n_nodes} x {cores} cores",
        "jobs_per_point": n_jobs,
        "loads": loads,
        "variants": SAMPLING_VARIANTS,
        "options": base,
        "results": res_doc,
        "checks": checks,
        "paper_reported": PAPER["sampling"],
    }


def fmt_ms(x) -> str:
    return "-" if x is None else f"{1000 * x:.2f} ms"


def _plot_sampling(doc: dict, loads: list[float], path) -> None:
    plt = _plt()
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), dpi=110, sharex=True)
    panels = [
        ("Fig. 3.4: power of two", ["power of two"]),
        ("Fig. 3.5: + doubling after failure", ["power of two", "doubling"]),
        ("Fig. 3.7: + adaptive initial rate", ["power of two", "doubling", "adaptive"]),
        ("Fig. 3.8: + switch to centralized", ["adaptive", "adaptive + centralized"]),
    ]
    x = [100 * v for v in loads]
    for ax, (title, names) in zip(axes.ravel(), panels, strict=True):
        for n in names:
            y = [1000 * (doc[n][f"{v:.2f}"]["service_mean"] or np.nan) for v in loads]
            ax.plot(x, y, marker="o", label=n)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("average service time (ms)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    for ax in axes[1]:
        ax.set_xlabel("cluster load (%)")
    fig.tight_layout()
    fig.savefig(str(path))
    plt.close(fig)


# --- macrm-service-time: thesis Fig. 4.2 -------------------------------------------------------------------------
GROUPS = [0.70, 0.75, 0.80, 0.85, 0.90]


def _group_inputs(
    rng: np.random.Generator,
    n_nodes: int,
    group: float,
    start: float,
    max_jobs: int,
    trace: Workload,
    tail: float = 30.0,
    scale: float | np.ndarray = 1.0,
    jitter: float = ARRIVAL_JITTER,
) -> tuple[Workload, Datacenter, np.ndarray]:
    """Cluster at initial load ``start`` and Google jobs every 500 ms (± ``jitter``) until the offered load passes
    ``group`` + 5 %."""
    phys = google_machines(n_nodes)
    dc = cluster(phys, gaussian_background(phys, start, rng), ("cpu", "mem"), f"google{n_nodes}")
    w = google_jobs(
        rng, max_jobs, WARMUP, 0.5, 1e9, phys.sum(axis=0), max_share=0.05, trace=trace, scale=scale, jitter=jitter
    )
    ol = offered_load(w, dc, w.job_arrival)
    k = int(min(max_jobs, np.searchsorted(np.maximum.accumulate(ol), group + 0.05) + 1))
    n_t = int(w.job_num_tasks[:k].sum())
    horizon = float(w.job_arrival[k - 1]) + tail
    dur = np.minimum(w.task_duration[:n_t], horizon - w.task_arrival[:n_t])  # runs end soon after the last arrival
    w = replace(
        w,
        job_arrival=w.job_arrival[:k],
        job_num_tasks=w.job_num_tasks[:k],
        job_mean_duration=w.job_mean_duration[:k],
        task_duration=dur,
        task_demand=w.task_demand[:n_t],
    )
    return w, dc, ol[:k]


@experiment(
    "macrm-service-time",
    "Fig. 4.2: average service time of MACRM, YARN and Sparrow at 70-90 % load "
    "(500 nodes, Google machine mix, Google jobs every 500 ms)",
    "MACRM thesis (seed 001)",
    quick_note="one set of jobs per load group",
)
def run_service_time(ctx: ReproContext) -> dict:
    n_nodes = int(ctx.extra.get("nodes", 500))
    sets = int(ctx.extra.get("sets", 1 if ctx.quick else 3))
    max_jobs = int(ctx.extra.get("jobs", 250 if ctx.quick else 400))
    below = float(ctx.extra.get("start_below", 0.04))
    start = ctx.extra.get("start")  # the thesis's 0.55 for every group (needs many more jobs: see the docstring)
    jitter = float(ctx.extra.get("jitter", ARRIVAL_JITTER))
    net = float(ctx.extra.get("net", NET_CH4))
    scale = request_scale(ctx)
    g = _google_trace()
    scheds = ch4_schedulers(
        n_nodes, str(ctx.extra.get("per_responder", PER_RESPONDER)), str(ctx.extra.get("round_end", "all")), net
    )
    samplers = [lab for lab, sched, *_ in scheds if sched == "macrm"]
    per: dict[str, dict[float, list[np.ndarray]]] = {lab: {L: [] for L in GROUPS} for lab, *_ in scheds}
    diag: dict[str, dict[float, list[dict]]] = {lab: {L: [] for L in GROUPS} for lab in samplers}
    raw_yarn: dict[float, list[np.ndarray]] = {L: [] for L in GROUPS}
    counters: dict[str, dict] = {}
    for L in GROUPS:
        for k in range(sets):
            rng = np.random.default_rng([ctx.seed, k, round(L * 100)])
            w, dc, ol = _group_inputs(
                rng,
                n_nodes,
                L,
                float(start) if start is not None else L - below,
                max_jobs,
                g,
                scale=scale,
                jitter=jitter,
            )
            sel = (ol >= L - 0.05 - 1e-9) & (ol < L + 0.05)
            for lab, sched, opts, how in scheds:
                r = simulate_inputs(
                    w,
                    dc,
                    sched,
                    opts,
                    seed=ctx.seed + k,
                    network_delay=net,
                    stall_timeout=600.0,
                    label=f"goog-{int(L * 100)}-{k}",
                )
                per[lab][L].append(_service(r, how)[sel])
                if lab in diag:
                    diag[lab][L].append(sampler_diagnostics(r, sel))
                if lab == "YARN":
                    raw_yarn[L].append(service_times(r)[sel])
                if k == 0:
                    counters[f"{lab} {int(L * 100)}%"] = {kk: v for kk, v in r.counters.items() if v}
        ctx.log(
            f"  {int(L * 100)} %: "
            + ", ".join(f"{lab} {fmt_ms(_stats(np.concatenate(per[lab][L]))['mean'])}" for lab, *_ in scheds)
        )
    rows, results, diagnostics = [], {}, {}
    for L in GROUPS:
        row = {"load": f"{int(L * 100)} %"}
        for lab, *_ in scheds:
            st = _stats(np.concatenate(per[lab][L]))
            results.setdefault(lab, {})[f"{int(L * 100)}"] = st
            row[f"{lab}_mean"] = st["mean"]
            row[f"{lab}_p50"] = st["p50"]
            row[f"{lab}_incomplete"] = st["incomplete"]
        for lab in samplers:
            dg = _diag_summary(diag[lab][L])
            diagnostics.setdefault(lab, {})[f"{int(L * 100)}"] = dg
            row.update({f"{lab}_{kk}": v for kk, v in dg.items()})
        row["jobs_measured"] = results["MACRM"][f"{int(L * 100)}"]["n"]
        row["YARN_heartbeat_reported_mean"] = _stats(np.concatenate(raw_yarn[L]))["mean"]
        rows.append(row)
    cols = [
        "load",
        *[f"{lab}_mean" for lab, *_ in scheds],
        *[f"{lab}_p50" for lab, *_ in scheds],
        *[f"{lab}_{kk}" for lab in samplers for kk in ("jm_wait", "answer_rate", "failed_rounds_per_job")],
        "Sparrow_incomplete",
        "Sparrow-thesis_incomplete",
        "jobs_measured",
        "YARN_heartbeat_reported_mean",
    ]
    _table(rows, ctx.out / "service_time", cols)
    _plot_groups(
        results,
        [lab for lab, *_ in scheds],
        ctx.out / "fig4_2_service_time.png",
        "Fig. 4.2: average service time (500 nodes)",
    )

    def m(lab, L):
        return results[lab][f"{int(L * 100)}"]["mean"]

    checks = {
        "macrm_below_yarn_every_load": all((m("MACRM", L) or 1e9) < (m("YARN", L) or 0) for L in GROUPS),
        "macrm_below_yarn_am_every_load": all((m("MACRM", L) or 1e9) < (m("YARN+AM", L) or 0) for L in GROUPS),
        "macrm_below_sparrow_at_85_90": all((m("MACRM", L) or 1e9) < (m("Sparrow", L) or 0) for L in (0.85, 0.9)),
        "macrm_below_sparrow_thesis_at_85_90": all(
            (m("MACRM", L) or 1e9) < (m("Sparrow-thesis", L) or 0) for L in (0.85, 0.9)
        ),
        **{f"macrm_vs_yarn_{int(L * 100)}_pct": _pct(m("MACRM", L), m("YARN", L)) for L in GROUPS},
        **{f"macrm_vs_yarn_am_{int(L * 100)}_pct": _pct(m("MACRM", L), m("YARN+AM", L)) for L in GROUPS},
        **{f"macrm_vs_sparrow_{int(L * 100)}_pct": _pct(m("MACRM", L), m("Sparrow", L)) for L in GROUPS},
        **{f"macrm_vs_sparrow_thesis_{int(L * 100)}_pct": _pct(m("MACRM", L), m("Sparrow-thesis", L)) for L in GROUPS},
        "sparrow_thesis_90_over_70": _ratio(m("Sparrow-thesis", 0.9), m("Sparrow-thesis", 0.7)),
        "macrm_90_over_70": _ratio(m("MACRM", 0.9), m("MACRM", 0.7)),
    }
    ctx.log("  " + ", ".join(_fmt_check(k, v) for k, v in checks.items()))
    return {
        "nodes": n_nodes,
        "sets_per_group": sets,
        "max_jobs": max_jobs,
        "network_delay": net,
        "arrival_jitter": jitter,
        "initial_load": (f"{float(start):.2f}" if start is not None else f"group load - {below:.2f}")
        + " (per node and resource ~ N(., (1 - start)/2) clipped)",
        "schedulers": {lab: {"scheduler": s, "options": o, "completion": how} for lab, s, o, how in scheds},
        "results": results,
        "sampler_diagnostics": diagnostics,
        "checks": checks,
        "counters_first_set": counters,
        "paper_reported": {
            k: PAPER[k] for k in ("service_time_ms_70", "macrm_vs_yarn", "macrm_vs_sparrow", "sparrow_growth")
        },
    }


def _plot_groups(results: dict, labels: list[str], path, title: str) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    x = np.arange(len(GROUPS))
    width = 0.8 / len(labels)
    for i, lab in enumerate(labels):
        y = [1000 * (results[lab][f"{int(L * 100)}"]["mean"] or np.nan) for L in GROUPS]
        ax.bar(x + (i - (len(labels) - 1) / 2) * width, y, width=width, label=lab)
    ax.set_xticks(x, [f"{int(L * 100)} %" for L in GROUPS])
    ax.set_yscale("log")
    ax.set_ylabel("average service time (ms)")
    ax.set_title(title)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(str(path))
    plt.close(fig)


# --- macrm-burst: thesis Fig. 4.3 / Appendix A -------------------------------------------------------------------
@experiment(
    "macrm-burst",
    "Fig. 4.3: maximum service time of bursts of 5-20 jobs of 10-40 tasks at initial loads "
    "70-90 % (MACRM, YARN, Sparrow)",
    "MACRM thesis (seed 001)",
    quick_note="loads 70/80/90 %, bursts 5 or 20 jobs of 10 or 40 tasks, one set",
)
def run_burst(ctx: ReproContext) -> dict:
    n_nodes = int(ctx.extra.get("nodes", 500))
    if ctx.quick:
        loads, n_jobs, n_tasks, sets = [0.7, 0.8, 0.9], [5, 20], [10, 40], 1
    else:
        loads, n_jobs, n_tasks, sets = GROUPS, [5, 10, 15, 20], [10, 20, 30, 40], 5
    sets = int(ctx.extra.get("sets", sets))
    net = float(ctx.extra.get("net", NET_CH4))
    scale = request_scale(ctx)
    g = _google_trace()
    scheds = ch4_schedulers(
        n_nodes, str(ctx.extra.get("per_responder", PER_RESPONDER)), str(ctx.extra.get("round_end", "all")), net
    )
    samplers = [lab for lab, sched, *_ in scheds if sched == "macrm"]
    phys = google_machines(n_nodes)
    maxima: dict[str, dict[tuple, list[float]]] = {lab: {} for lab, *_ in scheds}
    diag: dict[str, dict[float, list[dict]]] = {lab: {L: [] for L in loads} for lab in samplers}
    for L in loads:
        for J in n_jobs:
            for T in n_tasks:
                for k in range(sets):
                    rng = np.random.default_rng([ctx.seed, k, round(L * 100), J, T])
                    dc = cluster(phys, gaussian_background(phys, L, rng), ("cpu", "mem"), f"google{n_nodes}")
                    at = WARMUP + float(rng.uniform(0.0, CH4_HEARTBEAT))  # bursts come at any heartbeat phase
                    w = burst_jobs(rng, J, T, at, max_duration=10.0, trace=g, scale=scale)
                    for lab, sched, opts, how in scheds:
                        r = simulate_inputs(
                            w,
                            dc,
                            sched,
                            opts,
                            seed=ctx.seed + k,
                            network_delay=net,
                            stall_timeout=600.0,
                            label=f"burst{J}x{T}",
                        )
                        if lab in diag:
                            diag[lab][L].append(sampler_diagnostics(r))
                        st = _service(r, how)
                        maxima[lab].setdefault((L, J, T), []).append(
                            float(np.max(st)) if np.isfinite(st).all() else np.nan
                        )
        fails = ", ".join(f"{lab} {_diag_summary(diag[lab][L])['failed_rounds_per_job']:.2f}" for lab in samplers)
        ctx.log(
            f"  {int(L * 100)} %: "
            + ", ".join(f"{lab} {fmt_ms(_mean_max(maxima[lab], L))}" for lab, *_ in scheds)
            + f" (mean of burst maxima); failed sampling rounds per job: {fails}"
        )
    rows = []
    results: dict = {}
    for lab, *_ in scheds:
        for (L, J, T), v in sorted(maxima[lab].items()):
            arr = np.array(v)
            ok = arr[np.isfinite(arr)]
            mean = float(ok.mean()) if ok.size else None
            rows.append(
                {
                    "scheduler": lab,
                    "load": f"{int(L * 100)} %",
                    "jobs": J,
                    "tasks": T,
                    "max_service_mean": mean,
                    "incomplete_bursts": int(arr.size - ok.size),
                }
            )
            results.setdefault(lab, {}).setdefault(f"{int(L * 100)}", {})[f"{J}x{T}"] = mean
    _table(rows, ctx.out / "burst", ["scheduler", "load", "jobs", "tasks", "max_service_mean", "incomplete_bursts"])
    _plot_burst(results, [lab for lab, *_ in scheds], loads, n_jobs, n_tasks, ctx.out / "fig4_3_burst.png")

    def avg(lab, L):
        return _mean_max(maxima[lab], L)

    checks = {
        "macrm_below_yarn_every_load": all((avg("MACRM", L) or 1e9) < (avg("YARN", L) or 0) for L in loads),
        "macrm_below_sparrow_at_85_90": all(
            (avg("MACRM", L) or 1e9) < (avg("Sparrow", L) or 0) for L in loads if L >= 0.85
        ),
        "macrm_below_sparrow_thesis_at_85_90": all(
            (avg("MACRM", L) or 1e9) < (avg("Sparrow-thesis", L) or 0) for L in loads if L >= 0.85
        ),
        **{f"macrm_vs_yarn_{int(L * 100)}_pct": _pct(avg("MACRM", L), avg("YARN", L)) for L in loads},
        **{f"macrm_vs_sparrow_{int(L * 100)}_pct": _pct(avg("MACRM", L), avg("Sparrow", L)) for L in loads},
        **{
            f"macrm_vs_sparrow_thesis_{int(L * 100)}_pct": _pct(avg("MACRM", L), avg("Sparrow-thesis", L))
            for L in loads
        },
        "sparrow_thesis_90_over_70": _ratio(avg("Sparrow-thesis", max(loads)), avg("Sparrow-thesis", min(loads))),
        "macrm_90_over_70": _ratio(avg("MACRM", max(loads)), avg("MACRM", min(loads))),
    }
    ctx.log("  " + ", ".join(_fmt_check(k, v) for k, v in checks.items()))
    diagnostics = {lab: {f"{int(L * 100)}": _diag_summary(diag[lab][L]) for L in loads} for lab in samplers}
    return {
        "nodes": n_nodes,
        "loads": loads,
        "jobs": n_jobs,
        "tasks": n_tasks,
        "sets": sets,
        "network_delay": net,
        "schedulers": {lab: {"scheduler": s, "options": o, "completion": how} for lab, s, o, how in scheds},
        "results": results,
        "sampler_diagnostics": diagnostics,
        "checks": checks,
        "paper_reported": PAPER["burst_ms_appendix_A"],
    }


def _mean_max(d: dict, L: float) -> float | None:
    v = np.array([x for (ll, _, _), xs in d.items() if ll == L for x in xs], dtype=np.float64)
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else None


def _plot_burst(results: dict, labels: list[str], loads, n_jobs, n_tasks, path) -> None:
    plt = _plt()
    fig, axes = plt.subplots(1, len(labels), figsize=(4 * len(labels), 4), dpi=110, sharey=True)
    x = [100 * v for v in loads]
    for ax, lab in zip(np.atleast_1d(axes), labels, strict=True):
        for J in n_jobs:
            for T in n_tasks:
                y = [1000 * (results[lab].get(f"{int(L * 100)}", {}).get(f"{J}x{T}") or np.nan) for L in loads]
                ax.plot(x, y, marker="o", label=f"{J} jobs x {T} tasks")
        ax.set_title(lab)
        ax.set_xlabel("initial load (%)")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("max service time per burst (ms)")
    np.atleast_1d(axes)[-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(str(path))
    plt.close(fig)
