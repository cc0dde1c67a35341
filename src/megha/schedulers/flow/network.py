"""A dynamic min-cost flow network with stable node and arc ids, edited in batches.

:class:`FlowNetwork` stores nodes (supplies) and arcs (lower and upper bounds, integer unit costs) in growable
columnar tables (see :mod:`megha.schedulers.flow._kernels`). Ids of removed nodes and arcs are recycled.
Every edit is recorded so the incremental solver repairs only what changed; the same network can be handed
to a from-scratch solver through :meth:`FlowNetwork.export`.

Conventions: supplies are positive at sources and negative at sinks; an arc carries a *true* flow between
its lower and upper bound; the cost of a solution is ``Σ cost · true flow``. When ``balance_node`` is set,
that node's supply is kept at minus the sum of all other supplies, so callers can add and remove supply
nodes (tasks) without bookkeeping at the sink.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from megha.errors import InputError
from megha.schedulers.flow import _kernels as K

BIG = 1 << 40
"""A capacity that never binds (\"infinite\")."""


def _i64(x: ArrayLike, n: int | None = None, name: str = "value") -> np.ndarray:
    a = np.asarray(x)
    if a.ndim == 0:
        a = np.full(1 if n is None else n, a)
    if a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            raise InputError(f"flow network: {name} must be integers")
    elif a.dtype.kind not in "iub":
        raise InputError(f"flow network: {name} must be integers, got dtype {a.dtype}")
    a = np.ascontiguousarray(a, dtype=np.int64)
    if n is not None and a.size != n:
        raise InputError(f"flow network: {name} has {a.size} entries, expected {n}")
    return a


@dataclass
class Exported:
    """A compact copy of a network for from-scratch solvers (lower bounds not yet transformed)."""

    node_ids: np.ndarray  # network node id of compact node i
    supply: np.ndarray
    arc_ids: np.ndarray  # network arc id of compact arc k
    tail: np.ndarray  # compact node indices
    head: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    cost: np.ndarray

    @property
    def n_nodes(self) -> int:
        """Number of compact nodes."""
        return int(self.node_ids.size)

    @property
    def n_arcs(self) -> int:
        """Number of compact arcs."""
        return int(self.arc_ids.size)


class FlowNetwork:
    """A min-cost flow network edited in place; see the module docstring."""

    def __init__(self, node_capacity: int = 256, arc_capacity: int = 1024, balance_node: int | None = None) -> None:
        nc = max(16, int(node_capacity))
        ac = max(16, int(arc_capacity))
        # the node and arc tables are column-major: the fields of one node (one arc) sit together, so a search
        # reads one or two cache lines per node it labels and per arc it scans instead of one per field (each
        # kernel indexes them as ``N[row, v]``, ``A[row, a]`` either way); the half-arc table stays row-major
        # (adjacency lists are walked mostly in id order: its rows stream)
        self.N = np.zeros((K.NF, nc), dtype=np.int64, order="F")
        self.A = np.zeros((K.AF, ac), dtype=np.int64, order="F")
        self.H = np.full((K.HF, 2 * ac), -1, dtype=np.int64)
        # the counters, then the flow log (see K._log_flow): the arcs whose flow the solves set or moved
        self.M = np.zeros(K.MF + K.TL_CAP, dtype=np.int64)
        self.FN = np.zeros(nc, dtype=np.int64)
        self.FA = np.zeros(ac, dtype=np.int64)
        self.DN = np.zeros(nc, dtype=np.int64)
        self.DA = np.zeros(ac, dtype=np.int64)
        self.balance_node = balance_node
        self._one = np.zeros(2, dtype=np.int64)  # scratch: the balance node's id and new supply
        self._heap = np.zeros(0, dtype=np.int64)  # see search_heap
        self.solution_owner: str | None = None  # which solver's state the flow/potentials are

    # ------------------------------------------------------------------------------------ capacity
    @property
    def node_capacity(self) -> int:
        """Node columns allocated (they grow on demand)."""
        return int(self.N.shape[1])

    @property
    def arc_capacity(self) -> int:
        """Arc columns allocated (they grow on demand)."""
        return int(self.A.shape[1])

    def _reserve_nodes(self, k: int) -> None:
        need = int(self.M[K.M_NHW]) + k - int(self.M[K.M_NFREE])
        cap = self.node_capacity
        if need <= cap:
            return
        new = max(need, 2 * cap)
        self.N = _grow(self.N, new, 0)
        self.FN = _grow1(self.FN, new)
        self.DN = _grow1(self.DN, new)

    def _reserve_arcs(self, k: int) -> None:
        need = int(self.M[K.M_AHW]) + k - int(self.M[K.M_AFREE])
        cap = self.A.shape[1]
        if need <= cap:
            return
        new = max(need, 2 * cap)
        self.A = _grow(self.A, new, 0)
        self.H = _grow(self.H, 2 * new, -1)
        K.k_index_rebuild(self.N, self.A, self.H, self.M)  # the index pool spans rows that just got longer
        self.FA = _grow1(self.FA, new)
        self.DA = _grow1(self.DA, new)

    def search_heap(self) -> np.ndarray:
        """The incremental solver's heap storage for this network (``hd`` of ``K.k_solve``: three int64 per entry,
        room for every entry a search can push at the current arc capacity); reallocated when the tables grew."""
        need = 3 * (2 * self.A.shape[1] + 2)
        if self._heap.size < need:
            self._heap = np.zeros(need, dtype=np.int64)
        return self._heap

    # ------------------------------------------------------------------------------------ edits
    def add_nodes(self, supplies: ArrayLike | int) -> np.ndarray:
        """Add nodes with the given supplies (an int gives that many nodes of supply 0); returns their ids."""
        if isinstance(supplies, int | np.integer):
            supplies = np.zeros(int(supplies), dtype=np.int64)
        s = _i64(supplies, name="supplies")
        self._reserve_nodes(s.size)
        out = np.empty(s.size, dtype=np.int64)
        K.k_add_nodes(self.N, self.M, self.FN, self.DN, s, out)
        return out

    def add_node(self, supply: int = 0) -> int:
        """Add one node of the given supply; returns its id."""
        return int(self.add_nodes(np.array([supply]))[0])

    def add_arcs(
        self, tails: ArrayLike, heads: ArrayLike, costs: ArrayLike, upper: ArrayLike, lower: ArrayLike = 0
    ) -> np.ndarray:
        """Add arcs ``tails → heads`` with unit ``costs`` and bounds ``[lower, upper]``; returns their ids."""
        t = _i64(tails, name="tails")
        n = t.size
        h = _i64(heads, n, "heads")
        c = _i64(costs, n, "costs")
        up = _i64(upper, n, "upper bounds")
        lo = _i64(lower, n, "lower bounds")
        self._reserve_arcs(n)
        out = np.empty(n, dtype=np.int64)
        bad = K.k_add_arcs(self.N, self.A, self.H, self.M, self.FA, self.DN, self.DA, t, h, lo, up, c, out)
        if bad >= 0:
            raise InputError(
                f"flow network: arc {int(t[bad])} -> {int(h[bad])} is invalid "
                f"(dead or unknown endpoint, or bounds [{int(lo[bad])}, {int(up[bad])}] with lower > upper or < 0)"
            )
        return out

    def add_arc(self, tail: int, head: int, cost: int, upper: int, lower: int = 0) -> int:
        """Add one arc ``tail → head`` with unit ``cost`` and bounds ``[lower, upper]``; returns its id."""
        return int(self.add_arcs([tail], [head], [cost], [upper], [lower])[0])

    def remove_arcs(self, ids: ArrayLike) -> None:
        """Remove arcs (dead ids are ignored); their flow turns into imbalance at their endpoints for the next solve."""
        K.k_remove_arcs(self.N, self.A, self.H, self.M, self.FA, self.DN, _i64(ids, name="arc ids"))

    def remove_nodes(self, ids: ArrayLike, unwind: bool = True) -> None:
        """Remove nodes and every arc touching them.

        With ``unwind`` (default) the supply of each removed node is first taken back out of the flow along
        flow-carrying arcs down to a sink (see :func:`~megha.schedulers.flow._kernels.k_unwind`), so a departing
        task costs the incremental solver no search; the result is optimal either way.
        """
        i = _i64(ids, name="node ids")
        if unwind:
            K.k_unwind(self.N, self.A, self.H, self.M, self.DN, self.DA, i, 64)
        K.k_remove_nodes(self.N, self.A, self.H, self.M, self.FN, self.FA, self.DN, i)

    def set_costs(self, ids: ArrayLike, costs: ArrayLike) -> None:
        """New unit costs of live arcs."""
        i = self._live_arcs(ids)
        K.k_set_costs(self.A, self.M, self.DA, i, _i64(costs, i.size, "costs"))

    def set_bounds(self, ids: ArrayLike, lower: ArrayLike, upper: ArrayLike) -> None:
        """New bounds ``[lower, upper]`` of live arcs (flow above a new upper bound is cut back); raises on an
        invalid pair."""
        i = self._live_arcs(ids)
        lo = _i64(lower, i.size, "lower bounds")
        up = _i64(upper, i.size, "upper bounds")
        bad = K.k_set_bounds(self.N, self.A, self.H, self.M, self.DN, self.DA, i, lo, up)
        if bad >= 0:
            raise InputError(f"flow network: arc {int(i[bad])}: bounds [{int(lo[bad])}, {int(up[bad])}] are invalid")

    def set_supplies(self, ids: ArrayLike, supplies: ArrayLike) -> None:
        """New supplies of live nodes."""
        i = self._live_nodes(ids)
        K.k_set_supplies(self.N, self.M, self.DN, i, _i64(supplies, i.size, "supplies"))

    def add_flow(self, ids: ArrayLike, deltas: ArrayLike) -> None:
        """Move flow on arcs by hand (e.g. to retire a placed task); the next solve repairs the rest."""
        i = self._live_arcs(ids)
        K.k_add_flow(self.N, self.A, self.H, self.M, self.DN, self.DA, i, _i64(deltas, i.size, "deltas"))

    def _live_arcs(self, ids: ArrayLike) -> np.ndarray:
        i = _i64(ids, name="arc ids")
        if i.size and ((i < 0).any() or (i >= self.M[K.M_AHW]).any() or not self.A[K.A_ALIVE, i].all()):
            bad = i[(i < 0) | (i >= self.M[K.M_AHW])]
            bad = bad if bad.size else i[self.A[K.A_ALIVE, i] == 0]
            raise InputError(f"flow network: arc {int(bad[0])} does not exist")
        return i

    def _live_nodes(self, ids: ArrayLike) -> np.ndarray:
        i = _i64(ids, name="node ids")
        if i.size and ((i < 0).any() or (i >= self.M[K.M_NHW]).any() or not self.N[K.N_ALIVE, i].all()):
            raise InputError("flow network: a node id does not exist")
        return i

    def sync_balance(self) -> None:
        """Set the balance node's supply to minus the sum of the other supplies (no-op without one)."""
        b = self.balance_node
        if b is None or self.M[K.M_SUPSUM] == 0:  # balanced already (the sum includes the balance node's supply)
            return
        own = int(self.N[K.N_SUP, b])
        others = int(self.M[K.M_SUPSUM]) - own
        if own != -others:
            if not (0 <= b < self.M[K.M_NHW] and self.N[K.N_ALIVE, b]):
                raise InputError("flow network: a node id does not exist")
            one = self._one
            one[0] = b
            one[1] = -others
            K.k_set_supplies(self.N, self.M, self.DN, one[:1], one[1:])

    @property
    def supply_sum(self) -> int:
        """Sum of all live nodes' supplies (must be 0 to solve)."""
        return int(self.M[K.M_SUPSUM])

    def reset_solution(self) -> None:
        """Drop the current flow and potentials (the next incremental solve starts cold)."""
        K.k_reset_solution(self.N, self.A, self.H, self.M, self.DN, self.DA)
        self.solution_owner = None

    # ------------------------------------------------------------------------------------ queries
    @property
    def n_nodes(self) -> int:
        """Number of live nodes."""
        return int(self.M[K.M_NALIVE])

    @property
    def n_arcs(self) -> int:
        """Number of live arcs."""
        return int(self.M[K.M_AALIVE])

    def alive_nodes(self) -> np.ndarray:
        """Ids of the live nodes, ascending."""
        hw = int(self.M[K.M_NHW])
        return np.flatnonzero(self.N[K.N_ALIVE, :hw] == 1)

    def alive_arcs(self) -> np.ndarray:
        """Ids of the live arcs, ascending."""
        hw = int(self.M[K.M_AHW])
        return np.flatnonzero(self.A[K.A_ALIVE, :hw] == 1)

    def tails(self, ids: ArrayLike) -> np.ndarray:
        """Tail nodes of arcs."""
        return self.H[K.H_TO, 2 * np.asarray(ids, dtype=np.int64) + 1].copy()

    def heads(self, ids: ArrayLike) -> np.ndarray:
        """Head nodes of arcs."""
        return self.H[K.H_TO, 2 * np.asarray(ids, dtype=np.int64)].copy()

    def flows(self, ids: ArrayLike) -> np.ndarray:
        """True flows of arcs."""
        i = np.asarray(ids, dtype=np.int64)
        return self.A[K.A_FLOW, i] + self.A[K.A_LOW, i]

    def costs(self, ids: ArrayLike) -> np.ndarray:
        """Unit costs of arcs."""
        return self.A[K.A_COST, np.asarray(ids, dtype=np.int64)].copy()

    def uppers(self, ids: ArrayLike) -> np.ndarray:
        """Upper bounds of arcs."""
        i = np.asarray(ids, dtype=np.int64)
        return self.A[K.A_CAP, i] + self.A[K.A_LOW, i]

    def lowers(self, ids: ArrayLike) -> np.ndarray:
        """Lower bounds of arcs."""
        return self.A[K.A_LOW, np.asarray(ids, dtype=np.int64)].copy()

    def supplies(self, ids: ArrayLike) -> np.ndarray:
        """Supplies of nodes."""
        return self.N[K.N_SUP, np.asarray(ids, dtype=np.int64)].copy()

    def potentials(self, ids: ArrayLike) -> np.ndarray:
        """Potentials ``π(v)`` of nodes (from the last solve)."""
        return self.N[K.N_POT, np.asarray(ids, dtype=np.int64)].copy()

    def excess(self, ids: ArrayLike) -> np.ndarray:
        """Excesses of nodes: supply + true inflow − true outflow (0 everywhere after a solve)."""
        return self.N[K.N_EXC, np.asarray(ids, dtype=np.int64)].copy()

    def out_flow_arcs(self, nodes: ArrayLike) -> np.ndarray:
        """For each node, the first outgoing arc with positive flow (−1 if none)."""
        v = _i64(nodes, name="node ids")
        out = np.empty(v.size, dtype=np.int64)
        K.k_out_flow_arcs(self.N, self.A, self.H, v, out)
        return out

    def total_cost(self) -> int:
        """``Σ cost · true flow`` over the live arcs (exact: falls back to Python ints if int64 could overflow)."""
        hw = int(self.M[K.M_AHW])
        alive = self.A[K.A_ALIVE, :hw] == 1
        f = np.where(alive, self.A[K.A_FLOW, :hw] + self.A[K.A_LOW, :hw], 0)
        c = self.A[K.A_COST, :hw]
        if hw == 0:
            return 0
        if float(np.abs(f).sum()) * float(np.abs(c).max()) < 2.0**62:
            return int(np.dot(f, c))
        nz = np.flatnonzero(f)
        return sum(int(x) * int(y) for x, y in zip(f[nz].tolist(), c[nz].tolist(), strict=True))

    def export(self) -> Exported:
        """Compact arrays of the live graph (for from-scratch solvers)."""
        nodes = self.alive_nodes()
        index = np.full(int(self.M[K.M_NHW]), -1, dtype=np.int64)
        index[nodes] = np.arange(nodes.size, dtype=np.int64)
        arcs = self.alive_arcs()
        low = self.A[K.A_LOW, arcs].copy()
        return Exported(
            node_ids=nodes,
            supply=self.N[K.N_SUP, nodes].copy(),
            arc_ids=arcs,
            tail=index[self.H[K.H_TO, 2 * arcs + 1]],
            head=index[self.H[K.H_TO, 2 * arcs]],
            lower=low,
            upper=self.A[K.A_CAP, arcs] + low,
            cost=self.A[K.A_COST, arcs].copy(),
        )

    def write_flows(self, arc_ids: np.ndarray, true_flows: np.ndarray, owner: str) -> None:
        """Install a solution computed elsewhere (flows balanced; potentials become invalid)."""
        arc_ids = np.asarray(arc_ids, dtype=np.int64)
        self.A[K.A_FLOW, arc_ids] = np.asarray(true_flows, dtype=np.int64) - self.A[K.A_LOW, arc_ids]
        K.k_sync_arcs(self.A, self.H, arc_ids)
        self.forget_flow_log()
        nodes = self.alive_nodes()
        self.N[K.N_EXC, nodes] = 0
        self.solution_owner = owner

    def forget_flow_log(self) -> None:
        """Drop the flow log (after flow was written outside the solver's kernels: the log no longer lists every
        arc that may carry flow); its reader falls back to scanning every arc once and starts a new one."""
        self.M[K.M_NTL] = -1

    def check(self) -> None:
        """Raise AssertionError unless bounds, conservation and reduced-cost optimality hold everywhere."""
        code, idx = K.k_check(self.N, self.A, self.H, self.M)
        if code == 1:
            raise AssertionError(f"arc {idx}: flow outside its bounds")
        if code == 2:
            raise AssertionError(f"arc {idx}: reduced-cost optimality violated")
        if code == 3:
            raise AssertionError(f"node {idx}: stored excess differs from the recomputed balance")
        if code == 4:
            raise AssertionError(f"node {idx}: its half-arc index disagrees with its adjacency list or the flows")
        nodes = self.alive_nodes()
        exc = self.N[K.N_EXC, nodes]
        if (exc != 0).any():
            raise AssertionError(f"node {int(nodes[np.flatnonzero(exc)[0]])}: flow not conserved (excess != 0)")

    def stats(self) -> dict[str, int]:
        """Solver counters since creation (searches, arc scans, settled nodes, augmentations, failures)."""
        m = self.M
        return {
            "searches": int(m[K.M_SEARCHES]),
            "arc_scans": int(m[K.M_SCANS]),
            "list_visits": int(m[K.M_VISITS]),
            "settled": int(m[K.M_SETTLED]),
            "augments": int(m[K.M_AUGMENTS]),
            "failed_searches": int(m[K.M_FAILED]),
            "arc_fixes": int(m[K.M_FIXES]),
        }


def _grow(a: np.ndarray, n: int, fill: int) -> np.ndarray:
    """``a`` with ``n`` columns (the new ones ``fill``), in ``a``'s memory order."""
    out = np.full((a.shape[0], n), fill, dtype=a.dtype, order="F" if a.flags.f_contiguous else "C")
    out[:, : a.shape[1]] = a
    return out


def _grow1(a: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=a.dtype)
    out[: a.size] = a
    return out
