"""Megha: decentralized global scheduling for federated clusters (seeds 000 and 004, DESIGN §5.1).

Registered as ``megha`` (G GMs × L LMs; the bundled 10,000-worker file has 5 × 5) and ``megha-central``
(the same code with 1 GM × 1 LM, the papers' centralized configuration).

Decisions where the papers leave room (documented here and in the README):

* The LM answers a launch batch only when it rejected a mapping (as the IoT paper's reference simulator does);
  acknowledgements are cumulative on every LM → GM message. ``reply_always=true`` makes the LM answer every
  batch (the Megha paper: GMs "collect partial state information ... after every launch request").
  Deltas carry absolute worker state, so a GM's view is self-correcting.
* Requests are batched per LM for all tasks handled in one step (a job arrival, a reply, an update), at most
  ``batch_size`` (100, as the reference) per message.
* A mapping rejected as inconsistent is retried at once against the refreshed view; if nothing fits it goes to
  the head of the queue.
* Empty heartbeats are not sent (nothing to say; liveness is not modelled in the simulator).
* Preemption verification at the LM checks the victim's share against the LM's own cluster (LMs do not talk
  to each other), plus a suitable running task of the victim.

Fidelity profiles (``-o profile=NAME``; every setting a profile changes is also an option of its own, and an
option given explicitly wins over the profile):

* ``paper`` (default) — the papers' text as above: FIFO queue, jobs to GMs round robin, internal partitions
  round robin, a freed worker offered to the first queued task that fits, 5 s heartbeats staggered between LMs.
* ``megha20`` — the authors' 2020 simulator (``megha_simulator``, REFERENCE_SIMULATORS.md §3b). Deviations
  from the papers' text: {megha20}.
* ``iot23`` — the authors' Megha 3.0 simulator of the IoT 2023 paper (§3a). Deviations: {iot23}.
  Megha 3.0's LM has a bug (§7 item 10): a rejection carries a *reference* to the LM's pending delta for that GM
  and empties it at once, so the GM gets (almost) nothing and those changes are never sent. It is not
  reproduced: emulated (the rejection's delta dropped), it raised the inconsistency count by about 10-20 % but
  did not change delays measurably — YH1_sub on the 10k constrained cluster, p99 over seeds 0-3: 371, 478,
  548, 494 s without, 414, 471, 501, 541 s with (seed-to-seed spread larger than the effect); GOOG_subtrace
  seed 0: p50 2,194 vs 2,209 s, p99 48,810 vs 48,420 s.

Both reference simulators parse durations with ``int(float(x))`` and shift jobs sharing an arrival by +0.01 s;
``trace_quirks`` (on in both profiles) makes the run load its trace that way (``truncate_durations`` and
``dephase`` of the run configuration). The ``megha20`` and ``iot23`` settings are simulator behaviour: the live
runtime runs the ``paper`` profile.

The 2020 simulator's state pull (``pull_overwrites``, on in ``megha20``): its GM's ``update_status`` rebuilds its
view of every partition from the LMs' whole state, in which the GM's own bookings that the LM has not verified yet
(a booking reaches the LM one network delay later) still show free; and every completed task, and every rejected
one, makes its own update. So a GM with k tasks ending at one instant books the workers free then up to k times
over, and the LM keeps one booking per worker and rejects the rest (each rejection a further update). Here one
pull stands for all the updates of its instant (the completions and rejections it carries, and those of pulls
asked at the same instant); when it is answered the GM runs that many rounds, each freeing in its view the
bookings no LM can have verified yet (this instant's and those sent less than one GM→LM delay ago) and serving
the queue. A heartbeat is one update per beat. The reference's event queue orders events of the same instant by
heap position (its events always compare as smaller), so its LMs verify one instant's bookings in an effectively
arbitrary order: here each LM's bookings of one instant are shuffled when they book a worker twice, and which
booking the LM keeps is random. Off, the GM's view keeps its own bookings until the LM answers (one pull per
completion message, one round). Measured on GOOG_subtrace, 10,000 unconstrained workers, 4 GMs × 25 LMs, seed 0:
p99 1,091 s without, 1,551 s with (the authors' 1,473 s); the LMs rejected 146 k bookings without, 2.8 M with.

Speed: in the lean configuration (the ``paper`` profile's defaults in slot mode — FIFO queues, offer matching,
retried rejections, policy random, round-robin partitions, in-process workers — without fairness, hand-over,
``reply_always``, faults or a processing model) the whole simulation runs as one compiled loop
(:mod:`._lean`), with the same results as the components (it is compiled once, about a minute of CPU, and cached;
until then only runs of 100,000 tasks or more use it); ``MEGHA_LEAN=0`` runs the components, ``MEGHA_LEAN=1`` always
the compiled loop.

Not reproduced: the reference's batching of *consecutive* same-LM mappings (here all mappings of one step to
one LM form one request: the same instants, fewer messages); delta updates as change lists (here they carry the
workers' truth, so a GM's view corrects itself); the pull costs one more network delay (a request and an
answer, where the reference reads the LMs' state directly).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PrivateAttr, model_validator

from megha.errors import InputError
from megha.model.matching import Policy
from megha.schedulers.common.workers import WorkerPool
from megha.schedulers.megha._lean import lean_runner
from megha.schedulers.megha.counters import COUNTERS
from megha.schedulers.megha.faults import MeghaFaults
from megha.schedulers.megha.gm import GlobalMaster
from megha.schedulers.megha.lm import LocalMaster
from megha.schedulers.megha.simlm import InProcessWorkers, SimLocalMaster
from megha.schedulers.megha.wiring import job_users, megha_layout, megha_parts
from megha.schedulers.registry import BuildContext, Deployment, SchedulerOptions, register

# what each profile sets (an option the user gives explicitly wins); ``paper`` is the papers' text
PAPER = {
    "queue": "fifo",
    "route": "round-robin",
    "partition_order": "round-robin",
    "matching": "offer",
    "reject": "retry",
    "full_pull": False,
    "pull_overwrites": False,
    "heartbeat": 5.0,
    "heartbeat_phase": "staggered",
    "trace_quirks": False,
}
PROFILES: dict[str, dict] = {
    "paper": {},
    "megha20": {
        "queue": "fewest-tasks",
        "route": "tasks-mod-g",
        "partition_order": "random",
        "matching": "scan",
        "reject": "head",
        "full_pull": True,
        "pull_overwrites": True,
        "heartbeat": 30.0,
        "heartbeat_phase": "aligned",
        "trace_quirks": True,
    },
    "iot23": {
        "partition_order": "first",
        "reject": "head",
        "heartbeat_phase": "aligned",
        "trace_quirks": True,
    },
}
# each profile's deviations from the papers' text (shown by ``megha schedulers`` and in the module docs)
DEVIATIONS = {
    "paper": "none: the papers' text (the default)",
    "megha20": "job queue ordered by fewest queued tasks per job, not FIFO (queue=fewest-tasks); "
    "job to GM number num_tasks mod G, not round robin (route=tasks-mod-g); "
    "a random internal partition with a free suitable worker, then a random worker, not round robin "
    "(partition_order=random), and likewise a random external partition on repartition; "
    "after every update the GM places queued tasks in queue order on its view, instead of offering each freed "
    "worker to the first queued task that fits (matching=scan); "
    "the GM pulls every LM's state after each completion and each rejection, not partial state on rejections "
    "only (full_pull=true); "
    "a rejected task goes back to the queue (its job first among equals) to wait for that pull, not retried at "
    "once (reject=head); "
    "each completed or rejected task is an update that rebuilds the GM's view from the LMs' state, where its own "
    "bookings not verified yet show free, so updates at one instant book workers several times over and the LMs "
    "reject all but one booking per worker (pull_overwrites=true; slot mode only); "
    "heartbeats every 30 s, all LMs at once, not 10 s (heartbeat=30, heartbeat_phase=aligned); "
    "task durations truncated to whole seconds and jobs sharing an arrival de-phased by +0.01 s "
    "(trace_quirks=true)",
    "iot23": "internal partitions searched first-fit in fixed LM order (LM 0 first), external ones LM-major then "
    "in GM order, not round robin (partition_order=first); "
    "a rejected task goes straight back to the head of the queue, not retried at once (reject=head); "
    "heartbeats of all LMs at the same instants, first arrival - 0.05 s + k x 5 s (heartbeat_phase=aligned); "
    "task durations truncated to whole seconds and jobs sharing an arrival de-phased by +0.01 s "
    "(trace_quirks=true)",
}
__doc__ = __doc__.format(megha20=DEVIATIONS["megha20"], iot23=DEVIATIONS["iot23"])


class MeghaOptions(SchedulerOptions):
    """Options of the Megha scheduler (``--opt key=value``).

    Options left unset take the value of the chosen ``profile`` (see :data:`PROFILES`), else the papers'.
    """

    profile: Literal["paper", "megha20", "iot23"] = Field(
        "paper",
        description="fidelity profile: paper (the papers' text) | megha20 (the authors' 2020 simulator) | "
        "iot23 (the authors' Megha 3.0 simulator); sets the options below unless given",
    )
    queue: Literal["fifo", "fewest-tasks", "fewest-remaining"] | None = Field(
        None,
        description="GM queue discipline: fifo (arrival order; paper, iot23) | fewest-tasks (jobs with the fewest "
        "queued tasks first, earlier job on ties; megha20) | fewest-remaining (jobs with the fewest unfinished "
        "tasks first, the order refreshed only when a job joins the queue: the 2020 simulator's own key)",
    )
    route: Literal["round-robin", "tasks-mod-g"] | None = Field(
        None, description="job to GM: round-robin (paper, iot23) | tasks-mod-g (GM num_tasks mod G; megha20)"
    )
    partition_order: Literal["round-robin", "first", "random"] | None = Field(
        None,
        description="which partition a GM searches first: round-robin over LMs (paper) | first in LM order "
        "(iot23) | random among those with a suitable free worker (megha20)",
    )
    matching: Literal["offer", "scan"] | None = Field(
        None,
        description="serving the queue: offer (a freed worker goes to the first queued task that fits; paper, "
        "iot23) | scan (after each update, queued tasks in order are placed on the view; megha20)",
    )
    reject: Literal["retry", "head"] | None = Field(
        None,
        description="a rejected mapping: retry (at once on the refreshed view, else head of the queue; paper) | "
        "head (straight back to the head of the queue; iot23, megha20)",
    )
    full_pull: bool | None = Field(
        None, description="GM pulls every LM's state after each completion and rejection (megha20)"
    )
    pull_overwrites: bool | None = Field(
        None,
        description="the 2020 simulator's state pull (needs matching=scan, full_pull=true, slot mode): each "
        "completed or rejected task is one update that rebuilds the GM's view from the LMs' state, where the GM's "
        "own bookings the LM has not verified yet show free, so updates at one instant book a worker several "
        "times; the LM keeps one booking (chosen at random: the reference verifies same-instant bookings in "
        "arbitrary order) and rejects the rest",
    )
    heartbeat_phase: Literal["staggered", "aligned"] | None = Field(
        None,
        description="LM heartbeat instants: staggered over one period between LMs (paper) | aligned, all LMs at "
        "first arrival - 0.05 s + k x heartbeat (iot23, megha20)",
    )
    trace_quirks: bool | None = Field(
        None,
        description="load the trace as the reference simulators do: durations truncated to whole seconds, jobs "
        "sharing an arrival de-phased (sets the run's truncate_durations and dephase; iot23, megha20)",
    )
    handoff_after: float | None = Field(
        None,
        gt=0,
        description="starvation remedy beyond the papers (off by default): a task that only a few workers can run "
        "(handoff_rare) queued this many seconds at its GM is handed to the LM with the most such workers, which "
        "gives freed workers to the oldest such tasks first (slot mode, queue=fifo, matching=offer, no fairness)",
    )
    handoff_rare: int = Field(
        100, ge=1, description="starvation remedy: only tasks that at most this many workers can run are handed over"
    )
    policy: Policy = Field(Policy.RANDOM, description="worker choice: random | min-constraints | first")
    heartbeat: float | None = Field(
        None, gt=0, description="LM update period in seconds (default 5 s as IoT 2023; megha20 30 s; Megha 2020: 10 s)"
    )
    batch_size: int = Field(100, ge=1, description="max mappings per launch request")
    repartition: bool = Field(True, description="allow placing tasks in external partitions")
    shares: list[float] | None = Field(None, description="fairness: share of each user queue, e.g. [0.1,0.25,0.15,0.5]")
    user_gms: list[int] | None = Field(None, description="fairness: GM of each user queue (default u mod G)")
    users: Literal["trace", "round-robin", "random"] = Field(
        "random", description="fairness: how jobs get users when the trace has none"
    )
    preemption: bool = Field(True, description="fairness: preempt over-share users under contention")
    preempt_candidates: int = Field(16, ge=1, description="fairness: queued tasks offered per preemption request")
    reply_always: bool = Field(
        False, description="LM replies to every launch batch (else only to batches with rejected mappings)"
    )
    in_process_workers: bool = Field(
        True,
        description="simulator: each LM runs its workers in-process (same results, fewer events; "
        "ignored with per-message processing costs)",
    )
    gms: int | None = Field(None, ge=1, description="number of GMs (overrides --gms)")
    lms: int | None = Field(None, ge=1, description="number of LMs (overrides --lms)")

    _ow_given: bool = PrivateAttr(False)  # pull_overwrites=true given (else the profile's, which may give way)

    @model_validator(mode="after")
    def _profile_defaults(self) -> MeghaOptions:
        self._ow_given = "pull_overwrites" in self.model_fields_set and self.pull_overwrites is True
        prof = PROFILES[self.profile]
        for k, v in PAPER.items():
            if getattr(self, k) is None:
                setattr(self, k, prof.get(k, v))
        if self.pull_overwrites and (self.matching != "scan" or not self.full_pull):
            if self._ow_given:
                raise ValueError("pull_overwrites=true needs matching=scan and full_pull=true (the megha20 profile's)")
            self.pull_overwrites = False  # the profile's, without what it rests on
        return self

    def implied_config(self) -> dict:
        """Run-configuration fields this scheduler's options imply (applied before the trace is loaded)."""
        return {"truncate_durations": True, "dephase": True} if self.trace_quirks else {}


def build_megha(ctx: BuildContext, central: bool = False) -> Deployment:
    """Megha's GMs and LMs for one simulation (the live runtime builds its own from :func:`.wiring.megha_parts`)."""
    opts: MeghaOptions = ctx.options
    layout = megha_layout(ctx.datacenter, opts, ctx.n_lms, ctx.n_gms, central=central)
    parts = megha_parts(opts, layout)
    fair = parts.fair
    w = ctx.workload
    job_user = None if fair is None else job_users(opts, fair.n_users, w.n_jobs, w.job_user, ctx.rng)
    eng = ctx.host
    lms, gms = [], []
    # without per-message processing costs each LM runs its workers in-process (same timing, fewer events)
    in_process = opts.in_process_workers and eng.processing is None
    first_arrival = float(w.job_arrival.min()) if w.n_jobs else 0.0
    lm_kw = {
        "phase": first_arrival - 0.05 if opts.heartbeat_phase == "aligned" else None,
    }
    for lm in range(layout.n_lms):
        if in_process:
            eng.add(InProcessWorkers(layout.pool_address(lm)))
            lms.append(
                eng.add(
                    parts.lm(
                        lm,
                        ctx.recorder,
                        cls=SimLocalMaster,
                        launch_delay=eng.delay_model.delay(LocalMaster.kind, WorkerPool.kind),
                        report_delay=eng.delay_model.delay(WorkerPool.kind, LocalMaster.kind),
                        **lm_kw,
                    )
                )
            )
        else:
            cap = None if layout.capacity is None else layout.capacity
            eng.add(WorkerPool(layout.pool_address(lm), layout.n_workers, ctx.recorder, capacity=cap))
            lms.append(eng.add(parts.lm(lm, ctx.recorder, **lm_kw)))
    ow = {}
    if opts.pull_overwrites and layout.capacity is not None:  # the megha20 profile leaves it off in resource mode
        if opts._ow_given:
            raise InputError("megha: pull_overwrites needs slot mode (the 2020 simulator's single-slot workers)")
    elif opts.pull_overwrites:  # the GM -> LM delay: a booking younger than that is not verified yet
        ow["pull_overwrites"] = eng.delay_model.delay(GlobalMaster.kind, LocalMaster.kind)
    for g in range(layout.n_gms):
        gms.append(eng.add(parts.gm(g, ctx.recorder, job_user=job_user, **ow)))
    n_g = layout.n_gms
    if fair is not None:
        user_gm = fair.user_gm

        def route(job: int) -> str:
            return gms[int(user_gm[job_user[job]])].address
    elif opts.route == "tasks-mod-g":
        n_tasks = w.job_num_tasks

        def route(job: int) -> str:  # the 2020 simulator: GM number (num_tasks mod G)
            return gms[int(n_tasks[job]) % n_g].address
    else:

        def route(job: int) -> str:  # jobs go to GMs round robin
            return gms[job % n_g].address

    def counters() -> dict[str, int]:
        # the paper's counters are reported even when they stay at zero (no fairness: no preemption)
        out: dict[str, int] = dict.fromkeys(
            ("inconsistencies", "repartitions", "preemptions", "preemption_attempts", "updates_sent"), 0
        )
        for c in [*gms, *lms]:
            for k, v in c.counters.items():
                out[k] = out.get(k, 0) + int(v)
        return out

    describe = {
        "gms": layout.n_gms,
        "lms": layout.n_lms,
        "partition_size": int(layout.idx.seg_size.mean()),
        "mode": "resource" if layout.capacity is not None else "slot",
        "fairness": fair is not None,
        "profile": opts.profile,
    }
    extras = {"job_user": job_user, "fair": fair, "layout": layout}
    faults = MeghaFaults(eng, layout, gms, lms, ctx.workload)  # keeps gms current across GM restarts
    return Deployment(
        route=route,
        counters=counters,
        describe=describe,
        components=[*gms, *lms],
        extras=extras,
        faults=faults,
        run=lean_runner(ctx, opts, layout, gms, lms, route, extras),
    )


@register(
    "megha",
    "Megha: GMs place tasks on an eventually consistent global view, LMs validate and launch",
    options=MeghaOptions,
    modes=("slot", "resource"),
    profiles=DEVIATIONS,
    counters=COUNTERS,
)
def build(ctx: BuildContext) -> Deployment:
    """Wire a ``megha`` deployment: G GMs and L LMs over the datacenter's partitions (:func:`build_megha`)."""
    return build_megha(ctx)


@register(
    "megha-central",
    "Megha with 1 GM x 1 LM (the papers' centralized configuration)",
    options=MeghaOptions,
    modes=("slot", "resource"),
    profiles=DEVIATIONS,
    counters=COUNTERS,
)
def build_central(ctx: BuildContext) -> Deployment:
    """Wire ``megha-central``: the same GM and LM code with 1 GM × 1 LM, the papers' centralized configuration."""
    return build_megha(ctx, central=True)
