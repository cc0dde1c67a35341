"""Quincy-shaped scheduling graphs with task churn, for benchmarks and the latency reproduction.

:class:`ChurnGraph` keeps a :class:`~megha.schedulers.flow.network.FlowNetwork` shaped like the scheduler's
graph (DESIGN §5.6): every task node has supply 1 and arcs to a few preferred machines (data-locality costs),
to a cluster aggregator ``X`` that reaches every machine (the "anywhere" cost), and to its job's unscheduled
aggregator ``U_j``; ``U_j → S`` carries the Quincy fairness bounds ``[N_j − A_j, N_j]`` (max-min fair share
``A_j``) and the job's waiting cost; machines reach the sink ``S`` with their slots as capacity.
:meth:`ChurnGraph.step` removes a fraction of the tasks and adds as many new ones (new jobs), as a scheduler
would between two rounds. Everything is drawn from one seeded generator, so two runs see the same rounds.
"""

from __future__ import annotations

import heapq

import numpy as np

from megha.schedulers.flow.fairness import max_min_shares
from megha.schedulers.flow.network import BIG, FlowNetwork


class ChurnGraph:
    """A scheduling-shaped flow network whose tasks come and go (see the module docstring)."""

    def __init__(
        self,
        n_machines: int,
        slots: int,
        n_tasks: int,
        rng: np.random.Generator,
        preferred: int = 10,
        mean_job_size: float = 20.0,
        any_cost: int = 150,
        wait_cost: int = 400,
        fairness: bool = True,
        job_sizes: np.ndarray | None = None,
        durations: np.ndarray | None = None,
    ) -> None:
        self.rng = rng
        self.n_machines = n_machines
        self.slots = slots
        self.preferred = preferred
        self.mean_job_size = mean_job_size
        self.any_cost = any_cost
        self.wait_cost = wait_cost
        self.fairness = fairness
        self._sizes = job_sizes
        self._durations = durations  # task durations to sample; None: departures are drawn at random
        self.clock = 0.0
        self._ends: list[tuple[float, int]] = []  # (end time, task) heap when durations are given
        self.last_left = np.zeros(0, dtype=np.int64)
        self.last_arrived = np.zeros(0, dtype=np.int64)
        n_arcs = n_tasks * (preferred + 3) + 3 * n_machines
        self.net = FlowNetwork(node_capacity=n_tasks + n_machines + n_tasks // 2 + 16, arc_capacity=n_arcs)
        net = self.net
        self.sink = net.add_node(0)
        net.balance_node = self.sink
        self.machines = net.add_nodes(np.zeros(n_machines, dtype=np.int64))
        self.machine_arcs = net.add_arcs(self.machines, np.full(n_machines, self.sink), 0, slots)
        self.x = net.add_node(0)
        net.add_arcs(np.full(n_machines, self.x), self.machines, 0, slots)
        self.job_u: dict[int, int] = {}  # job -> U node
        self.job_arc: dict[int, int] = {}  # job -> U→S arc
        self.job_tasks: dict[int, list[int]] = {}
        self.task_job: dict[int, int] = {}
        # the live tasks in insertion order (the order of task_job's keys), without a Python pass per round: every
        # task ever added at its position in _order, _live marks those still here, _pos maps a task to its position
        self._order = np.zeros(max(16, n_tasks), dtype=np.int64)
        self._live = np.zeros(max(16, n_tasks), dtype=bool)
        self._pos = np.full(net.node_capacity, -1, dtype=np.int64)
        self._n_order = 0
        self.next_job = 0
        self._add_tasks(n_tasks)
        self._update_jobs(set(self.job_tasks))
        self.initial_tasks = self.last_arrived

    @property
    def n_tasks(self) -> int:
        """Tasks in the graph now."""
        return len(self.task_job)

    def _job_size(self) -> int:
        if self._sizes is not None and self._sizes.size:
            return int(self._sizes[int(self.rng.integers(0, self._sizes.size))])
        return int(self.rng.geometric(1.0 / self.mean_job_size))

    def _add_tasks(self, n: int) -> set[int]:
        """Add ``n`` tasks in new jobs; returns the jobs created."""
        net = self.net
        rng = self.rng
        sizes = []
        while sum(sizes) < n:
            sizes.append(min(self._job_size(), n - sum(sizes)))
        jobs = set()
        for size in sizes:
            j = self.next_job
            self.next_job += 1
            u = net.add_node(0)
            self.job_u[j] = u
            self.job_arc[j] = net.add_arc(u, self.sink, self.wait_cost, 0, 0)
            tasks = net.add_nodes(np.ones(size, dtype=np.int64))
            k = self.preferred
            tails = np.repeat(tasks, k + 2)
            heads = np.empty((size, k + 2), dtype=np.int64)
            heads[:, :k] = self.machines[rng.integers(0, self.n_machines, (size, k))]
            heads[:, k] = self.x
            heads[:, k + 1] = u
            costs = np.empty((size, k + 2), dtype=np.int64)
            costs[:, :k] = rng.integers(0, 100, (size, k))
            costs[:, k] = self.any_cost
            costs[:, k + 1] = 0
            net.add_arcs(tails, heads.ravel(), costs.ravel(), 1)
            self.job_tasks[j] = tasks.tolist()
            for t in self.job_tasks[j]:
                self.task_job[t] = j
            self._append(tasks)
            if self._durations is not None and self._durations.size:
                d = self._durations[rng.integers(0, self._durations.size, size)]
                for t, e in zip(tasks.tolist(), (self.clock + d).tolist(), strict=True):
                    heapq.heappush(self._ends, (e, t))
            jobs.add(j)
            self.last_arrived = np.concatenate([self.last_arrived, tasks])
        return jobs

    def _append(self, tasks: np.ndarray) -> None:
        """Record new tasks at the end of the insertion order (compacting it when it is mostly departed tasks)."""
        n = self._n_order
        if n + tasks.size > self._order.size:
            keep = self._live[:n]
            live = self._order[:n][keep]
            if live.size + tasks.size > self._order.size // 2:  # grow
                size = 2 * (live.size + tasks.size) + 16
                self._order = np.zeros(size, dtype=np.int64)
                self._live = np.zeros(size, dtype=bool)
            self._order[: live.size] = live
            self._live[: live.size] = True
            self._live[live.size :] = False
            n = live.size
            self._pos[live] = np.arange(n, dtype=np.int64)
        top = int(tasks.max()) if tasks.size else -1
        if top >= self._pos.size:
            pos = np.full(max(2 * self._pos.size, top + 1), -1, dtype=np.int64)
            pos[: self._pos.size] = self._pos
            self._pos = pos
        self._order[n : n + tasks.size] = tasks
        self._live[n : n + tasks.size] = True
        self._pos[tasks] = np.arange(n, n + tasks.size, dtype=np.int64)
        self._n_order = n + tasks.size

    def live_tasks(self) -> np.ndarray:
        """The tasks present, in the order they were added (the order of ``task_job``'s keys)."""
        n = self._n_order
        return self._order[:n][self._live[:n]]

    def _update_jobs(self, jobs: set[int]) -> None:
        """Fairness bounds and waiting costs of the given jobs (all jobs when shares move)."""
        net = self.net
        if self.fairness:
            ids = sorted(self.job_tasks)
            demand = np.array([len(self.job_tasks[j]) for j in ids], dtype=np.int64)
            share = max_min_shares(demand, self.n_machines * self.slots)
            arcs = np.array([self.job_arc[j] for j in ids], dtype=np.int64)
            lower = demand - share
            cur_low = net.lowers(arcs)
            cur_up = net.uppers(arcs)
            ch = (cur_low != lower) | (cur_up != demand)
            if ch.any():
                net.set_bounds(arcs[ch], lower[ch], demand[ch])
        else:
            ids = sorted(jobs)
            if ids:
                arcs = np.array([self.job_arc[j] for j in ids], dtype=np.int64)
                demand = np.array([len(self.job_tasks[j]) for j in ids], dtype=np.int64)
                net.set_bounds(arcs, np.zeros_like(demand), demand)

    def step(self, fraction: float = 0.01) -> dict[str, int]:
        """One round of churn: ``fraction`` of the tasks leave and as many arrive; returns the counts."""
        rng = self.rng
        n = max(1, round(self.n_tasks * fraction))
        if self._ends:  # the n tasks that finish first leave; the clock moves to the last of them
            gone_l = []
            while len(gone_l) < n and self._ends:
                e, t = heapq.heappop(self._ends)
                if t in self.task_job:
                    gone_l.append(t)
                    self.clock = max(self.clock, e)
            gone = np.array(gone_l, dtype=np.int64)
            n = gone.size
        else:
            gone = rng.choice(self.live_tasks(), n, replace=False)
        self.last_left = gone
        self.last_arrived = np.zeros(0, dtype=np.int64)
        self._live[self._pos[gone]] = False
        touched: set[int] = set()
        for t in gone.tolist():
            j = self.task_job.pop(t)
            self.job_tasks[j].remove(t)
            touched.add(j)
        self.net.remove_nodes(gone)
        empty = [j for j in touched if not self.job_tasks[j]]
        if empty:
            self.net.remove_nodes([self.job_u[j] for j in empty])
            for j in empty:
                del self.job_u[j], self.job_arc[j], self.job_tasks[j]
            touched -= set(empty)
        touched |= self._add_tasks(n)
        self._update_jobs(touched)
        return {"left": int(n), "arrived": int(n)}

    def fail_machines(self, ids: np.ndarray, cost: int = 10**6) -> None:
        """Machine failure modelled as a prohibitive cost on its sink arc (the graph stays warm)."""
        self.net.set_costs(self.machine_arcs[ids], np.full(len(ids), cost))

    def machine_slots(self) -> int:
        """Slots of all machines together."""
        return self.n_machines * self.slots


__all__ = ["BIG", "ChurnGraph"]
