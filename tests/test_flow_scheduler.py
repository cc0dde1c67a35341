"""The flow scheduler end to end: every task completes exactly once, no over-commit, determinism, policies."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megha.config import RunConfig
from megha.errors import InputError
from megha.metrics.recorder import TaskRecorder
from megha.model.topology import Datacenter
from megha.runner import simulate
from megha.schedulers.common.messages import Finished, JobArrival, Kill, Killed, Launch
from megha.schedulers.flow import FlowOptions, build_scheduler
from megha.sim.component import RecordingPort


def _cfg(**opts) -> RunConfig:
    workers = opts.pop("workers", 60)
    max_jobs = opts.pop("max_jobs", 40)
    return RunConfig(
        scheduler="flow", trace="sample:YH_small", workers=workers, max_jobs=max_jobs, seed=3, options=opts
    )


@pytest.mark.parametrize(
    "opts",
    [
        {},
        {"cost_model": "quincy+priority+placement", "verify": True},
        {"solver": "ortools"},
        {"preemption": True, "verify": True},
        {"preemption": True, "migration": False, "cost_model": "priority+quincy"},
        {"slots_per_machine": 4, "rack_size": 3, "verify": True},
        {"min_interval": 0.5, "round_cost": 0.01, "round_cost_per_node": 1e-6},
        {"policy": "random"},
        {"policy": "greedy", "cost_model": "priority"},
    ],
)
def test_every_task_completes_once(opts: dict) -> None:
    res = simulate(_cfg(**opts))
    assert res.unfinished_reason is None
    feas = res.feasible
    assert (res.recorder.finishes[feas] == 1).all()
    assert res.counters["flow_rounds"] > 0
    assert res.counters["flow_launched"] >= int(feas.sum())


def test_same_seed_same_schedule() -> None:
    a = simulate(_cfg(cost_model="quincy+priority"))
    b = simulate(_cfg(cost_model="quincy+priority"))
    assert np.array_equal(a.recorder.start, b.recorder.start, equal_nan=True)
    assert np.array_equal(a.recorder.worker, b.recorder.worker)


def test_incremental_and_ortools_give_equally_good_rounds() -> None:
    """Both solvers find optimal rounds; with the same inputs the simulations complete the same tasks."""
    a = simulate(_cfg(solver="incremental", verify=True))
    b = simulate(_cfg(solver="ortools"))
    assert a.unfinished_reason is None and b.unfinished_reason is None


def test_modelled_round_cost_delays_launches() -> None:
    fast = simulate(_cfg())
    slow = simulate(_cfg(round_cost=0.05))
    first = np.nanmin(fast.recorder.start)
    assert np.nanmin(slow.recorder.start) == pytest.approx(first + 0.05)
    assert (slow.recorder.proc[slow.feasible] >= 0.05 - 1e-12).all()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    workers=st.integers(5, 40),
    preempt=st.booleans(),
    model=st.sampled_from(["quincy", "priority", "placement+quincy"]),
)
def test_random_configurations_complete(seed: int, workers: int, preempt: bool, model: str) -> None:
    cfg = RunConfig(
        scheduler="flow",
        trace="sample:YH_small",
        workers=workers,
        max_jobs=15,
        seed=seed,
        options={"preemption": preempt, "cost_model": model, "verify": True},
    )
    res = simulate(cfg)  # the worker pool raises on any over-commit
    assert res.unfinished_reason is None
    assert (res.recorder.finishes[res.feasible] == 1).all()


def _sched(n_workers: int, **opts) -> tuple:
    dc = Datacenter(worker_masks=np.zeros(n_workers, dtype=np.uint32))
    rec = TaskRecorder(np.zeros(16))
    s = build_scheduler("s", "pool", rec, dc, FlowOptions(**opts), np.random.default_rng(0), 16)
    port = RecordingPort()
    s.attach(port)
    return s, port, rec


def _job(j: int, tasks, prio: int = 0) -> JobArrival:
    t = np.asarray(tasks, dtype=np.int64)
    return JobArrival(j, t, np.full(t.size, 10.0), np.zeros(t.size, dtype=np.uint32), priority=prio)


def test_preemption_kills_a_lower_priority_task() -> None:
    s, port, _ = _sched(1, cost_model="priority", preemption=True)
    s.on_message(_job(0, [0], prio=5), 0.0)
    s.on_timer("round", 0.0)
    ((_, launch),) = port.take(Launch)
    assert launch.tasks.tolist() == [0]
    s.on_message(_job(1, [1], prio=1), 1.0)
    s.on_timer("round", 1.0)
    ((_, kill),) = port.take(Kill)
    assert kill.tasks.tolist() == [0]
    assert port.take(Launch) == []  # the slot is not free until the kill is confirmed
    s.on_message(Killed(np.array([0]), np.array([0])), 1.001)
    s.on_timer("round", 1.001)
    ((_, launch),) = port.take(Launch)
    assert launch.tasks.tolist() == [1]
    assert s.counters()["flow_preemptions"] == 1


def test_no_preemption_keeps_running_tasks() -> None:
    s, port, rec = _sched(1, cost_model="priority")
    s.on_message(_job(0, [0], prio=5), 0.0)
    s.on_timer("round", 0.0)
    port.take(Launch)
    s.on_message(_job(1, [1], prio=1), 1.0)
    s.on_timer("round", 1.0)
    assert port.take(Kill) == [] and port.take(Launch) == []
    s.on_message(Finished(np.array([0]), np.array([0])), 10.0)
    s.on_timer("round", 10.0)
    ((_, launch),) = port.take(Launch)
    assert np.asarray(launch.tasks).tolist() == [1]
    assert rec.outstanding == -1  # completion_known was reported for task 0 (nothing expected in this test)


def test_min_interval_spaces_rounds() -> None:
    s, port, _ = _sched(4, min_interval=2.0)
    s.on_message(_job(0, [0]), 0.0)
    s.on_timer("round", 0.0)
    port.timers.clear()
    s.on_message(_job(1, [1]), 0.5)
    ((delay, key),) = port.timers.values()
    assert key == "round" and delay == pytest.approx(1.5)


def test_bad_options_are_named() -> None:
    with pytest.raises(InputError, match="preemption needs policy=flow"):
        _sched(2, policy="random", preemption=True)
    with pytest.raises(ValueError, match="unknown cost model"):
        FlowOptions(cost_model="fifo")
    dc = Datacenter(worker_masks=np.zeros(2, dtype=np.uint32)).with_resources()
    with pytest.raises(InputError, match="slots_per_machine=1"):
        build_scheduler(
            "s", "pool", TaskRecorder(np.zeros(1)), dc, FlowOptions(slots_per_machine=4), np.random.default_rng(0)
        )


@pytest.mark.parametrize("opts", [{}, {"policy": "greedy"}, {"preemption": True, "cost_model": "priority"}])
def test_resource_mode_completes_without_overcommit(opts: dict) -> None:
    cfg = RunConfig(
        scheduler="flow",
        trace="sample:YH_small",
        workers=6,
        max_jobs=20,
        seed=1,
        resources=True,
        capacity={"cpu": 4.0, "mem": 4.0},
        demand={"cpu": 1.0, "mem": 0.5},
        options=opts,
    )
    res = simulate(cfg)  # the pool raises on any over-commit of a worker's resources
    assert res.unfinished_reason is None
    assert (res.recorder.finishes[res.feasible] == 1).all()
