"""MACRM: the multi-agent cluster resource manager (seed 001, Sedighi Gilani 2016; DESIGN §5.5).

Registered as ``macrm`` (resource mode: nodes with CPU and memory, tasks with requests). Agents (thesis Fig. 3.1):

* **resource trackers** (``trackers``, each owning a contiguous share of the nodes): node heartbeats, liveness,
  cluster view, statistics (:mod:`.tracker`);
* the **resource arbitrator**: admission, a container for each job's job manager, the central queue (FIFO or fair
  share), the view of free resources and the parallel scheduler actors with optimistic commits (:mod:`.arbitrator`,
  :mod:`.view`);
* one **job manager** per job: batch sampling with the adaptive initial rate and doubling, or central requests
  (:mod:`.jobmanager`);
* **node managers** (one component per tracker's nodes, per-node rules of Fig. 3.3 exact) (:mod:`.nodes`).

The switch between distributed and centralized allocation and the sampling rate are in :mod:`.policy`; the client,
supervisor/store, container runtime and fault injection in :mod:`.infra`.

Choices where the thesis leaves room (also listed in the module docstrings):

* A job manager waits for every sampled node to answer or for ``sampling_timeout``, then places (``round_end=all``;
  ``enough`` places as soon as the answers hold every task, ``timeout`` always waits the timeout: the thesis leaves
  this open, :data:`~megha.schedulers.macrm.policy.ROUND_ENDS`); a node answers if it has room for the smallest
  pending task of the round. Responders may host several tasks (least loaded first), or one each with
  ``per_responder=one`` (the thesis's "n tasks on the least loaded of d x n nodes", §3.1.3, which the chapter-3/4
  reproductions use).
* Job-manager containers are placed on forwarded heartbeats (thesis §3.2.2); ``jm_placement=sampling`` places them by
  power-of-two sampling instead — the per-job schedulers of the thesis's Sparrow baseline (ch. 4), whose nodes
  also drop Fig. 3.3's heartbeat rule (``hb_blocks_sampling=false``: that Sparrow has no heartbeats, §4.2.3).
* Trackers forward free nodes' heartbeats only while the arbitrator has something to place or is centralized (it
  tells them, :class:`~megha.schedulers.macrm.messages.Forwarding`): same allocations, far fewer simulated messages.
* Initial load ("background") is read from ``datacenter.meta["background"]`` ([N, R], resources held by processes
  outside the scheduler): allocatable capacity is ``datacenter.capacity``, load counts background + containers.
* The load is the largest used fraction over resources (``load_metric``), from the trackers' statistics.
* Gang requests (``gang=true``) always go to the central queue and are served by the scheduler actors against the
  view, all-or-nothing, in both modes. Other requests in distributed mode are served on forwarded heartbeats.
* The thesis keeps the arbitrator's hard state in ZooKeeper and calls tracker state soft (§3.1.1); §4.2.4 swaps the
  two in one sentence — we follow §3.1.1. Restarts are by a supervisor that watches periodic ``Alive`` messages.
* Network partitions (Table 4.5's last column) are not simulated.

Simulation speed, the plan in progress (issue #14: GOOG_subtrace on 10,000 nodes at 10,000 tasks per CPU-second or
more; 16k-18k on the afternoon of 2026-11-27, 8k-12.7k on slower hours of the same day). The profile is flat
over Python handlers that share one per-node state (news heartbeats
``NodeManagers._deliver``, ``_wake``, container ends, the tracker's free wheel and forwarding, the calm bound), so
fewer Python calls do not help and one handler moved to numpy while the others read the state from Python is
slower. What ``benchmarks/bench_macrm.py --event-runs`` measures (first 2,000 jobs, 5.08 events per task): news
deliveries 1.77 per task in runs of 5.2 consecutive events across node-manager groups but 1.1 within one group,
container ends and the job managers' finished tasks 1.00 each; those, heartbeats, forwards and replies are 86 % of
the events, in runs of 20.8. Hence, in bit-identical steps:

1. one state for every group, indexed by global node, in numpy arrays (anchor, tick memo, rank, forwarded tick and
   count, reply waits, news sequence number, flags, used rows through the ledger's array mode, the trackers' view
   rows, the free wheel as per-bucket linked lists, the rank counter and message counts, the calm bound and its undo
   log as a ring buffer), with ``@njit(cache=True)`` kernels for every handler that touches it, each taking a whole
   message (an inquiry's nodes, a decision's containers) or one event. Packed into a few 2-D arrays: a compiled call
   costs about 1 us with three array arguments but 9-10 us with twenty (a news delivery in Python costs about 15 us),
   and a numpy element read from Python about 0.5 us against 0.07 us for a list element;
2. news deliveries, container ends, heartbeat and forwarding timers and finished tasks in one compiled event queue
   (engine sequence numbers kept), run in ``(time, seq)`` order as long as its head precedes the engine's next event
   (needs a simulator hook to peek at that key); the pushes a batch makes (messages, timers) come back as records in
   order and Python makes them; a push that precedes the queue's next event ends the batch;
3. the job managers' task completions (state per task, the known ledger, the recorder's counts) in that queue.

Done of step 1: the node managers' per-node scalars, the trackers' view (used rows, known, last seen, free in the
arbitrator's view), their undo logs (rings), the calm bound, the rank counter, the kernels' heartbeat and reply
counts (added to the counter dicts and message counts only when read) and, with a power-of-two heartbeat period, the
free wheels (per-bucket linked lists) live in one shared :class:`~megha.schedulers.macrm.state.NodeState` (Python
reads and writes them through memoryviews; the ledger's used rows are mirrored there), and news deliveries, news
wakes, the node's side of container ends and starts, sampling inquiries and the trackers' scan of the free wheel run
as kernels (``k_deliver``, ``k_wake_news``, ``k_container_end``, ``k_container_start``, ``k_inquiry``, ``k_vf_arm``,
called through their compiled entry points; the events they ask for are made in Python). Still in Python: the
virtual replies, the pending samplings' tokens and response timeouts, the ledger rows, the containers' bookkeeping
and every engine event (about 83 Python calls per task on the first 2,000 GOOG jobs by cProfile's count, 85 before
the small rounds and row reads below; 115 before the inquiries, the counts, the entry points and the wheel moved).

What the whole run spends (GOOG_subtrace, 10,000 workers, 10,000 jobs, about 20 CPU-s): the profile is flat over
handlers that each cost a few microseconds per task (container starts and ends, the job managers' finished tasks, rounds
and placements, inquiries, news deliveries) plus the forwarded-heartbeat traffic that places the job managers'
containers (101,983 forwarded heartbeats, 160,016 Forwarding messages: tracker timer, arbitrator and node reply, roughly
10-15 % of the run by per-handler timers at 3,000 jobs); the cyclic garbage collector about 0.9 CPU-s. Measured and not
worth it: the containers' end timers are 99 % of the engine's heap (about 11,000 entries), but a queue of their own
beside it (only the earliest end in the heap) costs 2.3 us per end against 1.0 us for the heap's push and pop, which the
smaller heap does not win back; a compiled call with the state's seven arrays costs about 0.35 us (0.19 with one
struct), so fewer arguments would not help either. Also done: small rounds (at most 16 tasks) pick masks, nodes and
places in plain Python (smallassign.py; NumPy calls per task 4.96 -> 3.77 on the first 2,000 jobs), the kernels' ledger
rows are read back from the packed state, the view's growth test and a fully compiled inquiry skip NumPy and the loop's
setup. Step 2 remains the lever: one engine event per delivery, end and finished task is the floor in Python, and a
batch that runs several queued events in one engine event must also have them counted (the engine counts one event per
item of its chunk), which a read-only peek at the next key does not give.

Exactness rests on the same float operations in the same order, the rank counter shared in event order, the
``Period`` memo being only a cache, and engine sequence numbers taken in the order Python would take them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import numpy as np
from pydantic import Field

from megha.errors import InputError
from megha.schedulers.common.sampling import ProbeSampler
from megha.schedulers.macrm.arbitrator import ResourceArbitrator
from megha.schedulers.macrm.cadence import Cadence
from megha.schedulers.macrm.counters import COUNTERS
from megha.schedulers.macrm.faults import MacrmFaultHandler
from megha.schedulers.macrm.infra import Client, JMSlot, MacrmFaults, Runtime, Supervisor
from megha.schedulers.macrm.jobmanager import JMContext, JobManager, KnownLedger
from megha.schedulers.macrm.multicast import Multicast
from megha.schedulers.macrm.nodes import NodeManagers
from megha.schedulers.macrm.period import Period
from megha.schedulers.macrm.policy import ADAPTIVE_FROM, ModeSwitch, adaptive_rate
from megha.schedulers.macrm.state import share
from megha.schedulers.macrm.tracker import ResourceTracker
from megha.schedulers.registry import BuildContext, Deployment, SchedulerOptions, register
from megha.sim.component import Component

__all__ = [
    "JobManager",
    "MacrmOptions",
    "ModeSwitch",
    "NodeManagers",
    "ResourceArbitrator",
    "ResourceTracker",
    "adaptive_rate",
]

PREFIX = "macrm"


class MacrmOptions(SchedulerOptions):
    """Options of ``macrm`` (``--opt key=value``)."""

    trackers: int | None = Field(None, ge=1, description="resource trackers (default: one per 250 nodes, at most 8)")
    heartbeat: float = Field(1.0, gt=0, le=60, description="node heartbeat period (s): 1 s in ch. 3, 2 s in ch. 4")
    sampling_timeout: float = Field(0.005, gt=0, description="job manager's wait for sampling answers (s)")
    rate: Literal["adaptive", "fixed"] = Field("adaptive", description="initial sampling rate: adaptive d(x) | fixed")
    initial_rate: float = Field(2.0, ge=1, description="the fixed initial rate (power of two choices: 2)")
    doubling: bool = Field(True, description="double the sampling rate after each failed round")
    max_retries: int = Field(3, ge=0, description="sampling retries before leftovers go to the central queue")
    per_responder: Literal["fill", "one"] = Field(
        "fill",
        description="tasks a sampling responder may take: as many "
        "as fit (fill) or one (one: n tasks on n of the d x n nodes)",
    )
    round_end: Literal["all", "enough", "timeout"] = Field(
        "all",
        description="a sampling round ends when every "
        "sampled node answered (all), when the answers hold every "
        "task (enough), or only at the timeout (timeout)",
    )
    centralized: bool = Field(True, description="switch to centralized allocation at high load")
    switch_load: float = Field(0.9, gt=0, le=1, description="load at which to switch to centralized mode")
    hysteresis: float = Field(0.02, ge=0, lt=1, description="back to distributed below switch_load - hysteresis")
    queue: Literal["fifo", "fair"] = Field("fifo", description="central queue policy")
    actors: int = Field(4, ge=1, description="parallel scheduler actors")
    match_cost: float = Field(1e-4, ge=0, description="a scheduler actor's time to match one request (s)")
    match_cost_per_task: float = Field(1e-6, ge=0, description="... plus this per task (s)")
    gang: bool = Field(False, description="every job is a gang request (all-or-nothing)")
    jm_demand: dict[str, float] = Field(
        default_factory=lambda: {"cpu": 1.0}, description="job-manager container request (missing resources: 0)"
    )
    jm_placement: Literal["heartbeat", "sampling"] = Field(
        "heartbeat",
        description="job-manager containers: on "
        "node heartbeats (MACRM) or by power-of-two sampling "
        "(the thesis's Sparrow) in distributed mode",
    )
    jm_share: float = Field(
        0.1,
        gt=0,
        le=1,
        description="job-manager containers hold at most this share of the "
        "allocatable resources (YARN's maximum AM share; avoids deadlock)",
    )
    jm_heartbeat: float = Field(1.0, gt=0, description="job-manager heartbeat period (s)")
    node_timeout: float | None = Field(None, gt=0, description="node declared dead after (s; default 3 x hb + 0.5)")
    jm_timeout: float | None = Field(None, gt=0, description="job manager declared dead after (s; default 3 x + 0.5)")
    stats_interval: float = Field(0.1, gt=0, description="trackers' statistics period (s)")
    alive_interval: float = Field(0.25, gt=0, description="arbitrator/trackers alive-signal period (s)")
    alive_timeout: float = Field(1.0, gt=0, description="supervisor restarts an agent silent this long (s)")
    hold_timeout: float | None = Field(None, gt=0, description="node's wait for the sampler's decision (s)")
    hb_reply_timeout: float = Field(0.1, gt=0, description="node stops waiting for a heartbeat reply after (s)")
    hb_blocks_sampling: bool = Field(
        True,
        description="a node waiting for its heartbeat's reply ignores samplings "
        "(Fig. 3.3; off for the thesis's Sparrow, which has no heartbeats)",
    )
    task_failure_prob: float = Field(0.0, ge=0, le=1, description="probability that a task run fails midway")
    load_metric: Literal["max", "cpu", "mean"] = Field("max", description="cluster load from resource fractions")
    fast_forward: bool = Field(
        True,
        description="simulator: compute the periodic messages that carry no news (heartbeats of nodes whose state did "
        "not change, ...) instead of simulating each; same results (false: every timer is an event)",
    )


def _cadence(ctx: BuildContext, opts: MacrmOptions, hold: float, node_timeout: float) -> Cadence | None:
    """The fast-forward of periodic messages (cadence.py), where it is exact: the simulator's engine without a
    processing-cost model, heartbeat replies far shorter than the period, timeouts far longer."""
    eng = ctx.host
    if not opts.fast_forward or getattr(eng, "processing", None) is not None or not hasattr(eng, "inject"):
        return None
    dm = eng.delay_model
    kinds = ("macrm-nm", "macrm-tracker", "macrm-arbitrator")
    d = {f"{a[6]}{b[6]}": dm.delay(a, b) for a in kinds for b in kinds if a != b}  # "nt", "tn", "ta", ...
    rtt = max(d.values()) * 3 + hold
    if opts.heartbeat <= 20 * rtt or node_timeout <= opts.heartbeat + 2 * rtt + 0.1:
        return None
    if opts.alive_timeout <= 2 * opts.alive_interval + 3 * max(d.values()):
        return None
    jm_timeout = opts.jm_timeout or (3 * opts.jm_heartbeat + 0.5)
    if jm_timeout <= opts.jm_heartbeat + 2 * rtt + 0.1:
        return None
    d["jt"] = dm.delay("macrm-jm", "macrm-tracker")
    cad = Cadence(eng, opts.heartbeat, d)
    cad.d_nt, cad.d_tn = d["nt"], d["tn"]
    cad.d_ts = dm.delay("macrm-tracker", "macrm-supervisor")
    cad.d_as = dm.delay("macrm-arbitrator", "macrm-supervisor")
    # loads decide the mode switch and, from 75 %, the adaptive sampling rate (policy.adaptive_rate)
    thr = math.inf
    if opts.centralized:
        thr = opts.switch_load - 1e-6
    if opts.rate == "adaptive":
        thr = min(thr, ADAPTIVE_FROM / 100.0)
    cad.threshold = thr
    cad.stats_period = Period(opts.stats_interval)
    cad.jm_period = Period(opts.jm_heartbeat)
    cad.settle_after = opts.stats_interval + opts.jm_heartbeat + 10 * max(d.values()) + 0.5
    return cad


def _jm_demand(opts: MacrmOptions, names: tuple[str, ...]) -> np.ndarray:
    unknown = sorted(set(opts.jm_demand) - set(names))
    if unknown:
        raise InputError(f"macrm: jm_demand names unknown resource(s) {unknown} (the cluster has {list(names)})")
    return np.array([float(opts.jm_demand.get(k, 0.0)) for k in names])


@register(
    "macrm",
    "MACRM: job managers sample nodes (adaptive rate, doubling) at low load, centralized parallel "
    "scheduler actors at >= 90 % load; trackers, arbitrator, failures (Sedighi Gilani 2016)",
    options=MacrmOptions,
    modes=("resource",),
    counters=COUNTERS,
)
def build(ctx: BuildContext) -> Deployment:
    """Wire a ``macrm`` deployment (resource mode): the node-manager groups and their resource trackers, the resource
    arbitrator, the supervisor, the container runtime, the users' client and one job-manager address per job, with the
    fast-forward of periodic traffic (:mod:`.cadence`) when it is exact; raises InputError for a datacenter or options
    MACRM cannot run."""
    opts: MacrmOptions = ctx.options
    dc = ctx.datacenter
    if dc.capacity is None:
        raise InputError("macrm runs in resource mode (nodes with cores and memory): use --resources")
    cap = np.asarray(dc.capacity, dtype=np.float64)
    n, n_res = cap.shape
    bg = dc.meta.get("background")
    bg = np.zeros_like(cap) if bg is None else np.asarray(bg, dtype=np.float64)
    if bg.shape != cap.shape or (bg < 0).any():
        raise InputError(f"macrm: datacenter.meta['background'] must be a non-negative [{n}, {n_res}] array")
    if opts.hysteresis >= opts.switch_load:
        raise InputError(f"macrm: hysteresis ({opts.hysteresis}) must be below switch_load ({opts.switch_load})")
    jm_dem = _jm_demand(opts, dc.resource_names)
    if not ((cap + 1e-12 >= jm_dem).all(axis=1)).any():
        raise InputError(f"macrm: no node can hold a job-manager container of {jm_dem.tolist()}")
    n_tr = opts.trackers or max(1, min(8, math.ceil(n / 250)))
    n_tr = min(n_tr, n)
    bounds = [(k * n) // n_tr for k in range(n_tr + 1)]
    group_of = np.repeat(np.arange(n_tr, dtype=np.int64), np.diff(bounds))
    net = ctx.delay_model.network_delay
    hold = opts.hold_timeout or (2 * opts.sampling_timeout + 4 * net)
    node_timeout = opts.node_timeout or (3 * opts.heartbeat + 0.5)
    jm_timeout = opts.jm_timeout or (3 * opts.jm_heartbeat + 0.5)
    w = ctx.workload
    feas = ctx.feasible
    if w.task_demand is not None and feas.any():
        min_alloc = np.minimum(w.task_demand[feas].min(axis=0), jm_dem)
    else:
        min_alloc = np.zeros(n_res)

    addr = {k: f"{PREFIX}/{k}" for k in ("client", "arbitrator", "supervisor", "runtime")}
    groups = [f"{PREFIX}/nm{g}" for g in range(n_tr)]
    trackers = [f"{PREFIX}/tracker{g}" for g in range(n_tr)]
    links = ctx.delay_model.links  # co-located: submission front end, container starts, process restarts
    links[("macrm-client", "macrm-arbitrator")] = 0.0
    links[("macrm-nm", "macrm-runtime")] = 0.0
    links[("macrm-supervisor", "macrm-runtime")] = 0.0

    ledger = KnownLedger(ctx.recorder, w.n_tasks)
    comps_of = getattr(ctx.host, "components", None)  # the simulator's engine: folded multicasts (multicast.py)
    multicast = Multicast(comps_of) if isinstance(comps_of, dict) else None
    jm_ctx = JMContext(
        arbitrator=addr["arbitrator"],
        groups=groups,
        group_of=group_of,
        trackers=trackers,
        worker_masks=dc.worker_masks,
        sampler=ProbeSampler(dc.worker_masks),
        recorder=ctx.recorder,
        ledger=ledger,
        n_res=n_res,
        rate=opts.rate,
        initial_rate=opts.initial_rate,
        doubling=opts.doubling,
        max_retries=opts.max_retries,
        sampling_timeout=opts.sampling_timeout,
        jm_heartbeat=opts.jm_heartbeat,
        gang=opts.gang,
        per_responder=opts.per_responder,
        round_end=opts.round_end,
        multicast=multicast,
    )

    def make_arbitrator(restarted: bool = False) -> ResourceArbitrator:
        arb = ResourceArbitrator(
            addr["arbitrator"],
            ctx.recorder,
            n,
            dc.worker_masks,
            group_of,
            groups,
            trackers,
            addr["supervisor"],
            addr["client"],
            jm_dem,
            (cap + bg).sum(axis=0),
            jm_prefix=f"{PREFIX}/jm",
            queue=opts.queue,
            actors=opts.actors,
            match_cost=opts.match_cost,
            match_cost_per_task=opts.match_cost_per_task,
            switch=ModeSwitch(opts.switch_load, opts.hysteresis, enabled=opts.centralized),
            load_metric=opts.load_metric,
            alive_interval=opts.alive_interval,
            restarted=restarted,
            jm_limit=opts.jm_share * cap.sum(axis=0),
            capacity=cap,
            jm_placement=opts.jm_placement,
            sampling_timeout=opts.sampling_timeout,
            round_end=opts.round_end,
        )
        arb.multicast = multicast
        return arb

    def make_tracker(g: int) -> Callable[[], ResourceTracker]:
        def f() -> ResourceTracker:
            lo, hi = bounds[g], bounds[g + 1]
            return ResourceTracker(
                trackers[g],
                g,
                groups[g],
                lo,
                (cap + bg)[lo:hi],
                addr["arbitrator"],
                addr["supervisor"],
                node_timeout,
                jm_timeout,
                opts.stats_interval,
                opts.alive_interval,
                min_alloc,
            )

        return f

    factories = {addr["arbitrator"]: lambda: make_arbitrator(restarted=True)}
    factories.update({trackers[g]: make_tracker(g) for g in range(n_tr)})
    runtime = Runtime(addr["runtime"], ctx.host, jm_ctx, factories)
    supervisor = Supervisor(
        addr["supervisor"], addr["runtime"], [addr["arbitrator"], *trackers], opts.alive_timeout, opts.alive_interval
    )
    client = Client(addr["client"], addr["arbitrator"])
    arbitrator = make_arbitrator()
    nms = [
        NodeManagers(
            groups[g],
            g,
            bounds[g],
            cap[bounds[g] : bounds[g + 1]],
            bg[bounds[g] : bounds[g + 1]],
            ctx.recorder,
            trackers[g],
            addr["arbitrator"],
            addr["runtime"],
            heartbeat=opts.heartbeat,
            hold_timeout=hold,
            hb_reply_timeout=opts.hb_reply_timeout,
            min_alloc=min_alloc,
            task_failure_prob=opts.task_failure_prob,
            track_users=opts.queue == "fair",
            hb_blocks_sampling=opts.hb_blocks_sampling,
        )
        for g in range(n_tr)
    ]
    state = share(nms)  # one packed per-node state for every group (state.py)
    tracker_comps = [make_tracker(g)() for g in range(n_tr)]
    comps = [runtime, supervisor, client, arbitrator, *tracker_comps, *nms]
    for c in comps:
        ctx.add(c)
    cad = _cadence(ctx, opts, hold, node_timeout)
    if cad is not None:
        for nm in nms:
            nm.use_cadence(cad)
            cad.add_group(nm)
        for tr in tracker_comps:
            tr.cad = cad
            cad.add_tracker(tr)
        for c in (arbitrator, supervisor):
            c.cad = cad
            cad.add_other(c)
        cad.supervisor = supervisor
        cad.arbitrator = arbitrator
        cad.use_state(state)
        jm_ctx.cadence = cad
    for j in range(w.n_jobs):  # job-manager addresses: dead letters until a job manager runs there
        ctx.add(JMSlot(f"{PREFIX}/jm{j}"))
    faults = MacrmFaults(ctx.host, runtime, groups, group_of, trackers, addr["arbitrator"], cad)

    def current(address: str) -> Component:
        return ctx.host.components[address]

    def counters() -> dict[str, int]:
        if cad is not None:
            cad.settle(ctx.host.now)
        out: dict[str, int] = {}

        def add(prefix: str, d: dict) -> None:
            for k, v in d.items():
                key = f"macrm_{prefix}{k}"
                out[key] = out.get(key, 0) + int(v)

        for g in groups:
            add("nm_", current(g).stats)
        for t in trackers:
            c = current(t)
            if isinstance(c, ResourceTracker):
                add("tracker_", c.stats)
        arb = current(addr["arbitrator"])
        if isinstance(arb, ResourceArbitrator):
            arb.close_stats(ctx.host.now)
            add("arb_", arb.stats)
            out["macrm_arb_left_queued"] = arb.queued()
            out["macrm_arb_central_at_end"] = int(arb.central)
        for jm in runtime.jms:
            add("jm_", jm.stats)
        out["macrm_jm_processes"] = len(runtime.jms)
        out["macrm_processes_killed"] = runtime.killed
        out["macrm_agents_restarted"] = runtime.restarted
        out["macrm_arbitrator_restarts"] = supervisor.restarts.get(addr["arbitrator"], 0)
        out["macrm_tracker_restarts"] = sum(supervisor.restarts.get(t, 0) for t in trackers)
        out["macrm_client_resubmissions"] = client.resubmissions
        return out

    describe = {
        "nodes": n,
        "trackers": n_tr,
        "heartbeat": opts.heartbeat,
        "sampling_timeout": opts.sampling_timeout,
        "rate": opts.rate,
        "doubling": opts.doubling,
        "max_retries": opts.max_retries,
        "per_responder": opts.per_responder,
        "round_end": opts.round_end,
        "jm_placement": opts.jm_placement,
        "hb_blocks_sampling": opts.hb_blocks_sampling,
        "centralized": opts.centralized,
        "switch_load": opts.switch_load,
        "hysteresis": opts.hysteresis,
        "queue": opts.queue,
        "actors": opts.actors,
        "jm_demand": jm_dem.tolist(),
        "background_load": float(np.max(bg.sum(axis=0) / np.maximum((cap + bg).sum(axis=0), 1e-12))),
    }
    extras = {"macrm": faults, "runtime": runtime, "supervisor": supervisor, "group_of": group_of, "cadence": cad}
    return Deployment(
        route=lambda job: addr["client"],
        counters=counters,
        describe=describe,
        components=comps,
        extras=extras,
        faults=MacrmFaultHandler(faults, n, w.n_jobs),  # node/worker, jm, tracker, arbitrator (faults.py)
    )
