"""The plug-in's own tests: the component driven by hand-written messages, then a whole simulation."""

from __future__ import annotations

import numpy as np
from megha_random_fifo import RandomFifo

from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.messages import Finished, JobArrival, Launch
from megha.sim.component import RecordingPort


def _sched(masks, scan=0):
    rec = TaskRecorder(np.zeros(8))
    s = RandomFifo("s", "pool", np.asarray(masks, dtype=np.int64), rec, scan)
    s.attach(RecordingPort(seed=1))
    return s


def test_places_each_task_on_a_free_worker_that_suits_it():
    s = _sched([0b01, 0b11])
    job = JobArrival(0, np.array([0, 1, 2]), np.array([1.0, 1.0, 1.0]), np.array([0b10, 0, 0], dtype=np.uint32))
    s.on_message(job, 0.0)
    ((dst, launch),) = s.port.take(Launch)
    assert dst == "pool" and launch.tasks.tolist() == [0, 1] and launch.workers.tolist() == [1, 0]
    assert len(s.queue) == 1  # task 2 waits: no free worker
    s.on_message(Finished(np.array([0]), np.array([1])), 1.0)
    ((_, launch),) = s.port.take(Launch)
    assert launch.tasks.tolist() == [2] and launch.workers.tolist() == [1]


def test_strict_fifo_blocks_and_scan_looks_past_the_head():
    masks = [0b01, 0b01]
    job = JobArrival(0, np.array([0, 1]), np.array([1.0, 1.0]), np.array([0b10, 0], dtype=np.uint32))
    strict = _sched(masks, scan=0)
    strict.on_message(job, 0.0)
    assert strict.port.take(Launch) == []
    scanning = _sched(masks, scan=4)
    scanning.on_message(job, 0.0)
    ((_, launch),) = scanning.port.take(Launch)
    assert launch.tasks.tolist() == [1]


def test_simulates_through_the_python_api():
    import megha

    assert "random-fifo" in megha.schedulers()
    r = megha.simulate("random-fifo", "sample:YH_small", workers=500, scan=4)
    assert r.completed and r.summary["config"]["options"]["scan"] == 4
