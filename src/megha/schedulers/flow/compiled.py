"""The scheduling graph at trace scale: the graph of :mod:`megha.schedulers.flow.graph`, with its bookkeeping
in compiled kernels (:mod:`megha.schedulers.flow._graph_kernels`) and tasks grouped.

Same nodes and arcs as the reference :class:`~megha.schedulers.flow.graph.SchedulingGraph` (sink ``S``,
machines ``M_i``, equivalence-class aggregators ``E_q``, unscheduled aggregators ``U_j`` with the fairness
bounds of paper eq. 1–2, optional rack aggregators), with these decisions where the paper is silent:

* **Task groups.** Tasks of one job with the same hard and soft constraint masks are interchangeable (same arcs,
  same costs), so they share one node whose supply is their number (Quincy and Firmament aggregate equivalent
  tasks the same way). A unit the flow places on a machine is the group's lowest-numbered waiting task. A
  group's preference arcs (placement cost model) are those of its first task.
* **Waiting cost.** Quincy's cost of keeping job ``j`` waiting grows by ``wait_weight`` per second waited,
  in steps of ``wait_quantum``. Here the steps are taken on a global clock (``tick(t) = ⌊t / quantum⌋``):
  ``cost_j(t) = base + G(t) − G(a_j)`` with ``G(t) = round(wait_weight · quantum · tick(t))`` (the reference
  graph steps each job's cost at its own offset from its arrival). Every job's cost grows alike, so the
  differences between jobs (older jobs first) never change; the growth only matters where keeping a task
  waiting can be cheaper than a placement (``placement_cost`` plus the largest machine cost reaching
  ``unscheduled_cost``: tasks wait for machines they prefer until waiting costs more). Only then is the growth
  applied, each round: the job arcs' costs and the sink's potential rise together (reduced costs unchanged) and
  the machine arcs with room left are re-checked. Otherwise the clock is frozen: ``G(t)`` is replaced by a
  constant far above every placement cost, so waiting stays the dearest choice and no round pays for the clock
  (with waiting dearer than any placement the optimum places as many tasks as it can either way).
* **Class targets.** A class ``E_q`` keeps ``min(waiting + 8, ec_fanout)`` arcs to free machines it fits,
  chosen from a random starting point in the shorter of its fitting-machine list and the free-machine list
  (the reference draws a uniform random subset), refreshed in compiled code; targets on busy machines go when
  more than twice the wanted number (or the reserved room) is used. This holds for a class every machine fits
  too (Quincy's cluster aggregator), unless racks are configured (then it reaches every rack aggregator):
  without preemption only free machines can take a task, and a hub with an arc to every machine makes each
  augmenting search scan all of them (the reference graph connects it to every machine).
* **Starved classes.** A class that finds no further free machine it fits is starved: every free machine it
  fits is its target already, so only a machine that frees up can be a new one. When one does, at most
  ``ec_fanin`` starved classes it fits connect to it per pass, the most urgent first (largest waiting cost minus
  placement cost among their tasks whose job is below its fair share); the flow then picks the best of their
  tasks. Under deep overload thousands of classes may fit a freed machine, and letting all of them compete
  makes every search back from it scan them all (the optimum is that of this sparser graph, as with
  ``ec_fanout``). A machine that is still free after the pass stays *pending* and is offered to the next
  classes at the next pass or round, until every starved class it fits aims at it: no class waits for ever
  while a machine it fits is free.

Preemption is not supported here (the scheduler uses the reference graph for it).
"""

from __future__ import annotations

import numpy as np

from megha.schedulers.flow import _graph_kernels as GK
from megha.schedulers.flow import _kernels as K
from megha.schedulers.flow.costs import CostModel
from megha.schedulers.flow.graph import (
    PROHIBITIVE,
    ROLE_EC,
    ROLE_JOB,
    ROLE_MACHINE,
    ROLE_RACK,
    ROLE_SINK,
    ROLE_TASK,
)
from megha.schedulers.flow.network import BIG, FlowNetwork
from megha.schedulers.flow.solvers import Solver, SolveResult

_EMPTY = np.zeros(0, dtype=np.int64)
_ZERO1 = np.zeros(1, dtype=np.int64)

FROZEN_G = 1 << 36
"""The waiting-cost clock's stand-in when it is frozen (far above any placement cost, far below overflow)."""


def _grow1(a: np.ndarray, n: int, fill: int) -> np.ndarray:
    if n <= a.size:
        return a
    out = np.full(max(n, 2 * a.size), fill, dtype=a.dtype)
    out[: a.size] = a
    return out


def _grow2(a: np.ndarray, n: int, fill: int) -> np.ndarray:
    if n <= a.shape[1]:
        return a
    out = np.full((a.shape[0], max(n, 2 * a.shape[1])), fill, dtype=a.dtype)
    out[:, : a.shape[1]] = a
    return out


def _varies(cm: CostModel, method: str) -> bool:
    """Whether some part of a (combined) cost model overrides ``method`` of the do-nothing base."""
    parts = getattr(cm, "parts", [cm])
    return any(getattr(type(p), method) is not getattr(CostModel, method) for p in parts)


class CompiledGraph:
    """Scheduling graph without preemption, edited by compiled kernels (see the module docstring)."""

    preemption = False
    spare = 8  # targets wanted beyond the waiting units of a class

    def __init__(
        self,
        machine_mask: np.ndarray,
        machine_slots: np.ndarray,
        cost_model: CostModel,
        *,
        machine_rack: np.ndarray | None = None,
        unscheduled_base: int = 1000,
        max_arcs: int = 16,
        ec_fanout: int = 128,
        ec_fanin: int = 16,
        placement_cost: int = 0,
        wait_weight: float = 0.0,
        wait_quantum: float = 1.0,
        waiting_dominates: bool = True,
        rng: np.random.Generator | None = None,
    ) -> None:
        self.cm = cost_model
        self.placement_cost = int(placement_cost)
        self.unscheduled_base = int(unscheduled_base)
        self.max_arcs = int(max_arcs)
        self.ec_fanout = int(ec_fanout)
        self.ec_fanin = int(ec_fanin)
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.wait_weight = float(wait_weight)
        self.wait_quantum = float(wait_quantum)
        # frozen clock: waiting always costs more than any placement, so its growth changes no decision
        self.frozen_clock = bool(waiting_dominates) or self.wait_weight <= 0
        self._g0: int | None = None  # G at the first arrival (frozen clock)
        self._machine_costs_vary = _varies(cost_model, "machine_cost")
        self._fair_shares = bool(cost_model.fair_shares)
        nm = int(machine_mask.size)
        self.machine_mask = np.asarray(machine_mask, dtype=np.uint32)
        # the per-machine arrays of the kernels: rows of one table (GK.MT_*), so a kernel call passes one array
        self.MT = MT = np.zeros((GK.MTF, nm), dtype=np.int64)
        MT[GK.MT_SLOTS] = np.asarray(machine_slots, dtype=np.int64)
        MT[GK.MT_FREE] = MT[GK.MT_SLOTS]
        MT[GK.MT_MASK] = self.machine_mask
        MT[GK.MT_FPOS] = -1
        self.machine_slots = MT[GK.MT_SLOTS]
        self.machine_free = MT[GK.MT_FREE]
        self.machine_failed = np.zeros(nm, dtype=bool)
        self._n_failed = 0
        self._class_up: np.ndarray | None = None  # per class: machines up that fit it, while some machine is failed
        self._no_dead = np.zeros(0, dtype=np.int64)
        self._mmask = MT[GK.MT_MASK]
        self._wasfree = MT[GK.MT_WASFREE]
        self._mflag = MT[GK.MT_FLAG]
        self._fpos = MT[GK.MT_FPOS]
        self._mdirty = MT[GK.MT_DIRTY]
        self._free_list = MT[GK.MT_FREELIST]
        self._freed = MT[GK.MT_FREED]
        self._pend = MT[GK.MT_PEND]  # pending machines (see GK.k_wake)
        self._mpend = MT[GK.MT_MPEND]
        self._arc_pos = np.zeros(0, dtype=np.int64)
        self._scratch = MT[GK.MT_SCRATCH]
        self.all_mask = int(np.bitwise_and.reduce(self.machine_mask)) if nm else 0
        self.GM = np.zeros(GK.GMF, dtype=np.int64)
        self.GM[GK.GM_RNG] = int(self.rng.integers(1, 2**62))
        self._upd = self.GM[GK.GM_UPD : GK.GM_UPD + GK.UPD_F]  # k_update's out
        GM = self.GM
        GM[GK.GM_FANOUT] = self.ec_fanout
        GM[GK.GM_SPARE] = self.spare
        GM[GK.GM_FANIN] = self.ec_fanin
        GM[GK.GM_EXACT] = int(self.frozen_clock)
        GM[GK.GM_FAIR] = int(self._fair_shares)
        GM[GK.GM_GROLE] = ROLE_TASK
        GM[GK.GM_EROLE] = ROLE_EC
        # tasks (columns read by cost models)
        self.task_job = np.zeros(0, dtype=np.int64)
        self.task_soft = np.zeros(0, dtype=np.uint32)
        self.task_hard = np.zeros(0, dtype=np.uint32)
        # jobs
        self.job_priority = np.zeros(0, dtype=np.int64)
        self.job_arrival = np.zeros(0, dtype=np.float64)
        self.JT = np.zeros((GK.JTF, 0), dtype=np.int64)
        self._act = np.zeros(64, dtype=np.int64)
        self._jdem = np.zeros(0, dtype=np.int64)  # per job: its demand in the sorted demands (-1: none; see k_jobs)
        self._dsorted = np.zeros(64, dtype=np.int64)
        # classes
        self.CT = np.zeros((GK.CTF, 0), dtype=np.int64)
        self.CX = np.zeros((GK.CXF, 0), dtype=np.int64)  # the class lists (GK.CX_*)
        self._class_lists()
        self._class_of: dict[int, int] = {}
        self._n_new_classes = 0  # classes registered by the current add_tasks (their nodes still to add)
        self._fit_pool = np.zeros(0, dtype=np.int64)
        self._fit_used = 0
        self.TT = np.zeros((2, 0), dtype=np.int64)  # the classes' target machines (row 0) and arcs (row 1)
        self._t_mach = self.TT[0]
        self._t_arc = self.TT[1]
        self._t_used = 0
        # groups
        self.GT = np.zeros((GK.GTF, 0), dtype=np.int64)
        self._n_groups = 0
        self._gfree = np.zeros(0, dtype=np.int64)
        self._order = np.zeros(0, dtype=np.int64)
        self._order_used = 0
        self.waiting_total = 0
        # waiting-cost clock
        self._g_applied = 0  # G(t) already folded into the job arcs' costs

        net = FlowNetwork(node_capacity=nm + 1024, arc_capacity=4 * nm + 4096)
        self.net = net
        self.sink = net.add_node(0)
        net.balance_node = self.sink
        self.NR = np.zeros((2, net.node_capacity), dtype=np.int64)  # each node's role (row 0) and reference (row 1)
        self.node_role = self.NR[0]
        self.node_ref = self.NR[1]
        self.node_role[self.sink] = ROLE_SINK
        MT[GK.MT_NODE] = net.add_nodes(np.zeros(nm, dtype=np.int64))
        self.machine_node = MT[GK.MT_NODE]
        self._roles(self.machine_node, ROLE_MACHINE, np.arange(nm))
        mcost = np.asarray(self.cm.machine_cost(self, np.arange(nm)), dtype=np.int64)
        MT[GK.MT_ARC] = net.add_arcs(self.machine_node, np.full(nm, self.sink), mcost, self.machine_slots)
        self.machine_arc = MT[GK.MT_ARC]
        self.machine_cost = mcost
        GK.k_mark_machines(self._mflag, self._mdirty, self.GM, np.arange(nm, dtype=np.int64))
        self.rack_node = np.zeros(0, dtype=np.int64)
        self.machine_rack = None
        if machine_rack is not None and nm:
            self.machine_rack = np.asarray(machine_rack, dtype=np.int64)
            n_racks = int(self.machine_rack.max()) + 1
            self.rack_node = net.add_nodes(np.zeros(n_racks, dtype=np.int64))
            self._roles(self.rack_node, ROLE_RACK, np.arange(n_racks))
            net.add_arcs(self.rack_node[self.machine_rack], self.machine_node, 0, BIG)
        self._cursor = np.zeros(0, dtype=np.int64)
        self._touched = np.zeros(0, dtype=np.int64)
        self._used = np.zeros(0, dtype=np.int64)

    # ---------------------------------------------------------------------------------------- helpers
    def _roles(self, nodes: np.ndarray, role: int, ref: np.ndarray) -> None:
        cap = self.net.node_capacity
        if self.NR.shape[1] < cap:
            self.NR = _grow2(self.NR, cap, 0)
            self.node_role = self.NR[0]
            self.node_ref = self.NR[1]
        self.node_role[nodes] = role
        self.node_ref[nodes] = ref

    def _class_lists(self) -> None:
        """The names of the class lists' rows (after ``CX`` grew)."""
        CX = self.CX
        self._cdirty = CX[GK.CX_DIRTY]
        self._starved = CX[GK.CX_STARVED]
        self._smask = CX[GK.CX_SMASK]  # the mask of each class in the starved list (see GK.k_wake)
        self._cmark = CX[GK.CX_MARK]

    def _g(self, t: float) -> int:
        """``G(t)``: the global part of the waiting cost at time ``t``."""
        if self.wait_weight <= 0:
            return 0
        if self.wait_quantum > 0:
            return round(float(self.wait_weight * self.wait_quantum * np.floor(t / self.wait_quantum)))
        return round(self.wait_weight * t)

    def _ensure_tasks(self, hi: int) -> None:
        if hi > self.task_job.size:
            self.task_job = _grow1(self.task_job, hi, 0)
            self.task_soft = _grow1(self.task_soft, hi, 0)
            self.task_hard = _grow1(self.task_hard, hi, 0)

    def _ensure_jobs(self, hi: int) -> None:
        if hi > self.job_priority.size:
            self.job_priority = _grow1(self.job_priority, hi, 0)
            self.job_arrival = _grow1(self.job_arrival, hi, 0.0)
            n0 = self.JT.shape[1]
            self.JT = _grow2(self.JT, hi, 0)
            self.JT[GK.JT_NODE, n0:] = -1
            self.JT[GK.JT_ARC, n0:] = -1
            self._jdem = _grow1(self._jdem, self.JT.shape[1], -1)

    def _class(self, mask: int) -> int:
        """The class of a hard-constraint mask; a new one is registered without its node (``CT_NODE`` −1), which
        :func:`GK.k_add_tasks` adds after the group nodes of the tasks that brought it."""
        c = self._class_of.get(mask)
        if c is not None:
            return c
        c = len(self._class_of)
        self._class_of[mask] = c
        if c >= self.CT.shape[1]:
            self.CT = _grow2(self.CT, c + 1, 0)
            self.CX = _grow2(self.CX, self.CT.shape[1], 0)
            self._class_lists()
        self._n_new_classes += 1
        full = (mask & ~self.all_mask) == 0 and self.machine_rack is not None
        nm = self.machine_mask.size
        if not full and self._fit_used + nm > self._fit_pool.size:
            self._fit_pool = _grow1(self._fit_pool, self._fit_used + nm, 0)
        # its columns (node −1: it comes with the tasks, see GK.k_add_tasks) and its fitting machines
        self._fit_used, tcap = GK.k_new_class(
            self.CT, c, mask, full, self._mmask, self._fit_pool, self._fit_used, self._t_used, self.ec_fanout
        )
        need = self._t_used + tcap
        if need > self.TT.shape[1]:
            self.TT = _grow2(self.TT, need, 0)
            self._t_mach = self.TT[0]
            self._t_arc = self.TT[1]
        self._t_used = need
        return c

    def _arc_pos_for(self, net: FlowNetwork) -> np.ndarray:
        """Position of each target arc in its class's target list (grown with the arc table)."""
        n = net.A.shape[1]
        if self._arc_pos.size < n:
            self._arc_pos = _grow1(self._arc_pos, n, 0)
        return self._arc_pos

    def fits(self, mask: int) -> np.ndarray:
        """Machines satisfying a hard-constraint mask."""
        return np.flatnonzero((self.machine_mask & np.uint32(mask)) == np.uint32(mask))

    # ---------------------------------------------------------------------------------------- jobs and tasks
    def add_tasks(
        self, job: int, tasks: np.ndarray, hard: np.ndarray, soft: np.ndarray, priority: int, arrival: float
    ) -> None:
        """Tasks of ``job`` enter the graph as waiting tasks, one node per group of interchangeable tasks."""
        tasks = np.asarray(tasks, dtype=np.int64)
        n = tasks.size
        if n == 0:
            return
        hard = np.asarray(hard, dtype=np.uint32)
        soft = np.asarray(soft, dtype=np.uint32)
        self._ensure_tasks(int(tasks.max()) + 1)
        self._ensure_jobs(job + 1)
        net = self.net
        JT = self.JT
        new_job = JT[GK.JT_ALIVE, job] == 0
        jcost = 0
        if new_job:
            self.job_priority[job] = priority
            self.job_arrival[job] = arrival
            cost = (
                self.unscheduled_base
                + self.cm.max_task_cost()
                + int(self.cm.unscheduled(self, np.array([job]), arrival)[0])
                - self._g(arrival)
            )
            if self.frozen_clock:
                if self._g0 is None:
                    self._g0 = self._g(arrival)
                cost += FROZEN_G + self._g0  # waiting stays dearer than any placement
            else:
                cost += self._g_applied
            jcost = int(cost)
        self.task_job[tasks] = job
        self.task_hard[tasks] = hard
        self.task_soft[tasks] = soft
        # groups: same (hard, soft) masks, tasks in id order within each
        if n > 1:
            order, starts = GK.k_group(hard, soft)
        else:
            order = starts = _ZERO1
        ng = starts.size
        first = tasks[order[starts]]  # first task of each group
        self._n_new_classes = 0
        get = self._class_of.get
        classes = np.array(
            [c if (c := get(q)) is not None else self._class(q) for q in hard[order[starts]].tolist()], dtype=np.int64
        )
        tcost = np.asarray(self.cm.task_cost(self, first), dtype=np.int64) + self.placement_cost
        pref = self.cm.has_preferences(self, first)
        pidx: list[np.ndarray] = []
        pmach: list[np.ndarray] = []
        pcost: list[np.ndarray] = []
        for i in np.flatnonzero(pref).tolist():
            ms = self._preferred(int(first[i]))
            if ms.size:
                pidx.append(np.full(ms.size, i, dtype=np.int64))
                pmach.append(self.machine_node[ms])
                pcost.append(tcost[i] + self.cm.pair_cost(self, np.full(ms.size, first[i]), ms))
        if pidx:
            p_i, p_m, p_c = (np.concatenate(x).astype(np.int64) for x in (pidx, pmach, pcost))
        else:
            p_i = p_m = p_c = _EMPTY
        # room: group nodes, new class nodes (and their rack arcs), the job's node and arc, the task arcs
        n_new = self._n_new_classes
        net._reserve_nodes(ng + n_new + 1)
        net._reserve_arcs(2 * ng + p_i.size + n_new * self.rack_node.size + 1)
        if self.node_role.size < net.node_capacity:
            self._roles(_EMPTY, ROLE_SINK, _EMPTY)
        if self._n_groups + ng > self.GT.shape[1]:
            self.GT = _grow2(self.GT, self._n_groups + ng, 0)
            self._gfree = _grow1(self._gfree, self.GT.shape[1], 0)
        need = self._order_used + n
        if need > self._order.size:
            self._order = _grow1(self._order, need, 0)
        if new_job:
            JT[:, job] = 0
            JT[GK.JT_ALIVE, job] = 1
        self._n_groups = GK.k_add_tasks(
            net.N, net.A, net.H, net.M, net.FN, net.FA, net.DN, net.DA,
            self.GM, self.CT, self._cdirty, JT, self.GT, self._gfree, self._order, self.node_role, self.node_ref,
            ROLE_JOB, ROLE_TASK, ROLE_EC, self.rack_node, BIG,
            job, new_job, jcost, self.sink, tasks, order, starts, classes, tcost, p_i, p_m, p_c,
            self._n_groups, self._order_used,
        )  # fmt: skip
        self._order_used = need
        if new_job:
            self._activate(job)
        self.waiting_total += n

    def _activate(self, job: int) -> None:
        n = int(self.GM[GK.GM_NACT])
        if n + 1 > self._act.size:
            self._act = _grow1(self._act, n + 1, 0)
            self._dsorted = _grow1(self._dsorted, self._act.size, 0)
        if n and self._act[n - 1] >= job:  # keep job-id order (fair shares break ties by it)
            live = self._act[:n]
            p = int(np.searchsorted(live, job))
            if live[p] == job:  # back before the list dropped it (tasks lost with a machine): listed once
                return
            self._act[p + 1 : n + 1] = live[p:n].copy()
            self._act[p] = job
        else:
            self._act[n] = job
        self.GM[GK.GM_NACT] = n + 1

    def _preferred(self, t: int) -> np.ndarray:
        """Up to ``max_arcs`` machines where task ``t`` is cheaper than on its aggregator (free ones first)."""
        ms = self.fits(int(self.task_hard[t]))
        if ms.size == 0:
            return ms
        pc = self.cm.pair_cost(self, np.full(ms.size, t), ms)
        ms = ms[pc < 0]
        if ms.size <= self.max_arcs:
            return ms
        pc = pc[pc < 0]
        free = self.machine_free[ms] > 0
        key = pc.astype(np.float64) - free * 1e15 + self.rng.random(ms.size)
        return ms[np.argsort(key, kind="stable")[: self.max_arcs]]

    def wake_jobs(self, jobs: np.ndarray) -> None:
        """Tasks of running jobs came back to wait (lost with a machine): their jobs' classes look at every free
        machine again (the fair-share bookkeeping sees a job's waiting units only grow at its arrival, so it would
        not notice that such a job, held back before, may place again)."""
        JT = self.JT
        net = self.net
        for j in np.unique(np.asarray(jobs, dtype=np.int64)).tolist():
            if JT[GK.JT_ALIVE, j] == 1:
                GK._stale_job_classes(
                    net.N,
                    net.A,
                    net.H,
                    self.node_role,
                    self.node_ref,
                    ROLE_TASK,
                    self.GT,
                    JT,
                    self.CT,
                    j,
                    self._cdirty,
                    self.GM,
                    True,
                    GK.KEYS_STALE,
                )
        self.GM[GK.GM_JOBS] = 1

    # ---------------------------------------------------------------------------------------- machines
    def set_free(self, machines: np.ndarray, free: np.ndarray) -> None:
        """Record the machines' free slots (applied to the graph at the next :meth:`prepare`)."""
        machines = np.asarray(machines, dtype=np.int64)
        self.machine_free[machines] = free
        GK.k_mark_machines(self._mflag, self._mdirty, self.GM, machines)

    def fail_machines(self, machines: np.ndarray, failed: bool = True) -> None:
        """Mark machines failed (prohibitive cost on ``M → S``) or repaired."""
        machines = np.asarray(machines, dtype=np.int64)
        changed = np.unique(machines[self.machine_failed[machines] != failed])
        self.machine_failed[machines] = failed
        self._count_up(changed, failed)
        cost = np.asarray(self.cm.machine_cost(self, machines), dtype=np.int64)
        cost = cost + np.where(self.machine_failed[machines], PROHIBITIVE, 0)
        self.net.set_costs(self.machine_arc[machines], cost)
        self.machine_cost[machines] = cost
        self.GM[GK.GM_JOBS] = 1  # the fair shares' capacity changed

    def finished_outside(self, tasks: np.ndarray, machines: np.ndarray) -> None:
        """Running tasks (not in the graph) finished; their slots are free again, empty jobs leave."""
        net = self.net
        GK.k_finish(
            net.N,
            net.A,
            net.H,
            net.M,
            net.FN,
            net.FA,
            net.DN,
            self.JT,
            self.GM,
            self.machine_free,
            self._mflag,
            self._mdirty,
            np.asarray(machines, dtype=np.int64),
            self.task_job[np.asarray(tasks, dtype=np.int64)],
        )

    # ---------------------------------------------------------------------------------------- rounds
    def prepare(self, now: float) -> None:
        """Bring costs, bounds and aggregator arcs up to date for a round at ``now``."""
        net = self.net
        g = 0 if self.frozen_clock else self._g(now)
        if g != self._g_applied:
            GK.k_tick(
                net.N,
                net.A,
                net.M,
                net.DA,
                self.JT,
                self._act,
                self.GM,
                self.sink,
                self.machine_arc,
                g - self._g_applied,
            )
            self._g_applied = g
        do_jobs = bool(self.GM[GK.GM_JOBS])
        capacity = 0
        unplaceable = self._no_dead
        if do_jobs:
            ms = self.machine_slots
            capacity = int(ms.sum() if self._n_failed == 0 else ms[~self.machine_failed].sum())
            unplaceable = self._no_dead if self._class_up is None else self._unplaceable()
        if self._machine_costs_vary:  # the machines' costs are priced in Python between the two steps
            if do_jobs:
                GK.k_jobs(
                    net.N, net.A, net.H, net.M, net.DN, net.DA, self.JT, self._act, self.GM, capacity, unplaceable,
                    self._fair_shares, self.node_role, self.node_ref, ROLE_TASK, self.GT, self.CT, self._cdirty,
                    self._jdem, self._dsorted, self.frozen_clock,
                )  # fmt: skip
            self._update(1)
            return
        GK.k_prepare_packed(
            net.N, net.A, net.H, net.M, net.FA, net.DN, net.DA, self.GM, self.CT, self.CX, self.NR, self.GT, self.JT,
            self.MT, self.TT, self._arc_pos_for(net), self._fit_pool,
            do_jobs, self._act, capacity, unplaceable, self._jdem, self._dsorted,
        )  # fmt: skip
        self._update_rest()

    def _count_up(self, changed: np.ndarray, failed: bool) -> None:
        """Machines ``changed`` failed (or came back): keep, while some machine is failed, the number of machines up
        that fit each class (counted for a class when first needed, see :meth:`_unplaceable`)."""
        if changed.size == 0:
            return
        self._n_failed += int(changed.size) if failed else -int(changed.size)
        if self._n_failed == 0:
            self._class_up = None
        elif self._class_up is None:
            self._class_up = np.zeros(0, dtype=np.int64)
        elif self._class_up.size:
            q = self.CT[GK.CT_MASK, : self._class_up.size]
            hit = ((q[:, None] & ~self._mmask[changed][None, :]) == 0).sum(axis=1)
            self._class_up += -hit if failed else hit

    def _unplaceable(self) -> np.ndarray:
        """Waiting units per job id whose hard constraints no machine up satisfies (while some is failed); empty if
        there are none. They take no fair share (see ``k_jobs``)."""
        up = self._class_up
        assert up is not None
        nc = len(self._class_of)
        if up.size < nc:  # classes not counted yet: their machines up
            live = ~self.machine_failed
            ct = self.CT
            new = np.empty(nc - up.size, dtype=np.int64)
            for i, c in enumerate(range(up.size, nc)):
                if ct[GK.CT_FLAG, c] & GK.CF_FULL:
                    new[i] = self.machine_mask.size - self._n_failed
                else:
                    f0 = ct[GK.CT_FIT0, c]
                    new[i] = int(live[self._fit_pool[f0 : f0 + ct[GK.CT_FITN, c]]].sum())
            self._class_up = up = np.concatenate((up, new))
        dead = (up == 0) & (self.CT[GK.CT_WAIT, :nc] > 0)
        if not dead.any():
            return self._no_dead
        ng = self._n_groups
        gn = self.GT[GK.GT_N, :ng]
        sel = np.flatnonzero(gn > 0)
        sel = sel[dead[self.GT[GK.GT_CLASS, sel]]]
        out = np.zeros(self.JT.shape[1], dtype=np.int64)
        np.add.at(out, self.GT[GK.GT_JOB, sel], gn[sel])
        return out

    def _update(self, refresh: int) -> int:
        """Apply the dirty machines, offer the pending ones, then refresh the class targets (``refresh`` 1), or
        (2) refresh them if some class was unserved before (see ``GK.k_update``); returns the arcs added."""
        if self._machine_costs_vary:  # the cost model prices the dirty machines in Python
            unserved = refresh == 1 or self.unserved()
            added = self._machines()
            return added + self._refresh() if unserved else added
        net = self.net
        GK.k_update_packed(
            net.N, net.A, net.H, net.M, net.FA, net.DN, net.DA, self.GM, self.CT, self.CX, self.NR, self.GT, self.JT,
            self.MT, self.TT, self._arc_pos_for(net), self._fit_pool, refresh,
        )  # fmt: skip
        return self._update_rest()

    def _update_rest(self) -> int:
        """After ``GK.k_update`` (alone or after a placement): the steps it left for want of arc room; returns every
        arc it and they added."""
        out = self._upd
        added = int(out[GK.UPD_ADDED])
        stage = out[GK.UPD_STAGE]
        if stage == 1:  # the arc table was short of room for the pending machines' arcs
            added += self._wake()
        if stage and out[GK.UPD_REFRESH]:
            added += self._refresh()
        return added

    def _machines(self) -> int:
        """Apply the dirty machines, then offer the pending ones to starved classes; returns the arcs added."""
        net = self.net
        nmd = int(self.GM[GK.GM_NMD])
        if nmd == 0:
            return self._wake()
        if self._machine_costs_vary:
            ms = np.sort(self._mdirty[:nmd])
            cost = np.asarray(self.cm.machine_cost(self, ms), dtype=np.int64)
            cost = cost + np.where(self.machine_failed[ms], PROHIBITIVE, 0)
            ch = cost != self.machine_cost[ms]
            if ch.any():
                net.set_costs(self.machine_arc[ms[ch]], cost[ch])
                self.machine_cost[ms[ch]] = cost[ch]
        GK.k_machines(
            net.N,
            net.A,
            net.H,
            net.M,
            net.DN,
            net.DA,
            self.GM,
            self.CT,
            self._cdirty,
            self._starved,
            self.node_role,
            self.node_ref,
            ROLE_EC,
            self.machine_free,
            self._mmask,
            self.machine_arc,
            self._wasfree,
            self._mflag,
            self._fpos,
            self._mdirty,
            self._free_list,
            self._freed,
            True,
            net.FA,
            self._t_mach,
            self._t_arc,
            self._arc_pos_for(net),
            self._pend,
            self._mpend,
        )
        return self._wake()

    def _wake(self) -> int:
        """Offer the pending machines to the starved classes (see ``GK.k_wake``); returns the arcs added."""
        npd = int(self.GM[GK.GM_NPEND])
        nst = int(self.GM[GK.GM_NST])
        if npd == 0 or nst == 0:
            return 0
        net = self.net
        net._reserve_arcs(npd * (min(self.ec_fanin, nst) if self.ec_fanin > 0 else nst) + 64)
        return int(
            GK.k_wake(
                net.N,
                net.A,
                net.H,
                net.M,
                net.FA,
                net.DN,
                net.DA,
                self.GM,
                self.CT,
                self._starved,
                self._pend,
                self._mpend,
                self._cmark,
                self.node_role,
                self.node_ref,
                ROLE_TASK,
                ROLE_EC,
                self.GT,
                self.JT,
                self._t_mach,
                self._t_arc,
                self._arc_pos_for(net),
                self.machine_node,
                self.machine_arc,
                self._mmask,
                self._wasfree,
                self.machine_slots,
                self.ec_fanout,
                self.spare,
                self.ec_fanin,
                self._smask,
            )
        )

    def _refresh(self) -> int:
        """Class targets (see the module docstring); returns the number of arcs added."""
        added = 0
        while self.GM[GK.GM_NCD]:
            net = self.net
            room = 64 + (self.ec_fanout if self.ec_fanout > 0 else self.machine_mask.size)
            r = GK.k_refresh(
                net.N,
                net.A,
                net.H,
                net.M,
                net.FA,
                net.DN,
                net.DA,
                self.GM,
                self.CT,
                self._cdirty,
                self._starved,
                self._fit_pool,
                self._t_mach,
                self._t_arc,
                self._scratch,
                self.machine_node,
                self.machine_arc,
                self._mmask,
                self._wasfree,
                self.machine_slots,
                self._free_list,
                self._arc_pos_for(net),
                self.ec_fanout,
                self.spare,
                0,
                self._smask,
            )
            if r >= 0:
                added += r
                break
            net._reserve_arcs(net.arc_capacity + room)  # grow, then go on where it stopped
        return added

    def unserved(self) -> bool:
        """Some class has waiting tasks and may still reach free machines (worth another pass now)."""
        return bool(GK.k_unserved(self.CT, self._cdirty, self.GM))

    def solve(self, solver: Solver) -> SolveResult:
        """Run ``solver`` on the graph's network: the min-cost flow whose task arcs are this round's placements.

        The solver may write flow outside the network's kernels (a bulk or from-scratch solve): the flow log is
        dropped, so the next placement reads every free machine once (see ``k_place``)."""
        res = solver.solve(self.net)
        self.net.forget_flow_log()
        return res

    def _place_scratch(self) -> FlowNetwork:
        """Size the placement kernels' scratch (cursors, arc marks, node roles) to the network; returns it."""
        net = self.net
        cap = net.N.shape[1]
        if self._cursor.size < cap:
            self._cursor = np.full(cap, -2, dtype=np.int64)
            self._touched = np.zeros(cap, dtype=np.int64)
        if self._used.size < net.A.shape[1]:
            self._used = np.zeros(net.A.shape[1], dtype=np.int64)
        if self.node_role.size < cap:
            self._roles(_EMPTY, ROLE_SINK, _EMPTY)
        return net

    def place(self) -> tuple[np.ndarray, np.ndarray]:
        """Commit the current flow's placements: (tasks, machines); they leave the graph (see ``k_place``)."""
        net = self._place_scratch()
        tasks, machines = GK.k_place(
            net.N,
            net.A,
            net.H,
            net.M,
            net.FN,
            net.FA,
            net.DN,
            net.DA,
            self.GM,
            self.CT,
            self._cdirty,
            self.JT,
            self.GT,
            self._order,
            self.node_role,
            self.node_ref,
            ROLE_TASK,
            self._cursor,
            self._used,
            self._touched,
            self.machine_node,
            self.machine_arc,
            self.machine_free,
            self._mflag,
            self._mdirty,
            self._gfree,
            self._free_list,
            self.frozen_clock,
        )
        self.waiting_total -= int(tasks.size)
        return tasks, machines

    def place_pass(self) -> tuple[np.ndarray, np.ndarray, bool]:
        """:meth:`place`, then, if it placed tasks, :meth:`pass_again` (in one kernel call where the machine costs
        are fixed): (tasks, machines, whether another pass may help)."""
        if self._machine_costs_vary:
            t, m = self.place()
            return t, m, bool(t.size) and self.pass_again()
        net = self._place_scratch()
        tasks, machines = GK.k_place_update_packed(
            net.N, net.A, net.H, net.M, net.FN, net.FA, net.DN, net.DA, self.GM, self.CT, self.CX, self.NR, self.GT,
            self.JT, self.MT, self.TT, self._order, self._cursor, self._used, self._touched, self._gfree,
            self._arc_pos_for(net), self._fit_pool,
        )  # fmt: skip
        if tasks.size == 0:
            return tasks, machines, False
        self.waiting_total -= int(tasks.size)
        return tasks, machines, self._update_rest() > 0

    def pass_again(self) -> bool:
        """After a pass that placed tasks: update machines and class targets; True if another pass may help."""
        return self._update(2) > 0

    # ---------------------------------------------------------------------------------------- queries
    @property
    def jobs(self) -> np.ndarray:
        """Jobs in the graph (waiting or running tasks), in id order."""
        a = self._act[: int(self.GM[GK.GM_NACT])]
        return a[self.JT[GK.JT_ALIVE, a] == 1]

    @property
    def job_in_graph(self) -> np.ndarray:
        """Per job id, its waiting units in the graph (``N_j``)."""
        return self.JT[GK.JT_IN]

    @property
    def job_running(self) -> np.ndarray:
        """Per job id, its running tasks."""
        return self.JT[GK.JT_RUN]


__all__ = ["CompiledGraph", "K"]
