"""Property tests of the incremental min-cost flow solver against OR-Tools solving from scratch.

Random small graphs with lower bounds and negative costs go through random sequences of changes (nodes and
arcs added and removed, costs, bounds and supplies changed); after every change the incremental solver's
cost must equal OR-Tools' (or both must find the problem infeasible), and flow conservation, bounds and
reduced-cost optimality must hold.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megha.errors import InputError
from megha.schedulers.flow.network import FlowNetwork
from megha.schedulers.flow.solvers import OPTIMAL, IncrementalSolver, OrToolsSolver, solve_ortools, warm_up

warm_up()


def _oracle(net: FlowNetwork) -> tuple[str, int]:
    status, cost, _ = solve_ortools(net.export())
    return status, cost


def _assert_agrees(net: FlowNetwork, sol: IncrementalSolver) -> None:
    res = sol.solve(net)
    status, cost = _oracle(net)
    assert res.status == status, (res.status, status)
    if status == OPTIMAL:
        assert res.cost == cost
        if sol._stale is not net:  # a lazy bulk solve leaves the potentials to the next incremental solve
            net.check()


def _random_arc(rng: np.random.Generator, nodes: np.ndarray) -> tuple[int, int, int, int, int]:
    u, w = rng.choice(nodes, 2, replace=True)
    up = int(rng.integers(0, 6))
    lo = int(rng.integers(0, up + 1)) if rng.random() < 0.3 else 0
    return int(u), int(w), int(rng.integers(-10, 11)), up, lo


def _run_sequence(
    seed: int,
    n_nodes: int,
    n_steps: int,
    bulk_units: int = 0,
    bulk_work: float = 0.0,
    lazy: bool = False,
    tie_break: str = "degree",
    bulk_mode: str = "scratch",
) -> None:
    rng = np.random.default_rng(seed)
    net = FlowNetwork(node_capacity=4, arc_capacity=4)  # tiny: exercises growth
    sup = rng.integers(-3, 4, n_nodes)
    sup[-1] -= sup.sum()
    nodes = net.add_nodes(sup)
    arcs = []
    for _ in range(int(rng.integers(n_nodes, 4 * n_nodes))):
        u, w, c, up, lo = _random_arc(rng, nodes)
        arcs.append(net.add_arc(u, w, c, up, lo))
    # a cheap-to-reach-feasible backbone: a cycle of generous arcs with a high cost
    for i in range(n_nodes):
        arcs.append(net.add_arc(int(nodes[i]), int(nodes[(i + 1) % n_nodes]), 40, 30))
    sol = IncrementalSolver(
        bulk_units=bulk_units, bulk_work=bulk_work, lazy_potentials=lazy, tie_break=tie_break, bulk=bulk_mode
    )
    _assert_agrees(net, sol)
    live_nodes = list(nodes.tolist())
    for _ in range(n_steps):
        op = int(rng.integers(0, 8))
        live_arcs = net.alive_arcs()
        if op == 0:  # add an arc
            u, w, c, up, lo = _random_arc(rng, np.array(live_nodes))
            net.add_arc(u, w, c, up, lo)
        elif op == 1 and live_arcs.size > 1:  # remove an arc
            net.remove_arcs([int(rng.choice(live_arcs))])
        elif op == 2 and live_arcs.size:  # change costs
            k = int(rng.integers(1, min(4, live_arcs.size) + 1))
            ids = rng.choice(live_arcs, k, replace=False)
            net.set_costs(ids, rng.integers(-10, 11, k))
        elif op == 3 and live_arcs.size:  # change bounds
            a = int(rng.choice(live_arcs))
            up = int(rng.integers(0, 8))
            lo = int(rng.integers(0, up + 1)) if rng.random() < 0.5 else 0
            net.set_bounds([a], [lo], [up])
        elif op == 4 and len(live_nodes) >= 2:  # move supply between two nodes
            u, w = rng.choice(live_nodes, 2, replace=False)
            d = int(rng.integers(1, 4))
            s = net.supplies([u, w])
            net.set_supplies([u, w], [s[0] + d, s[1] - d])
        elif op == 5:  # add a node wired into the graph, supply taken from another node
            other = int(rng.choice(live_nodes))
            d = int(rng.integers(-2, 3))
            v = net.add_node(d)
            net.set_supplies([other], [int(net.supplies([other])[0]) - d])
            for w in rng.choice(live_nodes, 2):
                net.add_arc(v, int(w), int(rng.integers(-5, 20)), int(rng.integers(1, 4)))
                net.add_arc(int(w), v, int(rng.integers(-5, 20)), int(rng.integers(1, 4)))
            live_nodes.append(v)
        elif op == 6 and len(live_nodes) > 3:  # remove a node, its supply moves to another node
            v = int(rng.choice(live_nodes))
            live_nodes.remove(v)
            other = int(rng.choice(live_nodes))
            s = int(net.supplies([v])[0])
            net.remove_nodes([v], unwind=bool(rng.random() < 0.5))
            net.set_supplies([other], [int(net.supplies([other])[0]) + s])
        elif op == 7 and live_arcs.size:  # a hand-made flow change (as when a placed task is retired)
            a = int(rng.choice(live_arcs))
            net.add_flow([a], [int(rng.integers(-2, 3))])
        _assert_agrees(net, sol)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_nodes=st.integers(2, 9), n_steps=st.integers(1, 25))
def test_incremental_matches_ortools_after_every_change(seed: int, n_nodes: int, n_steps: int) -> None:
    _run_sequence(seed, n_nodes, n_steps)


def test_long_sequence_on_a_bigger_graph() -> None:
    _run_sequence(12345, 40, 300)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n_nodes=st.integers(2, 9),
    n_steps=st.integers(1, 25),
    tie=st.sampled_from(["lifo", "lifo-hub"]),
)
def test_every_tie_break_matches_ortools(seed: int, n_nodes: int, n_steps: int, tie: str) -> None:
    """Another order of the nodes at equal distance may pick another optimal flow, never a dearer one."""
    _run_sequence(seed, n_nodes, n_steps, tie_break=tie)


@pytest.mark.parametrize("tie", ["lifo", "lifo-hub"])
def test_tie_breaks_on_a_long_sequence(tie: str) -> None:
    _run_sequence(12345, 40, 300, tie_break=tie)


def test_unknown_tie_break_is_named() -> None:
    with pytest.raises(InputError, match="tie_break"):
        IncrementalSolver(tie_break="random")


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n_nodes=st.integers(2, 9),
    n_steps=st.integers(1, 25),
    bulk=st.sampled_from([1, 3]),
)
def test_bulk_seeded_solves_match_ortools(seed: int, n_nodes: int, n_steps: int, bulk: int) -> None:
    """Solves that start with a bulk solve (OR-Tools flow + computed potentials) and incremental solves after
    them agree with OR-Tools, and leave reduced-cost optimality intact (``net.check``)."""
    _run_sequence(seed, n_nodes, n_steps, bulk_units=bulk)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_nodes=st.integers(2, 9), n_steps=st.integers(1, 25))
def test_solves_over_their_work_budget_finish_in_bulk(seed: int, n_nodes: int, n_steps: int) -> None:
    """A budget of one arc scan: every solve that needs a second search stops and finishes with a bulk solve from
    the stopped (valid, unsolved) state; the optimum and reduced-cost optimality hold after each, and the
    incremental solves after them too."""
    _run_sequence(seed, n_nodes, n_steps, bulk_work=1e-9)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n_nodes=st.integers(2, 9),
    n_steps=st.integers(1, 25),
    bulk=st.sampled_from([1, 3]),
    work=st.sampled_from([0.0, 1e-9]),
)
def test_lazy_potentials_after_bulk_solves(seed: int, n_nodes: int, n_steps: int, bulk: int, work: float) -> None:
    """Bulk solves that leave the potentials to the next incremental solve (computed there over the arcs no edit
    touched): every solve agrees with OR-Tools, and every incremental solve leaves reduced-cost optimality."""
    _run_sequence(seed, n_nodes, n_steps, bulk_units=bulk, bulk_work=work, lazy=True)


def test_lazy_potentials_skipped_while_rounds_stay_bulk() -> None:
    from megha.schedulers.flow.synthetic import ChurnGraph

    g = ChurnGraph(40, 2, 200, np.random.default_rng(5), fairness=True)  # overloaded: 200 tasks, 80 slots
    sol = IncrementalSolver(bulk_units=50, bulk_work=0.01, lazy_potentials=True)
    pot = g.net.potentials(g.net.alive_nodes())
    assert sol.solve(g.net).stats["bulk"] == 1
    assert sol._stale is g.net and (g.net.potentials(g.net.alive_nodes()) == pot).all()  # not computed
    for i in range(3):
        g.step(0.05)
        res = sol.solve(g.net)
        assert res.stats["bulk"] == 1 and res.cost == _oracle(g.net)[1]
        assert sol._stale is g.net
        # the first round computed the potentials and searched until its budget ran out; the next ones go to bulk
        assert (res.stats["searches"] >= 1) if i == 0 else (res.stats["searches"] == 0)
    sol.bulk_work = 0  # no budget: incremental again, from potentials computed after this round's edits
    sol._over_ndn = 0
    g.step(0.05)
    res = sol.solve(g.net)
    assert "bulk" not in res.stats and res.cost == _oracle(g.net)[1]
    assert sol._stale is None
    g.net.check()


def test_over_budget_round_after_a_cold_start() -> None:
    from megha.schedulers.flow.synthetic import ChurnGraph

    g = ChurnGraph(40, 2, 200, np.random.default_rng(5), fairness=True)  # overloaded: 200 tasks, 80 slots
    sol = IncrementalSolver(bulk_units=50, bulk_work=0.01)
    assert sol.solve(g.net).stats["bulk"] == 1
    for i in range(3):
        g.step(0.05)
        res = sol.solve(g.net)
        assert res.stats["bulk"] == 1 and res.cost == _oracle(g.net)[1]
        # the first round searched until its budget ran out; the next ones, as large, go to bulk at once
        assert (res.stats["searches"] >= 1) if i == 0 else (res.stats["searches"] == 0)
        g.net.check()
    assert sol.bulk_solves == 4
    sol.bulk_work = 0  # no budget: incremental again, from the bulk solves' potentials
    g.step(0.05)
    sol._over_ndn = 0
    res = sol.solve(g.net)
    assert "bulk" not in res.stats and res.cost == _oracle(g.net)[1]
    g.net.check()


def test_bulk_cold_start_then_incremental_rounds() -> None:
    from megha.schedulers.flow.synthetic import ChurnGraph

    g = ChurnGraph(60, 3, 400, np.random.default_rng(4), fairness=True)
    sol = IncrementalSolver(bulk_units=100)
    res = sol.solve(g.net)
    assert res.stats["bulk"] == 1 and sol.bulk_solves == 1
    assert res.cost == _oracle(g.net)[1]
    g.net.check()
    for _ in range(5):
        g.step(0.02)  # 8 tasks leave, 8 arrive: incremental
        res = sol.solve(g.net)
        assert "bulk" not in res.stats and res.cost == _oracle(g.net)[1]
        g.net.check()
    assert sol.bulk_solves == 1


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_scheduling_shaped_graph_with_balance_node(seed: int) -> None:
    """Tasks (supply 1) → machines / unscheduled aggregators with fairness lower bounds → sink."""
    rng = np.random.default_rng(seed)
    net = FlowNetwork()
    sink = net.add_node(0)
    net.balance_node = sink
    n_m = int(rng.integers(1, 6))
    machines = net.add_nodes(np.zeros(n_m, dtype=np.int64))
    m_arcs = net.add_arcs(machines, np.full(n_m, sink), 0, rng.integers(1, 4, n_m))
    jobs = []
    for _ in range(int(rng.integers(1, 4))):
        n_t = int(rng.integers(1, 6))
        u = net.add_node(0)
        tasks = net.add_nodes(np.ones(n_t, dtype=np.int64))
        net.add_arcs(tasks, np.full(n_t, u), 50, 1)
        for t in tasks:
            k = int(rng.integers(1, n_m + 1))
            ms = rng.choice(machines, k, replace=False)
            net.add_arcs(np.full(k, t), ms, rng.integers(-5, 10, k), 1)
        ua = net.add_arc(u, sink, 0, n_t, int(rng.integers(0, n_t + 1)))
        jobs.append([u, list(tasks), ua])
    sol = IncrementalSolver()
    _assert_agrees(net, sol)
    for _ in range(15):
        j = jobs[int(rng.integers(0, len(jobs)))]
        u, tasks, ua = j
        r = rng.random()
        if r < 0.35 and tasks:  # a task leaves
            t = tasks.pop(int(rng.integers(0, len(tasks))))
            net.remove_nodes([t])
        elif r < 0.7:  # a task arrives
            t = net.add_node(1)
            net.add_arc(t, u, 50, 1)
            k = int(rng.integers(1, n_m + 1))
            ms = rng.choice(machines, k, replace=False)
            net.add_arcs(np.full(k, t), ms, rng.integers(-5, 10, k), 1)
            tasks.append(t)
        elif r < 0.85:  # machine capacity changes (failure = capacity 0, or a prohibitive cost)
            i = int(rng.integers(0, n_m))
            net.set_bounds([m_arcs[i]], [0], [int(rng.integers(0, 4))])
        else:
            net.set_costs([m_arcs[int(rng.integers(0, n_m))]], [int(rng.integers(0, 1000))])
        n = len(tasks)
        net.set_bounds([ua], [int(rng.integers(0, n + 1))], [n])
        _assert_agrees(net, sol)


def test_ortools_solver_installs_its_flow() -> None:
    net = FlowNetwork()
    s, m, t = net.add_nodes([2, 0, -2])
    a = net.add_arcs([s, s, m], [m, t, t], [1, 5, 1], [1, 5, 5], [0, 0, 0])
    res = OrToolsSolver().solve(net)
    assert res.optimal and res.cost == 2 + 5
    assert net.flows(a).tolist() == [1, 1, 1]
    # the incremental solver starts cold after a foreign solve and agrees
    res2 = IncrementalSolver().solve(net)
    assert res2.cost == res.cost
    net.check()


def test_infeasible_is_reported_and_recovers() -> None:
    net = FlowNetwork()
    s, t = net.add_nodes([3, -3])
    a = net.add_arc(s, t, 1, 2)
    sol = IncrementalSolver()
    assert sol.solve(net).status == "infeasible"
    net.set_bounds([a], [0], [3])
    res = sol.solve(net)
    assert res.optimal and res.cost == 3
    net.check()


def test_bad_input_is_named() -> None:
    net = FlowNetwork()
    s, t = net.add_nodes([1, -1])
    with pytest.raises(InputError, match="lower > upper"):
        net.add_arc(s, t, 1, 1, 2)
    with pytest.raises(InputError, match="does not exist"):
        net.set_costs([99], [1])
    net.add_arc(s, t, 1, 1)
    net.set_supplies([s], [2])
    with pytest.raises(InputError, match="sum to 1"):
        IncrementalSolver().solve(net)


def test_decompose_paths_and_scratch_reset() -> None:
    """k_decompose gives one row per unit of flow into each root (task side first) and leaves its scratch
    (per-arc ``used``, per-node cursors) as it found it, so the next call starts clean."""
    from megha.schedulers.flow import _kernels as K

    net = FlowNetwork(balance_node=None)
    t1, t2, t3 = (net.add_node(1) for _ in range(3))
    agg, m1, m2 = net.add_node(), net.add_node(), net.add_node()
    sink = net.add_node(-3)
    net.add_arcs([t1, t2, t3, agg, agg, m1, m2], [agg, agg, m2, m1, m2, sink, sink], [0] * 7, [1, 1, 1, 1, 1, 5, 5])
    assert IncrementalSolver().solve(net).status == OPTIMAL
    n = net.node_capacity
    role = np.zeros(n, dtype=np.int64)
    role[[t1, t2, t3]] = 1  # tasks
    role[[agg, m1, m2]] = 2
    cursor = np.full(n, -2, dtype=np.int64)
    used = np.zeros(net.arc_capacity, dtype=np.int64)
    touched = np.zeros(n, dtype=np.int64)
    out_task = np.zeros(8, dtype=np.int64)
    out_root = np.zeros(8, dtype=np.int64)
    out_arcs = np.zeros((8, 4), dtype=np.int64)
    roots = np.array([m1, m2], dtype=np.int64)
    for _ in range(2):  # the second call must see the same clean scratch
        rows = K.k_decompose(net.N, net.A, net.H, roots, role, 1, cursor, used, touched, out_task, out_root, out_arcs)
        assert rows == 3
        assert sorted(out_task[:rows].tolist()) == [t1, t2, t3]
        assert out_root[:rows].tolist().count(m1) == 1 and out_root[:rows].tolist().count(m2) == 2
        for r in range(rows):
            arcs = [a for a in out_arcs[r].tolist() if a >= 0]
            assert int(net.tails(arcs[:1])[0]) == out_task[r] and int(net.heads(arcs[-1:])[0]) == out_root[r]
        assert not used.any()
        assert (cursor == -2).all()
