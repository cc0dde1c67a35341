"""PigeonC and Pigeon (seed 004, DESIGN §5.2): distributors hand tasks to masters that own fixed worker groups.

* ``pigeonc`` — constraint-aware: weighted master choice by suitable-worker counts, Random or
  Minimum-Constraints worker choice, short/long queues with weighted fair queuing (FQW = 20), no reservation.
* ``pigeon`` — the original: a job's tasks spread evenly over the masters, a few workers per group reserved for
  short tasks.

Defaults follow the PigeonC cluster file when one is given (``sample:pigeon_D10M100S10000``: 10 distributors,
100 masters × 100 workers, FQW 20); otherwise 10 distributors and 100 masters over an even split of the workers.
The short/long cutoff defaults to the trace's (Yahoo 90.5811 s, Google 1129.532 s, Cloudera 272.783 s,
Facebook 76.5951 s), see :mod:`megha.schedulers.pigeon.cutoff`.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from megha.model.matching import Policy, SegmentedIndex
from megha.schedulers.pigeon.cutoff import resolve_cutoff
from megha.schedulers.pigeon.distributor import MasterWeights, PigeonDistributor
from megha.schedulers.pigeon.master import PigeonMaster
from megha.schedulers.pigeon.workers import GroupWorkers
from megha.schedulers.registry import BuildContext, Deployment, SchedulerOptions, register

__all__ = ["MasterWeights", "PigeonCOptions", "PigeonDistributor", "PigeonMaster", "PigeonOptions"]

DEFAULT_DISTRIBUTORS = 10
DEFAULT_MASTERS = 100


class PigeonCOptions(SchedulerOptions):
    """Options of ``pigeonc``."""

    distributors: int | None = Field(
        None, ge=1, description="number of distributors (default: cluster file, --gms, 10)"
    )
    masters: int | None = Field(None, ge=1, description="number of masters (default: cluster file groups, --lms, 100)")
    policy: Policy = Field(Policy.RANDOM, description="worker choice: random | min-constraints | first")
    fqw: int | None = Field(None, ge=0, description="short tasks served per long task (default: cluster file, 20)")
    cutoff: float | None = Field(None, ge=0, description="short/long cutoff on a job's mean task duration (s)")
    weights: Literal["exact", "reference"] = Field(
        "exact",
        description="master weights: exact suitable-worker counts, or the authors' simulator's "
        "constraint-set table (compatibility: reproduces the paper's PigeonC numbers)",
    )


class PigeonOptions(PigeonCOptions):
    """Options of ``pigeon`` (adds the short-task reservation)."""

    reserve: float = Field(0.05, ge=0, lt=1, description="fraction of each group's workers reserved for short tasks")


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
    cutoff, cutoff_source = resolve_cutoff(opts.cutoff, ctx.workload.name, meta)

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
    n_reserved = 0
    for g, ws in enumerate(members):
        reserved = None
        if reserve > 0 and ws.size > 1:
            k = min(round(reserve * ws.size), ws.size - 1)
            if k:
                reserved = np.sort(ctx.rng.permutation(ws)[:k])
                n_reserved += k
        pool = GroupWorkers(f"{name}/workers{g}", master_addr[g], ws, ctx.recorder)
        m = PigeonMaster(
            master_addr[g],
            ws,
            dc.worker_masks,
            pool.address,
            ctx.recorder,
            dist_addr,
            policy=opts.policy,
            fqw=fqw,
            reserved=reserved,
        )
        pools.append(pool)
        masters.append(m)
    dists = [
        PigeonDistributor(dist_addr[i], i, master_addr, weights, ctx.recorder, cutoff, weighted=weighted)
        for i in range(n_dist)
    ]
    for c in (*dists, *masters, *pools):
        ctx.engine.add(c)

    def counters() -> dict[str, int]:
        out = {
            "pigeon_jobs_short": sum(d.jobs_short for d in dists),
            "pigeon_jobs_long": sum(d.jobs_long for d in dists),
        }
        for key in ("queued_short", "queued_long", "served_short", "served_long"):
            out[f"pigeon_{key}"] = sum(m.stats[key] for m in masters)
        out["pigeon_left_queued"] = sum(m.queued() for m in masters)
        return out

    describe = {
        "distributors": n_dist,
        "masters": n_masters,
        "workers_per_master": [int(members[0].size), int(max(m.size for m in members))],
        "policy": Policy(opts.policy).value,
        "fqw": fqw,
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
    return Deployment(
        route=lambda job: dist_addr[job % n_dist],
        counters=counters,
        describe=describe,
        components=[*dists, *masters, *pools],
    )


@register(
    "pigeonc",
    "PigeonC: distributors pick masters weighted by suitable workers; masters with WFQ short/long queues (IoT 2023)",
    options=PigeonCOptions,
)
def build_pigeonc(ctx: BuildContext) -> Deployment:
    return _build(ctx, "pigeonc", weighted=True, reserve=0.0)


@register(
    "pigeon",
    "Pigeon: tasks spread evenly over masters, workers reserved for short tasks, WFQ (SoCC 2019)",
    options=PigeonOptions,
)
def build_pigeon(ctx: BuildContext) -> Deployment:
    return _build(ctx, "pigeon", weighted=False, reserve=ctx.options.reserve)
