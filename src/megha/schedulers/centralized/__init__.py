"""Centralized schedulers (DESIGN §5.4): ``yarn``, a YARN-like heartbeat-driven resource manager.

(Megha's own centralized configuration, 1 GM × 1 LM, is ``megha-central`` in the Megha family.)

``yarn``: one central RM with one queue (FIFO, fair across users, or fewest waiting tasks first); a node manager
heartbeats every ``heartbeat`` seconds (1–3 s in MACRM's experiments) and the RM allocates containers only while
processing a heartbeat; optional per-job application-master start-up overhead. Slot and resource modes.

Node scan (``scan``): an arriving task is booked on the first suitable free node in heartbeat order from a start.
``first``: the node heartbeating soonest after the arrival, on a strictly periodic schedule — with 1 s heartbeats
and whole-second arrivals (as in the traces) that is the same node every time, which packs work onto the same
nodes and makes results hinge on arrivals landing on heartbeat boundaries. ``rotate`` (default): the same, but a
node manager's interval is the period plus 1 ms (it times the next heartbeat from the previous one), so the order
drifts against the clock and the first node after an arrival rotates through the cluster. ``random``: a random
start for each task (the task then waits up to a period for that node's heartbeat). See
:mod:`megha.schedulers.centralized.rm` and :mod:`megha.schedulers.centralized.heartbeats`.

Measured with ``rotate`` on the default compare (GOOG_subtrace, 20,000 constrained workers): the p99 delay with the
trace's whole-second arrivals is 2,851 s; shifting every arrival by 0.25 s or 0.5 s against the heartbeats gives
2,861 s and 2,834 s (under 1 %), well inside the spread over run seeds (2,692–3,007 s for seeds 0–2). Jittering
each job's arrival uniformly within its second gives 2,622–2,715 s: spreading simultaneous jobs over the second
makes the workload less bursty, which is a property of the arrivals, not of the heartbeat phase.

The common configuration — slot mode with the node managers in-process, FIFO queue, ``rotate`` or ``first`` scan,
no application-master overhead, no processing model, no faults — runs as one compiled event loop with the same
results (:mod:`megha.schedulers.centralized._lean`; about 7 CPU-s to compile once; ``YARN_LEAN=1`` always, ``0``
never, unset: when it is compiled already or the run has at least 100,000 tasks).

Faults (``megha simulate --faults``): ``worker`` (nodes die: their containers are asked for again, launches on
their way are refused) and ``rm`` (the RM restarts; ``recovery``: work-preserving, its view rebuilt from the node
managers' re-registration, or kept). See :mod:`megha.schedulers.centralized.faults`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from megha.schedulers.centralized._lean import lean_runner
from megha.schedulers.centralized.counters import COUNTERS
from megha.schedulers.centralized.faults import YarnFaults, task_info
from megha.schedulers.centralized.heartbeats import HEARTBEAT_LAG, HeartbeatSchedule
from megha.schedulers.centralized.nodemanager import NodeManagers
from megha.schedulers.centralized.rm import ResourceManager
from megha.schedulers.centralized.simrm import SimResourceManager
from megha.schedulers.registry import BuildContext, Deployment, SchedulerOptions, register

__all__ = ["HeartbeatSchedule", "NodeManagers", "ResourceManager", "YarnOptions"]


class YarnOptions(SchedulerOptions):
    """Options of ``yarn``."""

    heartbeat: float = Field(1.0, gt=0, le=60, description="node heartbeat period in seconds (MACRM: 1-3 s)")
    queue: Literal["fifo", "fair", "fewest-tasks"] = Field(
        "fifo",
        description="queue policy: fifo | fair (per user, fewest running containers first) | fewest-tasks (the job "
        "with the fewest queued tasks first)",
    )
    scan: Literal["rotate", "first", "random"] = Field(
        "rotate",
        description="node an arriving task is booked on: rotate (the soonest heartbeat; heartbeats every period + "
        "1 ms, so the order drifts against the clock) | first (the soonest heartbeat of a strictly periodic "
        "schedule: whole-second arrivals always meet the same node first) | random (random start per task)",
    )
    am_overhead: float = Field(0.0, ge=0, description="per-job application master start-up time (s)")
    recovery: Literal["work-preserving", "kept"] = Field(
        "work-preserving",
        description="RM restart after a crash (fault kind rm): work-preserving (Hadoop's: running containers "
        "kept, the RM's view of the nodes rebuilt from their re-registration, containers allocated but not "
        "launched asked for again) | kept (the RM comes back with its state)",
    )


def node_managers_in_process(ctx: BuildContext) -> bool:
    """Whether the RM runs the node managers in-process (:class:`SimResourceManager`, same results with a third of
    the engine events): in slot mode without processing costs (which need real messages)."""
    return ctx.processing is None and ctx.datacenter.capacity is None


@register(
    "yarn",
    "YARN-like central RM: allocations only on node heartbeats (period 1-3 s), FIFO, fair or fewest-tasks queue",
    options=YarnOptions,
    modes=("slot", "resource"),
    counters=COUNTERS,
)
def build(ctx: BuildContext) -> Deployment:
    """Wire a ``yarn`` deployment: one resource manager and the node managers (in-process when
    :func:`node_managers_in_process`), heartbeats drawn from the build's stream."""
    opts = ctx.options
    dc = ctx.datacenter
    lag = HEARTBEAT_LAG if opts.scan == "rotate" else 0.0
    schedule = HeartbeatSchedule.random(dc.n_workers, opts.heartbeat, ctx.rng, lag=lag)
    dm = ctx.delay_model
    latency = dm.delay(NodeManagers.kind, ResourceManager.kind)
    args = ("yarn/rm", "yarn/nm", "yarn/nm", dc.worker_masks, dc.capacity, schedule, ctx.recorder)
    kw = {
        "queue": opts.queue,
        "am_overhead": opts.am_overhead,
        "heartbeat_latency": latency,
        "scan": opts.scan,
        "recovery": opts.recovery,
    }
    nm = None
    if node_managers_in_process(ctx):
        rm = SimResourceManager(*args, **kw, launch_delay=dm.delay(ResourceManager.kind, NodeManagers.kind))
        components = [rm]
    else:
        nm = NodeManagers("yarn/nm", "yarn/rm", schedule, dc.n_workers, ctx.recorder, capacity=dc.capacity)
        rm = ResourceManager(*args, **kw)
        components = [nm, rm]
    for c in components:
        ctx.add(c)
    rm.task_info = task_info(ctx.workload)

    def counters() -> dict[str, int]:
        out = {f"yarn_{k}": int(v) for k, v in rm.stats.items()}
        out["yarn_nm_heartbeats"] = rm.nm_heartbeats if nm is None else nm.heartbeats
        out["yarn_left_queued"] = rm.queued()
        return out

    describe = {
        "heartbeat": opts.heartbeat,
        "queue": opts.queue,
        "scan": opts.scan,
        "heartbeat_interval": schedule.period,
        "am_overhead": opts.am_overhead,
        "recovery": opts.recovery,
        "mode": "resource" if dc.capacity is not None else "slot",
    }
    faults = YarnFaults(ctx.host, rm, nm, dc.n_workers)
    extras: dict = {}
    return Deployment(
        route=lambda job: rm.address,
        counters=counters,
        describe=describe,
        components=components,
        faults=faults,
        extras=extras,
        run=lean_runner(ctx, rm, extras) if nm is None else None,
    )
