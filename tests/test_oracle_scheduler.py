"""The oracle driven by hand-written messages: instant placement, one queue (fifo / fewest-tasks), resources."""

from __future__ import annotations

import numpy as np
import pytest

from megha.config import RunConfig
from megha.metrics.recorder import TaskRecorder
from megha.metrics.summary import job_table
from megha.model.matching import Policy
from megha.runner import simulate
from megha.schedulers.common.messages import JobArrival
from megha.schedulers.oracle import Oracle
from megha.sim.component import RecordingPort

U32 = np.uint32


def make(masks, policy=Policy.FIRST, queue="fifo", capacity=None, n_tasks=20):
    rec = TaskRecorder(np.zeros(n_tasks))
    rec.expect(n_tasks)
    o = Oracle("o", np.asarray(masks, dtype=U32), rec, capacity, policy, queue)
    o.attach(RecordingPort(0))
    o.on_start(0.0)
    return o, rec


def job(j, tasks, durations=None, masks=None, demands=None):
    tasks = np.asarray(tasks, dtype=np.int64)
    durs = np.ones(tasks.size) if durations is None else np.asarray(durations, dtype=float)
    m = np.zeros(tasks.size, dtype=U32) if masks is None else np.asarray(masks, dtype=U32)
    return JobArrival(j, tasks, durs, m, demands=None if demands is None else np.asarray(demands, dtype=float))


def fire(o, port, upto):
    """Fire the oracle's end timers due by ``upto``, in time order; returns the instants."""
    fired = []
    while True:
        due = sorted((d, k) for _, (d, k) in port.timers.items() if k in o._ends and k <= upto)
        if not due:
            return fired
        _, k = due[0]
        o.on_timer(k, k)
        fired.append(k)


def test_a_task_starts_the_instant_it_arrives_and_its_end_is_known_at_once():
    o, rec = make([0b1, 0b0])
    o.on_message(job(0, [0, 1], durations=[2.0, 3.0], masks=[0b1, 0b0]), 5.0)
    assert rec.scheduled[0] == rec.start[0] == 5.0 and rec.worker[0] == 0 and rec.worker[1] == 1
    assert o.port.sent == []  # no messages: timers only
    fire(o, o.port, 10.0)
    assert rec.end[0] == rec.known[0] == 7.0 and rec.known[1] == 8.0


def test_a_task_waits_for_a_suitable_worker_and_gets_it_the_instant_it_frees():
    o, rec = make([0b1, 0b0])
    o.on_message(job(0, [0, 1], durations=[2.0, 1.0]), 0.0)  # both workers busy
    o.on_message(job(1, [2], masks=[0b1]), 0.5)  # needs worker 0
    o.on_message(job(2, [3]), 0.6)  # fits anywhere
    assert o.queued() == 2
    fire(o, o.port, 1.0)  # worker 1 frees at 1.0: task 2 does not fit it, task 3 does
    assert rec.start[3] == 1.0 and rec.worker[3] == 1 and np.isnan(rec.start[2])
    fire(o, o.port, 2.0)
    assert rec.start[2] == 2.0 and rec.worker[2] == 0 and o.queued() == 0


def test_fifo_gives_a_freed_worker_to_the_oldest_waiting_task():
    o, rec = make([0], queue="fifo")
    o.on_message(job(0, [0]), 0.0)
    o.on_message(job(1, [1, 2, 3]), 0.1)
    o.on_message(job(2, [4]), 0.2)
    fire(o, o.port, 10.0)
    assert np.argsort(rec.start[:5]).tolist() == [0, 1, 2, 3, 4]


def test_fewest_tasks_gives_a_freed_worker_to_the_job_with_the_fewest_waiting_tasks():
    o, rec = make([0], queue="fewest-tasks")
    o.on_message(job(0, [0]), 0.0)
    o.on_message(job(1, [1, 2, 3]), 0.1)
    o.on_message(job(2, [4]), 0.2)
    fire(o, o.port, 10.0)
    assert np.argsort(rec.start[:5]).tolist() == [0, 4, 1, 2, 3]


def test_policies_choose_among_the_suitable_free_workers():
    masks = [0b111, 0b011, 0b001, 0b000]
    o, rec = make(masks, policy=Policy.MIN_CONSTRAINTS)
    o.on_message(job(0, [0, 1], masks=[0b001, 0b001]), 0.0)
    assert rec.worker[:2].tolist() == [2, 1]
    o, rec = make(masks, policy=Policy.FIRST)
    o.on_message(job(0, [0, 1], masks=[0b001, 0b001]), 0.0)
    assert rec.worker[:2].tolist() == [0, 1]
    seen = set()
    for seed in range(30):
        o, rec = make(masks, policy=Policy.RANDOM)
        o.attach(RecordingPort(seed))
        o.on_start(0.0)
        o.on_message(job(0, [0], masks=[0b001]), 0.0)
        seen.add(int(rec.worker[0]))
    assert seen == {0, 1, 2}


def test_resource_mode_packs_requests_within_capacity_and_queues_the_rest():
    cap = np.array([[4.0, 4.0], [2.0, 2.0]])
    o, rec = make([0, 0], capacity=cap)
    o.on_message(job(0, [0, 1, 2], durations=[1.0, 2.0, 3.0], demands=[[3, 1], [1, 1], [2, 2]]), 0.0)
    assert rec.worker[:3].tolist() == [0, 0, 1]
    o.on_message(job(1, [3, 4], demands=[[4, 4], [1, 1]]), 0.5)  # 3 needs worker 0 empty; 4 fits nowhere now
    assert o.queued() == 2
    fire(o, o.port, 1.0)  # task 0 ends: worker 0 has 3 x 3 free: task 4 (1,1) fits, task 3 does not
    assert rec.start[4] == 1.0 and np.isnan(rec.start[3])
    fire(o, o.port, 10.0)
    assert rec.start[3] == 2.0 and rec.worker[3] == 0  # tasks 1 and 4 end at 2.0: worker 0 is empty


def test_bad_queue_is_rejected():
    with pytest.raises(ValueError, match="queue"):
        Oracle("o", np.zeros(2, dtype=U32), TaskRecorder(np.zeros(1)), queue="lifo")


def test_end_to_end_an_idle_datacenter_adds_no_delay():
    r = simulate(RunConfig(scheduler="oracle", trace="sample:YH_small", cluster="sample:megha_G5L5S10000"))
    assert r.unfinished_reason is None
    d = job_table(r.workload, r.recorder, r.feasible)["delay"]
    assert np.allclose(d, 0.0, atol=1e-9)
    assert r.counters["oracle_left_queued"] == 0


def test_over_commit_is_the_ledgers_error_in_both_modes():
    """The oracle never over-commits; if its placement were wrong, the workers' ledger raises its one error."""
    from megha.errors import SimulationError

    o, _ = make([0, 0])
    o._start([1], [0], [5.0], [None], 0.0)
    with pytest.raises(SimulationError, match=r"^o: worker 0 over-committed at t=1\.000000: task 2 launched while"):
        o._start([2], [0], [5.0], [None], 1.0)
    o, _ = make([0, 0], capacity=np.array([[1.0, 1.0], [1.0, 1.0]]))
    o._take_resource(1, np.array([0.5, 1.0]), 0.0)
    with pytest.raises(
        SimulationError,
        match=r"^o: worker 1 over-committed at t=2\.000000: used \[1\.5, 1\.0\] > capacity \[1\.0, 1\.0\]$",
    ):
        o._take_resource(1, np.array([1.0, 0.0]), 2.0)
