"""``oracle``: the best a centralized design can do — a perfect, instantaneous global view of a finite datacenter.

One central scheduler knows at every instant which workers are free and what each has; it places a task the
instant it arrives on a free worker with every constraint the task needs (``policy``: random, min-constraints or
first), queues it otherwise (``queue``: ``fifo`` or ``fewest-tasks``), and hands a worker to a waiting task the
instant the worker frees. No message latency, no decision cost, no stale state: job delays come from queuing for
capacity only. Slot and resource modes. Compare with ``ideal`` (unlimited capacity, constraints ignored: a lower
bound no real scheduler can reach) and ``megha-central`` / ``yarn`` (centralized, with latencies and heartbeats).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from megha.model.matching import Policy
from megha.schedulers.oracle.counters import COUNTERS
from megha.schedulers.oracle.scheduler import Oracle
from megha.schedulers.registry import BuildContext, Deployment, SchedulerOptions, register

__all__ = ["Oracle", "OracleOptions"]


class OracleOptions(SchedulerOptions):
    """Options of ``oracle``."""

    policy: Policy = Field(
        Policy.RANDOM, description="worker choice among the suitable free workers: random | min-constraints | first"
    )
    queue: Literal["fifo", "fewest-tasks"] = Field(
        "fifo",
        description="who gets a freed worker: fifo (the oldest waiting task it can run) or fewest-tasks (a task of "
        "the job with the fewest waiting tasks among those it can run; ties to the job queued first)",
    )


@register(
    "oracle",
    "central scheduler with a perfect, instantaneous global view: finite capacity, constraints honoured, no delays",
    options=OracleOptions,
    modes=("slot", "resource"),
    counters=COUNTERS,
)
def build(ctx: BuildContext) -> Deployment:
    """Wire an ``oracle`` deployment: one scheduler with the whole datacenter's state and no delays."""
    opts = ctx.options
    dc = ctx.datacenter
    oracle = Oracle("oracle/scheduler", dc.worker_masks, ctx.recorder, dc.capacity, opts.policy, opts.queue)
    ctx.add(oracle)

    def counters() -> dict[str, int]:
        out = {f"oracle_{k}": int(v) for k, v in oracle.stats.items()}
        out["oracle_left_queued"] = oracle.queued()
        return out

    describe = {
        "workers": dc.n_workers,
        "policy": Policy(opts.policy).value,
        "queue": opts.queue,
        "mode": "resource" if dc.capacity is not None else "slot",
    }
    return Deployment(route=lambda job: oracle.address, counters=counters, describe=describe, components=[oracle])
