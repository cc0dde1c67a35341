"""Cost models of the flow scheduler: small strategy objects, combined by name (``quincy+priority``).

Each model contributes integer costs (and, for fairness, bounds) to the graph of
:mod:`megha.schedulers.flow.graph`:

* ``unscheduled(jobs)`` — cost per waiting task of job ``j``, on the arc ``U_j → S``;
* ``task_cost(tasks)`` — added to every placement arc of a task (to a machine or an aggregator);
* ``pair_cost(tasks, machines)`` — added to a task's direct arcs to particular machines (preferences);
* ``machine_cost(machines)`` — on ``M → S``, paid by every task placed on the machine;
* ``fair_shares`` — whether ``U_j → S`` gets the Quincy lower bound ``N_j − A_j``.

Models (DESIGN §5.6, paper §3.1):

* ``quincy`` — fairness: max-min fair share ``A_j`` per job enforced by the bound ``[N_j − A_j, N_j]`` on
  ``U_j → S`` (eq. 1–2), and a waiting cost that grows with the job's waiting time so tasks are not starved.
* ``placement`` (Alsched) — cost ``−utility`` on arcs to machines that satisfy a task's *soft* constraints
  (eq. 5); hard constraints are arcs present or absent.
* ``priority`` (Borg) — ``cost = w · (priority, cpu load)`` with the priority weight dominating (eq. 7), so a
  higher-priority task always wins a contended slot.

All costs are integers in units of :data:`UNIT` (= 1.0 of utility).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from megha.errors import InputError

UNIT = 100
"""Integer cost of one unit of utility (costs are integers for the solvers)."""


class GraphView(Protocol):
    """What cost models read from the scheduling graph (columns indexed by task / job / machine id)."""

    task_job: np.ndarray
    task_soft: np.ndarray  # soft-constraint bits wanted by the task
    job_priority: np.ndarray
    job_arrival: np.ndarray
    machine_mask: np.ndarray
    machine_slots: np.ndarray
    machine_free: np.ndarray


class CostModel:
    """Base: contributes nothing. Subclasses override what they need."""

    name = "base"
    fair_shares = False

    def unscheduled(self, g: GraphView, jobs: np.ndarray, now: float) -> np.ndarray:
        """Cost per waiting task of each of ``jobs`` at ``now``, on its arc ``U_j → S`` (left unscheduled)."""
        return np.zeros(jobs.size, dtype=np.int64)

    def task_cost(self, g: GraphView, tasks: np.ndarray) -> np.ndarray:
        """Cost added to every placement arc of each of ``tasks`` (to a machine or an aggregator)."""
        return np.zeros(tasks.size, dtype=np.int64)

    def pair_cost(self, g: GraphView, tasks: np.ndarray, machines: np.ndarray) -> np.ndarray:
        """Cost added to the direct arc of each task of ``tasks`` to the machine at the same position of
        ``machines``."""
        return np.zeros(tasks.size, dtype=np.int64)

    def machine_cost(self, g: GraphView, machines: np.ndarray) -> np.ndarray:
        """Cost on each machine's arc ``M → S``, paid by every task placed on it."""
        return np.zeros(machines.size, dtype=np.int64)

    def has_preferences(self, g: GraphView, tasks: np.ndarray) -> np.ndarray:
        """Tasks whose cost differs between machines (they get direct arcs to their best machines)."""
        return np.zeros(tasks.size, dtype=bool)

    def max_task_cost(self) -> int:
        """An upper bound of ``task_cost`` (the unscheduled cost is kept above it)."""
        return 0

    def max_machine_cost(self) -> int:
        """An upper bound of ``machine_cost``."""
        return 0

    def wait_rate(self) -> float:
        """Cost units by which ``unscheduled`` grows per second waited (the compiled graph applies this growth
        on a global clock; ``unscheduled`` at the job's arrival gives the rest)."""
        return 0.0

    def rank(self, g: GraphView, tasks: np.ndarray) -> np.ndarray:
        """Sort key for greedy queue policies (lower goes first); FIFO by default."""
        return g.job_arrival[g.task_job[tasks]]


@dataclass
class Quincy(CostModel):
    """Max-min fairness by capacity bounds (paper eq. 1–2) plus a waiting cost growing with time."""

    wait_weight: float = 1.0  # cost units per second waited
    wait_quantum: float = 1.0  # seconds: the waiting cost steps at this granularity (fewer cost changes)
    name: str = "quincy"
    fair_shares: bool = True  # False keeps only the growing waiting cost (FIFO-like among equals)

    def unscheduled(self, g: GraphView, jobs: np.ndarray, now: float) -> np.ndarray:
        """The waiting cost: ``wait_weight`` per second each job has waited, in steps of ``wait_quantum``."""
        if self.wait_weight <= 0:
            return np.zeros(jobs.size, dtype=np.int64)
        waited = np.maximum(now - g.job_arrival[jobs], 0.0)
        if self.wait_quantum > 0:
            waited = np.floor(waited / self.wait_quantum) * self.wait_quantum
        return np.round(self.wait_weight * waited).astype(np.int64)

    def wait_rate(self) -> float:
        return float(self.wait_weight)


@dataclass
class Placement(CostModel):
    """Alsched-style utility: a task gets ``utility`` on machines holding all its soft constraints (eq. 5)."""

    utility: float = 1.0
    name: str = "placement"

    def pair_cost(self, g: GraphView, tasks: np.ndarray, machines: np.ndarray) -> np.ndarray:
        """``−utility`` on machines that hold all of the task's soft constraints, 0 elsewhere."""
        soft = g.task_soft[tasks]
        ok = (soft != 0) & ((g.machine_mask[machines] & soft) == soft)
        return np.where(ok, -round(self.utility * UNIT), 0).astype(np.int64)

    def has_preferences(self, g: GraphView, tasks: np.ndarray) -> np.ndarray:
        return g.task_soft[tasks] != 0


@dataclass
class Priority(CostModel):
    """Borg-style ``w · (priority, cpu)`` (eq. 7): the priority term dominates; cpu = the machine's load.

    ``order='lower-first'`` follows the paper (priority 1 beats 2 beats 5); ``'higher-first'`` is Borg's.
    Priorities are clamped to ``[0, levels − 1]``.
    """

    weight: int = 10 * UNIT  # per priority level; dominates the load term (≤ load_weight)
    load_weight: int = UNIT // 2
    levels: int = 16
    order: str = "lower-first"
    name: str = "priority"
    fair_shares: bool = False

    def __post_init__(self) -> None:
        if self.order not in ("lower-first", "higher-first"):
            raise InputError(f"priority order must be 'lower-first' or 'higher-first', got {self.order!r}")
        if self.weight <= self.load_weight:
            raise InputError("priority weight must exceed the load weight (the priority term dominates)")

    def level(self, g: GraphView, tasks: np.ndarray) -> np.ndarray:
        """Each task's priority level in ``[0, levels − 1]``, 0 the most urgent (whatever ``order``)."""
        p = np.clip(g.job_priority[g.task_job[tasks]].astype(np.int64), 0, self.levels - 1)
        return p if self.order == "lower-first" else (self.levels - 1) - p

    def task_cost(self, g: GraphView, tasks: np.ndarray) -> np.ndarray:
        """``weight`` per priority level: a more urgent task is cheaper to place."""
        return self.weight * self.level(g, tasks)

    def machine_cost(self, g: GraphView, machines: np.ndarray) -> np.ndarray:
        """``load_weight`` times the machine's busy fraction of slots (spreads load)."""
        slots = np.maximum(g.machine_slots[machines], 1)
        busy = (g.machine_slots[machines] - g.machine_free[machines]) / slots
        return np.round(self.load_weight * busy).astype(np.int64)

    def max_task_cost(self) -> int:
        return self.weight * (self.levels - 1)

    def max_machine_cost(self) -> int:
        return int(self.load_weight)

    def rank(self, g: GraphView, tasks: np.ndarray) -> np.ndarray:
        return self.level(g, tasks) * 1e12 + g.job_arrival[g.task_job[tasks]]


@dataclass
class Combined(CostModel):
    """The sum of several models (fair shares if any part asks for them)."""

    parts: list[CostModel] = field(default_factory=list)

    @property
    def name(self) -> str:  # type: ignore[override]
        return "+".join(p.name for p in self.parts) or "base"

    @property
    def fair_shares(self) -> bool:  # type: ignore[override]
        return any(p.fair_shares for p in self.parts)

    def unscheduled(self, g: GraphView, jobs: np.ndarray, now: float) -> np.ndarray:
        """The sum of the parts' waiting costs."""
        return sum((p.unscheduled(g, jobs, now) for p in self.parts), np.zeros(jobs.size, dtype=np.int64))

    def task_cost(self, g: GraphView, tasks: np.ndarray) -> np.ndarray:
        """The sum of the parts' task costs."""
        return sum((p.task_cost(g, tasks) for p in self.parts), np.zeros(tasks.size, dtype=np.int64))

    def pair_cost(self, g: GraphView, tasks: np.ndarray, machines: np.ndarray) -> np.ndarray:
        """The sum of the parts' preference costs."""
        return sum((p.pair_cost(g, tasks, machines) for p in self.parts), np.zeros(tasks.size, dtype=np.int64))

    def machine_cost(self, g: GraphView, machines: np.ndarray) -> np.ndarray:
        """The sum of the parts' machine costs."""
        return sum((p.machine_cost(g, machines) for p in self.parts), np.zeros(machines.size, dtype=np.int64))

    def has_preferences(self, g: GraphView, tasks: np.ndarray) -> np.ndarray:
        out = np.zeros(tasks.size, dtype=bool)
        for p in self.parts:
            out |= p.has_preferences(g, tasks)
        return out

    def max_task_cost(self) -> int:
        return sum(p.max_task_cost() for p in self.parts)

    def wait_rate(self) -> float:
        return sum(p.wait_rate() for p in self.parts)

    def max_machine_cost(self) -> int:
        return sum(p.max_machine_cost() for p in self.parts)

    def rank(self, g: GraphView, tasks: np.ndarray) -> np.ndarray:
        for p in self.parts:
            if isinstance(p, Priority):
                return p.rank(g, tasks)
        return super().rank(g, tasks)


MODELS = ("quincy", "placement", "priority")


def make_cost_model(spec: str, **params: Any) -> Combined:
    """Build ``'quincy'``, ``'placement'``, ``'priority'`` or a ``+``-joined combination of them.

    ``params`` may hold ``wait_weight``, ``wait_quantum``, ``fairness`` (quincy), ``utility`` (placement),
    ``priority_weight``, ``load_weight``, ``priority_levels``, ``priority_order`` (priority); others are ignored.
    """
    names = [s.strip() for s in spec.split("+") if s.strip()]
    if not names:
        raise InputError("cost model: give at least one of " + ", ".join(MODELS))
    parts: list[CostModel] = []
    for n in names:
        if n == "quincy":
            parts.append(
                Quincy(
                    wait_weight=params.get("wait_weight", 1.0),
                    wait_quantum=params.get("wait_quantum", 1.0),
                    fair_shares=params.get("fairness", True),
                )
            )
        elif n == "placement":
            parts.append(Placement(utility=params.get("utility", 1.0)))
        elif n == "priority":
            parts.append(
                Priority(
                    weight=params.get("priority_weight", 10 * UNIT),
                    load_weight=params.get("load_weight", UNIT // 2),
                    levels=params.get("priority_levels", 16),
                    order=params.get("priority_order", "lower-first"),
                )
            )
        else:
            raise InputError(f"unknown cost model {n!r} in {spec!r}; known: {', '.join(MODELS)} (join with '+')")
    if len(set(names)) != len(names):
        raise InputError(f"cost model {spec!r} names a model twice")
    return Combined(parts)
