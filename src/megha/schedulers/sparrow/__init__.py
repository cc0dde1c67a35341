"""Sparrow (Ousterhout et al., SOSP 2013; baseline of seeds 000 and 001; DESIGN §5.3).

Distributed schedulers with batch sampling (probe ratio ``d`` = 2, probes on distinct workers), probes queued FIFO
at the workers' node monitors, and late binding (a worker that reaches a probe asks the scheduler for a task: one
round trip, a task or a no-op). With placement constraints, probes go only to eligible workers. Works in slot mode
(one task per worker) and resource mode (probes reserve the task group's demand).

Faults (``megha simulate --faults``): ``worker`` deaths, recovered as described in
:mod:`megha.schedulers.sparrow.faults` (detection after ``failure_timeout``); ``scheduler`` crashes are the runner's
generic ones.

Speed: in the common configuration (slot mode, no processing model, no fault schedule, the default network delay on
every scheduler–monitor link) the whole event loop runs compiled (:mod:`._lean`), with the same results as the
components (it is compiled once, ~30 CPU-s, and cached; ``SPARROW_LEAN=1``/``0`` forces it on/off).
"""

from __future__ import annotations

from pydantic import Field

from megha.schedulers.common.sampling import ProbeSampler
from megha.schedulers.registry import BuildContext, Deployment, SchedulerOptions, register
from megha.schedulers.sparrow._lean import lean_runner
from megha.schedulers.sparrow.counters import COUNTERS
from megha.schedulers.sparrow.faults import SparrowFaults
from megha.schedulers.sparrow.monitors import SparrowMonitors
from megha.schedulers.sparrow.scheduler import SparrowScheduler

__all__ = ["ProbeSampler", "SparrowMonitors", "SparrowOptions", "SparrowScheduler"]


class SparrowOptions(SchedulerOptions):
    """Options of ``sparrow``."""

    schedulers: int | None = Field(None, ge=1, description="number of distributed schedulers (default: --gms, 10)")
    probe_ratio: float = Field(2.0, ge=1, description="probes per task (d)")
    failure_timeout: float = Field(
        1.0,
        ge=0,
        description="fault schedules: seconds until the schedulers learn that a worker died (an RPC/heartbeat "
        "timeout); they then re-issue its probes and tasks elsewhere",
    )


@register(
    "sparrow",
    "Sparrow: distributed schedulers, batch sampling (d=2), worker queues, late binding (SOSP 2013)",
    options=SparrowOptions,
    modes=("slot", "resource"),
    counters=COUNTERS,
)
def build(ctx: BuildContext) -> Deployment:
    """Sparrow's node monitors and ``schedulers`` distributed schedulers (jobs routed round-robin by id), with the
    compiled run of the common configuration (:mod:`megha.schedulers.sparrow._lean`) when the run allows it."""
    opts = ctx.options
    dc = ctx.datacenter
    n_sched = int(opts.schedulers or ctx.n_gms or 10)
    addrs = [f"sparrow/scheduler{i}" for i in range(n_sched)]
    # the monitors model a task's Done message (one network delay), and single requests and answers go straight to
    # their handlers, unless processing costs or a fault schedule need them sent (see SparrowMonitors.on_start)
    modelled = ctx.processing is None and not ctx.faults
    done_delay = ctx.delay(SparrowMonitors.kind, SparrowScheduler.kind) if modelled else None
    monitors = SparrowMonitors(
        "sparrow/monitors",
        dc.n_workers,
        ctx.recorder,
        addrs,
        capacity=dc.capacity,
        failure_timeout=opts.failure_timeout,
        done_delay=done_delay,
    )
    sampler = ProbeSampler(dc.worker_masks, capacity=dc.capacity)
    scheds = [
        SparrowScheduler(
            addrs[i],
            i,
            monitors.address,
            dc.worker_masks,
            ctx.recorder,
            probe_ratio=opts.probe_ratio,
            sampler=sampler,
            direct=modelled and dc.capacity is None,
        )
        for i in range(n_sched)
    ]
    skipping = modelled and dc.capacity is None
    if skipping:
        monitors.skip_known_noops(scheds)
    ctx.add(monitors)
    for s in scheds:
        ctx.add(s)

    def counters() -> dict[str, int]:
        """The ``sparrow_*`` counters at the end of the run."""
        # skipped no-op round trips the run's end cut off are taken back (from the message counts too: read after)
        _, unanswered = monitors.settle_skipped(ctx.host.now) if skipping else (0, 0)
        out = {
            "sparrow_probes": sum(s.probes for s in scheds),
            "sparrow_requests": sum(s.requests for s in scheds) - unanswered,
            "sparrow_noops": sum(s.noops for s in scheds) - unanswered,
            "sparrow_probes_queued": monitors.queued_probes,
            "sparrow_max_worker_queue": monitors.max_queue,
        }
        if monitors.tasks_lost or monitors.probes_lost:
            out["sparrow_tasks_lost"] = monitors.tasks_lost
            out["sparrow_probes_lost"] = monitors.probes_lost
            out["sparrow_tasks_relaunched"] = sum(s.tasks_relaunched for s in scheds)
            out["sparrow_probes_reissued"] = sum(s.probes_reissued for s in scheds)
        return out

    describe = {
        "schedulers": n_sched,
        "probe_ratio": opts.probe_ratio,
        "workers": dc.n_workers,
        "mode": "resource" if dc.capacity is not None else "slot",
    }

    def route(job: int) -> str:
        """The scheduler that job ``job`` is submitted to."""
        return addrs[job % n_sched]

    extras: dict = {}
    return Deployment(
        route=route,
        counters=counters,
        describe=describe,
        components=[monitors, *scheds],
        faults=SparrowFaults(monitors, scheds, ctx.workload),
        extras=extras,
        run=lean_runner(ctx, monitors, scheds, route, extras) if skipping else None,
    )
