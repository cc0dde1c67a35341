"""The packing policies as a central scheduler of the event engine (resource mode on traces)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from megha.cli import app
from megha.config import RunConfig
from megha.errors import InputError
from megha.metrics.recorder import TaskRecorder
from megha.runner import simulate
from megha.schedulers.common.messages import Finished, JobArrival, Launch
from megha.schedulers.packing.component import PackingScheduler, TaskSizer
from megha.schedulers.packing.policies import POLICIES, make_policy
from megha.sim.component import RecordingPort


def test_scheduler_decides_at_slot_boundaries():
    rec = TaskRecorder(np.zeros(4))
    rec.expect(3)
    sizer = TaskSizer(np.array([[4.0, 8.0], [4.0, 8.0]]), "max")
    sched = PackingScheduler("s", "pool", rec, make_policy("bf-js", 2), sizer, n_tasks=4, slot=0.001)
    port = RecordingPort()
    sched.attach(port)
    demands = np.array([[2.0, 1.0], [2.0, 1.0], [1.0, 6.0]])  # sizes 0.5, 0.5, 0.75
    sched.on_message(JobArrival(0, np.arange(3), np.array([1.0, 2.0, 3.0]), np.zeros(3, np.uint32), demands), 0.0002)
    assert port.sent == []
    ((delay, key),) = port.timers.values()
    assert key == 1 and delay == pytest.approx(0.0008)
    sched.on_timer(1, 0.001)
    ((dst, launch),) = port.take(Launch)
    assert dst == "pool"
    assert list(launch.tasks) == [0, 1, 2] and list(launch.workers) == [0, 0, 1]  # best fit
    assert list(launch.durations) == [1.0, 2.0, 3.0]
    assert launch.demands.tolist() == demands.tolist()
    assert np.isfinite(rec.scheduled[:3]).all()
    sched.on_message(Finished(np.array([0]), np.array([0]), demands[:1]), 1.0015)
    assert rec.known[0] == 1.0015 and rec.outstanding == 2
    assert sched.policy.residual(0) == 500_000_000  # the departure freed half of worker 0
    assert sched.q_max == 3


def test_heterogeneous_workers_rejected():
    with pytest.raises(InputError, match="identical workers"):
        TaskSizer(np.array([[4.0, 8.0], [8.0, 8.0]]), "max")
    with pytest.raises(InputError, match="resource mode"):
        TaskSizer(None, "tetris")


def _cfg(name, trace, **kw):
    base = dict(
        scheduler=name,
        trace=str(trace),
        workers=3,
        resources=True,
        capacity={"cpu": 4.0, "mem": 8.0},
        demand={"cpu": 1.0, "mem": 3.0},
        constraints=False,
    )
    base.update(kw)
    return RunConfig(**base)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_simulate_every_policy_resource_mode(name, tiny_trace):
    res = simulate(_cfg(name, tiny_trace))
    assert res.unfinished_reason is None
    assert res.counters["packing_placements"] == res.workload.n_tasks
    assert res.describe["size"] == "max(demand/capacity)"
    again = simulate(_cfg(name, tiny_trace))
    assert np.array_equal(res.recorder.known, again.recorder.known)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_simulate_with_constraints_and_slot_mode(name, tiny_trace):
    res = simulate(_cfg(name, tiny_trace, constraints=True, workers=6, seed=3))
    assert res.unfinished_reason is None
    w, rec = res.workload, res.recorder
    ok = res.feasible
    wm = res.datacenter.worker_masks[rec.worker[ok]]
    assert ((w.masks[ok] & ~wm) == 0).all()  # every task ran on a worker with all its constraints
    slot = simulate(RunConfig(scheduler=name, trace=str(tiny_trace), workers=2, constraints=False))
    assert slot.unfinished_reason is None and slot.describe["size"] == "1 (slot mode)"


def test_tetris_option_and_bad_options(tiny_trace):
    res = simulate(_cfg("bf-js", tiny_trace, options={"multi": "tetris", "slot": 0.01}))
    assert res.unfinished_reason is None and res.describe["size"] == "vector (tetris score)"
    with pytest.raises(InputError, match="multi"):
        simulate(_cfg("vqs", tiny_trace, options={"multi": "tetris"}))
    with pytest.raises(InputError, match="J"):
        simulate(_cfg("vqs", tiny_trace, options={"J": 1}))
    res = simulate(_cfg("vqs", tiny_trace, options={"J": 3, "config_set": "pure"}))
    assert len(res.describe["configurations"]) == 6


def test_cli_simulate_packing(tmp_path, tiny_trace):
    out = tmp_path / "run"
    res = CliRunner().invoke(
        app,
        [
            "simulate",
            "-s",
            "vqs-bf",
            "-t",
            str(tiny_trace),
            "-w",
            "3",
            "--resources",
            "--capacity",
            "cpu=4,mem=8",
            "--demand",
            "cpu=1,mem=3",
            "--no-constraints",
            "-o",
            "J=4",
            "--out",
            str(out),
            "--quiet",
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    s = json.loads((out / "summary.json").read_text())
    assert s["completed"] and s["deployment"]["policy"] == "vqs-bf" and "mean_queue" in s["deployment"]
