"""The simulator's in-process LM on a plain Port (a RecordingPort, no SimHooks): its workers' ledger, the one
over-commit error in both modes, and its modelled messages counted without the simulator's hooks."""

from __future__ import annotations

import numpy as np
import pytest

from megha.errors import SimulationError
from megha.metrics.recorder import TaskRecorder
from megha.model.topology import Datacenter
from megha.schedulers.common.messages import Kill
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.messages import LaunchRequest, TaskDone
from megha.schedulers.megha.simlm import SimLocalMaster
from megha.sim.component import RecordingPort

MASKS = np.zeros(8, dtype=np.uint32)


def _lm(resources: bool = False, lm: int = 1) -> tuple[SimLocalMaster, RecordingPort]:
    dc = Datacenter(worker_masks=MASKS)
    if resources:
        dc = dc.with_resources({"cpu": 1.0, "mem": 2.0})
    layout = MeghaLayout.build(dc, 2, 2)
    rec = TaskRecorder(np.zeros(32))
    rec.expect(32)
    m = SimLocalMaster(lm, layout, rec, heartbeat=5.0, launch_delay=0.5, report_delay=0.25)
    port = RecordingPort()
    m.attach(port)
    m.on_start(0.0)
    return m, port


def test_launch_and_end_on_a_plain_port() -> None:
    m, port = _lm()
    w0, w1 = m.lo, m.lo + 1
    m.on_message(LaunchRequest(0, 1, [3, 4], [w0, w1], [1.0, 2.0], [0, 0]), 0.0)
    assert m.modelled["Launch"] == [1]
    assert m.ledger.running_on(w0) == 3 and m.ledger.running_on(w1) == 4
    ends = sorted((d, k) for d, k in port.timers.values() if type(k) is float)
    assert ends == [(1.75, 1.5), (2.75, 2.5)]  # launch delay + duration + report delay; keyed by the end on the worker
    port.take()
    m.on_timer(1.5, 1.75)
    assert m.ledger.running_on(w0) == -1
    assert m.modelled["Finished"] == [1]
    done = [msg for _, msg in port.take(TaskDone)]
    assert len(done) == 1 and list(done[0].tasks) == [3]


def test_kill_on_a_plain_port() -> None:
    m, port = _lm()
    w = m.lo
    m.on_message(LaunchRequest(0, 1, [3], [w], [10.0], [0]), 0.0)
    m.to_workers(Kill(np.array([3], dtype=np.int64), m.address), 1.0)
    assert m.modelled["Kill"] == [1]
    assert m.ledger.running_on(w) == -1  # freed at once: the LM reuses the worker
    key = next(k for _, k in port.timers.values() if type(k) is tuple and k[0] == "kill")
    m.on_timer(key, 1.5)
    assert m.modelled["Killed"] == [1]


def test_slot_over_commit_is_the_ledgers_error() -> None:
    m, _ = _lm()
    w = m.lo + 2
    m.start_tasks([5], [w], [10.0], None, 0.0)
    with pytest.raises(
        SimulationError,
        match=rf"^{m.pool}: worker {w} over-committed at t=1\.500000: task 6 launched while it runs task 5$",
    ):
        m.start_tasks([6], [w], [10.0], None, 1.0)


def test_resource_over_commit_is_the_ledgers_error() -> None:
    m, _ = _lm(resources=True)
    w = m.lo
    m.start_tasks([5], [w], [10.0], np.array([[0.75, 1.0]]), 0.0)
    assert m.ledger.used[0].tolist() == [0.75, 1.0]
    with pytest.raises(
        SimulationError,
        match=rf"^{m.pool}: worker {w} over-committed at t=1\.500000: used \[1\.25, 1\.5\] > capacity \[1\.0, 2\.0\]$",
    ):
        m.start_tasks([6], [w], [10.0], np.array([[0.5, 0.5]]), 1.0)
