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
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from megha.model.matching import Policy
from megha.schedulers.common.workers import WorkerPool
from megha.schedulers.megha.fairness import FairShare
from megha.schedulers.megha.faults import MeghaFaults
from megha.schedulers.megha.gm import GlobalMaster
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.lm import LocalMaster
from megha.schedulers.megha.simlm import InProcessWorkers, SimLocalMaster
from megha.schedulers.registry import BuildContext, Deployment, SchedulerOptions, register


class MeghaOptions(SchedulerOptions):
    """Options of the Megha scheduler (``--opt key=value``)."""

    policy: Policy = Field(Policy.RANDOM, description="worker choice: random | min-constraints | first")
    heartbeat: float = Field(5.0, gt=0, description="LM update period in seconds (5 s IoT 2023, 10 s Megha 2020)")
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


def _fairness(ctx: BuildContext, opts: MeghaOptions, n_gms: int, total: float) -> tuple:
    if not opts.shares:
        return None, None
    shares = np.asarray(opts.shares, dtype=np.float64)
    if (shares < 0).any() or shares.sum() > 1 + 1e-9:
        raise ValueError("fairness shares must be >= 0 and sum to at most 1")
    U = shares.size
    user_gm = np.asarray(opts.user_gms if opts.user_gms is not None else [u % n_gms for u in range(U)])
    if user_gm.size != U or (user_gm < 0).any() or (user_gm >= n_gms).any():
        from megha.errors import InputError

        raise InputError(f"user_gms must give a GM in 0..{n_gms - 1} for each of the {U} users")
    w = ctx.workload
    if w.job_user is not None and opts.users == "trace":
        job_user = np.asarray(w.job_user, dtype=np.int64) % U
    elif opts.users == "round-robin":
        job_user = np.arange(w.n_jobs, dtype=np.int64) % U
    else:
        job_user = ctx.rng.integers(0, U, size=w.n_jobs)
    return FairShare(shares, user_gm, total), job_user


def build_megha(ctx: BuildContext, central: bool = False) -> Deployment:
    opts: MeghaOptions = ctx.options
    n_lms = 1 if central else (opts.lms or ctx.n_lms)
    n_gms = 1 if central else (opts.gms or ctx.n_gms)
    layout = MeghaLayout.build(ctx.datacenter, n_lms, n_gms, prefix="megha-central" if central else "megha")
    total = float(layout.n_workers) if layout.capacity is None else float(layout.capacity[:, 0].sum())
    fair, job_user = _fairness(ctx, opts, layout.n_gms, total)
    eng = ctx.engine
    lms, gms = [], []
    # without per-message processing costs each LM runs its workers in-process (same timing, fewer events)
    in_process = opts.in_process_workers and eng.processing is None
    for lm in range(layout.n_lms):
        if in_process:
            eng.add(InProcessWorkers(layout.pool_address(lm)))
            lms.append(
                eng.add(
                    SimLocalMaster(
                        lm,
                        layout,
                        ctx.recorder,
                        opts.heartbeat,
                        fair,
                        opts.reply_always,
                        launch_delay=eng.delay_model.delay(LocalMaster.kind, WorkerPool.kind),
                        report_delay=eng.delay_model.delay(WorkerPool.kind, LocalMaster.kind),
                    )
                )
            )
        else:
            cap = None if layout.capacity is None else layout.capacity
            eng.add(WorkerPool(layout.pool_address(lm), layout.n_workers, ctx.recorder, capacity=cap))
            lms.append(eng.add(LocalMaster(lm, layout, ctx.recorder, opts.heartbeat, fair, opts.reply_always)))
    for g in range(layout.n_gms):
        gms.append(
            eng.add(
                GlobalMaster(
                    g,
                    layout,
                    ctx.recorder,
                    opts.policy,
                    opts.batch_size,
                    opts.repartition,
                    fair,
                    job_user,
                    opts.preemption,
                    preempt_candidates=opts.preempt_candidates,
                    fair_period=opts.heartbeat,
                )
            )
        )
    n_g = layout.n_gms
    if fair is not None:
        user_gm = fair.user_gm

        def route(job: int) -> str:
            return gms[int(user_gm[job_user[job]])].address
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
    }
    extras = {"job_user": job_user, "fair": fair, "layout": layout}
    faults = MeghaFaults(eng, layout, gms, lms, ctx.workload)  # keeps gms current across GM restarts
    return Deployment(
        route=route, counters=counters, describe=describe, components=[*gms, *lms], extras=extras, faults=faults
    )


@register(
    "megha",
    "Megha: GMs place tasks on an eventually consistent global view, LMs validate and launch",
    options=MeghaOptions,
    modes=("slot", "resource"),
)
def build(ctx: BuildContext) -> Deployment:
    return build_megha(ctx)


@register(
    "megha-central",
    "Megha with 1 GM x 1 LM (the papers' centralized configuration)",
    options=MeghaOptions,
    modes=("slot", "resource"),
)
def build_central(ctx: BuildContext) -> Deployment:
    return build_megha(ctx, central=True)
