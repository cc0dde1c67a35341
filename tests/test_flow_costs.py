"""Cost models of the flow scheduler on the paper's worked examples (seed 002 §3.1)."""

from __future__ import annotations

import numpy as np
import pytest

from megha.errors import InputError
from megha.metrics.recorder import TaskRecorder
from megha.model.topology import Datacenter
from megha.schedulers.common.messages import JobArrival, Launch
from megha.schedulers.flow import FlowOptions, build_scheduler
from megha.schedulers.flow.costs import UNIT, make_cost_model
from megha.schedulers.flow.fairness import max_min_shares
from megha.schedulers.flow.graph import SchedulingGraph
from megha.schedulers.flow.solvers import IncrementalSolver, OrToolsSolver, solve_ortools
from megha.sim.component import RecordingPort

GPU = 1  # constraint bit 0 plays "has a GPU"


def _graph(masks, slots, model: str, **kw) -> SchedulingGraph:
    return SchedulingGraph(
        np.asarray(masks, dtype=np.uint32), np.asarray(slots, dtype=np.int64), make_cost_model(model), **kw
    )


def _solve(g: SchedulingGraph, tasks) -> np.ndarray:
    g.prepare(0.0)
    res = g.solve(IncrementalSolver())
    assert res.optimal
    status, cost, _ = solve_ortools(g.net.export())
    assert status == "optimal" and cost == res.cost
    g.net.check()
    return g.assignment(np.asarray(tasks))


# ---------------------------------------------------------------------------------------------- fairness
def test_max_min_shares() -> None:
    assert max_min_shares(np.array([3, 4]), 4).tolist() == [2, 2]
    assert max_min_shares(np.array([1, 10, 10]), 9).tolist() == [1, 4, 4]
    assert max_min_shares(np.array([5, 5, 5]), 7).tolist() == [3, 2, 2]  # remainder to the earlier job
    assert max_min_shares(np.array([2, 3]), 10).tolist() == [2, 3]
    assert max_min_shares(np.array([4, 4]), 6, weights=np.array([2.0, 1.0])).tolist() == [4, 2]
    with pytest.raises(InputError):
        max_min_shares(np.array([-1]), 3)


def test_fairness_two_jobs_four_machines_gives_two_each() -> None:
    """Paper §3.1.1: Job1 has 3 tasks, Job2 4 tasks, 4 one-slot machines → U1→S = [1,1], U2→S = [2,2]."""
    g = _graph(np.zeros(4), np.ones(4), "quincy")
    g.add_tasks(0, np.arange(3), np.zeros(3), np.zeros(3), 0, 0.0)
    g.add_tasks(1, np.arange(3, 7), np.zeros(4), np.zeros(4), 0, 0.0)
    where = _solve(g, np.arange(7))
    assert (where[:3] >= 0).sum() == 2
    assert (where[3:] >= 0).sum() == 2
    assert len(set(where[where >= 0].tolist())) == 4  # one task per machine
    arcs = g.job_arc[[0, 1]]
    assert g.net.lowers(arcs).tolist() == [1, 2]
    assert g.net.flows(arcs).tolist() == [1, 2]  # exactly N_j − A_j tasks wait (eq. 1–2)


def test_without_fairness_the_bigger_job_can_take_more() -> None:
    g = _graph(np.zeros(4), np.ones(4), "priority")  # no fair shares
    g.add_tasks(0, np.arange(1), np.zeros(1), np.zeros(1), 0, 0.0)
    g.add_tasks(1, np.arange(1, 8), np.zeros(7), np.zeros(7), 0, 0.0)
    where = _solve(g, np.arange(8))
    assert (where >= 0).sum() == 4


def test_fairness_through_the_scheduler_component() -> None:
    """The same example end to end: one round launches 2 tasks of each job on the 4 machines."""
    dc = Datacenter(worker_masks=np.zeros(4, dtype=np.uint32))
    rec = TaskRecorder(np.zeros(7))
    s = build_scheduler("s", "pool", rec, dc, FlowOptions(cost_model="quincy"), np.random.default_rng(0), 7)
    port = RecordingPort()
    s.attach(port)
    s.on_message(JobArrival(0, np.arange(3), np.ones(3), np.zeros(3, dtype=np.uint32)), 0.0)
    s.on_message(JobArrival(1, np.arange(3, 7), np.ones(4), np.zeros(4, dtype=np.uint32)), 0.0)
    assert [k for _, k in port.timers.values()] == ["round"]  # one round for both arrivals
    s.on_timer("round", 0.0)
    ((dst, launch),) = port.take(Launch)
    assert dst == "pool"
    assert sorted((np.asarray(launch.tasks) < 3).tolist()) == [False, False, True, True]
    assert sorted(np.asarray(launch.workers).tolist()) == [0, 1, 2, 3]


def test_waiting_cost_grows_with_time() -> None:
    cm = make_cost_model("quincy", wait_weight=2.0, wait_quantum=1.0)
    g = _graph(np.zeros(1), np.ones(1), "quincy")
    g.job_arrival = np.array([0.0, 5.0])
    assert cm.unscheduled(g, np.array([0, 1]), 10.5).tolist() == [20, 10]


# ---------------------------------------------------------------------------------------------- placement
def test_gpu_task_goes_to_the_gpu_machine() -> None:
    """Paper §3.1.2 / Fig. 4: T1 (image processing) has utility 1 on M1 (GPU), 0 on M2 → T1 runs on M1."""
    for order in ([GPU, 0], [0, GPU]):  # whichever index the GPU machine has
        g = _graph(order, [1, 1], "placement")
        g.add_tasks(0, np.array([0]), np.array([0]), np.array([GPU]), 0, 0.0)
        where = _solve(g, [0])
        assert g.machine_mask[where[0]] == GPU
        assert g.net.total_cost() == g.unscheduled_base * 0 - UNIT  # cost −utility (eq. 5–6)


def test_gpu_example_ten_and_twenty_tasks() -> None:
    """§4.2.2: 20 one-slot machines, 10 with a GPU. 10 GPU tasks → all on GPUs; 20 → every GPU used."""
    masks = np.r_[np.full(10, GPU), np.zeros(10)]
    for n in (10, 20):
        g = _graph(masks, np.ones(20), "placement")
        g.add_tasks(0, np.arange(n), np.zeros(n), np.full(n, GPU), 0, 0.0)
        where = _solve(g, np.arange(n))
        on_gpu = (g.machine_mask[where[where >= 0]] == GPU).sum()
        assert on_gpu == 10
        assert (where >= 0).sum() == n


def test_hard_constraints_are_arcs_present_or_absent() -> None:
    g = _graph([0, 2, 2 | 4], [1, 1, 1], "placement")
    g.add_tasks(0, np.arange(3), np.array([2 | 4, 2, 0]), np.zeros(3), 0, 0.0)
    where = _solve(g, np.arange(3))
    assert where[0] == 2  # only machine 2 has both bits
    assert where[1] == 1
    assert where[2] == 0


# ---------------------------------------------------------------------------------------------- priority
@pytest.mark.parametrize("model", ["priority", "priority+quincy", "priority+placement+quincy"])
def test_three_priorities_one_machine(model: str) -> None:
    """Paper §3.1.3 / Fig. 5: T1, T2, T3 with priorities 1, 2, 5 and one machine M → T1 runs, T2 and T3 wait."""
    g = _graph([0], [1], model)
    for j, p in enumerate([1, 2, 5]):
        g.add_tasks(j, np.array([j]), np.zeros(1), np.zeros(1), p, 0.0)
    cm = g.cm
    alphas = cm.task_cost(g, np.arange(3))
    assert alphas[0] < alphas[1] < alphas[2]  # α1 < α2 < α3
    where = _solve(g, np.arange(3))
    assert where.tolist() == [0, -1, -1]


def test_priority_orders_and_two_machines() -> None:
    g = _graph([0, 0], [1, 1], "priority")
    for j, p in enumerate([5, 1, 2]):
        g.add_tasks(j, np.array([j]), np.zeros(1), np.zeros(1), p, 0.0)
    assert (_solve(g, np.arange(3)) >= 0).tolist() == [False, True, True]
    g = SchedulingGraph(
        np.zeros(1, dtype=np.uint32),
        np.ones(1, dtype=np.int64),
        make_cost_model("priority", priority_order="higher-first"),
    )
    for j, p in enumerate([1, 2, 5]):
        g.add_tasks(j, np.array([j]), np.zeros(1), np.zeros(1), p, 0.0)
    assert _solve(g, np.arange(3)).tolist() == [-1, -1, 0]


def test_priority_dominates_the_load_term() -> None:
    cm = make_cost_model("priority")
    g = _graph([0, 0], [4, 4], "priority")
    g.machine_free = np.array([0, 4])
    load = cm.machine_cost(g, np.array([0, 1]))
    assert load.tolist() == [50, 0]
    assert cm.parts[0].weight > load.max()


def test_unknown_cost_model_is_named() -> None:
    with pytest.raises(InputError, match="unknown cost model 'fifo'"):
        make_cost_model("quincy+fifo")
    with pytest.raises(InputError, match="twice"):
        make_cost_model("quincy+quincy")


def test_ortools_solver_gives_the_same_assignment_cost() -> None:
    g = _graph(np.zeros(4), np.ones(4), "quincy+priority")
    for j, (n, p) in enumerate([(3, 1), (4, 3)]):
        lo = 0 if j == 0 else 3
        g.add_tasks(j, np.arange(lo, lo + n), np.zeros(n), np.zeros(n), p, 0.0)
    g.prepare(0.0)
    a = g.solve(OrToolsSolver())
    where = g.assignment(np.arange(7))
    assert (where[:3] >= 0).sum() == 2 and (where[3:] >= 0).sum() == 2
    b = IncrementalSolver().solve(g.net)
    assert a.cost == b.cost
