"""Packing schedulers with throughput guarantees (Psychas & Ghaderi; DESIGN §5.7).

``fifo-ff``, ``bf-j``, ``bf-s``, ``bf-js``, ``vqs`` and ``vqs-bf`` pack jobs of random sizes into servers of
capacity 1 from one central queue, deciding once per time slot. The package holds:

* :mod:`.policies` — the six policies as strategy objects (one implementation each);
* :mod:`.structures`, :mod:`.partition`, :mod:`.multires` — residual-capacity indexes, the universal
  partition with VQS's reduced configuration set, and the multi-resource (Tetris-scored) variants;
* :mod:`.slotted` and :mod:`.workloads` — the fast time-slotted core and the workload generators used by
  ``megha reproduce psychas-*``;
* :mod:`.component` — the same policies as a central scheduler of the event engine, registered below so
  ``megha simulate -s bf-js --resources …`` runs them on traces; :mod:`.inprocess` — that scheduler with the
  workers run in-process (one engine event per slot pass and per job; the same results), used whenever the
  order of events allows it (see :func:`_in_process`).

They are registered with ``in_compare=False``: in slot mode every task fills a worker, so the six policies
all reduce to "any free worker" and add nothing to ``megha compare``; use resource mode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
from pydantic import Field

from megha.schedulers.common.workers import WorkerPool
from megha.schedulers.packing.component import PackingScheduler, TaskSizer
from megha.schedulers.packing.counters import COUNTERS
from megha.schedulers.packing.inprocess import InProcessPackingScheduler, min_duration
from megha.schedulers.packing.policies import POLICIES, make_policy
from megha.schedulers.registry import BuildContext, Deployment, SchedulerOptions, register


class BestFitOptions(SchedulerOptions):
    """Options of the Best-Fit family (fifo-ff, bf-j, bf-s, bf-js)."""

    slot: float = Field(0.001, gt=0, description="decision period in seconds (paper's Google experiment: 1 ms)")
    multi: Literal["max", "tetris"] = Field(
        "max",
        description="resource mode: size = max of demand/capacity, or per-resource vectors scored by "
        "alignment (Tetris-style inner product)",
    )


class VQSOptions(SchedulerOptions):
    """Options of the partition-based policies (vqs, vqs-bf)."""

    slot: float = Field(0.001, gt=0, description="decision period in seconds (paper's Google experiment: 1 ms)")
    J: int = Field(
        6, ge=2, le=40, description="universal partition parameter: 2J virtual queues, jobs below 1/2^J rounded up"
    )
    split_tail: bool = Field(False, description="give jobs <= 1/2^J their own virtual queue (2J+1 queues)")
    config_set: Literal["reduced", "pure"] = Field(
        "reduced", description="VQS configurations: the paper's reduced set K_RED, or single-type only"
    )
    reserve: float = Field(2.0 / 3.0, ge=0.5, lt=1.0, description="share reserved for a (1/2, 2/3] job")
    cuts: list[float] | None = Field(None, description="explicit partition cut points (replace J)")
    multi: Literal["max"] = Field("max", description="resource mode: size = max of demand/capacity")


_HELP = {
    "fifo-ff": "packing: FIFO queue, head job to the first server with room (Psychas & Ghaderi's baseline)",
    "bf-j": "packing: Best-Fit per job in arrival order (tightest server that fits)",
    "bf-s": "packing: Best-Fit per server (largest queued job that fits)",
    "bf-js": "packing: BF-S on servers with departures + BF-J on new jobs (>= 1/2 of max throughput)",
    "vqs": "packing: virtual queues over a universal partition, max-weight configurations (>= 2/3)",
    "vqs-bf": "packing: VQS configurations with Best-Fit inside them (>= 2/3)",
}


def _constrained(ctx: BuildContext) -> bool:
    tm = ctx.workload.task_mask
    if tm is None or not tm.any():
        return False
    wm = ctx.datacenter.worker_masks
    common = int(np.bitwise_and.reduce(wm)) if wm.size else 0
    return bool((tm[ctx.feasible] & np.uint32(~common & 0xFFFFFFFF)).any())


def _in_process(ctx: BuildContext) -> bool:
    """Whether the workers can run inside the scheduler (:mod:`.inprocess`): no processing costs, no fault schedule,
    and every task longer than :func:`~megha.schedulers.packing.inprocess.min_duration`."""
    if ctx.processing is not None or ctx.faults:
        return False
    d = ctx.workload.task_duration
    return not d.size or float(d.min()) > min_duration(
        ctx.delay("scheduler", "worker"), ctx.delay("worker", "scheduler")
    )


def _builder(name: str) -> Callable[[BuildContext], Deployment]:
    def build(ctx: BuildContext) -> Deployment:
        opts = ctx.options
        dc = ctx.datacenter
        n = dc.n_workers
        sizer = TaskSizer(dc.capacity, opts.multi)
        constrained = _constrained(ctx)
        args = (ctx.recorder, None, sizer, ctx.workload.n_tasks, opts.slot, dc.worker_masks if constrained else None)
        pool: WorkerPool | None = None
        if _in_process(ctx):
            sched = InProcessPackingScheduler(
                f"{name}/scheduler",
                f"{name}/workers",
                *args,
                n_workers=n,
                capacity=dc.capacity,
                d_sw=ctx.delay("scheduler", "worker"),
                d_ws=ctx.delay("worker", "scheduler"),
            )
        else:
            pool = WorkerPool(f"{name}/pool", n, ctx.recorder, capacity=dc.capacity)
            sched = PackingScheduler(f"{name}/scheduler", pool.address, *args)
        compat = sched.constraints
        if isinstance(opts, VQSOptions):
            policy = make_policy(
                name,
                n,
                compat,
                J=opts.J,
                split_tail=opts.split_tail,
                config_set=opts.config_set,
                reserve=opts.reserve,
                cuts=opts.cuts,
            )
        else:
            policy = make_policy(name, n, compat, vector=sizer.vector)
        sched.policy = policy
        if pool is not None:
            ctx.add(pool)
        ctx.add(sched)
        describe = {
            "workers": n,
            "slot_seconds": opts.slot,
            "size": "1 (slot mode)"
            if dc.capacity is None
            else ("vector (tetris score)" if sizer.vector else "max(demand/capacity)"),
            "constraints": constrained,
            **policy.describe(),
        }

        def counters() -> dict[str, int]:
            describe["mean_queue"] = sched.mean_queue()
            return {
                "packing_slots": sched.slots,
                "packing_placements": sched.placements,
                "packing_max_queue": sched.q_max,
            }

        return Deployment(
            route=lambda job: sched.address,
            counters=counters,
            describe=describe,
            components=[sched] if pool is None else [pool, sched],
        )

    build.__name__ = f"build_{name.replace('-', '_')}"
    build.__module__ = __name__
    return build


for _name in POLICIES:
    _opts = VQSOptions if _name in ("vqs", "vqs-bf") else BestFitOptions
    register(_name, _HELP[_name], options=_opts, modes=("slot", "resource"), in_compare=False, counters=COUNTERS)(
        _builder(_name)
    )
