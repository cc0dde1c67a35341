"""Sirius: min-cost max-flow scheduling with fairness, priority and placement constraints (seed 002).

Registered as ``flow``. A central scheduler builds a flow network from the cluster state (tasks → machines or
their job's unscheduled aggregator → sink; DESIGN §5.6), applies a cost model (``quincy`` fairness,
``placement`` utilities, ``priority``, or a ``+``-joined combination), and solves it every round with our
incremental min-cost flow solver (or OR-Tools from scratch, ``solver=ortools``). ``policy=random|greedy``
turns it into the paper's queue-based baselines on the same machinery.

Modules: :mod:`.network` (dynamic flow network), :mod:`._kernels` (numba kernels), :mod:`.solvers`,
:mod:`.costs` (cost models), :mod:`.fairness`, :mod:`.graph` (scheduling graph), :mod:`.scheduler`
(the component), :mod:`.faults` (machine failures from fault schedules), :mod:`.synthetic` (churn graphs for
benchmarks and the latency reproduction).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import AliasChoices, Field, field_validator

from megha.errors import InputError
from megha.metrics.recorder import TaskRecorder
from megha.model.topology import Datacenter
from megha.schedulers.common.workers import WorkerPool
from megha.schedulers.flow.compiled import CompiledGraph
from megha.schedulers.flow.costs import Combined, make_cost_model
from megha.schedulers.flow.counters import COUNTERS
from megha.schedulers.flow.faults import FlowFaults
from megha.schedulers.flow.graph import SchedulingGraph
from megha.schedulers.flow.scheduler import FlowScheduler, FlowSettings, Machines
from megha.schedulers.flow.solvers import IncrementalSolver, make_solver, warm_up
from megha.schedulers.registry import BuildContext, Deployment, SchedulerOptions, register


class FlowOptions(SchedulerOptions):
    """Options of the ``flow`` scheduler (``--opt key=value``)."""

    cost_model: str = Field("quincy", description="quincy | placement | priority, or a '+'-joined combination")
    policy: Literal["flow", "random", "greedy"] = Field(
        "flow", description="flow = min-cost flow rounds; random / greedy = queue-based baselines"
    )
    solver: Literal["incremental", "ortools"] = Field("incremental", description="min-cost flow solver")
    bulk_work: float = Field(
        0.0,
        ge=0,
        description=(
            "incremental solver: a solve whose searches scan more than this many times the graph's arcs finishes "
            "with a from-scratch solve (same optimal cost, possibly another optimal placement among ties); "
            "0 = never (the benchmarks use 32)"
        ),
    )
    tie_break: Literal["degree", "lifo", "lifo-hub"] = Field(
        "lifo",
        description=(
            "incremental solver: order of the nodes at equal distance in each shortest-path search; every order "
            "gives an optimal flow, but where several flows are optimal each may pick another placement (the paper "
            "leaves it open). lifo = the node reached last first (depth first: fewer nodes settled; the default); "
            "degree = lowest degree first (the default until 2026-11; its results stay reproducible with it); "
            "lifo-hub = lifo with nodes of more than 256 arcs last"
        ),
    )
    slots_per_machine: int = Field(1, ge=1, description="K consecutive workers form one machine of K slots")
    rack_size: int = Field(0, ge=0, description="machines per rack aggregator under the cluster aggregator (0: none)")
    interval: float = Field(
        1.0,
        ge=0,
        validation_alias=AliasChoices("interval", "min_interval"),
        description=(
            "scheduling interval (simulated s): a round runs once something changed, at most one per interval, "
            "batching every arrival and completion since the last round (the paper gives no cadence); "
            "0 = a round per event, the reference implementation's behaviour (alias: min_interval)"
        ),
    )
    graph: Literal["auto", "compiled", "reference"] = Field(
        "auto",
        description=(
            "scheduling-graph implementation: compiled (kernels, interchangeable tasks grouped; no preemption) "
            "or reference (per-task nodes, Python bookkeeping); auto = reference for interval 0 or preemption"
        ),
    )
    period: float = Field(0.0, ge=0, description="also run a round every this many seconds while tasks wait (0: off)")
    preemption: bool = Field(False, description="running tasks stay in the graph and may be preempted")
    migration: bool = Field(True, description="with preemption: a running task may be moved to another machine")
    round_cost: float = Field(0.0, ge=0, description="modelled seconds per round before its decisions apply")
    round_cost_per_node: float = Field(0.0, ge=0, description="modelled extra seconds per graph node per round")
    unscheduled_cost: int = Field(1000, ge=1, description="base cost of leaving a task unscheduled")
    placement_cost: int = Field(
        0, description="cost added to every placement; above unscheduled_cost tasks wait for machines they prefer"
    )
    wait_weight: float = Field(1.0, ge=0, description="quincy: waiting cost per second waited")
    wait_quantum: float = Field(1.0, ge=0, description="quincy: the waiting cost steps every this many seconds")
    fairness: bool = Field(True, description="quincy: enforce max-min fair shares (False: waiting cost only)")
    utility: float = Field(1.0, ge=0, description="placement: utility of a machine with the task's soft constraints")
    soft_mask: int = Field(0, ge=0, description="constraint bits treated as soft preferences (e.g. a GPU bit)")
    soft_speedup: float = Field(1.0, gt=0, description="tasks run this many times faster where their soft bits hold")
    priority_weight: int = Field(1000, ge=1, description="priority: cost per priority level (dominates load)")
    priority_levels: int = Field(16, ge=1, description="priority: levels (priorities are clamped)")
    priority_order: Literal["lower-first", "higher-first"] = Field(
        "lower-first", description="lower-first: priority 1 beats 5 (the paper); higher-first: Borg's order"
    )
    load_weight: int = Field(50, ge=0, description="priority: cost of a fully loaded machine")
    max_arcs: int = Field(16, ge=1, description="direct arcs per task to its preferred machines")
    ec_fanout: int = Field(128, ge=0, description="machines per constrained-class aggregator (0: all)")
    ec_fanin: int = Field(
        16,
        ge=0,
        description=(
            "compiled graph: at most this many starved classes (most urgent first) connect to a machine that "
            "frees up (0: all)"
        ),
    )
    continuation_bonus: int = Field(50, ge=0, description="preemption: cost advantage of staying on one's machine")
    verify: bool = Field(False, description="check every round's cost against OR-Tools from scratch (slow)")

    @field_validator("cost_model")
    @classmethod
    def _known(cls, v: str) -> str:
        try:
            make_cost_model(v)
        except InputError as e:
            raise ValueError(str(e)) from None
        return v


def cost_model_of(o: FlowOptions) -> Combined:
    """The cost model an options object describes."""
    return make_cost_model(
        o.cost_model,
        wait_weight=o.wait_weight,
        wait_quantum=o.wait_quantum,
        fairness=o.fairness,
        utility=o.utility,
        priority_weight=o.priority_weight,
        load_weight=min(o.load_weight, o.priority_weight - 1),
        priority_levels=o.priority_levels,
        priority_order=o.priority_order,
    )


def build_scheduler(
    address: str,
    pool: str,
    recorder: TaskRecorder,
    dc: Datacenter,
    o: FlowOptions,
    rng: np.random.Generator,
    n_tasks: int = 0,
) -> FlowScheduler:
    """Wire a :class:`FlowScheduler` for datacenter ``dc`` (used by :func:`build` and by tests)."""
    if dc.resource_mode and o.slots_per_machine != 1:
        raise InputError("scheduler 'flow': in resource mode every worker is one machine (slots_per_machine=1)")
    machines = Machines.build(dc, o.slots_per_machine)
    cm = cost_model_of(o)
    graph = None
    solver = None
    compiled = o.graph == "compiled" or (o.graph == "auto" and o.interval > 0 and not o.preemption)
    if compiled and o.preemption:
        raise InputError("scheduler 'flow': the compiled graph has no preemption (use graph=reference)")
    if o.policy == "flow" and compiled:
        rack = machines.block // o.rack_size if o.rack_size > 0 else None
        graph = CompiledGraph(
            machines.mask,
            machines.slots,
            cm,
            machine_rack=rack,
            unscheduled_base=o.unscheduled_cost,
            max_arcs=o.max_arcs,
            ec_fanout=o.ec_fanout,
            ec_fanin=o.ec_fanin,
            placement_cost=o.placement_cost,
            wait_weight=cm.wait_rate(),
            wait_quantum=o.wait_quantum,
            waiting_dominates=o.placement_cost + cm.max_machine_cost() < o.unscheduled_cost,
            rng=rng,
        )
    elif o.policy == "flow":
        rack = machines.block // o.rack_size if o.rack_size > 0 else None
        graph = SchedulingGraph(
            machines.mask,
            machines.slots,
            cm,
            machine_rack=rack,
            preemption=o.preemption,
            migration=o.migration,
            unscheduled_base=o.unscheduled_cost,
            continuation_bonus=o.continuation_bonus,
            max_arcs=o.max_arcs,
            ec_fanout=o.ec_fanout,
            placement_cost=o.placement_cost,
            rng=rng,
        )
    if graph is not None:
        solver = make_solver(o.solver, bulk_work=o.bulk_work, tie_break=o.tie_break)
        if isinstance(solver, IncrementalSolver):
            solver.compute_cost = o.verify  # the round's cost is only needed to check it
        warm_up()  # numba compilation (or cache load) before the first round, outside any timed region
    elif o.preemption:
        raise InputError(f"scheduler 'flow': preemption needs policy=flow (got policy={o.policy})")
    settings = FlowSettings(
        policy=o.policy,
        min_interval=o.interval,
        period=o.period,
        preemption=o.preemption,
        round_cost=o.round_cost,
        round_cost_per_node=o.round_cost_per_node,
        soft_mask=o.soft_mask,
        soft_speedup=o.soft_speedup,
        verify=o.verify,
    )
    return FlowScheduler(
        address, pool, recorder, machines, graph, cm, solver, settings, n_tasks=n_tasks, capacity=dc.capacity
    )


@register(
    "flow",
    "Sirius min-cost max-flow rounds (cost models quincy/placement/priority; incremental or OR-Tools solver)",
    options=FlowOptions,
    modes=("slot", "resource"),
    in_compare=False,  # a round over 10,000 machines makes the default `megha compare` take minutes; name it
    counters=COUNTERS,
)
def build(ctx: BuildContext) -> Deployment:
    """Build a flow deployment: one worker pool and one :class:`FlowScheduler` that every job is routed to."""
    o: FlowOptions = ctx.options
    pool = WorkerPool("flow/pool", ctx.datacenter.n_workers, ctx.recorder, capacity=ctx.datacenter.capacity)
    sched = build_scheduler(
        "flow/scheduler", pool.address, ctx.recorder, ctx.datacenter, o, ctx.rng, n_tasks=ctx.workload.n_tasks
    )
    ctx.add(pool)
    ctx.add(sched)
    return Deployment(
        route=lambda job: sched.address,
        counters=sched.counters,
        describe={
            "policy": o.policy,
            "cost_model": o.cost_model,
            "solver": o.solver if o.policy == "flow" else None,
            "machines": sched.m.n,
            "slots_per_machine": o.slots_per_machine,
            "preemption": o.preemption,
            "interval": o.interval,
            "graph": "compiled" if isinstance(sched.g, CompiledGraph) else ("reference" if sched.g else None),
        },
        components=[pool, sched],
        faults=FlowFaults(sched, pool, o.slots_per_machine),
    )
