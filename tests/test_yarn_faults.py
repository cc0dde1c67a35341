"""The YARN-like RM and its node managers under faults, driven by hand-written messages: node deaths and returns,
launches that reach a dead (or re-registered) node, and the work-preserving RM restart."""

from __future__ import annotations

import json

import numpy as np
import pytest

from megha.config import RunConfig
from megha.metrics.recorder import TaskRecorder
from megha.metrics.report import summarize
from megha.runner import simulate
from megha.schedulers.centralized.heartbeats import HeartbeatSchedule
from megha.schedulers.centralized.messages import (
    LaunchFailed,
    NodeHeartbeat,
    NodesAccepted,
    NodesLost,
    NodesRegistered,
    Resync,
)
from megha.schedulers.centralized.nodemanager import NodeManagers
from megha.schedulers.centralized.simrm import SimResourceManager
from megha.schedulers.common.messages import Launch
from tests.test_yarn_components import attach, job, launches, make_rm
from tests.tracegen import write_trace

U32 = np.uint32


def with_info(rm, masks=None, jobs=None):
    """The applications' record of their tasks (duration 1, mask, job)."""
    rm.task_info = lambda t: (1.0, 0 if masks is None else masks.get(t, 0), 0 if jobs is None else jobs.get(t, 0))
    return rm


def run_claims(rm, now):
    for _, k in list(rm.port.timers.values()):
        rm.on_timer(k, now)
    rm.port.timers.clear()


def test_lost_containers_go_back_to_the_head_of_the_queue_and_the_dead_node_takes_nothing():
    rm, _ = make_rm([0.1, 0.5])
    with_info(rm)
    rm.on_message(job(0, [0, 1]), 0.0)
    run_claims(rm, 0.6)
    assert sorted(launches(rm.port)) == [(0, 0), (1, 1)]
    rm.on_message(job(1, [2, 3]), 1.0)  # both nodes busy: queued
    assert rm.queued() == 2
    rm.on_message(NodesLost([0], [2], [(0, 0, None)]), 1.5)  # node 0 dies with task 0
    assert rm.queued() == 3 and 0 in rm.down
    # node 1 frees: the lost task goes first (head of the queue), never to node 0
    rm.on_message(NodeHeartbeat([1], [1], [1]), 2.0)
    assert launches(rm.port) == [(0, 1)]
    rm.on_message(job(2, [4]), 2.1)
    assert rm.queued() == 3 and rm.port.timers == {}  # no node with room: node 0 is dead


def test_a_heartbeat_sent_before_its_node_died_counts_but_does_not_free_the_node():
    rm, rec = make_rm([0.1, 0.5])
    with_info(rm)
    rm.on_message(job(0, [0]), 0.0)
    run_claims(rm, 0.2)
    assert launches(rm.port) == [(0, 0)]
    rm.on_message(NodesLost([0], [2], []), 1.0)
    rm.on_message(NodeHeartbeat([0], [0], [0]), 1.0005)
    assert rec.known[0] == pytest.approx(1.0005)
    rm.on_message(job(1, [1, 2]), 1.1)  # node 1 takes one, node 0 nothing
    run_claims(rm, 1.6)
    assert launches(rm.port) == [(1, 1)] and rm.queued() == 1


def test_claims_on_a_dead_node_are_booked_again_and_a_node_back_is_accepted_and_filled():
    rm, _ = make_rm([0.1, 0.5])
    with_info(rm)
    rm.on_message(job(0, [0]), 0.0)  # booked on node 0 for its heartbeat at 0.1
    assert rm.claims == {0: [(0, 1.0, None, 0)]}
    rm.on_message(NodesLost([0], [2], []), 0.05)
    assert 0 not in rm.claims and rm.claims[1][0][0] == 0  # booked again on node 1
    run_claims(rm, 0.6)
    assert launches(rm.port) == [(0, 1)]
    rm.on_message(job(1, [1]), 0.7)
    assert rm.queued() == 1
    rm.on_message(NodesRegistered([0], [3], [], []), 2.0)
    sent = rm.port.take()
    assert isinstance(sent[0][1], NodesAccepted) and sent[0][1].nodes == [0] and sent[0][1].incs == [3]
    assert isinstance(sent[1][1], Launch) and list(sent[1][1].tasks) == [1] and list(sent[1][1].workers) == [0]
    # stale reports (older versions) change nothing
    rm.on_message(NodesLost([0], [2], []), 2.1)
    rm.on_message(NodesRegistered([0], [3], [], []), 2.1)
    assert 0 not in rm.down and rm.port.take() == []


def test_fewest_tasks_queue_takes_a_lost_task_back_with_its_job():
    rm, _ = make_rm([0.1], queue="fewest-tasks")
    with_info(rm, jobs={0: 0, 1: 1, 2: 1})
    rm.on_message(job(0, [0]), 0.0)
    run_claims(rm, 0.2)
    launches(rm.port)
    rm.on_message(job(1, [1, 2]), 0.5)
    rm.on_message(NodesLost([0], [2], [(0, 0, None)]), 1.0)
    assert [e[0] for e in rm.queues[0].entries()] == [0, 1, 2]  # job 0 has the fewest queued tasks


def test_node_managers_refuse_launches_to_a_dead_node_and_to_one_the_rm_has_not_accepted():
    rec = TaskRecorder(np.zeros(6))
    nm = attach(NodeManagers("nm", "rm", HeartbeatSchedule(np.array([0.5, 0.25]), 1.0), 2, rec))
    nm.on_message(Launch([0, 1], [0, 1], [3.0, 3.0], "nm"), 0.0)
    lost = nm.fail_nodes([0], 1.0)
    assert lost.nodes == [0] and lost.incs == [2] and [x[:2] for x in lost.lost] == [(0, 0)]
    assert rec.fault_kills[0] == 1 and np.isnan(rec.start[0])
    nm.on_message(Launch([2], [0], [1.0], "nm"), 1.2)  # allocated before the RM learned: refused
    ((dst, msg),) = nm.port.take()
    assert dst == "rm" and isinstance(msg, LaunchFailed) and msg.tasks == [2] and np.isnan(rec.start[2])
    nm.restore_nodes([0], 2.0)
    ((_, reg),) = nm.port.take()
    assert isinstance(reg, NodesRegistered) and reg.nodes == [0] and reg.incs == [3]
    # a launch allocated against the old incarnation, still on its way, reaches the node back: refused
    nm.on_message(Launch([3], [0], [1.0], "nm"), 2.0)
    ((_, msg),) = nm.port.take()
    assert isinstance(msg, LaunchFailed) and msg.tasks == [3]
    nm.on_message(NodesAccepted([0], [3]), 2.001)
    nm.on_message(Launch([4], [0], [1.0], "nm"), 2.002)
    assert nm.port.take() == [] and rec.start[4] == pytest.approx(2.002)
    # the container on node 1 ran on: its heartbeat comes
    key = next(k for _, k in nm.port.timers.values() if k == pytest.approx(3.25))
    nm.on_timer(key, 3.25)
    ((_, hb),) = nm.port.take()
    assert list(hb.tasks) == [1]


def test_a_container_that_ended_before_its_node_died_but_was_not_reported_is_lost():
    rec = TaskRecorder(np.zeros(2))
    nm = attach(NodeManagers("nm", "rm", HeartbeatSchedule(np.array([0.9]), 1.0), 1, rec))
    nm.on_message(Launch([0], [0], [0.5], "nm"), 0.0)  # ends at 0.5, heartbeat at 0.9
    lost = nm.fail_nodes([0], 0.7)
    assert [x[0] for x in lost.lost] == [0] and np.isnan(rec.end[0]) and rec.fault_kills[0] == 1
    ((_, key),) = nm.port.timers.values()
    nm.on_timer(key, 0.9)  # nothing left to report
    assert nm.port.take() == []


def test_work_preserving_restart_rebuilds_the_view_from_the_node_managers():
    rm, rec = make_rm([0.1, 0.5, 0.8])
    with_info(rm)
    rm.on_message(job(0, [0, 1]), 0.0)
    run_claims(rm, 0.6)
    assert sorted(launches(rm.port)) == [(0, 0), (1, 1)]
    rm.on_message(job(1, [2]), 0.65)  # booked on node 2, not launched yet
    assert list(rm.claims) == [2]
    rm.port.timers.clear()
    rm.on_recover(1.0)
    ((_, msg),) = rm.port.take()
    assert isinstance(msg, Resync) and rm.syncing == msg.epoch
    assert rm.claims == {} and rm.queued() == 1  # asked for again; nothing allocated before the registration
    rm.on_message(job(2, [3]), 1.1)
    assert rm.queued() == 2 and rm.port.timers == {}
    rm.on_message(NodeHeartbeat([0], [0], [0]), 1.2)  # reported before the node managers re-registered
    assert rec.known[0] == pytest.approx(1.2) and rm.port.take() == []
    # the registration: node 1 runs task 1, nodes 0 and 2 are free
    rm.on_message(NodesRegistered([0, 1, 2], [1, 1, 1], [1], [1], None, resync=msg.epoch), 1.3)
    sent = rm.port.take()
    assert isinstance(sent[0][1], NodesAccepted)
    assert sorted(zip(sent[1][1].tasks, sent[1][1].workers, strict=True)) == [(2, 0), (3, 2)]
    assert rm.syncing == 0 and rm.queued() == 0 and rm.busy == [True, True, True]
    rm.on_message(NodeHeartbeat([0], [2], [0]), 1.45)  # node 0 frees
    rm.port.timers.clear()
    rm.on_message(job(3, [4]), 1.5)  # booked on node 0 for its next heartbeat
    assert rm.claims == {0: [(4, 1.0, None, 0)]}
    rm.on_timer(("hb", 0), 1.5)  # a heartbeat timer of the RM before its restart, held while it was down: void
    assert rm.port.take() == [] and 0 in rm.claims
    ((_, key),) = rm.port.timers.values()
    rm.on_timer(key, 2.1005)
    assert launches(rm.port) == [(4, 0)]


def test_an_old_resync_answer_is_ignored_and_kept_recovery_keeps_the_state():
    rm, _ = make_rm([0.1, 0.5])
    with_info(rm)
    rm.on_recover(1.0)
    rm.on_recover(2.0)
    assert [m.epoch for _, m in rm.port.take()] == [1, 2]
    rm.on_message(NodesRegistered([0, 1], [1, 1], [], [], None, resync=1), 2.1)
    assert rm.syncing == 2 and rm.port.take() == []
    kept, _ = make_rm([0.1, 0.5])
    kept.recovery = "kept"
    kept.on_message(job(0, [0]), 0.0)
    kept.on_recover(1.0)
    assert kept.port.take() == [] and list(kept.claims) == [0]


def make_sim_rm(phases, n_tasks=10):
    phases = np.asarray(phases, dtype=float)
    rec = TaskRecorder(np.zeros(n_tasks))
    rm = SimResourceManager(
        "rm",
        "nm",
        "nm",
        np.zeros(phases.size, dtype=U32),
        None,
        HeartbeatSchedule(phases, 1.0),
        rec,
        scan="first",
        heartbeat_latency=0.0005,
        launch_delay=0.0005,
    )
    return with_info(attach(rm)), rec


def test_in_process_node_managers_withdraw_a_launch_on_its_way_to_a_node_that_died():
    from megha.sim.component import RecordingPort

    class Port(RecordingPort):
        def set_timer_at(self, at, key):
            return self.set_timer(at, key)

        def count_message(self, cls, n=1):
            pass

    rm, rec = make_sim_rm([0.1, 0.5])
    rm.attach(Port(0))
    rm.on_start(0.0)
    rm.on_message(job(0, [0]), 0.0)
    ((_, key),) = rm.port.timers.values()
    rm.port.timers.clear()
    rm.on_timer(key, 0.1005)  # launched: reaches node 0 at 0.101
    assert rec.start[0] == pytest.approx(0.101)
    lost = rm.fail_nodes([0], 0.1008)  # the node dies before the launch arrives
    assert [x[0] for x in lost.lost] == [0] and np.isnan(rec.start[0]) and rec.launches[0] == 0
    assert rec.fault_kills[0] == 0  # it never ran
    # the RM commits a launch to node 0 before it learns of the death: refused, booked elsewhere
    rm._add_launch(0, (1, 1.0, None, 0))
    rm._flush(0.1009)
    assert np.isnan(rec.start[1]) and rm.claims[1][0][0] == 1
    rm.on_message(lost, 0.1008)
    assert 0 in rm.down and rm.queued() == 1  # node 1 is booked: the lost task waits at the head of the queue
    back = rm.restore_nodes([0], 0.2)
    assert back.nodes == [0] and back.incs == [3]
    rm.on_message(back, 0.2)
    assert 0 not in rm.down and rm.on_node[0] == 0 and rec.start[0] == pytest.approx(0.2005)  # the lost task


@pytest.mark.parametrize("resources", [False, True])
def test_node_faults_from_a_schedule_lose_no_task(tmp_path, resources):
    rng = np.random.default_rng(3)
    jobs = [(float(i), [float(x) for x in rng.uniform(1, 8, size=rng.integers(1, 8))]) for i in range(30)]
    trace = write_trace(jobs, tmp_path / "t.tr")
    faults = {
        "seed": 4,
        "fault": [
            {"at": 3, "kind": "worker", "target": 0.3, "down_for": 4},
            {"at": 8, "kind": "rm", "down_for": 2},
            {"at": 9, "kind": "worker", "target": 0.2, "down_for": 0},
        ],
    }
    kw = {"resources": True} if resources else {}
    cfg = RunConfig(scheduler="yarn", trace=str(trace), workers=20, seed=1, faults=faults, **kw)
    res = simulate(cfg)
    assert res.unfinished_reason is None
    assert (res.recorder.finishes[res.feasible] == 1).all()
    f = summarize(res)["faults"]
    assert f["injected"] == 3 and f["tasks_reexecuted"] > 0 and f["work_lost_s"] > 0
    assert res.counters["yarn_restarts"] == 1 and res.counters["yarn_requeued"] >= f["tasks_reexecuted"]
    json.dumps(f)
