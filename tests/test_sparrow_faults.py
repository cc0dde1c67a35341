"""Sparrow under worker faults, driven by hand-written messages: what a dead worker loses, how the schedulers learn
of it after the failure timeout, and how they re-issue the lost probes and tasks on live workers only."""

from __future__ import annotations

import numpy as np

from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.messages import JobArrival
from megha.schedulers.sparrow.messages import Done, Grant, Lost, Probes, Request, WorkersBack
from megha.schedulers.sparrow.monitors import SparrowMonitors
from megha.schedulers.sparrow.scheduler import SparrowScheduler
from megha.sim.component import RecordingPort

U32 = np.uint32


def attach(comp, seed=0):
    comp.attach(RecordingPort(seed))
    comp.on_start(0.0)
    return comp


def monitors(n=4, timeout=1.0, capacity=None):
    rec = TaskRecorder(np.zeros(10))
    rec.expect(10)
    return attach(SparrowMonitors("mon", n, rec, ["s0", "s1"], capacity=capacity, failure_timeout=timeout)), rec


def probes(job, sched, workers, groups=None, demands=None):
    w = np.asarray(workers, dtype=np.int64)
    g = np.zeros(w.size, dtype=np.int32) if groups is None else np.asarray(groups, dtype=np.int32)
    return Probes(job, sched, w, g, demands)


def timer(port, key):
    (tid,) = [t for t, (_, k) in port.timers.items() if k == key]
    return port.timers.pop(tid)[0]


def test_a_dead_worker_loses_its_task_and_its_probes_and_the_schedulers_learn_it_after_the_timeout():
    m, rec = monitors(timeout=0.5)
    m.on_message(probes(1, 0, [0]), 0.0)
    ((_, req),) = m.port.take()
    assert isinstance(req, Request) and req.worker == 0
    m.on_message(Grant(1, 0, 0, 3, 5.0, 0.0, 3), 0.001)  # task 3 runs on worker 0 until 5.001
    m.on_message(probes(2, 1, [0, 0]), 0.002)  # two probes of scheduler 1 queue behind it
    assert m.queue_length(0) == 2
    lost = m.fail_workers([0], 1.0)
    assert lost == [3] and rec.fault_kills[3] == 1 and rec.work_lost == 1.0 - 0.001
    assert m.queue_length(0) == 0 and not m.running
    assert m.port.take() == []  # nobody knows yet
    key = ("detect", 1)
    assert timer(m.port, key) == 0.5
    m.on_timer(5.001, 5.001)  # the lost task's end: nothing ends, nothing is reported
    m.on_timer(key, 1.5)
    sent = dict(m.port.take())
    assert sent["s0"].dead == [0] and sent["s0"].tasks == [3] and sent["s0"].probes == []
    assert sent["s1"].dead == [0] and sent["s1"].probes == [(2, 0), (2, 0)] and sent["s1"].tasks == []
    assert rec.finishes[3] == 0


def test_probes_and_tasks_that_reach_a_dead_worker_fail_and_a_restored_worker_waits_for_its_old_answers():
    m, rec = monitors(timeout=0.5)
    m.on_message(probes(1, 0, [1]), 0.0)
    m.port.take()  # worker 1 asked scheduler 0 for a task
    m.fail_workers([1], 1.0)
    m.on_message(probes(4, 1, [1, 2]), 1.1)  # before the detection: noted for it; worker 2 takes its probe
    ((dst, req),) = m.port.take()
    assert dst == "s1" and req.worker == 2
    m.restore_workers([1], 1.2)  # its request is still unanswered: not back yet
    assert 1 in m.dead
    m.on_message(Grant(1, 0, 1, 6, 2.0, 0.0, 6), 1.3)  # the answer: task 6 was sent to the dead worker
    assert np.isnan(rec.start[6]) and 1 not in m.dead  # it never started; the worker is back now
    assert m.port.take() == []  # not announced yet: no WorkersBack
    m.on_timer(("detect", 1), 1.5)
    sent = dict(m.port.take())
    assert sent["s0"].dead == [] and sent["s0"].tasks == [6]
    assert sent["s1"].probes == [(4, 0)]
    # after the detection, a probe reaching a dead worker fails at once
    m.fail_workers([3], 2.0)
    m.on_timer(("detect", 2), 2.5)
    m.port.take()
    m.on_message(probes(5, 0, [3]), 2.6)
    ((dst, lost),) = m.port.take()
    assert dst == "s0" and isinstance(lost, Lost) and lost.probes == [(5, 0)] and lost.dead == []
    m.restore_workers([3], 3.0)
    back = m.port.take()
    assert sorted(d for d, _ in back) == ["s0", "s1"]
    assert all(isinstance(b, WorkersBack) and b.workers == [3] for _, b in back)
    m.on_message(probes(6, 0, [3]), 3.1)
    ((_, req),) = m.port.take()
    assert isinstance(req, Request) and req.worker == 3


def test_resource_mode_voids_every_outstanding_request_of_a_dead_worker():
    cap = np.full((2, 1), 4.0)
    m, rec = monitors(n=2, capacity=cap)
    m.on_message(probes(1, 0, [0, 0], demands=np.array([[1.0]])), 0.0)
    m.port.take()
    assert m.n_req[0] == 2
    m.fail_workers([0], 0.5)
    m.restore_workers([0], 0.6)
    assert 0 in m.dead  # two answers due
    m.on_message(Grant(1, 0, 0, 2, 1.0, 0.0, 2, np.array([1.0]), np.array([1.0])), 0.7)
    assert 0 in m.dead
    m.on_message(Grant(1, 0, 0, -1, 0.0, 0.0, None, None, np.array([1.0])), 0.8)
    assert 0 not in m.dead and m.free[0].tolist() == [4.0] and np.isnan(rec.start[2])


def scheduler(n=6, masks=None):
    rec = TaskRecorder(np.zeros(20))
    wm = np.zeros(n, dtype=U32) if masks is None else np.asarray(masks, dtype=U32)
    s = attach(SparrowScheduler("s0", 0, "mon", wm, rec, probe_ratio=2.0))
    s.describe_tasks = lambda tasks: (np.full(tasks.size, 2.0), np.zeros(tasks.size, dtype=U32), None)
    return s, rec


def test_the_scheduler_reprobes_lost_reservations_and_relaunches_lost_tasks_on_live_workers_only():
    s, _ = scheduler()
    s.on_message(JobArrival(1, np.array([0, 1]), np.ones(2), np.zeros(2, dtype=U32)), 0.0)
    ((_, p),) = s.port.take()
    dead = p.workers[:2].tolist()
    s.on_message(Lost(dead, [(1, 0), (1, 0)], [7]), 1.0)
    sent = [m for _, m in s.port.take()]
    re = [m for m in sent if m.job == 1]
    new = [m for m in sent if m.job == -1]
    assert len(re) == 1 and re[0].workers.size == 2 and not set(re[0].workers.tolist()) & set(dead)
    assert s.jobs[1].probes_out == 4  # unchanged: the lost reservations were replaced
    assert len(new) == 1 and new[0].workers.size == 2 and not set(new[0].workers.tolist()) & set(dead)
    assert s.jobs[-1].task_list == [7]
    # a new job never probes a worker known dead
    for j in range(2, 12):
        s.on_message(JobArrival(j, np.array([j]), np.ones(1), np.zeros(1, dtype=U32)), 2.0)
    for _, m in s.port.take():
        assert not set(m.workers.tolist()) & set(dead)


def test_lost_probes_of_a_job_with_nothing_left_to_launch_are_just_dropped():
    s, _ = scheduler()
    s.on_message(JobArrival(1, np.array([0]), np.ones(1), np.zeros(1, dtype=U32)), 0.0)
    ((_, p),) = s.port.take()
    w = p.workers.tolist()
    s.on_message(Request(1, w[0], 0, 0.0), 0.1)  # the task goes to the first probe's worker
    s.port.take()
    s.on_message(Lost([w[1]], [(1, 0)], []), 1.0)
    assert s.port.take() == [] and 1 not in s.jobs
    s.on_message(Done(0, w[0]), 2.0)


def test_a_probe_with_no_live_eligible_worker_waits_until_workers_come_back():
    s, _ = scheduler(n=3, masks=[0b1, 0, 0])
    s.on_message(Lost([0], [], []), 0.5)
    s.on_message(JobArrival(1, np.array([0]), np.ones(1), np.array([0b1], dtype=U32)), 1.0)
    assert s.port.take() == [] and s.parked == [(1, 0)] and s.jobs[1].probes_out == 1  # one eligible worker
    s.on_message(WorkersBack([0]), 2.0)
    ((_, p),) = s.port.take()
    assert p.job == 1 and p.workers.tolist() == [0] and not s.parked
