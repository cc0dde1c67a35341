"""The flow scheduler component: rounds of min-cost flow placement over a slot datacenter.

Sirius's loop (paper §3.2, Table 3) waits for state changes (task submissions, machine failures...), updates
the graph and solves it incrementally; changes that arrive while a round runs wait for the next one. The paper
gives no cadence, so it is an option: a round runs once something changed, at most one per ``interval``
simulated seconds, and takes every arrival and completion since the last round in one batch (``interval`` 0: a
round per event, the behaviour and per-task results of the reference implementation). A round brings the
scheduling graph up to date, solves it (incremental solver by default) and launches the tasks the flow places.
With ``interval`` > 0 and no preemption the graph is :class:`~megha.schedulers.flow.compiled.CompiledGraph`
(bookkeeping in compiled kernels, interchangeable tasks grouped); within a round it solves again at once while
aggregators reach only part of the free machines and the last pass placed tasks. Otherwise it is the reference
:class:`~megha.schedulers.flow.graph.SchedulingGraph`. Without preemption a placed task leaves the graph and
takes a slot; with preemption running tasks stay in the graph and a task whose flow leaves its machine is
killed (and re-placed — possibly elsewhere, a migration — once the kill is confirmed).

The measured wall time of each round is kept for metrics and counters only; the decisions take effect at the
round's simulated time, or after a *modelled* deterministic round cost (``round_cost`` +
``round_cost_per_node`` × graph nodes) when one is configured, so results stay deterministic.

Two queue-based baselines share the loop (``policy``): ``random`` places waiting tasks FIFO on a random free
machine satisfying their constraints (the paper's Random), ``greedy`` places them one at a time, in the cost
model's order (priority, then arrival), on the cheapest free machine (a Swarm/Kubernetes-like scheduler).
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from megha.errors import SimulationError
from megha.metrics.recorder import TaskRecorder
from megha.model.topology import Datacenter
from megha.schedulers.common.ledger import FREE, WorkerLedger
from megha.schedulers.common.messages import Finished, JobArrival, Kill, Killed, Launch, LaunchFailed
from megha.schedulers.flow import _graph_kernels as GK
from megha.schedulers.flow import _kernels as K
from megha.schedulers.flow.compiled import CompiledGraph
from megha.schedulers.flow.costs import CostModel
from megha.schedulers.flow.graph import SchedulingGraph
from megha.schedulers.flow.solvers import IncrementalSolver, Solver, solve_ortools
from megha.sim.component import Component

WAITING, RUNNING, DONE, KILLING = 1, 2, 3, 4
_EMPTY = np.zeros(0, dtype=np.int64)
_SOLVE_STATS = np.array([K.M_SEARCHES, K.M_SCANS, K.M_SETTLED])
"""The solver's cumulative counters in a network's ``M`` that a round reports (searches, arc scans, settled)."""


@dataclass
class Machines:
    """Workers grouped into machines: ``K`` consecutive workers with the same constraint mask form one."""

    mask: np.ndarray  # uint32 per machine
    slots: np.ndarray  # int64 per machine
    block: np.ndarray  # physical machine (worker // K) of each machine node
    of_worker: np.ndarray  # machine of each worker
    ptr: np.ndarray  # CSR: workers of machine m are workers[ptr[m]:ptr[m+1]]
    workers: np.ndarray

    @classmethod
    def build(cls, dc: Datacenter, slots_per_machine: int) -> Machines:
        """Group the datacenter's workers into machines: ``slots_per_machine`` consecutive workers, split by
        constraint mask."""
        n = dc.n_workers
        k = max(1, int(slots_per_machine))
        block = np.arange(n, dtype=np.int64) // k
        key = block * (1 << 32) + dc.worker_masks.astype(np.int64)
        uniq, inv = np.unique(key, return_inverse=True)
        inv = inv.ravel().astype(np.int64)
        order = np.argsort(inv, kind="stable")
        counts = np.bincount(inv, minlength=uniq.size)
        ptr = np.zeros(uniq.size + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        return cls(
            mask=(uniq & 0xFFFFFFFF).astype(np.uint32),
            slots=counts.astype(np.int64),
            block=(uniq >> 32).astype(np.int64),
            of_worker=inv,
            ptr=ptr,
            workers=order.astype(np.int64),
        )

    @property
    def n(self) -> int:
        """Number of machines (machine nodes of the graph)."""
        return int(self.mask.size)


@dataclass
class FlowSettings:
    """Behaviour of :class:`FlowScheduler` (built from the registered options)."""

    policy: str = "flow"
    min_interval: float = 0.0  # the scheduling interval (rounds at least this far apart)
    period: float = 0.0
    preemption: bool = False
    round_cost: float = 0.0
    round_cost_per_node: float = 0.0
    soft_mask: int = 0
    soft_speedup: float = 1.0
    verify: bool = False


class FlowScheduler(Component):
    """Sirius-style central scheduler (see the module docstring)."""

    kind = "scheduler"

    def __init__(
        self,
        address: str,
        pool: str,
        recorder: TaskRecorder,
        machines: Machines,
        graph: SchedulingGraph | CompiledGraph | None,
        cost_model: CostModel,
        solver: Solver | None,
        settings: FlowSettings,
        n_tasks: int = 0,
        capacity: np.ndarray | None = None,
    ) -> None:
        super().__init__(address)
        self.pool = pool
        self.rec = recorder
        self.m = machines
        self.g = graph
        self.cm = cost_model
        self.solver = solver if solver is not None else IncrementalSolver()
        self.s = settings
        n_workers = int(machines.of_worker.size)
        self.free = machines.slots.copy()  # actual free slots per machine (resource mode: free units)
        # resource mode: one machine per worker; a machine's flow capacity is the number of the largest task
        # seen so far (per resource) that its free resources hold — conservative, so never an over-commit
        self.capacity = capacity
        # resource mode: the workers' free resources on the shared worker ledger (track_free: capacity minus the
        # running tasks' requests, subtracted in launch order); machine m is worker m there (one worker per machine)
        # slot mode: what each worker runs on the shared worker ledger (slot_array: the task per worker, FREE = -1);
        # a flow machine is a group of workers (Machines.ptr/workers), so it holds one ledger row per slot
        if capacity is None:
            self.ledger = WorkerLedger(address, n_workers, slot_array=True)
        else:
            self.ledger = WorkerLedger(address, n_workers, capacity, track_free=True)
        self.res_free = None if capacity is None else self.ledger.free
        self.dmax = None if capacity is None else np.zeros(self.res_free.shape[1])
        self.demand = None if capacity is None else np.zeros((n_tasks, self.res_free.shape[1]))
        self.state = np.zeros(n_tasks, dtype=np.int8)
        self.duration = np.zeros(n_tasks)
        self.mask = np.zeros(n_tasks, dtype=np.uint32)
        self.job = np.zeros(n_tasks, dtype=np.int64)
        self.machine = np.full(n_tasks, -1, dtype=np.int64)
        self.soft = np.zeros(n_tasks, dtype=np.uint32)
        self.queue = np.zeros(0, dtype=np.int64)  # waiting tasks in arrival order (queue policies)
        self.job_priority = np.zeros(16, dtype=np.int64)
        self.job_arrival = np.zeros(16)
        self._round_timer: int | None = None
        self._tick: int | None = None
        self._busy_until = 0.0
        self._last_round = -np.inf
        self.round_wall: list[float] = []
        self.round_solve: list[float] = []  # solver seconds per round (all its passes)
        self.round_tasks: list[int] = []
        self.round_sim_cost: list[float] = []
        self.compiled = isinstance(graph, CompiledGraph)
        # compiled rounds with the incremental solver and no verification solve through its quick path
        self._quick = self.compiled and isinstance(self.solver, IncrementalSolver) and not settings.verify
        self.down: np.ndarray | None = None  # machines down (worker faults, faults.py); None until the first fault
        self._fin_tasks: list = []  # compiled graph: completions since the last round (applied by the round)
        self._fin_workers: list = []
        self.counts = {
            "rounds": 0,
            "passes": 0,
            "preemptions": 0,
            "searches": 0,
            "arc_scans": 0,
            "settled": 0,
            "max_nodes": 0,
            "max_arcs": 0,
            "launched": 0,
        }
        # the queue policies read costs through a view with the graph's columns
        self._view = graph if graph is not None else _QueueView(machines, self)

    # ---------------------------------------------------------------------------------------- bookkeeping
    def _ensure(self, hi: int) -> None:
        if hi > self.state.size:
            n = max(hi, 2 * self.state.size)
            for name, fill in (("state", 0), ("duration", 0.0), ("mask", 0), ("job", 0), ("machine", -1), ("soft", 0)):
                a = getattr(self, name)
                b = np.full(n, fill, dtype=a.dtype)
                b[: a.size] = a
                setattr(self, name, b)
            if self.demand is not None:
                d = np.zeros((n, self.demand.shape[1]))
                d[: self.demand.shape[0]] = self.demand
                self.demand = d

    def _units(self, ms: np.ndarray, res: np.ndarray | None = None) -> np.ndarray:
        """Resource mode: how many of the largest tasks seen so far fit the machines' free resources."""
        r = self.res_free[ms] if res is None else res
        pos = self.dmax > 0
        if not pos.any():
            return np.full(ms.size, 1 << 20, dtype=np.int64)
        u = np.floor((r[:, pos] + 1e-9) / self.dmax[pos]).min(axis=1)
        return np.clip(u, 0, 1 << 20).astype(np.int64)

    def _sync_units(self, ms: np.ndarray) -> None:
        """Resource mode: refresh the machines' free units (and tell the graph)."""
        ms = np.unique(ms)
        self.free[ms] = self._units(ms)
        if self.down is not None:
            self.free[ms[self.down[ms]]] = 0
        if self.g is not None:
            self.g.set_free(ms, self.free[ms])

    def _free_slots(self, workers: np.ndarray) -> None:
        """Slot mode: the workers' slots on the ledger are free again (resource mode releases demands instead)."""
        if self.res_free is None:
            self.ledger.release(workers)

    def _request_round(self, now: float) -> None:
        if self._round_timer is not None:
            return
        at = max(now, self._busy_until, self._last_round + self.s.min_interval)
        self._round_timer = self.port.set_timer(at - now, "round")

    # ---------------------------------------------------------------------------------------- messages
    def on_message(self, msg: Any, now: float) -> None:
        if type(msg) is Finished:  # the most frequent message first
            self._finished(msg, now)
        elif isinstance(msg, JobArrival):
            self._arrival(msg, now)
        elif isinstance(msg, Finished):
            self._finished(msg, now)
        elif isinstance(msg, Killed):
            self._killed(msg, now)
        elif isinstance(msg, LaunchFailed):
            self._requeue(np.asarray(msg.tasks, dtype=np.int64), np.asarray(msg.workers, dtype=np.int64), now)
        else:
            super().on_message(msg, now)

    def _arrival(self, msg: JobArrival, now: float) -> None:
        tasks = msg.tasks
        if tasks.size == 0:
            return
        self._ensure(int(tasks.max()) + 1)
        self.state[tasks] = WAITING
        self.duration[tasks] = msg.durations
        self.mask[tasks] = msg.masks
        self.job[tasks] = msg.job
        if msg.job >= self.job_priority.size:
            n = max(msg.job + 1, 2 * self.job_priority.size)
            self.job_priority = np.concatenate([self.job_priority, np.zeros(n - self.job_priority.size, np.int64)])
            self.job_arrival = np.concatenate([self.job_arrival, np.zeros(n - self.job_arrival.size)])
        self.job_priority[msg.job] = int(msg.priority)
        self.job_arrival[msg.job] = now
        soft_bits = np.uint32(self.s.soft_mask)
        self.soft[tasks] = msg.masks & soft_bits
        if self.res_free is not None:
            if msg.demands is None:
                raise SimulationError(f"{self.address}: resource mode needs task demands (job {msg.job})")
            d = np.asarray(msg.demands, dtype=np.float64).reshape(tasks.size, -1)
            self.demand[tasks] = d
            top = np.maximum(self.dmax, d.max(axis=0))
            if (top > self.dmax).any():
                self.dmax = top
                all_m = np.arange(self.m.n)
                if self.g is not None:
                    self.g.machine_slots[:] = self._units(all_m, np.asarray(self.capacity, dtype=np.float64))
                self._sync_units(all_m)
        if self.g is not None:
            self.g.add_tasks(msg.job, tasks, msg.masks & ~soft_bits, msg.masks & soft_bits, int(msg.priority), now)
        else:
            self.queue = np.concatenate([self.queue, tasks])
        self._request_round(now)

    def _finished(self, msg: Finished, now: float) -> None:
        tasks, workers = msg.tasks, msg.workers
        self.rec.completion_known(tasks, now)
        if self.compiled:  # batched: the next round applies every completion since the last one
            if isinstance(tasks, list):
                self._fin_tasks.extend(tasks)
                self._fin_workers.extend(workers)
            else:
                self._fin_tasks.extend(tasks.tolist())
                self._fin_workers.extend(workers.tolist())
            if self._round_timer is None:
                self._request_round(now)
            return
        self.state[tasks] = DONE
        self._free_slots(workers)
        ms = self.m.of_worker[workers]
        np.add.at(self.free, ms, 1)
        self.machine[tasks] = -1
        if self.g is not None:
            if self.s.preemption:
                self.g.stop_running(tasks, back_to_waiting=False)
                u = np.unique(ms)
                self.g.set_free(u, self.free[u])
            else:
                self.g.finished_outside(tasks, ms)
        if self.res_free is not None:
            self.ledger.release(ms, self.demand[tasks])
            self._sync_units(ms)
        elif self.down is not None:
            self._hold_down(ms)
        self._request_round(now)

    def _killed(self, msg: Killed, now: float) -> None:
        tasks, workers = msg.tasks, msg.workers
        if tasks.size:
            self._free_slots(workers)
            ms = self.m.of_worker[workers]
            np.add.at(self.free, ms, 1)
            self.state[tasks] = WAITING
            self.machine[tasks] = -1
            self.counts["preemptions"] += int(tasks.size)
            if self.g is not None:
                self.g.stop_running(tasks, back_to_waiting=True)
                u = np.unique(ms)
                self.g.set_free(u, self.free[u])
            else:
                self.queue = np.concatenate([tasks, self.queue])
            if self.res_free is not None:
                self.ledger.release(ms, self.demand[tasks])
                self._sync_units(ms)
            elif self.down is not None:
                self._hold_down(ms)
        self._request_round(now)

    # ---------------------------------------------------------------------------------------- rounds
    def on_timer(self, key: Hashable, now: float) -> None:
        if key == "round":
            self._round_timer = None
            self._round(now)
        elif key == "tick":
            self._tick = None
            self._request_round(now)
        elif isinstance(key, tuple) and key[0] == "apply":
            self._send(key[1], key[2], key[3])
        else:
            super().on_timer(key, now)

    def _round(self, now: float) -> None:
        self._last_round = now
        t0 = time.perf_counter()
        kills = _EMPTY
        if self.compiled:
            self._apply_finished()
            tasks, machines, solve_s, size = self._compiled_round(now)
        elif self.g is not None:
            tasks, machines, kills, size, solve_s = self._flow_round(now)
        else:
            tasks, machines = self._queue_round()
            size = int(self.queue.size)
            solve_s = 0.0
        self.round_wall.append(time.perf_counter() - t0)
        self.round_solve.append(solve_s)
        self.round_tasks.append(int(tasks.size))
        self.counts["rounds"] += 1
        if self.compiled and self.res_free is None:
            workers = self._start_tasks(tasks, machines)
        else:
            workers = self._take_workers(tasks, machines, now)
            self.state[tasks] = RUNNING
            self.machine[tasks] = machines
        self.rec.decided(tasks, now)
        self.counts["launched"] += int(tasks.size)
        if self.g is not None and self.s.preemption and tasks.size:
            self.g.start_running(tasks, machines)
            u = np.unique(machines)
            self.g.set_free(u, self.free[u])
        if kills.size:
            self.state[kills] = KILLING
        if tasks.size and self.g is not None and not self.s.preemption and not self.compiled and self.g.unserved():
            self._request_round(now)  # aggregators reach only part of the free machines: go on while it helps
        elif self.s.period > 0 and self._tick is None and self._has_waiting():
            self._tick = self.port.set_timer(self.s.period, "tick")  # time-dependent costs: look again later
        cost = self.s.round_cost + self.s.round_cost_per_node * size
        self.round_sim_cost.append(cost)
        if cost > 0:
            if tasks.size:
                self.rec.add_proc(tasks, cost)
            self._busy_until = now + cost
            self.port.set_timer(cost, ("apply", tasks, workers, kills))
        else:
            self._send(tasks, workers, kills)

    def _apply_finished(self) -> None:
        """Compiled graph: the completions since the last round, in one batch."""
        if not self._fin_tasks:
            return
        tasks = np.array(self._fin_tasks, dtype=np.int64)
        workers = np.array(self._fin_workers, dtype=np.int64)
        self._fin_tasks = []
        self._fin_workers = []
        g = self.g
        if self.res_free is None:  # slot mode: the scheduler's and the graph's bookkeeping in one call
            ms = np.empty(workers.size, dtype=np.int64)
            net = g.net
            GK.k_finished_graph(
                tasks, workers, self.state, self.machine, DONE, self.ledger.task, self.m.of_worker, self.free, ms,
                net.N, net.A, net.H, net.M, net.FN, net.FA, net.DN, g.JT, g.GM, g.MT, g.task_job,
            )  # fmt: skip
            if self.down is not None:
                self._hold_down(ms)
            return
        self.state[tasks] = DONE
        self.machine[tasks] = -1
        ms = self.m.of_worker[workers]
        np.add.at(self.free, ms, 1)
        g.finished_outside(tasks, ms)
        self.ledger.release(ms, self.demand[tasks])
        self._sync_units(ms)

    def _compiled_round(self, now: float) -> tuple[np.ndarray, np.ndarray, float, int]:
        """Passes of solve and commit at one instant while they place tasks and classes may reach more."""
        g = self.g
        g.prepare(now)
        if self._quick:
            return self._quick_passes(g)
        solve_s = 0.0
        ts: list[np.ndarray] = []
        ms: list[np.ndarray] = []
        while True:
            res = g.solve(self.solver)
            if not res.optimal:
                raise SimulationError(f"{self.address}: the scheduling graph has no feasible flow ({res.status})")
            solve_s += res.seconds
            self.counts["passes"] += 1
            self.counts["searches"] += int(res.stats.get("searches", 0))
            self.counts["arc_scans"] += int(res.stats.get("arc_scans", 0))
            self.counts["settled"] += int(res.stats.get("settled", 0))
            if self.s.verify:
                self._verify(res, now)
            t, m, again = g.place_pass()
            if t.size:
                ts.append(t)
                ms.append(m)
            if not again:
                break
        return self._round_end(g, ts, ms, solve_s)

    def _quick_passes(self, g: CompiledGraph) -> tuple[np.ndarray, np.ndarray, float, int]:
        """The passes of :meth:`_compiled_round` with the incremental solver and no verification: the same solves
        and placements, the solver's counters read once per round from the network (``K.M_*``)."""
        M = g.net.M
        before = M[_SOLVE_STATS].tolist()
        solve = self.solver.solve_quick
        net = g.net
        place_pass = g.place_pass
        solve_s = 0.0
        passes = 0
        ts: list[np.ndarray] = []
        ms: list[np.ndarray] = []
        solver = self.solver
        assert isinstance(solver, IncrementalSolver)
        while True:
            bulk = solver.bulk_solves
            sec = solve(net)
            if sec < 0:
                raise SimulationError(f"{self.address}: the scheduling graph has no feasible flow (infeasible)")
            if solver.bulk_solves != bulk:  # flow written outside the kernels: the placement reads every machine
                net.forget_flow_log()
            solve_s += sec
            passes += 1
            t, m, again = place_pass()
            if t.size:
                ts.append(t)
                ms.append(m)
            if not again:
                break
        counts = self.counts
        counts["passes"] += passes
        after = M[_SOLVE_STATS].tolist()
        counts["searches"] += after[0] - before[0]
        counts["arc_scans"] += after[1] - before[1]
        counts["settled"] += after[2] - before[2]
        return self._round_end(g, ts, ms, solve_s)

    def _round_end(
        self, g: CompiledGraph, ts: list[np.ndarray], ms: list[np.ndarray], solve_s: float
    ) -> tuple[np.ndarray, np.ndarray, float, int]:
        """A compiled round's placements in one pair of arrays, and the graph's size counters."""
        net = g.net
        counts = self.counts
        nn = net.n_nodes
        na = net.n_arcs
        if nn > counts["max_nodes"]:
            counts["max_nodes"] = nn
        if na > counts["max_arcs"]:
            counts["max_arcs"] = na
        if not ts:
            return _EMPTY, _EMPTY, solve_s, nn
        if len(ts) == 1:
            return ts[0], ms[0], solve_s, nn
        return np.concatenate(ts), np.concatenate(ms), solve_s, nn

    def _verify(self, res, now: float) -> None:
        status, cost, _ = solve_ortools(self.g.net.export())
        if status != "optimal" or cost != res.cost:
            raise SimulationError(f"{self.address}: round at t={now}: solver cost {res.cost} != OR-Tools {cost}")

    def _has_waiting(self) -> bool:
        if self.compiled:
            return self.g.waiting_total > 0
        if self.g is not None:
            return any(c.waiting > 0 for c in self.g.classes.values())
        return bool(self.queue.size)

    def _send(self, tasks: np.ndarray, workers: np.ndarray, kills: np.ndarray) -> None:
        if tasks.size:
            durations = self.duration[tasks]
            if self.s.soft_speedup != 1.0 and self.s.soft_mask:
                soft = self.mask[tasks] & np.uint32(self.s.soft_mask)
                wm = self.m.mask[self.m.of_worker[workers]]
                fast = (soft != 0) & ((wm & soft) == soft)
                durations = np.where(fast, durations / self.s.soft_speedup, durations)
            demands = None if self.demand is None else self.demand[tasks]
            if self.compiled:  # as lists: the pool keeps them and answers each completion with lists (no arrays)
                self.port.send(
                    self.pool, Launch(tasks.tolist(), workers.tolist(), durations.tolist(), self.address, demands)
                )
            else:
                self.port.send(self.pool, Launch(tasks, workers, durations, self.address, demands))
        if kills.size:
            self.port.send(self.pool, Kill(kills, self.address))

    def _take_workers(self, tasks: np.ndarray, machines: np.ndarray, now: float) -> np.ndarray:
        """One free worker of each task's machine (lowest index first), its slot claimed on the worker ledger."""
        workers = np.empty(tasks.size, dtype=np.int64)
        m = self.m
        if self.down is not None and self.down[machines].any():
            raise SimulationError(f"{self.address}: a task was placed on a machine that is down")
        if self.res_free is not None:  # one worker per machine; resources, not slots
            workers[:] = m.workers[m.ptr[machines]]
            if machines.size:
                self.ledger.claim(tasks, workers, now, self.demand[tasks])  # raises the ledger's over-commit error
                self._sync_units(machines)
            return workers
        ms = np.asarray(machines, dtype=np.int64)
        bad = GK.k_take_workers(ms, np.asarray(tasks, dtype=np.int64), m.ptr, m.workers, self.ledger.task, workers)
        if bad >= 0:
            raise SimulationError(
                f"{self.address}: machine {int(machines[bad])} has no free slot for task {int(tasks[bad])}"
            )
        if machines.size:
            np.subtract.at(self.free, machines, 1)
        return workers

    def _start_tasks(self, tasks: np.ndarray, machines: np.ndarray) -> np.ndarray:
        """Compiled graph, slot mode: :meth:`_take_workers`, and the tasks run on their machines, in one call."""
        if self.down is not None and self.down[machines].any():
            raise SimulationError(f"{self.address}: a task was placed on a machine that is down")
        workers = np.empty(tasks.size, dtype=np.int64)
        m = self.m
        bad = GK.k_start_tasks(
            machines, tasks, m.ptr, m.workers, self.ledger.task, workers, self.free, self.state, self.machine, RUNNING
        )
        if bad >= 0:
            raise SimulationError(
                f"{self.address}: machine {int(machines[bad])} has no free slot for task {int(tasks[bad])}"
            )
        return workers

    def _flow_round(self, now: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, float]:
        g = self.g
        g.prepare(now)
        res = g.solve(self.solver)
        if not res.optimal:
            raise SimulationError(f"{self.address}: the scheduling graph has no feasible flow ({res.status})")
        self.counts["searches"] += int(res.stats.get("searches", 0))
        self.counts["arc_scans"] += int(res.stats.get("arc_scans", 0))
        self.counts["settled"] += int(res.stats.get("settled", 0))
        self.counts["max_nodes"] = max(self.counts["max_nodes"], g.net.n_nodes)
        self.counts["max_arcs"] = max(self.counts["max_arcs"], g.net.n_arcs)
        if self.s.verify:
            self._verify(res, now)
        placed, where = g.placements()
        st = self.state[placed]
        new = st == WAITING
        tasks = placed[new]
        machines = where[new]
        kills = np.zeros(0, dtype=np.int64)
        if self.s.preemption:
            # running tasks whose unit left their machine: preempt (they are re-placed after the kill)
            running = np.flatnonzero(self.state[: self.machine.size] == RUNNING)
            stay = np.zeros(self.state.size, dtype=bool)
            keep = (st == RUNNING) & (where == self.machine[placed])
            stay[placed[keep]] = True
            kills = running[~stay[running]]
            # launch only where a slot is really free now (kills in flight free theirs later)
            if tasks.size:
                ok = np.zeros(tasks.size, dtype=bool)
                left = self.free.copy()
                for i, mach in enumerate(machines.tolist()):
                    if left[mach] > 0:
                        left[mach] -= 1
                        ok[i] = True
                tasks, machines = tasks[ok], machines[ok]
        else:
            g.commit(tasks, machines)
        return tasks, machines, kills, g.net.n_nodes, res.seconds

    def _queue_round(self) -> tuple[np.ndarray, np.ndarray]:
        """Random / greedy queue scheduling of the waiting tasks onto free machines."""
        empty = np.zeros(0, dtype=np.int64)
        if self.queue.size == 0 or self.free.sum() <= 0:
            return empty, empty
        order = self.queue
        greedy = self.s.policy == "greedy"
        if greedy:
            order = order[np.argsort(self.cm.rank(self._view, order), kind="stable")]
        hard_bits = np.uint32(~np.uint32(self.s.soft_mask))
        hard = self.mask[order] & hard_bits
        fl = np.flatnonzero(self.free > 0)
        fm = self.m.mask[fl]
        uq, inv = np.unique(hard, return_inverse=True)
        fits_some = ((uq[:, None] & ~fm[None, :]) == 0).any(axis=1)
        order = order[fits_some[inv.ravel()]]
        free = self.free.copy()
        cands: dict[int, np.ndarray] = {}
        placed_t: list[int] = []
        placed_m: list[int] = []
        left = int(free.sum())
        rng = self.port.rng
        for t in order.tolist():
            if left <= 0:
                break
            q = int(self.mask[t] & hard_bits)
            c = cands.get(q)
            if c is None:
                c = fl[(fm & np.uint32(q)) == np.uint32(q)]
            c = c[free[c] > 0]
            cands[q] = c
            if c.size == 0:
                continue
            if greedy:
                cost = self.cm.pair_cost(self._view, np.full(c.size, t), c) + self.cm.machine_cost(self._view, c)
                best = np.flatnonzero(cost == cost.min())
                m = int(c[best[int(rng.integers(best.size))]])
            else:
                m = int(c[int(rng.integers(c.size))])
            free[m] -= 1
            left -= 1
            placed_t.append(t)
            placed_m.append(m)
        tasks = np.array(placed_t, dtype=np.int64)
        if tasks.size:
            self.queue = self.queue[~np.isin(self.queue, tasks)]
        return tasks, np.array(placed_m, dtype=np.int64)

    # ---------------------------------------------------------------------------------------- faults
    def fail_machines(self, machines: np.ndarray, tasks: np.ndarray, workers: np.ndarray, now: float) -> None:
        """Machines died at ``now`` (:mod:`.faults`): ``tasks`` ran on their ``workers`` and were lost. The machines
        leave the graph (no free slot, no flow to the sink, prohibitive cost, out of the fair shares' capacity)
        until :meth:`restore_machines`; the lost tasks wait again and the next round places them."""
        machines = np.unique(np.asarray(machines, dtype=np.int64))
        if self.down is None:
            self.down = np.zeros(self.m.n, dtype=bool)
        self.down[machines] = True
        self.counts["machines_failed"] = self.counts.get("machines_failed", 0) + int(machines.size)
        if tasks.size:
            self.counts["tasks_lost"] = self.counts.get("tasks_lost", 0) + int(tasks.size)
            self._requeue(tasks, workers, now)
        self._hold_down(machines)
        if self.g is not None:
            self.g.fail_machines(machines, True)
        self._request_round(now)

    def restore_machines(self, machines: np.ndarray, now: float) -> None:
        """Machines are back: they rejoin the graph with what is free on them (launches still in flight to them
        hold their slots)."""
        machines = np.unique(np.asarray(machines, dtype=np.int64))
        if self.down is None:
            return
        self.down[machines] = False
        if self.res_free is not None:
            self._sync_units(machines)
        else:
            m = self.m
            for k in machines.tolist():
                self.free[k] = int((self.ledger.task[m.workers[m.ptr[k] : m.ptr[k + 1]]] == FREE).sum())
            if self.g is not None:
                self.g.set_free(machines, self.free[machines])
        if self.g is not None:
            self.g.fail_machines(machines, False)
        self._request_round(now)

    def _hold_down(self, ms: np.ndarray) -> None:
        """Machines down have no free slot, whatever finished or came back on them."""
        d = ms[self.down[ms]]
        if d.size:
            d = np.unique(d)
            self.free[d] = 0
            if self.g is not None:
                self.g.set_free(d, self.free[d])

    def _requeue(self, tasks: np.ndarray, workers: np.ndarray, now: float) -> None:
        """Tasks the scheduler launched stopped without finishing (lost with their machine, or their launch found
        it down): their slots are released and they wait again for the next round."""
        keep = (self.state[tasks] == RUNNING) | (self.state[tasks] == KILLING)
        tasks, workers = tasks[keep], workers[keep]
        if tasks.size == 0:
            return
        if self.compiled:
            self._apply_finished()  # the batch first: one order of bookkeeping
        ms = self.m.of_worker[workers]
        self._free_slots(workers)
        np.add.at(self.free, ms, 1)
        self.state[tasks] = WAITING
        self.machine[tasks] = -1
        g = self.g
        if g is None:
            self.queue = np.concatenate([tasks, self.queue])
        elif self.s.preemption:
            g.stop_running(tasks, back_to_waiting=True)
            u = np.unique(ms)
            g.set_free(u, self.free[u])
        else:
            g.finished_outside(tasks, ms)
            soft_bits = np.uint32(self.s.soft_mask)
            jobs = self.job[tasks]
            for j in np.unique(jobs).tolist():
                ts = tasks[jobs == j]
                masks = self.mask[ts]
                g.add_tasks(
                    j, ts, masks & ~soft_bits, masks & soft_bits, int(self.job_priority[j]), float(self.job_arrival[j])
                )
            if self.compiled:
                g.wake_jobs(jobs)
        if self.res_free is not None:
            self.ledger.release(ms, self.demand[tasks])
            self._sync_units(ms)
        elif self.down is not None:
            self._hold_down(ms)
        self._request_round(now)

    # ---------------------------------------------------------------------------------------- metrics
    def counters(self) -> dict[str, int | float]:
        """Round counts and statistics (wall-clock figures are measurements: they vary between runs).

        ``flow_round_us_*``: a whole round (graph update, every solve pass, placement); ``flow_solve_us_*``: the
        solver alone; ``flow_round_tasks_*``: tasks placed per round (floats where a mean is meant).
        """
        out: dict[str, int | float] = {f"flow_{k}": int(v) for k, v in self.counts.items()}
        if self.round_wall:
            w = np.array(self.round_wall) * 1e6
            sv = np.array(self.round_solve) * 1e6
            n = np.array(self.round_tasks, dtype=np.float64)
            for name, a in (("round_us", w), ("solve_us", sv)):
                p50, p90, p99 = np.percentile(a, [50, 90, 99])
                out[f"flow_{name}_mean"] = round(float(a.mean()), 1)
                out[f"flow_{name}_p50"] = int(p50)
                out[f"flow_{name}_p90"] = int(p90)
                out[f"flow_{name}_p99"] = int(p99)
                out[f"flow_{name}_max"] = int(a.max())
                out[f"flow_{name}_total"] = int(a.sum())
            p50, p99 = np.percentile(n, [50, 99])
            out["flow_round_tasks_mean"] = round(float(n.mean()), 3)
            out["flow_round_tasks_p50"] = float(p50)
            out["flow_round_tasks_p99"] = float(p99)
            out["flow_round_tasks_max"] = int(n.max())
        return out


class _QueueView:
    """The columns cost models read, for the queue policies (no graph): views of the scheduler's arrays."""

    def __init__(self, machines: Machines, sched: FlowScheduler) -> None:
        self.s = sched
        self.machine_mask = machines.mask
        self.machine_slots = machines.slots

    @property
    def machine_free(self) -> np.ndarray:
        return self.s.free

    @property
    def task_job(self) -> np.ndarray:
        return self.s.job

    @property
    def task_soft(self) -> np.ndarray:
        return self.s.soft

    @property
    def job_priority(self) -> np.ndarray:
        return self.s.job_priority

    @property
    def job_arrival(self) -> np.ndarray:
        return self.s.job_arrival
