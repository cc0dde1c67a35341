"""Smoke tests of the Sirius reproductions (--quick) and of the churn graphs behind the benchmark."""

from __future__ import annotations

import numpy as np

from megha.experiments.registry import ReproContext, run_experiment
from megha.schedulers.flow.solvers import IncrementalSolver, solve_ortools
from megha.schedulers.flow.synthetic import ChurnGraph


def _run(exp: str, tmp_path) -> dict:
    return run_experiment(exp, ReproContext(out=tmp_path / exp, quick=True, log=lambda s: None))


def test_placement_reproduction(tmp_path) -> None:
    doc = _run("sirius-placement", tmp_path)
    t10 = doc["mean_task_time"]["T=10"]
    # every GPU task on a GPU with Sirius/alsched; Random puts about half of them on CPUs
    assert t10["Sirius/alsched"]["tasks_run_on_gpu"] == 10
    assert t10["Sirius/alsched"]["mean_task_time_s"] < t10["Random"]["mean_task_time_s"]
    t20 = doc["mean_task_time"]["T=20"]
    assert t20["Sirius/alsched"]["mean_task_time_s"] <= t20["Swarm/alsched"]["mean_task_time_s"]
    assert (tmp_path / "sirius-placement" / "placement.png").exists()


def test_priority_reproduction(tmp_path) -> None:
    doc = _run("sirius-priority", tmp_path)
    eq = doc["cases"]["equal"]["Sirius/borg"]["TPC-H"]["mean_job_latency_s"]
    di = doc["cases"]["distinct"]["Sirius/borg"]["TPC-H"]["mean_job_latency_s"]
    assert di < eq / 2  # the queries jump the queue when they have the higher priority
    pre = doc["cases"]["distinct"]["Sirius/borg+preemption"]
    assert pre["TPC-H"]["mean_job_latency_s"] < di and pre["preemptions"] > 0


def test_fairness_reproduction(tmp_path) -> None:
    doc = _run("sirius-fairness", tmp_path)
    for w in ("batch", "mixed"):
        assert doc["workloads"][w]["snp_ratio_sirius_over_random"] > 1.5


def test_churn_graph_rounds_match_ortools() -> None:
    rng = np.random.default_rng(5)
    g = ChurnGraph(60, 3, 150, rng, preferred=4, durations=np.array([1.0, 3.0, 9.0]))
    sol = IncrementalSolver()
    for i in range(6):
        if i == 3:
            g.fail_machines(np.arange(10))  # failure as a prohibitive cost: the graph stays warm
        res = sol.solve(g.net)
        status, cost, _ = solve_ortools(g.net.export())
        assert res.optimal and status == "optimal" and res.cost == cost
        g.net.check()
        g.step(0.05)
    assert g.clock > 0
