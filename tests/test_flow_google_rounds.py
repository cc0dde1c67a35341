"""Google-scale rounds: the benchmark's churn graph, the solver's compiled cost and the residual bulk solve.

:class:`~megha.schedulers.flow.synthetic.ChurnGraph` keeps its live tasks in arrays instead of reading them out of a
dict every round; the departures drawn from them must be the ones drawn from the dict's keys (insertion order, ids
recycled). :func:`~megha.schedulers.flow.solvers.total_cost` must equal ``FlowNetwork.total_cost``. A bulk solve on
the residual network (``IncrementalSolver(bulk="residual")``) must give OR-Tools' from-scratch cost every time.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megha.errors import InputError
from megha.schedulers.flow.network import FlowNetwork
from megha.schedulers.flow.solvers import IncrementalSolver, solve_ortools, total_cost
from megha.schedulers.flow.synthetic import ChurnGraph
from tests.test_flow_solver import _run_sequence


@pytest.mark.parametrize("churn", [0.01, 0.2, 0.6])
def test_live_tasks_follow_the_insertion_order(churn: float) -> None:
    g = ChurnGraph(30, 2, 60, np.random.default_rng(3), preferred=3, mean_job_size=4.0)
    for _ in range(40):
        assert g.live_tasks().tolist() == list(g.task_job)
        g.step(churn)
    assert g.live_tasks().tolist() == list(g.task_job)


def test_live_tasks_with_durations() -> None:
    durations = np.array([1.0, 2.0, 5.0, 9.0])
    g = ChurnGraph(20, 2, 50, np.random.default_rng(5), preferred=2, mean_job_size=3.0, durations=durations)
    for _ in range(30):
        g.step(0.1)
        assert g.live_tasks().tolist() == list(g.task_job)


def test_rounds_stay_optimal() -> None:
    g = ChurnGraph(40, 3, 150, np.random.default_rng(7), preferred=4, mean_job_size=5.0)
    sol = IncrementalSolver(bulk_units=0)
    for _ in range(25):
        res = sol.solve(g.net)
        status, cost, _ = solve_ortools(g.net.export())
        assert res.optimal and status == "optimal" and res.cost == cost
        g.step(0.05)


def test_total_cost_matches_the_network_sum() -> None:
    net = FlowNetwork(balance_node=None)
    s = net.add_nodes([3, 0, -3])
    a = net.add_arcs([s[0], s[0], s[1]], [s[1], s[2], s[2]], [2, 7, -1], [5, 5, 5], [1, 0, 0])
    IncrementalSolver().solve(net)
    assert total_cost(net) == net.total_cost()
    net.remove_arcs(a[1:2])
    IncrementalSolver().solve(net)
    assert total_cost(net) == net.total_cost()


def test_total_cost_beyond_int64_falls_back_to_python_integers() -> None:
    net = FlowNetwork(balance_node=None)
    big = 1 << 40
    s = net.add_nodes([big, -big])
    net.add_arcs([s[0]], [s[1]], [1 << 30], [big], [0])
    IncrementalSolver(bulk_units=0).solve(net)
    assert total_cost(net) == big * (1 << 30) == net.total_cost()


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_nodes=st.integers(2, 9), n_steps=st.integers(1, 25))
def test_residual_bulk_matches_ortools_after_every_change(seed: int, n_nodes: int, n_steps: int) -> None:
    """Every solve in bulk (bulk_units=1), on the residual network of the flow left by the previous one: random
    graphs with negative costs, lower bounds, infeasible steps and hand-made flow changes (tests/test_flow_solver)."""
    _run_sequence(seed, n_nodes, n_steps, bulk_units=1, bulk_mode="residual")
    _run_sequence(seed, n_nodes, n_steps, bulk_units=1, lazy=True, bulk_mode="residual")


def test_residual_bulk_over_the_work_budget_on_a_long_sequence() -> None:
    """Searches first, then a residual bulk solve from the state the searches left (tiny work budget)."""
    _run_sequence(12345, 40, 300, bulk_work=0.5, bulk_mode="residual")
    _run_sequence(777, 40, 300, bulk_work=0.5, lazy=True, bulk_mode="residual")


@pytest.mark.parametrize("lazy", [False, True])
def test_residual_bulk_rounds_of_an_overloaded_churn_graph(lazy: bool) -> None:
    """Shaped like the scheduler's graph, more tasks than slots (every round a bulk solve): the same cost as OR-Tools
    from scratch each round, and the flow conserved and within bounds."""
    g = ChurnGraph(60, 2, 300, np.random.default_rng(11), preferred=4, mean_job_size=6.0)
    sol = IncrementalSolver(bulk_units=1, lazy_potentials=lazy, bulk="residual")
    for _ in range(20):
        res = sol.solve(g.net)
        status, cost, _ = solve_ortools(g.net.export())
        assert res.optimal and status == "optimal" and res.cost == cost
        assert res.stats["bulk"] == 1
        if not lazy:
            g.net.check()
        g.step(0.05)


def test_unknown_bulk_mode_is_named() -> None:
    with pytest.raises(InputError, match="bulk mode"):
        IncrementalSolver(bulk="guess")
