"""Min-cost flow solvers behind one interface.

* :class:`IncrementalSolver` (``incremental``) — ours: keeps the previous flow and node potentials inside the
  :class:`~megha.schedulers.flow.network.FlowNetwork` and repairs only what changed (successive shortest paths
  on reduced costs, compiled with numba; see :mod:`megha.schedulers.flow._kernels`). Every answer is optimal.
  A solve facing a large change (changed nodes carrying ``bulk_units`` units of imbalance or more: a cold start,
  a big burst) is seeded by
  a bulk solve instead: OR-Tools from scratch, its flow installed, and potentials that make it reduced-cost
  optimal computed by one label-correcting pass over the residual network (OR-Tools does not return its
  duals); the rounds after it are incremental again. A solve whose searches scan more than ``bulk_work`` times
  the live arcs (overloaded graphs at Google scale, where each search settles a share of the graph) stops there
  and finishes with a bulk solve too (see :data:`BULK_WORK`). ``tie_break`` orders the nodes at equal distance
  in each search (``lifo``: the node labelled last first, which settles fewer nodes on the traces, the default;
  ``degree``: lowest degree first, the default until 2026-11; ``lifo-hub``): every order gives an optimal flow,
  but where several flows are optimal each may find another one (other placements, same total cost).
  ``bulk="residual"`` runs each bulk solve on the residual network of the current flow instead (only the
  imbalances routed: about 20 % less CPU at Google scale; same cost, possibly another optimal flow); the default
  ``scratch`` keeps the results as they were.
* :class:`OrToolsSolver` (``ortools``) — the baseline: OR-Tools ``SimpleMinCostFlow`` built and solved from
  scratch on an export of the network each time (OR-Tools never warm-starts).

A solver's :meth:`Solver.solve` leaves the optimal flow in the network (``net.flows(arcs)``) and returns a
:class:`SolveResult` with the status, the cost and the measured wall time. Lower bounds are handled by the
standard transformation (capacity ``upper − lower``, supplies shifted by ``lower``) in every solver.
Measured time is for metrics only; nothing here feeds it into simulated time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from megha.errors import InputError
from megha.schedulers.flow import _kernels as K
from megha.schedulers.flow._cost import k_total_cost
from megha.schedulers.flow._potentials import k_deferred_potentials, k_install_potentials
from megha.schedulers.flow._residual import k_add_residual_flow, k_residual_arcs
from megha.schedulers.flow.network import Exported, FlowNetwork

OPTIMAL = "optimal"
_STATS = np.array([K.M_SEARCHES, K.M_SCANS, K.M_SETTLED, K.M_AUGMENTS, K.M_FAILED, K.M_FIXES, K.M_VISITS])
_STAT_NAMES = ("searches", "arc_scans", "settled", "augments", "failed_searches", "arc_fixes", "list_visits")
"""The solver counters of ``FlowNetwork.stats`` (same names, same order), read as one slice per solve."""
INFEASIBLE = "infeasible"
BULK_UNITS = 50_000
"""A solve whose changed nodes carry at least this many units of imbalance (a cold start, a large burst: about one
search per unit) is seeded by a bulk solve: OR-Tools from scratch, then potentials from one label-correcting pass,
then incremental as usual."""
BULK_MODES = ("scratch", "residual")
"""How a bulk solve runs: OR-Tools on the whole network from scratch, or on the residual network of the current
flow with the imbalances as supplies (see :func:`solve_ortools_residual`)."""
BULK_WORK = 32.0
"""An incremental solve whose searches pass more than this many times the live arcs in adjacency-list entries
(``list_visits``: every entry of each list scanned, read or skipped by a hub's index) stops and finishes with a bulk
solve (a from-scratch solve plus potentials costs about 25 arc scans per arc). Successive shortest paths cost one
search per unit of imbalance and, in an overloaded graph (more tasks than slots: each new task displaces others),
each search settles a share of the whole graph, so a round's work grows with the square of the graph's size; the
bulk solve bounds it by a from-scratch solve's. After a solve over budget, the next ones with at least half as many
changed nodes go to the bulk solve at once (until a smaller change is solved within budget)."""


@dataclass
class SolveResult:
    """Outcome of one solve."""

    status: str
    cost: int
    seconds: float
    stats: dict = field(default_factory=dict)

    @property
    def optimal(self) -> bool:
        """Whether the solve ended with an optimal flow."""
        return self.status == OPTIMAL


class Solver:
    """Interface: ``solve(net)`` installs an optimal flow in ``net`` and reports it."""

    name = "solver"

    def solve(self, net: FlowNetwork) -> SolveResult:
        """Install an optimal flow in ``net`` (its supplies balanced first) and report the outcome."""
        raise NotImplementedError


class IncrementalSolver(Solver):
    """Warm-started successive shortest paths that repair the previous optimum after changes."""

    name = "incremental"

    def __init__(
        self,
        compute_cost: bool = True,
        bulk_units: int = BULK_UNITS,
        bulk_work: float = BULK_WORK,
        lazy_potentials: bool = False,
        tie_break: str = "lifo",
        bulk: str = "scratch",
    ) -> None:
        self._scratch: tuple[np.ndarray, ...] | None = None
        self._cap = (0, 0)
        self.compute_cost = compute_cost  # False: SolveResult.cost is 0 (saves an O(arcs) pass per round)
        self.bulk_units = bulk_units  # imbalance from which a solve starts with a bulk solve (0: never)
        self.bulk_work = bulk_work  # list entries passed per live arc after which a solve finishes in bulk (0: never)
        self.bulk_solves = 0
        # how a bulk solve runs (BULK_MODES): "scratch" (default) OR-Tools on the whole network from scratch;
        # "residual" OR-Tools on the residual network of the current flow, with the imbalances as supplies (same
        # cost; where several flows are optimal it may install another one than "scratch")
        if bulk not in BULK_MODES:
            raise InputError(f"unknown bulk mode {bulk!r}; known: {', '.join(BULK_MODES)}")
        self.bulk = bulk
        self._over_ndn = 0  # changed nodes of the last solve that went over its work budget (0: none since)
        # True: a bulk solve leaves the potentials to the next incremental solve (not computed if the next solve is
        # a bulk solve too); see _potentials.py. False (default): computed at once, as before.
        self.lazy_potentials = lazy_potentials
        self._stale: FlowNetwork | None = None  # the network whose potentials a bulk solve left to be computed
        # order of the nodes at equal distance in a search (K.TIE_NAMES): every order gives an optimal flow, but
        # among several optimal flows each may pick another one, and each settles a different number of nodes
        if tie_break not in K.TIE_NAMES:
            raise InputError(f"unknown tie_break {tie_break!r}; known: {', '.join(K.TIE_NAMES)}")
        self.tie_break = tie_break
        self._tie = K.TIE_NAMES[tie_break]

    def _arrays(self, net: FlowNetwork) -> tuple[np.ndarray, ...]:
        """``k_solve``'s scratch for ``net``: the search heap (the network's own, :meth:`FlowNetwork.search_heap`),
        the LIFO stack, and the settled and active lists."""
        cap = (net.N.shape[1], net.A.shape[1])
        if self._scratch is None or cap != self._cap:
            self._scratch = (
                np.zeros(2 * cap[1] + cap[0] + 8, dtype=np.int64),
                np.zeros(cap[0] + 1, dtype=np.int64),
                np.zeros(cap[0] + 1, dtype=np.int64),
            )
            self._cap = cap
        return (net.search_heap(), *self._scratch)

    def solve(self, net: FlowNetwork) -> SolveResult:
        """Repair the previous optimum of ``net`` after its edits, or solve in bulk with OR-Tools when the change or
        the work is large."""
        t0 = time.perf_counter()
        net.sync_balance()
        if net.solution_owner not in (None, self.name):
            net.reset_solution()
            if self._stale is net:
                self._stale = None
        M = net.M
        if M[K.M_SUPSUM] != 0:
            _check_balanced(net)
        ndn = int(M[K.M_NDN])
        if self.bulk_units > 0 and ndn >= self.bulk_units and self._imbalance(net) >= self.bulk_units:
            return self._bulk(net, t0)
        if self._over_ndn and ndn >= self._over_ndn // 2:  # as large a change as the last one over budget
            return self._bulk(net, t0)
        if self._stale is net and not self._price(net):
            return self._bulk(net, t0)
        before = M[_STATS].copy()
        hp, hv, settled, active = self._arrays(net)
        budget = max(1, int(self.bulk_work * (net.n_arcs + 1024))) if self.bulk_work > 0 else 0
        left = K.k_solve(net.N, net.A, net.H, M, net.DN, net.DA, hp, hv, settled, active, budget, self._tie)
        net.solution_owner = self.name
        if left < 0:  # over budget: the state is valid but unsolved; finish from scratch
            self._over_ndn = max(ndn, 2)
            return self._bulk(net, t0, dict(zip(_STAT_NAMES, before.tolist(), strict=True)))
        self._over_ndn = 0
        seconds = time.perf_counter() - t0
        stats = dict(zip(_STAT_NAMES, (M[_STATS] - before).tolist(), strict=True))
        status = OPTIMAL if left == 0 else INFEASIBLE
        cost = total_cost(net) if left == 0 and self.compute_cost else 0
        return SolveResult(status, cost, seconds, stats)

    def solve_quick(self, net: FlowNetwork) -> float:
        """:meth:`solve` without its result: the same steps and the same flow, but no cost, no per-solve counters
        (the caller reads the cumulative ones in ``net.M``) and no result object, for callers that solve many
        times per round. Returns the seconds it took, or −1.0 if no feasible flow exists."""
        M = net.M
        if (
            self._over_ndn or self._stale is not None or net.solution_owner not in (None, self.name)
        ):  # a bulk solve or a reset may be due: the general path
            res = self.solve(net)
            return res.seconds if res.status == OPTIMAL else -1.0
        t0 = time.perf_counter()
        net.sync_balance()
        if M[K.M_SUPSUM] != 0:
            _check_balanced(net)
        ndn = int(M[K.M_NDN])
        if self.bulk_units > 0 and ndn >= self.bulk_units:  # the balance node's change made it a large one
            res = self.solve(net)
            return res.seconds if res.status == OPTIMAL else -1.0
        hp, hv, settled, active = self._arrays(net)
        budget = max(1, int(self.bulk_work * (net.n_arcs + 1024))) if self.bulk_work > 0 else 0
        left = K.k_solve(net.N, net.A, net.H, M, net.DN, net.DA, hp, hv, settled, active, budget, self._tie)
        net.solution_owner = self.name
        if left < 0:  # over budget: finish from scratch (as solve)
            self._over_ndn = max(ndn, 2)
            res = self._bulk(net, t0)
            return res.seconds if res.status == OPTIMAL else -1.0
        return time.perf_counter() - t0 if left == 0 else -1.0

    def _price(self, net: FlowNetwork) -> bool:
        """Compute the potentials a lazy bulk solve left out (over the arcs not edited since); False if that failed
        (a negative residual cycle among them: then the caller solves in bulk again)."""
        self._stale = None
        n = net.node_capacity
        work = k_deferred_potentials(
            net.N, net.A, net.H, net.M, np.zeros(n + 1, dtype=np.int64), np.zeros(n, dtype=np.int8)
        )
        return work >= 0

    def _imbalance(self, net: FlowNetwork) -> int:
        """Units of imbalance on the changed nodes (0 when fewer nodes changed than ``bulk_units``)."""
        ndn = int(net.M[K.M_NDN])
        if ndn < self.bulk_units:
            return 0
        return int(np.abs(net.N[K.N_EXC, net.DN[:ndn]]).sum())

    def _bulk(self, net: FlowNetwork, t0: float, before: dict[str, int] | None = None) -> SolveResult:
        """Solve with OR-Tools (from scratch, or on the residual network: ``bulk``), install its flow and matching
        potentials (see the module docstring)."""
        if self.bulk == "residual":
            status = solve_ortools_residual(net)
            if status != OPTIMAL:
                return SolveResult(status, 0, time.perf_counter() - t0, _bulk_stats(net, before))
            net.N[K.N_EXC, net.alive_nodes()] = 0
            net.solution_owner = self.name
            cost = total_cost(net) if self.compute_cost else 0
        else:
            ex = net.export()
            status, cost, flows = solve_ortools(ex)
            if status != OPTIMAL:
                return SolveResult(status, 0, time.perf_counter() - t0, _bulk_stats(net, before))
            net.write_flows(ex.arc_ids, flows, self.name)
        if self.lazy_potentials:
            _forget_changes(net)
            self._stale = net
            self.bulk_solves += 1
            seconds = time.perf_counter() - t0
            return SolveResult(OPTIMAL, cost if self.compute_cost else 0, seconds, _bulk_stats(net, before))
        n = net.node_capacity
        work = k_install_potentials(
            net.N, net.A, net.H, net.M, net.DN, net.DA, np.zeros(n + 1, dtype=np.int64), np.zeros(n, dtype=np.int8)
        )
        if work < 0:
            raise RuntimeError("bulk solve: the installed flow has a negative residual cycle (not optimal)")
        self.bulk_solves += 1
        seconds = time.perf_counter() - t0
        return SolveResult(OPTIMAL, cost if self.compute_cost else 0, seconds, _bulk_stats(net, before))


def total_cost(net: FlowNetwork) -> int:
    """``Σ cost · true flow`` over the live arcs, as ``net.total_cost()`` (exact), in one compiled pass."""
    cost, exact = k_total_cost(net.A, net.M)
    return int(cost) if exact else net.total_cost()


def _forget_changes(net: FlowNetwork) -> None:
    """After a bulk solve installed its flow: no recorded changes and no new nodes left (what
    ``k_install_potentials`` leaves, without computing potentials)."""
    M = net.M
    ndn = int(M[K.M_NDN])
    nda = int(M[K.M_NDA])
    net.N[K.N_FLAG, net.DN[:ndn]] &= ~K.F_DIRTY
    net.A[K.A_FLAG, net.DA[:nda]] &= ~K.F_DIRTY
    M[K.M_NDN] = 0
    M[K.M_NDA] = 0
    hw = int(M[K.M_NHW])
    net.N[K.N_FLAG, :hw] &= ~K.F_NEW


def _bulk_stats(net: FlowNetwork, before: dict[str, int] | None = None) -> dict[str, int]:
    """Counters of a solve that ended in bulk: the searches before it (if any), and ``bulk``: 1."""
    after = net.stats()
    if before is None:
        return {**dict.fromkeys(after, 0), "bulk": 1}
    return {**{k: after[k] - before[k] for k in after}, "bulk": 1}


def _check_balanced(net: FlowNetwork) -> None:
    total = net.supply_sum
    if total != 0:
        raise InputError(f"flow network: supplies sum to {total}, they must sum to 0 (set a balance node)")


def solve_ortools(ex: Exported) -> tuple[str, int, np.ndarray]:
    """Solve an exported network from scratch with OR-Tools; returns (status, cost, true flows per arc)."""
    from ortools.graph.python import min_cost_flow

    smcf = min_cost_flow.SimpleMinCostFlow()
    sup = ex.supply.copy()
    if ex.n_arcs:
        np.subtract.at(sup, ex.tail, ex.lower)
        np.add.at(sup, ex.head, ex.lower)
        smcf.add_arcs_with_capacity_and_unit_cost(
            ex.tail.astype(np.int32), ex.head.astype(np.int32), ex.upper - ex.lower, ex.cost
        )
    if ex.n_nodes:
        smcf.set_nodes_supplies(np.arange(ex.n_nodes, dtype=np.int32), sup)
    if ex.n_arcs == 0:
        return (OPTIMAL if not sup.any() else INFEASIBLE), 0, np.zeros(0, dtype=np.int64)
    status = smcf.solve()
    if status != smcf.OPTIMAL:
        if status in (smcf.INFEASIBLE, smcf.UNBALANCED):
            return INFEASIBLE, 0, np.zeros(ex.n_arcs, dtype=np.int64)
        raise RuntimeError(f"OR-Tools min-cost flow failed with status {status}")
    f = np.asarray(smcf.flows(np.arange(ex.n_arcs, dtype=np.int32)), dtype=np.int64) + ex.lower
    cost = int(smcf.optimal_cost()) + int(np.dot(ex.lower, ex.cost))
    return OPTIMAL, cost, f


def solve_ortools_residual(net: FlowNetwork) -> str:
    """Solve with OR-Tools the min-cost flow problem on the residual network of ``net``'s current flow (any flow
    within the bounds: optimal or not, balanced or not), whose supplies are the nodes' imbalances, and add the flow
    found to ``net``'s (left unchanged unless the status is optimal): the sum is an optimal flow of ``net``. Costs are
    the reduced costs under the stored potentials, whatever they are (a shift of the objective by a constant), so they
    are mostly ≥ 0 when the potentials are those of the last optimum; only the imbalances (a round's changes, not
    every task) are routed. Returns the status; excesses and potentials are the caller's to update."""
    from ortools.graph.python import min_cost_flow

    nodes = net.alive_nodes()
    sup = net.N[K.N_EXC, nodes]
    if not sup.any():
        return OPTIMAL
    index = np.full(int(net.M[K.M_NHW]), -1, dtype=np.int32)
    index[nodes] = np.arange(nodes.size, dtype=np.int32)
    m = 2 * net.n_arcs
    tails = np.empty(m, dtype=np.int32)
    heads = np.empty(m, dtype=np.int32)
    caps = np.empty(m, dtype=np.int64)
    costs = np.empty(m, dtype=np.int64)
    refs = np.empty(m, dtype=np.int64)
    k = k_residual_arcs(net.N, net.A, net.H, net.M, index, tails, heads, caps, costs, refs)
    if k == 0:
        return INFEASIBLE
    smcf = min_cost_flow.SimpleMinCostFlow()
    smcf.add_arcs_with_capacity_and_unit_cost(tails[:k], heads[:k], caps[:k], costs[:k])
    smcf.set_nodes_supplies(np.arange(nodes.size, dtype=np.int32), sup)
    status = smcf.solve()
    if status != smcf.OPTIMAL:
        if status in (smcf.INFEASIBLE, smcf.UNBALANCED):
            return INFEASIBLE
        raise RuntimeError(f"OR-Tools min-cost flow failed with status {status}")
    flows = np.asarray(smcf.flows(np.arange(k, dtype=np.int32)), dtype=np.int64)
    k_add_residual_flow(net.A, net.H, refs[:k], flows)
    return OPTIMAL


class OrToolsSolver(Solver):
    """From-scratch OR-Tools ``SimpleMinCostFlow`` on every call (the paper's non-incremental baseline)."""

    name = "ortools"

    def solve(self, net: FlowNetwork) -> SolveResult:
        """Export ``net``, solve it from scratch with OR-Tools and install the flow found."""
        t0 = time.perf_counter()
        net.sync_balance()
        ex = net.export()
        status, cost, flows = solve_ortools(ex)
        if status == OPTIMAL:
            net.write_flows(ex.arc_ids, flows, self.name)
        return SolveResult(status, cost, time.perf_counter() - t0, {"arcs": ex.n_arcs, "nodes": ex.n_nodes})


SOLVERS = {"incremental": IncrementalSolver, "ortools": OrToolsSolver}


def make_solver(name: str, bulk_work: float = BULK_WORK, tie_break: str = "lifo") -> Solver:
    """A solver by name: ``incremental`` (finishing in bulk past ``bulk_work`` arc scans per arc, ordering equal
    distances by ``tie_break``) or ``ortools``."""
    cls = SOLVERS.get(name)
    if cls is None:
        raise InputError(f"unknown flow solver {name!r}; known: {', '.join(SOLVERS)}")
    if cls is IncrementalSolver:
        return IncrementalSolver(bulk_work=bulk_work, tie_break=tie_break)
    return cls()


def warm_up() -> None:
    """Compile (or load from the numba cache) every kernel on a tiny network, outside any timed region."""
    net = FlowNetwork(balance_node=None)
    s = net.add_nodes([2, 0, -2])
    a = net.add_arcs([s[0], s[0], s[1]], [s[1], s[2], s[2]], [1, 5, 1], [1, 5, 5], [0, 1, 0])
    sol = IncrementalSolver()
    sol.solve(net)
    n = net.node_capacity
    k_install_potentials(
        net.N, net.A, net.H, net.M, net.DN, net.DA, np.zeros(n + 1, dtype=np.int64), np.zeros(n, dtype=np.int8)
    )
    k_deferred_potentials(net.N, net.A, net.H, net.M, np.zeros(n + 1, dtype=np.int64), np.zeros(n, dtype=np.int8))
    net.set_costs(a[:1], [2])
    net.set_bounds(a[1:2], [0], [4])
    net.set_supplies(s[:1], [2])
    net.add_flow(a[2:], [0])
    net.out_flow_arcs(s)
    total_cost(net)
    sol.solve(net)
    net.check()
    net.remove_arcs(a[:1])
    net.remove_nodes(s[1:2])
    sol.solve(net)
    net.reset_solution()
    grown = FlowNetwork(arc_capacity=16, balance_node=None)  # the table grows: the half-arc index is rebuilt
    v = grown.add_nodes(np.zeros(K.INDEX_DEGREE + 1, dtype=np.int64))
    grown.add_arcs(np.repeat(v[1:], 5), np.full(5 * K.INDEX_DEGREE, v[0]), 0, 1)


def warm_up_residual() -> None:
    """Compile (or load from the numba cache) the kernels of the residual bulk solve (``bulk="residual"``)."""
    net = FlowNetwork(balance_node=None)
    s = net.add_nodes([2, 0, -2])
    net.add_arcs([s[0], s[1]], [s[1], s[2]], [1, 1], [3, 3], [0, 0])
    IncrementalSolver(bulk_units=1, bulk="residual").solve(net)
