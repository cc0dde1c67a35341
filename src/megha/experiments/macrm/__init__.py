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

from megha.experiments.macrm import burst, sampling, service_time  # noqa: F401  (register the experiments)
from megha.experiments.macrm.common import (
    ARRIVAL_JITTER,
    CH4_HEARTBEAT,
    GROUPS,
    MACRM_CH4,
    NET,
    NET_CH4,
    PAPER,
    PER_RESPONDER,
    SPARROW_THESIS,
    TIME_COLS,
    WARMUP,
    ch4_schedulers,
    fmt_ms,
    request_scale,
    sampler_diagnostics,
)
from megha.experiments.macrm.inputs import (
    ALL_CONSTRAINTS,
    CORES_PER_UNIT,
    CPU_MAX,
    CPU_MEAN,
    GB_PER_UNIT,
    GOOGLE_MACHINES,
    MEM_MAX,
    MEM_MEAN,
    _google_trace,
    burst_jobs,
    cluster,
    direct_service_times,
    gaussian_background,
    google_jobs,
    google_machines,
    google_requests,
    offered_load,
    poisson_jobs,
    service_times,
    shift,
    simulate_inputs,
    slot_background,
    workload_from_jobs,
)

__all__ = [
    "ALL_CONSTRAINTS",
    "ARRIVAL_JITTER",
    "CH4_HEARTBEAT",
    "CORES_PER_UNIT",
    "CPU_MAX",
    "CPU_MEAN",
    "GB_PER_UNIT",
    "GOOGLE_MACHINES",
    "GROUPS",
    "MACRM_CH4",
    "MEM_MAX",
    "MEM_MEAN",
    "NET",
    "NET_CH4",
    "PAPER",
    "PER_RESPONDER",
    "SPARROW_THESIS",
    "TIME_COLS",
    "WARMUP",
    "_google_trace",
    "burst_jobs",
    "ch4_schedulers",
    "cluster",
    "direct_service_times",
    "fmt_ms",
    "gaussian_background",
    "google_jobs",
    "google_machines",
    "google_requests",
    "offered_load",
    "poisson_jobs",
    "request_scale",
    "sampler_diagnostics",
    "service_times",
    "shift",
    "simulate_inputs",
    "slot_background",
    "workload_from_jobs",
]
