"""The half-arc index of the adjacency lists (``_kernels.INDEX_DEGREE``): it always agrees with a full scan of the
adjacency lists and flows, through random edits, flow changes and solves; the searches give the same flows,
potentials and list visits with and without it; and every write of an arc's flow or capacity updates it."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

from megha.schedulers.flow import _kernels as K
from megha.schedulers.flow import _residual, network
from megha.schedulers.flow.network import FlowNetwork
from megha.schedulers.flow.solvers import IncrementalSolver, OrToolsSolver, solve_ortools_residual


def _index_order(net: FlowNetwork, v: int, row: int) -> list[int]:
    """The half-arcs of indexed node ``v`` whose bit is set in ``row``, highest slot first (the search's order)."""
    H = net.H
    pool = H[K.H_POOL :].reshape(-1)
    b = int(net.N[K.N_HUB, v]) - 1
    used = int(net.N[K.N_HUSED, v])
    out = []
    for s in range(b + used - 1, b - 1, -1):
        if (int(H[row, s >> 6]) >> (s & 63)) & 1:
            out.append(int(pool[s]))
    return out


def _scan_order(net: FlowNetwork, v: int, backward: bool) -> list[int]:
    """The half-arcs of ``v``'s adjacency list with residual capacity in the scan's direction, in list order."""
    out = []
    h = int(net.N[K.N_FIRST, v])
    while h >= 0:
        r = h ^ 1 if backward else h
        a = r >> 1
        res = net.A[K.A_CAP, a] - net.A[K.A_FLOW, a] if r & 1 == 0 else net.A[K.A_FLOW, a]
        if res > 0:
            out.append(h)
        h = int(net.H[K.H_NEXT, h])
    return out


def _assert_index_agrees(net: FlowNetwork) -> int:
    """Check the index of every node against a full scan; returns the number of indexed nodes."""
    assert K.k_check_index(net.N, net.A, net.H, net.M) == -1
    hubs = 0
    for v in net.alive_nodes():
        if net.N[K.N_HUB, v] > 0:
            hubs += 1
            assert _index_order(net, int(v), K.H_WRF) == _scan_order(net, int(v), False)
            assert _index_order(net, int(v), K.H_WRB) == _scan_order(net, int(v), True)
    return hubs


def _hub_network(rng: np.random.Generator, n_hubs: int = 3, n_leaves: int = 60) -> tuple[FlowNetwork, list[int]]:
    """Leaves with supply, hubs in between, one sink: every leaf reaches a few hubs, every hub the sink and others."""
    net = FlowNetwork(node_capacity=16, arc_capacity=16, balance_node=None)
    leaves = [int(v) for v in net.add_nodes(rng.integers(0, 3, n_leaves))]
    hubs = [int(v) for v in net.add_nodes(np.zeros(n_hubs, dtype=np.int64))]
    total = int(net.N[K.N_SUP, leaves].sum())
    sink = int(net.add_nodes([-total])[0])
    tails, heads = [], []
    for x in leaves:
        for hb in rng.choice(hubs, size=min(n_hubs, 2), replace=False):
            tails.append(x)
            heads.append(int(hb))
        tails.append(x)
        heads.append(sink)
    for hb in hubs:
        tails.append(hb)
        heads.append(sink)
    n = len(tails)
    net.add_arcs(tails, heads, rng.integers(0, 20, n), rng.integers(1, 4, n))
    big = np.full(n_leaves, 1000)
    net.add_arcs(leaves, [sink] * n_leaves, np.full(n_leaves, 500), big)  # always feasible
    return net, leaves + hubs + [sink]


@pytest.mark.parametrize("seed", range(6))
def test_index_agrees_with_a_full_scan_through_random_edits_flow_changes_and_solves(seed: int) -> None:
    rng = np.random.default_rng(seed)
    net, _ = _hub_network(rng)
    solver = IncrementalSolver(bulk_units=0, bulk_work=0)
    assert _assert_index_agrees(net) >= 1
    hubs_seen = 0
    for step in range(60):
        live = net.alive_arcs()
        op = int(rng.integers(0, 8))
        if op == 0 and live.size:  # remove some arcs
            net.remove_arcs(rng.choice(live, size=min(live.size, int(rng.integers(1, 30))), replace=False))
        elif op == 1:  # add arcs between random live nodes (hubs grow, self-loops included)
            alive = net.alive_nodes()
            k = int(rng.integers(1, 80))
            hub = int(rng.choice(alive))
            t = rng.choice(alive, size=k)
            net.add_arcs(t, np.full(k, hub), rng.integers(0, 30, k), rng.integers(0, 4, k))
        elif op == 2 and live.size:  # new bounds
            ids = rng.choice(live, size=min(live.size, 20), replace=False)
            up = rng.integers(0, 5, ids.size)
            net.set_bounds(ids, np.zeros(ids.size, dtype=np.int64), up)
        elif op == 3 and live.size:  # flow moved by hand
            ids = rng.choice(live, size=min(live.size, 20), replace=False)
            net.add_flow(ids, rng.integers(-2, 3, ids.size))
        elif op == 4 and live.size:  # new costs (no flow change; the next solve repairs)
            ids = rng.choice(live, size=min(live.size, 20), replace=False)
            net.set_costs(ids, rng.integers(0, 30, ids.size))
        elif op == 5:  # a node leaves (with its arcs, unwound) and one comes
            alive = net.alive_nodes()
            sup = net.N[K.N_SUP, alive]
            cand = alive[sup > 0]
            if cand.size:
                v = int(rng.choice(cand))
                s = int(net.N[K.N_SUP, v])
                sink = int(alive[np.argmin(sup)])
                net.remove_nodes([v])
                net.set_supplies([sink], [int(net.N[K.N_SUP, sink]) + s])
            w = net.add_node(0)
            net.add_arcs([w] * 3, rng.choice(net.alive_nodes(), size=3), [1, 2, 3], [1, 1, 1])
        elif op == 6:  # a solve from scratch elsewhere, its flow written back (the next solve starts cold)
            OrToolsSolver().solve(net)
        else:
            net.reset_solution() if step % 7 == 0 else None
        hubs_seen = max(hubs_seen, _assert_index_agrees(net))
        res = solver.solve(net)
        hubs_seen = max(hubs_seen, _assert_index_agrees(net))
        if res.optimal:
            net.check()
    assert hubs_seen >= 2


def test_the_residual_bulk_solve_keeps_the_index() -> None:
    rng = np.random.default_rng(7)
    net, _ = _hub_network(rng, n_hubs=2, n_leaves=150)
    assert IncrementalSolver(bulk_units=0).solve(net).optimal
    leaves = net.alive_nodes()[:40]
    net.set_supplies(leaves, net.N[K.N_SUP, leaves] + 1)
    sink = int(net.alive_nodes()[-1])
    net.set_supplies([sink], [int(net.N[K.N_SUP, sink]) - 40])
    assert solve_ortools_residual(net) == "optimal"
    assert _assert_index_agrees(net) >= 1


def test_a_full_pool_is_repacked_and_nodes_without_room_scan_their_lists() -> None:
    net = FlowNetwork(node_capacity=16, arc_capacity=16, balance_node=None)
    nodes = [int(v) for v in net.add_nodes(np.zeros(400, dtype=np.int64))]
    rng = np.random.default_rng(3)
    moved_down = False  # a region moved to a lower slot: only a repack does that
    for rnd in range(12):  # hubs grow, lose most of their arcs and grow again: garbage, then repacks
        for hub in nodes[:8]:
            t = rng.choice(nodes[8:], size=90)
            before = {v: int(net.N[K.N_HUB, v]) for v in nodes[:8]}
            net.add_arcs(t, np.full(90, hub), np.ones(90, dtype=np.int64), np.ones(90, dtype=np.int64))
            moved_down |= any(0 < net.N[K.N_HUB, v] < before[v] for v in nodes[:8])
        if rnd % 4 == 3:
            live = net.alive_arcs()
            net.remove_arcs(live[rng.random(live.size) < 0.8])
        _assert_index_agrees(net)
    assert moved_down, "no repack happened"
    # a pool with no room left: the node reaching the index degree triggers a repack and finds room
    small = FlowNetwork(node_capacity=16, arc_capacity=32, balance_node=None)
    v = small.add_nodes(np.zeros(K.INDEX_DEGREE + 1, dtype=np.int64))
    small.M[K.M_HBUMP] = K.POOL_ROWS * small.H.shape[1]
    k = K.INDEX_DEGREE
    small.add_arcs(v[1:], np.full(k, v[0]), np.ones(k, dtype=np.int64), np.ones(k, dtype=np.int64))
    assert small.N[K.N_HUB, v[0]] > 0
    assert small.M[K.M_HBUMP] < K.POOL_ROWS * small.H.shape[1]
    _assert_index_agrees(small)
    # a node whose index is dropped is scanned through its list; the index stays consistent
    K._index_drop(small.N, small.H, small.M, int(v[0]))
    _assert_index_agrees(small)


def _drop_all(net: FlowNetwork) -> None:
    for v in net.alive_nodes():
        if net.N[K.N_HUB, v] > 0:
            K._index_drop(net.N, net.H, net.M, int(v))


@pytest.mark.parametrize("tie", ["degree", "lifo", "lifo-hub"])
def test_searches_give_the_same_flows_and_visits_with_and_without_the_index(tie: str) -> None:
    rng_a = np.random.default_rng(11)
    rng_b = np.random.default_rng(11)
    a, _ = _hub_network(rng_a, n_hubs=4, n_leaves=300)
    b, _ = _hub_network(rng_b, n_hubs=4, n_leaves=300)
    sa = IncrementalSolver(bulk_units=0, tie_break=tie)
    sb = IncrementalSolver(bulk_units=0, tie_break=tie)
    for step in range(8):
        _drop_all(b)
        assert sa.solve(a).optimal and sb.solve(b).optimal
        arcs = a.alive_arcs()
        assert np.array_equal(a.flows(arcs), b.flows(arcs))
        assert np.array_equal(a.potentials(a.alive_nodes()), b.potentials(b.alive_nodes()))
        sta, stb = a.stats(), b.stats()
        assert {k: v for k, v in sta.items() if k != "arc_scans"} == {k: v for k, v in stb.items() if k != "arc_scans"}
        assert sta["list_visits"] == stb["arc_scans"]  # without an index every entry passed is read
        assert sta["arc_scans"] <= stb["arc_scans"]
        # the same change to both: new demand at some leaves, taken by the sink
        for net, rng in ((a, rng_a), (b, rng_b)):
            leaves = net.alive_nodes()[: 300 - 20 * step]
            pick = rng.choice(leaves, size=10, replace=False)
            net.set_supplies(pick, net.N[K.N_SUP, pick] + 1)
            sink = int(net.alive_nodes()[-1])
            net.set_supplies([sink], [int(net.N[K.N_SUP, sink]) - 10])
    assert a.stats()["arc_scans"] < b.stats()["arc_scans"]


def test_a_hub_scan_reads_only_its_residual_half_arcs() -> None:
    # a star into a sink: 200 machines, 150 of them full; the sink's backward scan reads the 50 with room left
    net = FlowNetwork(balance_node=None)
    m = net.add_nodes(np.zeros(200, dtype=np.int64))
    sink = net.add_node(0)
    arcs = net.add_arcs(m, np.full(200, sink), np.zeros(200, dtype=np.int64), np.ones(200, dtype=np.int64))
    src = net.add_node(150)
    net.set_supplies([sink], [-150])
    net.add_arcs(np.full(150, src), m[:150], np.zeros(150, dtype=np.int64), np.ones(150, dtype=np.int64))
    assert IncrementalSolver(bulk_units=0).solve(net).optimal
    assert net.N[K.N_HUB, sink] > 0
    assert net.flows(arcs[:150]).sum() == 150
    assert len(_index_order(net, sink, K.H_WRB)) == 50  # machines with room, as seen backward from the sink
    assert len(_index_order(net, sink, K.H_WRF)) == 150  # machines whose flow can be sent back
    _assert_index_agrees(net)


# --------------------------------------------------------------------------- every flow write updates the index
_WRITES = ("A_FLOW", "A_CAP")
_SYNC = ("_sync_arc", "k_sync_arcs")
_BEFORE_LINK = {"_add_arc"}  # sets the arc's capacity and flow before linking it: the link reads them
_AFTER_UNLINK = {"_remove_arc"}  # clears the flow of an arc no longer in any list


def _writers(path: Path) -> dict[str, set[str]]:
    """Each function of ``path`` that assigns to ``A[A_FLOW, …]`` or ``A[A_CAP, …]`` (``A`` or ``self.A``), mapped
    to the names it calls."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: dict[str, set[str]] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        writes = False
        calls: set[str] = set()
        for node in ast.walk(fn):
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign):
                targets = [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Tuple) and t.slice.elts:
                    row = t.slice.elts[0]
                    name = row.id if isinstance(row, ast.Name) else row.attr if isinstance(row, ast.Attribute) else ""
                    writes |= name in _WRITES
            if isinstance(node, ast.Call):
                f = node.func
                calls.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
        if writes:
            out[fn.name] = calls
    return out


@pytest.mark.parametrize("module", [K, _residual, network])
def test_every_function_writing_a_flow_or_capacity_updates_the_index(module: object) -> None:
    path = Path(inspect.getfile(module))  # type: ignore[arg-type]
    writers = _writers(path)
    assert writers, f"{path.name}: no flow writes found (has the table layout changed?)"
    for name, calls in writers.items():
        if name in _BEFORE_LINK | _AFTER_UNLINK:
            continue
        assert calls & set(_SYNC), f"{path.name}:{name} writes a flow or capacity without updating the index"


def test_the_write_check_catches_a_forgotten_update(tmp_path: Path) -> None:
    src = tmp_path / "k.py"
    src.write_text(
        "def f(A, a):\n    A[A_FLOW, a] += 1\n\ndef g(A, H, a):\n    A[A_CAP, a] = 0\n    _sync_arc(A, H, a)\n"
    )
    writers = _writers(src)
    assert set(writers) == {"f", "g"}
    assert not writers["f"] & set(_SYNC) and writers["g"] & set(_SYNC)


def test_the_regions_of_removed_and_moved_nodes_are_reused() -> None:
    net = FlowNetwork(node_capacity=256, arc_capacity=4096, balance_node=None)
    hubs = net.add_nodes(np.zeros(4, dtype=np.int64))
    leaves = net.add_nodes(np.zeros(120, dtype=np.int64))  # one or two arcs each: never indexed
    ones = np.ones(10, dtype=np.int64)
    for i, hb in enumerate(hubs):  # four nodes of 10 half-arcs: regions of 32 slots (their first of 8 freed)
        net.add_arcs(leaves[10 * i : 10 * i + 10], np.full(10, hb), ones, ones)
    bump = int(net.M[K.M_HBUMP])
    net.remove_nodes(hubs[:2], unwind=False)
    again = net.add_nodes(np.zeros(2, dtype=np.int64))
    for i, hb in enumerate(again):  # the same sizes: the freed regions, not the end of the pool
        net.add_arcs(leaves[10 * i : 10 * i + 10], np.full(10, hb), ones, ones)
    assert int(net.M[K.M_HBUMP]) == bump
    _assert_index_agrees(net)
    # a node that outgrows its region moves, and the next node of the old size takes the old region
    b0 = int(net.N[K.N_HUB, again[0]])
    more = leaves[40:70]
    net.add_arcs(more, np.full(30, again[0]), np.ones(30, dtype=np.int64), np.ones(30, dtype=np.int64))
    assert int(net.N[K.N_HUB, again[0]]) != b0
    bump = int(net.M[K.M_HBUMP])
    late = net.add_node(0)
    net.add_arcs(leaves[70:80], np.full(10, late), ones, ones)
    assert int(net.N[K.N_HUB, late]) == b0 and int(net.M[K.M_HBUMP]) == bump
    _assert_index_agrees(net)


# --------------------------------------------------------------------------- nodes kept out of the index
def test_a_node_flagged_noindex_is_never_indexed_and_the_check_says_so() -> None:
    net = FlowNetwork(balance_node=None)
    plain, flagged = (int(v) for v in net.add_nodes(np.zeros(2, dtype=np.int64)))
    net.N[K.N_FLAG, flagged] |= K.F_NOINDEX
    leaves = net.add_nodes(np.zeros(40, dtype=np.int64))
    for hub in (plain, flagged):
        net.add_arcs(np.full(40, hub), leaves, np.arange(40, dtype=np.int64), np.ones(40, dtype=np.int64))
    assert net.N[K.N_HUB, plain] > 0  # past INDEX_DEGREE: indexed
    assert net.N[K.N_HUB, flagged] == 0  # same degree, flagged: its list is scanned as before
    assert K.k_check_index(net.N, net.A, net.H, net.M) == -1
    K._index_place(net.N, net.A, net.H, net.M, flagged)  # an index where none may be: the check finds it
    assert K.k_check_index(net.N, net.A, net.H, net.M) == flagged


def test_the_scheduling_graph_keeps_its_class_aggregators_out_of_the_index(monkeypatch) -> None:
    from megha.config import RunConfig
    from megha.runner import simulate
    from megha.schedulers.flow.compiled import CompiledGraph
    from megha.schedulers.flow.graph import ROLE_EC

    seen = {"rounds": 0, "classes": 0, "wide": 0}
    prepare = CompiledGraph.prepare

    def checked(self: CompiledGraph, now: float) -> None:
        prepare(self, now)
        net = self.net
        top = int(net.M[K.M_NHW])
        nodes = np.flatnonzero((self.node_role[:top] == ROLE_EC) & (net.N[K.N_ALIVE, :top] == 1))
        assert (net.N[K.N_FLAG, nodes] & K.F_NOINDEX != 0).all()
        assert (net.N[K.N_HUB, nodes] == 0).all()
        seen["rounds"] += 1
        seen["classes"] += nodes.size
        seen["wide"] += int((net.N[K.N_DEG, nodes] >= K.INDEX_DEGREE).sum())
        assert K.k_check_index(net.N, net.A, net.H, net.M) == -1

    monkeypatch.setattr(CompiledGraph, "prepare", checked)
    simulate(RunConfig(scheduler="flow", trace="sample:GOOG_subtrace", workers=400, max_jobs=60))
    assert seen["rounds"] > 20
    assert seen["wide"] > 0  # class aggregators that an index would have taken
