"""Centralized schedulers (DESIGN §5.4): ``yarn``, a YARN-like heartbeat-driven resource manager.

(Megha's own centralized configuration, 1 GM × 1 LM, is ``megha-central`` in the Megha family.)

``yarn``: one central RM with one queue (FIFO, or fair across users); a node manager heartbeats every
``heartbeat`` seconds (1–3 s in MACRM's experiments) and the RM allocates containers only while processing a
heartbeat; optional per-job application-master start-up overhead. Slot and resource modes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from megha.schedulers.centralized.heartbeats import HeartbeatSchedule
from megha.schedulers.centralized.nodemanager import NodeManagers
from megha.schedulers.centralized.rm import ResourceManager
from megha.schedulers.registry import BuildContext, Deployment, SchedulerOptions, register

__all__ = ["HeartbeatSchedule", "NodeManagers", "ResourceManager", "YarnOptions"]


class YarnOptions(SchedulerOptions):
    """Options of ``yarn``."""

    heartbeat: float = Field(1.0, gt=0, le=60, description="node heartbeat period in seconds (MACRM: 1-3 s)")
    queue: Literal["fifo", "fair"] = Field("fifo", description="queue policy: fifo | fair (per user)")
    am_overhead: float = Field(0.0, ge=0, description="per-job application master start-up time (s)")


@register(
    "yarn",
    "YARN-like central RM: allocations only on node heartbeats (period 1-3 s), FIFO or fair queue",
    options=YarnOptions,
    modes=("slot", "resource"),
)
def build(ctx: BuildContext) -> Deployment:
    opts = ctx.options
    dc = ctx.datacenter
    schedule = HeartbeatSchedule.random(dc.n_workers, opts.heartbeat, ctx.rng)
    latency = ctx.engine.delay_model.delay(NodeManagers.kind, ResourceManager.kind)
    nm = NodeManagers("yarn/nm", "yarn/rm", schedule, dc.n_workers, ctx.recorder, capacity=dc.capacity)
    rm = ResourceManager(
        "yarn/rm",
        nm.address,
        nm.address,
        dc.worker_masks,
        dc.capacity,
        schedule,
        ctx.recorder,
        queue=opts.queue,
        am_overhead=opts.am_overhead,
        heartbeat_latency=latency,
    )
    for c in (nm, rm):
        ctx.engine.add(c)

    def counters() -> dict[str, int]:
        out = {f"yarn_{k}": int(v) for k, v in rm.stats.items()}
        out["yarn_nm_heartbeats"] = nm.heartbeats
        out["yarn_left_queued"] = rm.queued()
        return out

    describe = {
        "heartbeat": opts.heartbeat,
        "queue": opts.queue,
        "am_overhead": opts.am_overhead,
        "mode": "resource" if dc.capacity is not None else "slot",
    }
    return Deployment(route=lambda job: rm.address, counters=counters, describe=describe, components=[nm, rm])
