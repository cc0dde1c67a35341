"""Sparrow components driven by hand-written messages: batch sampling, probe queueing, late binding."""

from __future__ import annotations

import numpy as np
import pytest

from megha.errors import SimulationError
from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.messages import JobArrival
from megha.schedulers.common.sampling import ProbeSampler
from megha.schedulers.sparrow.messages import Done, GetTask, Grant, Probes, Request, TaskReply
from megha.schedulers.sparrow.monitors import SparrowMonitors
from megha.schedulers.sparrow.scheduler import SparrowScheduler
from megha.sim.component import RecordingPort

U32 = np.uint32


def attach(comp, seed=0):
    comp.attach(RecordingPort(seed))
    comp.on_start(0.0)
    return comp


def job(j, tasks, masks=None, durations=None, demands=None):
    tasks = np.asarray(tasks, dtype=np.int64)
    masks = np.zeros(tasks.size, dtype=U32) if masks is None else np.asarray(masks, dtype=U32)
    durs = np.ones(tasks.size) if durations is None else np.asarray(durations, dtype=float)
    return JobArrival(j, tasks, durs, masks, demands=demands)


def test_batch_sampling_probes_d_times_m_distinct_workers():
    rec = TaskRecorder(np.zeros(10))
    s = attach(SparrowScheduler("s0", 0, "mon", np.zeros(50, dtype=U32), rec))
    s.on_message(job(7, [0, 1, 2]), 0.0)
    ((dst, p),) = s.port.take()
    assert dst == "mon" and isinstance(p, Probes) and p.job == 7 and p.scheduler == 0
    assert p.workers.size == 6 and np.unique(p.workers).size == 6
    assert (p.groups == 0).all()


def test_constrained_probes_go_only_to_eligible_workers():
    masks = np.array([0b1] * 5 + [0b0] * 45, dtype=U32)
    rec = TaskRecorder(np.zeros(10))
    s = attach(SparrowScheduler("s0", 0, "mon", masks, rec))
    s.on_message(job(1, [0, 1], masks=[0b1, 0b0]), 0.0)
    ((_, p),) = s.port.take()
    for w, g in zip(p.workers.tolist(), p.groups.tolist(), strict=True):
        gm = int(np.unique(np.array([0b1, 0b0]))[g])
        assert gm & ~int(masks[w]) == 0
    assert p.workers.size == 4


def test_fewer_eligible_workers_than_tasks_still_gives_one_probe_per_task():
    masks = np.array([0b1, 0, 0, 0], dtype=U32)
    w, g = ProbeSampler(masks).sample(np.random.default_rng(0), [0b1], [6], [3])
    assert w.tolist() == [0, 0, 0] and g.tolist() == [0, 0, 0]


def test_sampler_is_uniform_without_replacement():
    masks = np.array([0b1, 0b0] * 50, dtype=U32)  # 50 eligible workers for mask 1
    rng = np.random.default_rng(1)
    counts = np.zeros(100)
    for _ in range(2000):
        w, _ = ProbeSampler(masks).sample(rng, [0b1], [10], [5])
        assert np.unique(w).size == 10 and (masks[w] == 1).all()
        counts[w] += 1
    assert counts[1::2].sum() == 0
    assert counts[0::2].min() > 300 and counts[0::2].max() < 500  # mean 400


def test_late_binding_one_round_trip_per_task_then_no_ops():
    rec = TaskRecorder(np.zeros(10))
    s = attach(SparrowScheduler("s0", 0, "mon", np.zeros(20, dtype=U32), rec))
    s.on_message(job(3, [4, 5], durations=[2.0, 3.0]), 0.0)
    s.port.take()
    s.on_message(Request(3, 11, 0, 0.25), 1.0)
    ((dst, r),) = s.port.take()
    assert dst == "mon" and isinstance(r, Grant) and r.worker == 11 and r.task in (4, 5) and r.waited == 0.25
    assert r.alloc_tasks == r.task and rec.scheduled[r.task] == 1.0
    first = r.task
    s.on_message(GetTask(3, np.array([12, 13]), np.array([0, 0], dtype=np.int32), np.zeros(2)), 1.5)
    ((_, rr),) = s.port.take()
    assert isinstance(rr, TaskReply)
    assert sorted(rr.tasks.tolist()) == [-1, 9 - first]  # one task left: one gets it, the other a no-op
    assert rr.alloc_tasks.tolist() == [9 - first]
    s.on_message(Request(3, 14, 0, 0.0), 2.0)
    ((_, r),) = s.port.take()
    assert r.task == -1 and r.alloc_tasks is None  # a no-op
    assert s.waiting_jobs() == 0  # all 4 probes answered
    s.on_message(Done(4, 11), 5.0)
    assert rec.known[4] == 5.0


def test_probe_on_emptied_group_takes_another_groups_task_that_fits():
    masks = np.array([0b11] * 4, dtype=U32)
    rec = TaskRecorder(np.zeros(10))
    s = attach(SparrowScheduler("s0", 0, "mon", masks, rec))
    s.on_message(job(0, [0, 1, 2], masks=[0b01, 0b10, 0b10]), 0.0)  # groups: 01 -> [0], 10 -> [1, 2]
    s.port.take()
    got = []
    for w in (0, 1, 2):
        s.on_message(Request(0, w, 0, 0.0), 1.0)  # all three requests come from probes of group 0
        ((_, r),) = s.port.take()
        got.append(r.task)
    assert sorted(got) == [0, 1, 2]


def make_monitors(n=4, capacity=None, n_tasks=20):
    rec = TaskRecorder(np.zeros(n_tasks))
    return attach(SparrowMonitors("mon", n, rec, ["s0", "s1"], capacity=capacity)), rec


def test_probes_queue_fifo_at_a_worker_and_the_queue_delay_is_recorded():
    mon, rec = make_monitors()
    mon.on_message(Probes(1, 0, np.array([0]), np.array([0], dtype=np.int32)), 0.0)
    ((dst, req),) = mon.port.take()
    assert dst == "s0" and isinstance(req, Request) and (req.job, req.worker, req.waited) == (1, 0, 0.0)
    mon.on_message(Probes(2, 1, np.array([0]), np.array([0], dtype=np.int32)), 0.1)
    mon.on_message(Probes(3, 0, np.array([0]), np.array([0], dtype=np.int32)), 0.2)
    assert mon.port.take() == [] and mon.queue_length(0) == 2  # worker 0 holds a request: probes queue
    mon.on_message(Grant(1, 0, 0, 7, 1.0, 0.0, 7), 0.5)  # task 7 runs 0.5 .. 1.5
    assert rec.start[7] == 0.5 and rec.worker[7] == 0
    ((delay, key),) = mon.port.timers.values()
    assert delay == 1.0
    mon.on_timer(key, 1.5)
    sent = mon.port.take()
    assert sent[0] == ("s0", Done(7, 0))
    dst, req = sent[1]
    assert dst == "s1" and req.job == 2 and req.waited == pytest.approx(1.4)  # FIFO: job 2 before job 3
    mon.on_message(Grant(2, 1, 0, -1, 0.0, req.waited, None), 1.6)  # no-op: serve the next probe at once
    ((dst, req),) = mon.port.take()
    assert dst == "s0" and req.job == 3 and req.waited == pytest.approx(1.4)
    mon.on_message(Grant(3, 0, 0, 8, 2.0, req.waited, 8), 1.7)
    assert rec.wq[8] == pytest.approx(1.4) and rec.start[8] == 1.7


def test_idle_workers_request_together_one_message_per_job():
    mon, _ = make_monitors()
    mon.on_message(Probes(1, 1, np.array([0, 2, 3]), np.zeros(3, dtype=np.int32)), 0.0)
    ((dst, req),) = mon.port.take()
    assert dst == "s1" and isinstance(req, GetTask) and req.workers.tolist() == [0, 2, 3]


def test_a_task_sent_to_a_worker_without_a_request_is_an_over_commit():
    mon, _ = make_monitors()
    with pytest.raises(SimulationError, match="over-committed"):
        mon.on_message(Grant(1, 0, 2, 5, 1.0, 0.0, 5), 0.0)


def test_resource_mode_probes_reserve_demand_and_queue_when_it_does_not_fit():
    cap = np.array([[4.0, 4.0]] * 2)
    mon, rec = make_monitors(n=2, capacity=cap)
    dem = np.array([[3.0, 1.0]])
    mon.on_message(Probes(1, 0, np.array([0, 0]), np.zeros(2, dtype=np.int32), dem), 0.0)
    ((_, req),) = mon.port.take()  # 3 of 4 cores reserved: the second probe waits
    assert req.reserved.tolist() == [3.0, 1.0] and mon.queue_length(0) == 1
    # the task needs less than the probe reserved: the rest is returned, still not enough for the next probe
    mon.on_message(Grant(1, 0, 0, 4, 1.0, 0.0, 4, np.array([2.0, 1.0]), req.reserved), 0.1)
    assert mon.port.take() == [] and mon.free[0].tolist() == [2.0, 3.0]
    ((_, key),) = mon.port.timers.values()
    mon.on_timer(key, 1.1)
    sent = mon.port.take()
    assert isinstance(sent[0][1], Done) or sent[0][1].tasks.tolist() == [4]
    assert isinstance(sent[1][1], Request) and sent[1][1].waited == pytest.approx(1.1)
    assert rec.end[4] == 1.1


def test_resource_mode_task_larger_than_reservation_is_rejected():
    cap = np.array([[4.0, 4.0]])
    mon, _ = make_monitors(n=1, capacity=cap)
    mon.on_message(Probes(1, 0, np.array([0]), np.zeros(1, dtype=np.int32), np.array([[1.0, 1.0]])), 0.0)
    ((_, req),) = mon.port.take()
    with pytest.raises(SimulationError, match="reserved"):
        mon.on_message(Grant(1, 0, 0, 4, 1.0, 0.0, 4, np.array([2.0, 1.0]), req.reserved), 0.1)


def test_probes_go_only_to_machines_big_enough_when_machines_differ():
    # workers 0-5 have 2 cores, 6-9 have 8: a 4-core group must only probe workers 6-9
    cap = np.array([[2.0, 4.0]] * 6 + [[8.0, 16.0]] * 4)
    sampler = ProbeSampler(np.zeros(10, dtype=np.uint32), capacity=cap)
    rng = np.random.default_rng(0)
    workers, groups = sampler.sample(rng, [0, 0], [4, 6], [2, 3], np.array([[4.0, 1.0], [1.0, 1.0]]))
    assert set(workers[groups == 0].tolist()) <= {6, 7, 8, 9} and (groups == 0).sum() == 4
    assert (groups == 1).sum() == 6 and np.unique(workers[groups == 1]).size == 6
    # identical machines: the capacity check is skipped (every feasible task fits everywhere)
    assert ProbeSampler(np.zeros(4, dtype=np.uint32), capacity=np.ones((4, 2))).capacity is None


def test_first_open_fit_kernel_is_the_vectorized_rule():
    """The compiled choice of another group for a probe (jobs with many groups) finds what
    ``argmax(nonempty & ((gmasks & ~worker_mask) == 0))`` finds, or -1 when no group fits."""
    from megha.schedulers.sparrow._kernels import CLOSED, first_open_fit

    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        gmasks = rng.integers(0, 1 << 6, n).astype(np.uint32)
        nonempty = rng.random(n) < 0.6
        wm = np.uint32(rng.integers(0, 1 << 6))
        fit = nonempty & ((gmasks & ~wm) == 0)
        want = int(fit.argmax()) if fit.any() else -1
        open_masks = gmasks.astype(np.uint64) | np.where(nonempty, 0, CLOSED).astype(np.uint64)
        assert first_open_fit(open_masks, ~int(wm) & 0xFFFFFFFF | CLOSED) == want
