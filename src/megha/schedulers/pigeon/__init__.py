"""PigeonC and Pigeon (seed 004, DESIGN §5.2): distributors hand tasks to masters that own fixed worker groups.

* ``pigeonc`` — constraint-aware: weighted master choice by suitable-worker counts, Random or
  Minimum-Constraints worker choice, short/long queues with weighted fair queuing (FQW = 20), no reservation.
* ``pigeon`` — the original: a job's tasks spread evenly over the masters, a few workers per group reserved for
  short tasks.

Defaults follow the PigeonC cluster file when one is given (``sample:pigeon_D10M100S10000``: 10 distributors,
100 masters × 100 workers, FQW 20); otherwise 10 distributors and 100 masters over an even split of the workers.
The short/long cutoff defaults to the trace's (Yahoo 90.5811 s, Google 1129.532 s, Cloudera 272.783 s,
Facebook 76.5951 s), see :mod:`megha.schedulers.pigeon.cutoff`.

Profiles (``-o profile=NAME``; an option given explicitly always wins over its profile's value):

* ``paper`` (default) — the IoT 2023 paper's text: master weights are the exact numbers of suitable workers, the
  worker choice is the ``policy`` option (Random by default), the trace family's cutoff, and one long task per
  FQW short tasks.
* ``iot23`` — the authors' PigeonC simulator (``pigeon_sim``), which produced the paper's figures (see
  :data:`IOT23_DEVIATIONS`).

Faults (``megha simulate --faults``): ``worker``, ``partition`` (a master's group) and ``master`` crashes, with the
recovery described in :mod:`megha.schedulers.pigeon.faults`; ``distributor`` crashes are the runner's generic ones.
"""

from __future__ import annotations

from typing import Literal, Self

import numpy as np
from pydantic import Field, model_validator

from megha.model.matching import Policy, SegmentedIndex
from megha.schedulers.pigeon._lean import lean_runner
from megha.schedulers.pigeon.counters import COUNTERS
from megha.schedulers.pigeon.cutoff import resolve_cutoff
from megha.schedulers.pigeon.distributor import MasterWeights, PigeonDistributor
from megha.schedulers.pigeon.faults import PigeonFaults
from megha.schedulers.pigeon.master import PigeonMaster
from megha.schedulers.pigeon.simmaster import SimPigeonMaster
from megha.schedulers.pigeon.workers import GroupWorkers
from megha.schedulers.registry import BuildContext, Deployment, SchedulerOptions, register

__all__ = [
    "IOT23_DEVIATIONS",
    "MasterWeights",
    "PigeonCOptions",
    "PigeonDistributor",
    "PigeonMaster",
    "PigeonOptions",
]

DEFAULT_DISTRIBUTORS = 10
DEFAULT_MASTERS = 100

IOT23_DEVIATIONS = (
    "the authors' PigeonC simulator (pigeon_sim) instead of the paper's text: "
    "master weights from its constraint-set table, which counts a worker once for every listed set that contains "
    "its own, so workers that do not satisfy a task add weight (weights=reference); "
    "the fewest-constraints suitable worker whatever the matching approach, as both of its master files do "
    "(policy=min-constraints); "
    "a job is short when the trace's field 3 is below the cluster file's cutoff, 2 s in the 10k configuration "
    "(7 % of YH1_sub's jobs, none of GOOG_subtrace's; 2 s on a generated datacenter too) instead of the trace "
    "family's (cutoff_from=cluster); "
    "short tasks are served from the queue while the counter is <= FQW, i.e. FQW+1 short tasks per long one "
    "(fq_rule=reference). "
    "Not reproduced: its unseeded distributor choice, and its masters learning of a task's end one network delay "
    "later than here (the job delay is the same three network delays)"
)
"""How ``profile=iot23`` deviates from the IoT 2023 paper's text (shown by ``megha schedulers``)."""

#: Option values a profile sets unless the option is given explicitly.
PROFILE_OPTIONS: dict[str, dict[str, object]] = {
    "paper": {},
    "iot23": {
        "weights": "reference",
        "policy": Policy.MIN_CONSTRAINTS,
        "cutoff_from": "cluster",
        "fq_rule": "reference",
    },
}


class PigeonCOptions(SchedulerOptions):
    """Options of ``pigeonc``."""

    profile: Literal["paper", "iot23"] = Field(
        "paper",
        description="paper: the IoT 2023 paper's text; iot23: the authors' PigeonC simulator (sets weights, policy, "
        "cutoff_from and fq_rule unless given)",
    )
    distributors: int | None = Field(
        None, ge=1, description="number of distributors (default: cluster file, --gms, 10)"
    )
    masters: int | None = Field(None, ge=1, description="number of masters (default: cluster file groups, --lms, 100)")
    policy: Policy = Field(Policy.RANDOM, description="worker choice: random | min-constraints | first")
    fqw: int | None = Field(None, ge=0, description="short tasks served per long task (default: cluster file, 20)")
    fq_rule: Literal["paper", "reference"] = Field(
        "paper",
        description="weighted fair queuing: paper (one long task per fqw short tasks) or reference (the authors' "
        "code: short tasks while the counter is <= fqw, i.e. fqw+1 per long task)",
    )
    cutoff: float | None = Field(
        None, ge=0, description="short/long cutoff on a job's mean task duration, the trace's field 3 (s)"
    )
    cutoff_from: Literal["trace", "cluster"] = Field(
        "trace",
        description="default cutoff: trace (the trace family's, then the cluster file's) or cluster (the PigeonC "
        "cluster file's; without one, 2 s as in the authors' 10k configuration)",
    )
    weights: Literal["exact", "reference"] = Field(
        "exact",
        description="master weights: exact suitable-worker counts, or the authors' simulator's "
        "constraint-set table (compatibility: reproduces the paper's PigeonC numbers)",
    )

    @model_validator(mode="after")
    def _apply_profile(self) -> Self:
        for key, value in PROFILE_OPTIONS[self.profile].items():
            if key not in self.model_fields_set:
                setattr(self, key, value)
        return self


class PigeonOptions(PigeonCOptions):
    """Options of ``pigeon`` (adds the short-task reservation)."""

    reserve: float = Field(0.05, ge=0, lt=1, description="fraction of each group's workers reserved for short tasks")


def workers_in_process(ctx: BuildContext) -> bool:
    """Whether the masters run their groups' workers in-process (:class:`SimPigeonMaster`, same results with a
    quarter of the engine events): yes unless messages have processing costs, which need real messages."""
    return ctx.processing is None


def _build(ctx: BuildContext, name: str, weighted: bool, reserve: float) -> Deployment:
    opts = ctx.options
    dc = ctx.datacenter
    meta = dc.meta or {}
    n_masters = opts.masters or ctx.n_lms
    if n_masters is None and dc.group_of is None:
        n_masters = min(DEFAULT_MASTERS, dc.n_workers)
    group_of, n_masters = dc.groups(n_masters)
    n_dist = int(opts.distributors or ctx.n_gms or meta.get("num_distributors") or DEFAULT_DISTRIBUTORS)
    fqw = int(opts.fqw if opts.fqw is not None else meta.get("FQW", 20))
    cutoff, cutoff_source = resolve_cutoff(
        opts.cutoff, ctx.workload.name, meta, cluster_first=opts.cutoff_from == "cluster"
    )

    order = np.argsort(group_of, kind="stable")
    bounds = np.searchsorted(group_of[order], np.arange(n_masters + 1))
    members = [order[bounds[g] : bounds[g + 1]] for g in range(n_masters)]
    if any(m.size == 0 for m in members):
        raise ValueError(f"{name}: every master needs at least one worker")
    weights = MasterWeights(
        SegmentedIndex(members, dc.worker_masks, cache_size=1 << 12), reference=opts.weights == "reference"
    )

    dist_addr = [f"{name}/distributor{i}" for i in range(n_dist)]
    master_addr = [f"{name}/master{g}" for g in range(n_masters)]
    masters: list[PigeonMaster] = []
    pools: list[GroupWorkers] = []
    in_process = workers_in_process(ctx)
    dm = ctx.delay_model
    delays = {
        "launch_delay": dm.delay(PigeonMaster.kind, GroupWorkers.kind),
        "report_delay": dm.delay(GroupWorkers.kind, PigeonMaster.kind),
        "known_delay": dm.delay(PigeonMaster.kind, PigeonDistributor.kind),
    }
    n_reserved = 0
    for g, ws in enumerate(members):
        reserved = None
        if reserve > 0 and ws.size > 1:
            k = min(round(reserve * ws.size), ws.size - 1)
            if k:
                reserved = np.sort(ctx.rng.permutation(ws)[:k])
                n_reserved += k
        args = (master_addr[g], ws, dc.worker_masks, f"{name}/workers{g}", ctx.recorder, dist_addr)
        kw = {"policy": opts.policy, "fqw": fqw, "reserved": reserved, "fq_inclusive": opts.fq_rule == "reference"}
        if in_process:
            m = SimPigeonMaster(*args, **kw, **delays)
        else:
            pools.append(GroupWorkers(f"{name}/workers{g}", master_addr[g], ws, ctx.recorder))
            m = PigeonMaster(*args, **kw)
        masters.append(m)
    dists = [
        PigeonDistributor(dist_addr[i], i, master_addr, weights, ctx.recorder, cutoff, weighted=weighted)
        for i in range(n_dist)
    ]
    for c in (*dists, *masters, *pools):
        ctx.add(c)

    def counters() -> dict[str, int]:
        out = {
            "pigeon_jobs_short": sum(d.jobs_short for d in dists),
            "pigeon_jobs_long": sum(d.jobs_long for d in dists),
        }
        for key in ("queued_short", "queued_long", "served_short", "served_long"):
            out[f"pigeon_{key}"] = sum(m.stats[key] for m in masters)
        out["pigeon_left_queued"] = sum(m.queued() for m in masters) + sum(len(d.parked) for d in dists)
        rerouted = sum(d.rerouted for d in dists)
        if rerouted:
            out["pigeon_tasks_rerouted"] = rerouted
        return out

    describe = {
        "distributors": n_dist,
        "masters": n_masters,
        "workers_per_master": [int(members[0].size), int(max(m.size for m in members))],
        "policy": Policy(opts.policy).value,
        "profile": opts.profile,
        "fqw": fqw,
        "fq_rule": opts.fq_rule,
        "cutoff": cutoff,
        "cutoff_source": cutoff_source,
        "master_choice": (
            "even spread"
            if not weighted
            else "weighted by suitable workers"
            if opts.weights == "exact"
            else "weighted by the reference's constraint-set table"
        ),
        "reserved_workers": n_reserved,
    }

    def route(job: int) -> str:
        """The distributor that job ``job`` is submitted to."""
        return dist_addr[job % n_dist]

    extras: dict = {}
    return Deployment(
        route=route,
        counters=counters,
        describe=describe,
        components=[*dists, *masters, *pools],
        faults=PigeonFaults(ctx.host, dists, masters, group_of, weights, ctx.workload, cutoff),
        extras=extras,
        run=lean_runner(ctx, dists, masters, route, extras) if in_process else None,
    )


@register(
    "pigeonc",
    "PigeonC: distributors pick masters weighted by suitable workers; masters with WFQ short/long queues (IoT 2023)",
    options=PigeonCOptions,
    profiles={"iot23": IOT23_DEVIATIONS},
    counters=COUNTERS,
)
def build_pigeonc(ctx: BuildContext) -> Deployment:
    """Wire a ``pigeonc`` deployment: distributors that pick masters weighted by suitable workers, masters with WFQ
    short/long queues, no reserved workers."""
    return _build(ctx, "pigeonc", weighted=True, reserve=0.0)


@register(
    "pigeon",
    "Pigeon: tasks spread evenly over masters, workers reserved for short tasks, WFQ (SoCC 2019)",
    options=PigeonOptions,
    counters=COUNTERS,
)
def build_pigeon(ctx: BuildContext) -> Deployment:
    """Wire a ``pigeon`` deployment: a job's tasks spread evenly over the masters, a ``reserve`` fraction of each
    group's workers kept for short tasks."""
    return _build(ctx, "pigeon", weighted=False, reserve=ctx.options.reserve)
