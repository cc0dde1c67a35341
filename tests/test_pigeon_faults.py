"""PigeonC/Pigeon under worker and master faults, driven by hand-written messages: a lost task goes back to the
head of its master's queue, tasks no live worker of the group can run go back to the distributor, which re-routes
them (or holds them until workers come back), and the distributors route around a crashed master."""

from __future__ import annotations

import numpy as np
import pytest

from megha.errors import SimulationError
from megha.metrics.recorder import TaskRecorder
from megha.model.matching import SegmentedIndex
from megha.schedulers.common.messages import JobArrival
from megha.schedulers.pigeon.distributor import MasterWeights, PigeonDistributor
from megha.schedulers.pigeon.faults import Health
from megha.schedulers.pigeon.messages import GroupBack, Reroute, TaskBatch
from megha.schedulers.pigeon.simmaster import SimPigeonMaster
from megha.sim.component import RecordingPort

U32 = np.uint32


class SimPort(RecordingPort):
    """The simulator-only calls of the engine's port."""

    def set_timer_at(self, at, key):
        return self.set_timer(at, key)

    def count_message(self, cls, n=1):
        pass


def master(masks, n_tasks=10, fqw=20):
    rec = TaskRecorder(np.zeros(n_tasks))
    rec.expect(n_tasks)
    ws = np.arange(len(masks))
    m = SimPigeonMaster("m", ws, np.array(masks, dtype=U32), "w", rec, ["d0", "d1"], fqw=fqw, policy="first")
    m.attach(SimPort(0))
    m.on_start(0.0)
    return m, rec


def batch(tasks, durs, masks, short=True, dist=0):
    return TaskBatch(0, np.array(tasks, dtype=np.int64), np.array(durs, float), np.array(masks, dtype=U32), short, dist)


def info(durs, masks, short):
    return lambda t: (float(durs[t]), int(masks[t]), bool(short[t]))


def test_a_lost_task_goes_to_the_head_of_its_class_queue_and_runs_first_when_its_worker_is_back():
    m, rec = master([0, 0])
    durs, masks, short = [5.0, 5.0, 1.0, 1.0], [0, 0, 0, 0], [True, True, True, True]
    m.on_message(batch([0, 1, 2, 3], durs, masks), 0.0)  # 0 and 1 run, 2 and 3 queue (short)
    assert [e[0] for e in m.short_q.entries()] == [2, 3]
    lost = m.fail_workers([0], 1.0, info(durs, masks, short))
    assert lost == [0]
    assert rec.fault_kills[0] == 1 and rec.work_lost == 1.0 - 0.0005
    assert [e[0] for e in m.short_q.entries()] == [0, 2, 3]  # the lost task is next
    assert m.running() == 1 and 0 in m.dead
    # nothing launches on the dead worker: the end of task 1 hands worker 1 the lost task
    m.on_timer(0.0005 + 5.0, 5.0005)
    assert rec.worker[0] == 1 and rec.start[0] == 5.0005 + 0.0005
    m.restore_workers([0], 6.0, 3)
    assert rec.worker[2] == 0  # the restored worker takes the next queued task
    back = m.port.take(GroupBack)
    assert sorted(d for d, _ in back) == ["d0", "d1"] and back[0][1].master == 3


def test_a_lost_task_starts_at_once_on_a_free_suitable_worker():
    m, rec = master([0, 0, 0])
    durs, masks, short = [5.0], [0], [False]
    m.on_message(batch([0], durs, masks, short=False), 0.0)
    w0 = int(rec.worker[0])
    m.fail_workers([w0], 2.0, info(durs, masks, short))
    assert rec.worker[0] not in (-1, w0) and rec.start[0] == 2.0005
    assert m.queued() == 0


def test_a_failed_worker_holds_its_ledger_slot_until_it_comes_back():
    """A dead worker is busy in the group's worker ledger: a launch on it is the ledger's over-commit error."""
    m, _ = master([0, 0])
    m.fail_workers([0], 1.0, info([], [], []))
    assert m.ledger.busy() == 1 and m.running() == 0  # held by the failure, running nothing
    m.dist_of[5] = 0
    with pytest.raises(SimulationError, match=r"^w: worker 0 over-committed at t=2\.000500: task 5 launched while it"):
        m._launch([5], [0], [1.0], 2.0)
    m.restore_workers([0], 3.0, 0)
    assert m.ledger.running_on(0) == -1 and m.n_free == 2


def test_a_launch_still_on_its_way_to_a_dying_worker_never_started():
    m, rec = master([0, 0])
    durs, masks, short = [5.0, 5.0], [0, 0], [True, True]
    m.on_message(batch([0, 1], durs, masks), 1.0)  # both start at 1.0005
    m.fail_workers([int(rec.worker[0])], 1.0002, info(durs, masks, short))
    assert np.isnan(rec.start[0]) and rec.launches[0] == 0 and rec.fault_kills[0] == 0 and rec.running == 1
    assert [e[0] for e in m.short_q.entries()] == [0]


def test_tasks_no_live_worker_of_the_group_can_run_go_back_to_their_distributor():
    m, _ = master([0b1, 0b0])
    durs, masks, short = [5.0, 5.0, 5.0], [0b1, 0b1, 0b0], [True, True, True]
    m.on_message(batch([0, 1], durs[:2], masks[:2], dist=1), 0.0)  # 0 runs on worker 0, 1 queues
    m.on_message(batch([2], durs[2:], masks[2:]), 0.0)  # on worker 1
    m.port.take()
    m.fail_workers([0], 1.0, info(durs, masks, short))
    ((dst, msg),) = m.port.take(Reroute)
    assert dst == "d1" and sorted(msg.tasks.tolist()) == [0, 1] and msg.short
    assert m.queued() == 0 and 0 not in m.dist_of and 1 not in m.dist_of
    # a new batch with a task the group can no longer run: that task goes back, the other stays
    m.on_message(batch([3, 4], [1.0, 1.0], [0b1, 0b0]), 2.0)
    ((dst, msg),) = m.port.take(Reroute)
    assert dst == "d0" and msg.tasks.tolist() == [3]
    assert [e[0] for e in m.short_q.entries()] == [4]


def distributor(weighted=True):
    # group 0: workers 0 (mask 1), 1; group 1: workers 2 (mask 1), 3
    masks = np.array([0b1, 0b0, 0b1, 0b0], dtype=U32)
    weights = MasterWeights(SegmentedIndex([np.array([0, 1]), np.array([2, 3])], masks))
    rec = TaskRecorder(np.zeros(20))
    d = PigeonDistributor("d0", 0, ["m0", "m1"], weights, rec, cutoff=10.0, weighted=weighted)
    d.attach(RecordingPort(1))
    d.on_start(0.0)
    d.health = Health(weights, 4)
    return d


def test_a_rerouted_task_goes_to_a_master_with_a_live_suitable_worker_or_waits_for_one():
    for weighted in (True, False):
        d = distributor(weighted)
        d.health.alive[0] = False
        d.health.changed()
        d.on_message(Reroute(-1, np.array([0, 1]), np.array([1.0, 1.0]), np.array([0b1, 0b1], dtype=U32), True), 0)
        sent = d.port.take()
        assert [dst for dst, _ in sent] == ["m1"] and sent[0][1].tasks.tolist() == [0, 1] and sent[0][1].short
        d.health.alive[2] = False
        d.health.changed()
        d.on_message(Reroute(-1, np.array([5]), np.array([1.0]), np.array([0b1], dtype=U32), False), 0)
        assert d.port.take() == [] and [p[1] for p in d.parked] == [5]
        d.health.alive[0] = True
        d.health.changed()
        d.on_message(GroupBack(0, np.array([0])), 1.0)
        ((dst, msg),) = d.port.take()
        assert dst == "m0" and msg.tasks.tolist() == [5] and not msg.short and not d.parked


def test_the_distributors_route_new_jobs_around_a_crashed_master():
    d = distributor()
    d.health.master_up[0] = False
    d.health.changed()
    tasks = np.arange(6, dtype=np.int64)
    d.on_message(JobArrival(0, tasks, np.ones(6), np.zeros(6, dtype=U32), mean_duration=1.0), 0.0)
    assert {dst for dst, _ in d.port.take()} == {"m1"}
    # a task only the crashed master's group could run still goes there (it waits for the master)
    d.health.alive[2] = False
    d.health.changed()
    d.on_message(JobArrival(1, np.array([7]), np.ones(1), np.array([0b1], dtype=U32), mean_duration=1.0), 0.0)
    assert [dst for dst, _ in d.port.take()] == ["m0"]


def test_without_faults_the_choice_is_unchanged():
    a, b = distributor(), distributor()
    b.health = None
    masks = np.array([0b1, 0b0, 0b0, 0b1] * 5, dtype=U32)
    assert a.choose_masters(masks).tolist() == b.choose_masters(masks).tolist()
