"""The scheduling graph of the flow scheduler, kept up to date incrementally between rounds.

Nodes (DESIGN §5.6, paper Fig. 2–5, with the Quincy/Firmament tricks of DESIGN §7):

* ``S`` — the sink, the network's balance node (its demand follows the number of task nodes);
* ``M_i`` — one per machine, ``M_i → S`` with capacity = free slots (no preemption) or all slots
  (preemption), cost = the cost model's machine cost; a failed machine gets a prohibitive cost instead of a
  zero capacity, so the graph stays warm;
* ``E_q`` — one *equivalence-class aggregator* per hard-constraint mask ``q`` of waiting tasks (``q = 0`` is
  Quincy's cluster aggregator ``X``), with arcs to machines satisfying ``q``: all of them for a class that
  every machine satisfies (through rack aggregators ``R_r`` when asked), else up to ``ec_fanout`` of them,
  enough free ones for its waiting tasks (at most ``ec_fanout``; with preemption ``ec_fanout`` machines, busy
  ones included), chosen at random and refreshed every round — this keeps the graph sparse (when fewer
  machines than fit are connected, the optimum is the optimum of this sparser graph);
* ``U_j`` — the unscheduled aggregator of job ``j``: ``U_j → S`` with bounds ``[N_j − A_j, N_j]`` when the
  cost model asks for max-min fairness (paper eq. 1–2), else ``[0, N_j]``; its cost is the waiting cost;
* ``T`` — one per task in the graph, supply 1, arcs to ``U_j`` (cost 0), to ``E_mask`` (the task's cost) and,
  when the cost model gives it machine preferences, directly to up to ``max_arcs`` preferred machines.

Every round's assignment is an optimal min-cost flow of this graph. A task routed through an aggregator is
matched to one of the machines the aggregator's flow reaches (any matching of the flow decomposition is
valid: every machine an aggregator reaches satisfies all its tasks' hard constraints).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from megha.schedulers.flow import _kernels as K
from megha.schedulers.flow.costs import CostModel
from megha.schedulers.flow.fairness import max_min_shares
from megha.schedulers.flow.network import BIG, FlowNetwork
from megha.schedulers.flow.solvers import Solver, SolveResult

ROLE_SINK, ROLE_MACHINE, ROLE_EC, ROLE_JOB, ROLE_TASK, ROLE_RACK = 0, 1, 2, 3, 4, 5
PROHIBITIVE = 1 << 30


@dataclass
class _Class:
    """An equivalence-class aggregator E_q."""

    mask: int
    node: int
    full: bool  # every machine satisfies the mask: permanent arcs to all machines (or racks)
    targets: dict[int, int] = field(default_factory=dict)  # machine -> arc E_q → M
    rack_arcs: dict[int, int] = field(default_factory=dict)  # rack -> arc E_q → R
    waiting: int = 0
    fit: np.ndarray | None = None  # machines satisfying the mask (cached)
    live: int = 0  # targets with a free slot (all targets under preemption)
    starved: bool = False  # no further machine to connect until one it fits frees up


def _grow(a: np.ndarray, n: int, fill: int) -> np.ndarray:
    if n <= a.size:
        return a
    out = np.full(max(n, 2 * a.size), fill, dtype=a.dtype)
    out[: a.size] = a
    return out


class SchedulingGraph:
    """Flow graph of one scheduler: machines, equivalence classes, jobs and tasks (see module docstring)."""

    def __init__(
        self,
        machine_mask: np.ndarray,
        machine_slots: np.ndarray,
        cost_model: CostModel,
        *,
        machine_rack: np.ndarray | None = None,
        preemption: bool = False,
        migration: bool = True,
        unscheduled_base: int = 1000,
        continuation_bonus: int = 50,
        max_arcs: int = 16,
        ec_fanout: int = 128,
        placement_cost: int = 0,
        rng: np.random.Generator | None = None,
    ) -> None:
        self.cm = cost_model
        self.placement_cost = int(placement_cost)
        self.preemption = preemption
        self.migration = migration
        self.unscheduled_base = int(unscheduled_base)
        self.continuation_bonus = int(continuation_bonus)
        self.max_arcs = int(max_arcs)
        self.ec_fanout = int(ec_fanout)
        self.rng = rng if rng is not None else np.random.default_rng(0)
        nm = machine_mask.size
        self.machine_mask = np.asarray(machine_mask, dtype=np.uint32)
        self.machine_slots = np.asarray(machine_slots, dtype=np.int64)
        self.machine_free = self.machine_slots.copy()
        self.machine_failed = np.zeros(nm, dtype=bool)
        self._n_failed = 0
        self._class_up: dict[int, int] | None = None  # class mask -> machines up that fit it, while some is failed
        self._mark = np.zeros(nm, dtype=bool)
        self._cursor = np.zeros(0, dtype=np.int64)
        self._touched = np.zeros(0, dtype=np.int64)
        self._used = np.zeros(0, dtype=np.int64)
        self._paths: dict[int, list[int]] = {}
        self.all_mask = int(np.bitwise_and.reduce(self.machine_mask)) if nm else 0
        # columns read by cost models (grown on demand)
        self.task_job = np.zeros(0, dtype=np.int64)
        self.task_soft = np.zeros(0, dtype=np.uint32)
        self.task_hard = np.zeros(0, dtype=np.uint32)
        self.task_node = np.zeros(0, dtype=np.int64)
        self.task_machine = np.zeros(0, dtype=np.int64)  # preemption: machine a running task holds, else −1
        self.task_direct = np.zeros(0, dtype=np.int64)  # preemption: the running task's arc to its machine
        self.job_priority = np.zeros(0, dtype=np.int64)
        self.job_arrival = np.zeros(0, dtype=np.float64)
        self.job_node = np.zeros(0, dtype=np.int64)
        self.job_arc = np.zeros(0, dtype=np.int64)
        self.job_in_graph = np.zeros(0, dtype=np.int64)  # task nodes of the job in the graph (N_j)
        self.job_running = np.zeros(0, dtype=np.int64)  # running tasks (outside the graph without preemption)
        self.job_cost = np.zeros(0, dtype=np.int64)
        self.job_lower = np.zeros(0, dtype=np.int64)
        self.jobs: set[int] = set()
        self.classes: dict[int, _Class] = {}
        self._dirty: set[int] = set()  # partial classes whose waiting tasks or targets changed
        self._starved: set[int] = set()  # partial classes with no further machine to connect for now
        self._target_of: dict[int, set[int]] = {}  # machine -> partial classes with an arc to it

        net = FlowNetwork(node_capacity=nm + 1024, arc_capacity=4 * nm + 4096)
        self.net = net
        self.sink = net.add_node(0)
        net.balance_node = self.sink
        self.node_role = np.zeros(net.node_capacity, dtype=np.int8)
        self.node_ref = np.zeros(net.node_capacity, dtype=np.int64)
        self.node_role[self.sink] = ROLE_SINK
        self.machine_node = net.add_nodes(np.zeros(nm, dtype=np.int64))
        self._roles(self.machine_node, ROLE_MACHINE, np.arange(nm))
        mcost = self.cm.machine_cost(self, np.arange(nm))
        self.machine_arc = net.add_arcs(self.machine_node, np.full(nm, self.sink), mcost, self.machine_slots)
        self.machine_cost = mcost
        self.machine_dirty: set[int] = set()
        self._was_free = self.machine_free > 0  # free-slot state of each machine at the last accounting
        # racks
        self.rack_node = np.zeros(0, dtype=np.int64)
        self.machine_rack = None
        self.rack_to_machine_arc = None
        if machine_rack is not None and nm:
            self.machine_rack = np.asarray(machine_rack, dtype=np.int64)
            n_racks = int(self.machine_rack.max()) + 1
            self.rack_node = net.add_nodes(np.zeros(n_racks, dtype=np.int64))
            self._roles(self.rack_node, ROLE_RACK, np.arange(n_racks))
            self.rack_to_machine_arc = net.add_arcs(self.rack_node[self.machine_rack], self.machine_node, 0, BIG)

    # ---------------------------------------------------------------------------------------- helpers
    def _roles(self, nodes: np.ndarray, role: int, ref: np.ndarray) -> None:
        cap = self.net.node_capacity
        if self.node_role.size < cap:
            self.node_role = _grow(self.node_role, cap, 0)
            self.node_ref = _grow(self.node_ref, cap, 0)
        self.node_role[nodes] = role
        self.node_ref[nodes] = ref

    def _ensure_tasks(self, hi: int) -> None:
        if hi > self.task_job.size:
            self.task_job = _grow(self.task_job, hi, 0)
            self.task_soft = _grow(self.task_soft, hi, 0)
            self.task_hard = _grow(self.task_hard, hi, 0)
            self.task_node = _grow(self.task_node, hi, -1)
            self.task_machine = _grow(self.task_machine, hi, -1)
            self.task_direct = _grow(self.task_direct, hi, -1)

    def _ensure_jobs(self, hi: int) -> None:
        if hi > self.job_priority.size:
            self.job_priority = _grow(self.job_priority, hi, 0)
            self.job_arrival = _grow(self.job_arrival, hi, 0.0)
            self.job_node = _grow(self.job_node, hi, -1)
            self.job_arc = _grow(self.job_arc, hi, -1)
            self.job_in_graph = _grow(self.job_in_graph, hi, 0)
            self.job_running = _grow(self.job_running, hi, 0)
            self.job_cost = _grow(self.job_cost, hi, 0)
            self.job_lower = _grow(self.job_lower, hi, 0)

    def _class(self, mask: int) -> _Class:
        c = self.classes.get(mask)
        if c is None:
            node = self.net.add_node(0)
            self._roles(np.array([node]), ROLE_EC, np.array([mask]))
            full = (mask & ~self.all_mask) == 0
            c = _Class(mask=mask, node=node, full=full)
            self.classes[mask] = c
            if full:
                if self.machine_rack is not None:
                    racks = np.arange(self.rack_node.size)
                    arcs = self.net.add_arcs(np.full(racks.size, node), self.rack_node, 0, BIG)
                    c.rack_arcs = dict(zip(racks.tolist(), arcs.tolist(), strict=True))
                else:
                    ms = np.arange(self.machine_mask.size)
                    arcs = self.net.add_arcs(np.full(ms.size, node), self.machine_node, 0, BIG)
                    c.targets = dict(zip(ms.tolist(), arcs.tolist(), strict=True))
        return c

    def _touch(self, c: _Class) -> None:
        if not c.full:
            self._dirty.add(c.mask)

    def fits(self, mask: int) -> np.ndarray:
        """Machines satisfying a hard-constraint mask."""
        return np.flatnonzero((self.machine_mask & np.uint32(mask)) == np.uint32(mask))

    # ---------------------------------------------------------------------------------------- jobs and tasks
    def add_tasks(
        self,
        job: int,
        tasks: np.ndarray,
        hard: np.ndarray,
        soft: np.ndarray,
        priority: int,
        arrival: float,
    ) -> None:
        """Tasks of ``job`` enter the graph as waiting tasks (a new job or tasks coming back from preemption)."""
        tasks = np.asarray(tasks, dtype=np.int64)
        if tasks.size == 0:
            return
        self._ensure_tasks(int(tasks.max()) + 1)
        self._ensure_jobs(job + 1)
        net = self.net
        if self.job_node[job] < 0:
            u = net.add_node(0)
            self._roles(np.array([u]), ROLE_JOB, np.array([job]))
            self.job_node[job] = u
            self.job_arc[job] = net.add_arc(u, self.sink, 0, 0)
            self.job_priority[job] = priority
            self.job_arrival[job] = arrival
            self.job_cost[job] = 0
            self.job_lower[job] = 0
            self.jobs.add(job)
        self.task_job[tasks] = job
        self.task_hard[tasks] = hard
        self.task_soft[tasks] = soft
        nodes = net.add_nodes(np.ones(tasks.size, dtype=np.int64))
        self._roles(nodes, ROLE_TASK, tasks)
        self.task_node[tasks] = nodes
        self.job_in_graph[job] += tasks.size
        self._wire(tasks, nodes, job)

    def _wire(self, tasks: np.ndarray, nodes: np.ndarray, job: int) -> None:
        """Arcs of waiting tasks: to U_j, to their class aggregator, and to preferred machines."""
        net = self.net
        n = tasks.size
        tcost = self.cm.task_cost(self, tasks) + self.placement_cost
        heads = [np.full(n, self.job_node[job])]
        costs = [np.zeros(n, dtype=np.int64)]
        tails = [nodes]
        hard = self.task_hard[tasks]
        for q in np.unique(hard).tolist():
            sel = hard == q
            c = self._class(int(q))
            c.waiting += int(sel.sum())
            self._touch(c)
            tails.append(nodes[sel])
            heads.append(np.full(int(sel.sum()), c.node))
            costs.append(tcost[sel])
        pref = self.cm.has_preferences(self, tasks)
        for i in np.flatnonzero(pref).tolist():
            t = int(tasks[i])
            ms = self._preferred(t)
            if ms.size:
                tails.append(np.full(ms.size, nodes[i]))
                heads.append(self.machine_node[ms])
                costs.append(tcost[i] + self.cm.pair_cost(self, np.full(ms.size, t), ms))
        net.add_arcs(np.concatenate(tails), np.concatenate(heads), np.concatenate(costs), 1)

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

    def set_free(self, machines: np.ndarray, free: np.ndarray) -> None:
        """Record the machines' free slots (applied to the graph at the next :meth:`prepare`)."""
        self.machine_free[machines] = free
        self.machine_dirty.update(np.asarray(machines).tolist())

    def fail_machines(self, machines: np.ndarray, failed: bool = True) -> None:
        """Mark machines failed (prohibitive cost on ``M → S``; their slots leave the fair shares' capacity) or
        repaired. Without preemption a failed machine's sink arc follows its free slots (the scheduler holds them
        at 0 while it is down); with preemption its capacity is 0 until it is repaired."""
        machines = np.asarray(machines, dtype=np.int64)
        changed = np.unique(machines[self.machine_failed[machines] != failed])
        self.machine_failed[machines] = failed
        self._count_up(changed, failed)
        self.machine_dirty.update(machines.tolist())
        if self.preemption and machines.size:
            up = np.zeros(machines.size, dtype=np.int64) if failed else self.machine_slots[machines]
            self.net.set_bounds(self.machine_arc[machines], np.zeros(machines.size, dtype=np.int64), up)

    # ---------------------------------------------------------------------------------------- rounds
    def prepare(self, now: float) -> None:
        """Bring costs, bounds and aggregator arcs up to date for a round at ``now``."""
        net = self.net
        # machines
        freed_masks = np.zeros(0, dtype=np.uint32)
        if self.machine_dirty:
            ms = np.fromiter(self.machine_dirty, dtype=np.int64)
            ms.sort()
            self.machine_dirty.clear()
            now_free = self.machine_free[ms] > 0
            freed_masks = np.unique(self.machine_mask[ms[now_free]])
            if not self.preemption:
                # classes connected to machines that filled up or freed: keep their live counts
                flip = now_free != self._was_free[ms]
                for m, f in zip(ms[flip].tolist(), now_free[flip].tolist(), strict=True):
                    qs = self._target_of.get(m)
                    if qs:
                        for q in qs:
                            c = self.classes[q]
                            c.live += 1 if f else -1
                            if not f and c.waiting > 0:
                                self._dirty.add(q)
                self._was_free[ms] = now_free
            cost = self.cm.machine_cost(self, ms) + np.where(self.machine_failed[ms], PROHIBITIVE, 0)
            arcs = self.machine_arc[ms]
            ch = cost != self.machine_cost[ms]
            if ch.any():
                net.set_costs(arcs[ch], cost[ch])
                self.machine_cost[ms[ch]] = cost[ch]
            if not self.preemption:
                up = self.machine_free[ms]
                ch = up != net.uppers(arcs)
                if ch.any():
                    net.set_bounds(arcs[ch], np.zeros(int(ch.sum()), dtype=np.int64), up[ch])
        # jobs: fairness bounds and waiting costs
        if self.jobs:
            jobs = np.fromiter(self.jobs, dtype=np.int64)
            jobs.sort()
            n_in = self.job_in_graph[jobs]
            if self.cm.fair_shares:
                # Quincy's max-min shares of the live slots, under placement constraints and failures: a share is
                # not given to demand that cannot run. A job's demand is its running tasks plus its waiting tasks
                # that some machine up can run; waiting tasks no machine up fits stay in the graph (they can only
                # flow to U_j, the lower bound keeps them there) but take no share, else a job could hold a share
                # it cannot use while another job's runnable tasks wait below theirs, with no later event to
                # change it. Without failed machines every waiting task fits some machine: no extra work then.
                running = self.job_running[jobs]
                capacity = int(self.machine_slots[~self.machine_failed].sum())
                want = n_in if self._class_up is None else n_in - self._unplaceable(jobs)
                if self.preemption:  # running tasks are in the graph (n_in)
                    share = max_min_shares(want, capacity)
                    lower = n_in - share
                else:
                    share = max_min_shares(want + running, capacity)
                    allowed = np.maximum(share - running, 0)
                    lower = np.maximum(n_in - allowed, 0)
            else:
                lower = np.zeros(jobs.size, dtype=np.int64)
            arcs = self.job_arc[jobs]
            ch = (lower != self.job_lower[jobs]) | (n_in != net.uppers(arcs))
            if ch.any():
                net.set_bounds(arcs[ch], lower[ch], n_in[ch])
                self.job_lower[jobs[ch]] = lower[ch]
            cost = self.unscheduled_base + self.cm.max_task_cost() + self.cm.unscheduled(self, jobs, now)
            ch = cost != self.job_cost[jobs]
            if ch.any():
                net.set_costs(arcs[ch], cost[ch])
                self.job_cost[jobs[ch]] = cost[ch]
        self._refresh_classes(freed_masks)

    def _count_up(self, changed: np.ndarray, failed: bool) -> None:
        """Machines ``changed`` failed (or came back): keep, while some machine is failed, the number of machines up
        that fit each class (counted for a class when first needed, see :meth:`_unplaceable`)."""
        if changed.size == 0:
            return
        self._n_failed += int(changed.size) if failed else -int(changed.size)
        if self._n_failed == 0:
            self._class_up = None
        elif self._class_up is None:
            self._class_up = {}
        elif self._class_up:
            qs = np.fromiter(self._class_up, dtype=np.int64, count=len(self._class_up))
            mm = self.machine_mask[changed].astype(np.int64)
            hit = ((qs[:, None] & ~mm[None, :]) == 0).sum(axis=1)
            sign = -1 if failed else 1
            for q, h in zip(qs.tolist(), hit.tolist(), strict=True):
                self._class_up[q] += sign * h

    def _unplaceable(self, jobs: np.ndarray) -> np.ndarray:
        """Waiting tasks of each of ``jobs`` whose hard constraints no machine up satisfies (while some is failed)."""
        up = self._class_up
        assert up is not None
        dead = []
        for q, c in self.classes.items():
            if c.waiting > 0:
                n = up.get(q)
                if n is None:
                    n = up[q] = int((~self.machine_failed[self.fits(q)]).sum())
                if n == 0:
                    dead.append(q)
        if not dead:
            return np.zeros(jobs.size, dtype=np.int64)
        tasks = np.flatnonzero(self.task_node >= 0)
        tasks = tasks[(self.task_machine[tasks] < 0) & np.isin(self.task_hard[tasks], np.array(dead, dtype=np.uint32))]
        per_job = np.bincount(self.task_job[tasks], minlength=self.job_in_graph.size)
        return per_job[jobs]

    def _refresh_classes(self, freed_masks: np.ndarray) -> None:
        """Keep each partial class aggregator connected to enough machines (free ones first).

        Only classes whose waiting tasks or targets changed are revisited; a class that found no further
        machine is *starved* (skipped) until a machine it fits frees up.
        """
        net = self.net
        mark = self._mark
        if self._starved and freed_masks.size:
            st = sorted(self._starved)
            q = np.array(st, dtype=np.uint32)
            wake = ((q[:, None] & ~freed_masks[None, :]) == 0).any(axis=1)
            for mask, w in zip(st, wake.tolist(), strict=True):
                if w:
                    self._starved.discard(mask)
                    self._dirty.add(mask)
        dirty = sorted(self._dirty)
        self._dirty.clear()
        # candidates come from the (usually short) list of free machines, not from all fitting machines
        free_list = None if self.preemption else np.flatnonzero(self._was_free)
        free_masks = None if free_list is None else self.machine_mask[free_list]
        add_t: list[np.ndarray] = []
        add_m: list[np.ndarray] = []
        add_c: list[_Class] = []
        drop: list[int] = []
        for mask in dirty:
            c = self.classes[mask]
            if c.waiting <= 0:
                if c.targets:
                    for m, a in c.targets.items():
                        self._target_of[m].discard(mask)
                        drop.append(a)
                    c.targets.clear()
                    c.live = 0
                self._starved.discard(mask)
                continue
            if mask in self._starved:
                continue
            if self.preemption:  # arcs to busy machines too: a waiting task may displace a running one
                want = self.ec_fanout if self.ec_fanout > 0 else self.machine_mask.size
            else:  # enough free machines for every waiting task, a few spare
                want = c.waiting + 8 if self.ec_fanout <= 0 else min(c.waiting + 8, self.ec_fanout)
            have = c.live
            if have >= want:
                continue
            if not self.preemption and len(c.targets) > 2 * want:
                tm = np.fromiter(c.targets.keys(), dtype=np.int64, count=len(c.targets))
                for m in tm[self._was_free[tm] == 0].tolist():
                    drop.append(c.targets.pop(m))
                    self._target_of[m].discard(mask)
            if free_list is not None:
                q = np.uint32(c.mask)
                ms = free_list[(free_masks & q) == q]
            else:
                if c.fit is None:
                    c.fit = self.fits(c.mask)
                ms = c.fit
            if c.targets:
                if ms.size <= 64:  # few candidates (a busy cluster): look each up
                    targeted = c.targets
                    ms = np.array([m for m in ms.tolist() if m not in targeted], dtype=np.int64)
                else:
                    tm = np.fromiter(c.targets.keys(), dtype=np.int64, count=len(c.targets))
                    mark[tm] = True
                    ms = ms[~mark[ms]]
                    mark[tm] = False
            if ms.size == 0:
                self._starved.add(mask)
                continue
            k = want - have
            if ms.size > k:
                # random among the candidates (classes then rarely crowd the same machines)
                ms = np.sort(ms[np.argsort(self.rng.random(ms.size), kind="stable")[:k]])
            add_t.append(np.full(ms.size, c.node))
            add_m.append(ms)
            add_c.append(c)
        if drop:
            net.remove_arcs(np.array(drop, dtype=np.int64))
        if add_t:
            ms_all = np.concatenate(add_m)
            arcs = net.add_arcs(np.concatenate(add_t), self.machine_node[ms_all], 0, BIG)
            pos = 0
            for c, ms in zip(add_c, add_m, strict=True):
                c.targets.update(zip(ms.tolist(), arcs[pos : pos + ms.size].tolist(), strict=True))
                for m in ms.tolist():
                    self._target_of.setdefault(m, set()).add(c.mask)
                c.live += ms.size if self.preemption else int(self._was_free[ms].sum())
                pos += ms.size

    def unserved(self) -> bool:
        """Some class has waiting tasks and may still reach free machines (worth another round now)."""
        return any(self.classes[q].waiting > 0 and q not in self._starved for q in self._dirty)

    def solve(self, solver: Solver) -> SolveResult:
        """Run ``solver`` on the graph's network: the min-cost flow whose task arcs are this round's placements."""
        return solver.solve(self.net)

    def task_nodes(self) -> np.ndarray:
        """Tasks currently in the graph (sorted)."""
        return np.flatnonzero(self.task_node >= 0)

    def placements(self) -> tuple[np.ndarray, np.ndarray]:
        """(tasks, machines) placed by the current flow, aggregator flows decomposed into unit paths.

        Any decomposition is valid: every machine an aggregator reaches satisfies all its tasks' hard
        constraints. The arcs of each task's path are kept for :meth:`commit`.
        """
        net = self.net
        flow = net.flows(self.machine_arc)
        roots = self.machine_node[flow > 0]
        n = int(flow.sum())
        self._paths = {}
        if n == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        cap = net.node_capacity
        if self._cursor.size < cap:
            self._cursor = np.full(cap, -2, dtype=np.int64)
            self._touched = np.zeros(cap, dtype=np.int64)
        if self._used.size < net.arc_capacity:
            self._used = np.zeros(net.arc_capacity, dtype=np.int64)
        if self.node_role.size < cap:
            self._roles(np.zeros(0, dtype=np.int64), ROLE_SINK, np.zeros(0, dtype=np.int64))
        out_task = np.empty(n, dtype=np.int64)
        out_root = np.empty(n, dtype=np.int64)
        out_arcs = np.empty((n, 4), dtype=np.int64)
        rows = K.k_decompose(
            net.N,
            net.A,
            net.H,
            roots,
            self.node_role,
            ROLE_TASK,
            self._cursor,
            self._used,
            self._touched,
            out_task,
            out_root,
            out_arcs,
        )
        tasks = self.node_ref[out_task[:rows]]
        machines = self.node_ref[out_root[:rows]]
        arcs = out_arcs[:rows]
        self._paths = {t: [a for a in row if a >= 0] for t, row in zip(tasks.tolist(), arcs.tolist(), strict=True)}
        return tasks, machines

    def assignment(self, tasks: np.ndarray) -> np.ndarray:
        """Machine of each given task in the current flow (−1 = unscheduled)."""
        tasks = np.asarray(tasks, dtype=np.int64)
        placed, machines = self.placements()
        out = np.full(tasks.size, -1, dtype=np.int64)
        if placed.size:
            lookup = dict(zip(placed.tolist(), machines.tolist(), strict=True))
            out[:] = [lookup.get(t, -1) for t in tasks.tolist()]
        return out

    def commit(self, tasks: np.ndarray, machines: np.ndarray) -> None:
        """No preemption: placed tasks leave the graph and take a slot of their machine (no imbalance left).

        The unit of each task is taken back along the exact path of :meth:`placements` (task → aggregator →
        machine → sink), then the node is removed and the machine's capacity lowered by one.
        """
        tasks = np.asarray(tasks, dtype=np.int64)
        if tasks.size == 0:
            return
        path_arcs: list[int] = []
        for t, m in zip(tasks.tolist(), machines.tolist(), strict=True):
            path_arcs.extend(self._paths[t])
            path_arcs.append(int(self.machine_arc[m]))
            self.job_in_graph[int(self.task_job[t])] -= 1
            self.job_running[int(self.task_job[t])] += 1
            c = self.classes[int(self.task_hard[t])]
            c.waiting -= 1
            self._touch(c)
        pa = np.array(path_arcs, dtype=np.int64)
        self.net.add_flow(pa, np.full(pa.size, -1, dtype=np.int64))
        self.net.remove_nodes(self.task_node[tasks], unwind=False)
        self.task_node[tasks] = -1
        ms, cnt = np.unique(machines, return_counts=True)
        self.machine_free[ms] -= cnt
        arcs = self.machine_arc[ms]
        self.net.set_bounds(arcs, np.zeros(ms.size, dtype=np.int64), self.machine_free[ms])
        self.machine_dirty.update(ms.tolist())

    def finished_outside(self, tasks: np.ndarray, machines: np.ndarray) -> None:
        """No preemption: running tasks (not in the graph) finished; their slots are free again."""
        ms, cnt = np.unique(np.asarray(machines, dtype=np.int64), return_counts=True)
        self.machine_free[ms] += cnt
        self.machine_dirty.update(ms.tolist())
        for t in np.asarray(tasks, dtype=np.int64).tolist():
            j = int(self.task_job[t])
            self.job_running[j] -= 1
        self._drop_empty_jobs(np.unique(self.task_job[np.asarray(tasks, dtype=np.int64)]))

    def _drop_empty_jobs(self, jobs: np.ndarray) -> None:
        for j in jobs.tolist():
            if j in self.jobs and self.job_in_graph[j] == 0 and self.job_running[j] == 0:
                self.net.remove_nodes([int(self.job_node[j])])
                self.job_node[j] = -1
                self.job_arc[j] = -1
                self.jobs.discard(j)

    # ---------------------------------------------------------------------------------------- preemption mode
    def start_running(self, tasks: np.ndarray, machines: np.ndarray) -> None:
        """Preemption: placed tasks stay in the graph, tied to their machine by a cheaper continuation arc."""
        tasks = np.asarray(tasks, dtype=np.int64)
        if tasks.size == 0:
            return
        tcost = self.cm.task_cost(self, tasks) + self.placement_cost
        pc = self.cm.pair_cost(self, tasks, machines)
        nodes = self.task_node[tasks]
        for t in tasks.tolist():
            j = int(self.task_job[t])
            self.job_running[j] += 1
            c = self.classes[int(self.task_hard[t])]
            c.waiting -= 1
            self._touch(c)
        arcs = self.net.add_arcs(nodes, self.machine_node[machines], tcost + pc - self.continuation_bonus, 1)
        self.task_direct[tasks] = arcs
        self.task_machine[tasks] = machines
        if not self.migration:
            # a running task may only stay or go back to waiting: drop its aggregator and preference arcs
            self._rewire_running(tasks)

    def _rewire_running(self, tasks: np.ndarray) -> None:
        net = self.net
        for t in tasks.tolist():
            node = int(self.task_node[t])
            keep = {int(self.task_direct[t])}
            drop = []
            h = int(net.N[4, node])  # first half-arc
            while h >= 0:
                if h & 1 == 0:
                    a = h >> 1
                    head = int(net.H[0, h])
                    if a not in keep and self.node_role[head] != ROLE_JOB:
                        drop.append(a)
                h = int(net.H[1, h])
            if drop:
                net.remove_arcs(np.array(drop, dtype=np.int64))

    def stop_running(self, tasks: np.ndarray, back_to_waiting: bool) -> None:
        """Preemption: tasks stopped running (killed → waiting again, or finished → leave the graph)."""
        tasks = np.asarray(tasks, dtype=np.int64)
        if tasks.size == 0:
            return
        direct = self.task_direct[tasks]
        for t in tasks.tolist():
            self.job_running[int(self.task_job[t])] -= 1
        self.task_machine[tasks] = -1
        self.task_direct[tasks] = -1
        if back_to_waiting:
            live = direct[direct >= 0]
            if live.size:
                self.net.remove_arcs(live)
            for t in tasks.tolist():
                c = self.classes[int(self.task_hard[t])]
                c.waiting += 1
                self._touch(c)
            if not self.migration:
                for t in tasks.tolist():
                    node = int(self.task_node[t])
                    j = int(self.task_job[t])
                    self.net.remove_nodes([node])
                    self.job_in_graph[j] -= 1
                    self.classes[int(self.task_hard[t])].waiting -= 1
                    self.task_node[t] = -1
                    self.add_tasks(
                        j,
                        np.array([t]),
                        self.task_hard[[t]],
                        self.task_soft[[t]],
                        int(self.job_priority[j]),
                        float(self.job_arrival[j]),
                    )
        else:
            nodes = self.task_node[tasks]
            for t in tasks.tolist():
                self.job_in_graph[int(self.task_job[t])] -= 1
            self.net.remove_nodes(nodes, unwind=True)
            self.task_node[tasks] = -1
            self._drop_empty_jobs(np.unique(self.task_job[tasks]))
