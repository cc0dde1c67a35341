"""MACRM's resource arbitrator driven by hand-written messages: heartbeat-driven queue serving, the free-resource view,
parallel scheduler actors with optimistic commits (conflicts rejected and retried; gang requests all-or-nothing),
the mode switch, and failure handling."""

from __future__ import annotations

import numpy as np

from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.messages import JobArrival
from megha.schedulers.macrm.arbitrator import JobRec, ResourceArbitrator
from megha.schedulers.macrm.messages import (
    Accepted,
    Allocate,
    AllocRejected,
    ExpectJM,
    ForwardedHeartbeat,
    HeartbeatReply,
    JobDone,
    JobDoneAck,
    LoadInfo,
    ModeChange,
    NodesLost,
    Persist,
    Placed,
    Recover,
    Report,
    ReportAck,
    SampleDecision,
    SampleInquiry,
    SampleReply,
    Snapshot,
    Submit,
    TaskRequest,
    TrackerStats,
    select_containers,
)
from megha.schedulers.macrm.policy import ModeSwitch
from megha.schedulers.macrm.view import FreeView, match
from megha.sim.component import RecordingPort

ALL = np.uint32((1 << 21) - 1)


def spec(job, n=1, first=0, user=0):
    tasks = np.arange(first, first + n, dtype=np.int64)
    return JobArrival(job, tasks, np.ones(n), np.zeros(n, dtype=np.uint32), np.ones((n, 1)), user=user)


def make(
    n=4,
    actors=2,
    match_cost=1e-3,
    per_task=0.0,
    jm_limit=None,
    restarted=False,
    jm_placement="heartbeat",
    round_end="all",
):
    rec = TaskRecorder(np.zeros(64))
    arb = ResourceArbitrator(
        "arb",
        rec,
        n,
        np.full(n, ALL),
        np.zeros(n, dtype=np.int64),
        ["nm0"],
        ["tr0"],
        "sup",
        "client",
        np.array([1.0]),
        np.array([4.0 * n]),
        actors=actors,
        match_cost=match_cost,
        match_cost_per_task=per_task,
        switch=ModeSwitch(0.9, 0.05),
        restarted=restarted,
        jm_limit=jm_limit,
        jm_placement=jm_placement,
        sampling_timeout=0.003,
        round_end=round_end,
    )
    port = RecordingPort()
    arb.attach(port)
    arb.on_start(0.0)
    return arb, port


def hb(arb, nodes, free, now, acks=None):
    arb.on_message(
        ForwardedHeartbeat(0, "nm0", list(nodes), np.array(free, dtype=float)[:, None], list(acks or [0] * len(nodes))),
        now,
    )


def go_central(arb, port, now=0.0):
    arb.on_message(TrackerStats(0, np.array([0.95 * 16]), np.array([16.0]), {}, True), now)
    assert arb.central
    port.take()


def running(arb, job, n, first):
    arb.jobs[job] = JobRec(spec(job, n, first), 0, "running", f"jm{job}", 3, 0)


def request(arb, job, n, first, now, gang=False):
    arb.on_message(
        TaskRequest(
            f"jm{job}", job, 0, 0, list(range(first, first + n)), [1.0] * n, np.ones((n, 1)), [0] * n, gang=gang
        ),
        now,
    )


def fire_commits(arb, port, now):
    """Fire the scheduler actors' pending commit timers in time order."""
    for h, (delay, key) in sorted(port.timers.items(), key=lambda kv: kv[1][0]):
        if key[0] == "commit":
            del port.timers[h]
            arb.on_timer(key, now + delay)


def allocated(port):
    return [t for _, m in port.take(Allocate) for t in m.containers.tasks]


# --- distributed mode: the queue-actor serves on forwarded heartbeats ---------------------------------------------
def test_job_manager_container_allocated_in_a_heartbeat_reply():
    arb, port = make()
    arb.on_message(Submit(spec(5, 3)), 0.0)
    assert [m.job for _, m in port.take(Accepted)] == [5]
    assert [m.op for _, m in port.take(Persist)] == ["epoch", "submit"]
    hb(arb, [2], [0.5], 0.1)  # no room for the job manager's 1 core
    (r,) = port.take(HeartbeatReply)
    assert r[1].containers is None
    hb(arb, [1], [4.0], 0.2)
    (r,) = port.take(HeartbeatReply)
    c = r[1].containers
    assert r[0] == "nm0" and c.tasks == [-1] and c.nodes == [1] and c.owners == ["macrm/jm5"]
    assert c.specs[0][0].job == 5
    assert [m.jms for _, m in port.take(ExpectJM)] == [[("macrm/jm5", 5, 0)]]
    assert arb.jobs[5].status == "running" and arb.view.free[1, 0] == 3.0


def test_job_manager_container_by_power_of_two_sampling():
    """jm_placement="sampling" (the thesis's Sparrow): two random nodes sampled, the least loaded responder gets the
    container, the other is released; no responder -> sampled again after the timeout; heartbeats do not serve it."""
    arb, port = make(n=8, jm_placement="sampling")
    arb.on_message(Submit(spec(5, 3)), 0.0)
    ((dst, inq),) = port.take(SampleInquiry)
    assert dst == "nm0" and len(inq.nodes) == 2 and inq.jm == "arb" and inq.need.tolist() == [1.0]
    hb(arb, [0, 1, 2, 3], [4.0] * 4, 0.0005)  # heartbeats do not place a sampled container
    assert all(m.containers is None for _, m in port.take(HeartbeatReply))
    (timer,) = [k for _, k in port.timers.values() if k[0] == "jmsample"]
    arb.on_timer(timer, 0.003)  # nobody answered: a new sampling
    ((_, inq2),) = port.take(SampleInquiry)
    assert inq2.token != inq.token and arb.stats["jm_sampling_failures"] == 1
    a, b = inq2.nodes
    arb.on_message(SampleReply(inq2.token, [a, b], np.array([[1.5], [3.0]]), np.array([[4.0], [4.0]])), 0.004)
    ((_, dec),) = port.take(SampleDecision)
    assert dec.containers.tasks == [-1] and dec.containers.nodes == [b] and dec.cancel == [a]
    assert dec.containers.seqs[0] > 0  # booked in the view: the node acknowledges it in its heartbeats
    assert arb.jobs[5].status == "running" and arb.n_queued == 0
    arb.on_message(SampleReply(inq.token, [7], np.array([[4.0]]), np.array([[4.0]])), 0.005)  # a late reply
    ((_, late),) = port.take(SampleDecision)
    assert late.cancel == [7] and len(late.containers) == 0


def test_job_manager_container_sampling_follows_the_round_end_rule():
    """round_end="enough": the first answer holds the container (placed after the answers of that instant);
    "timeout": even two answers wait for the timer."""
    arb, port = make(n=8, jm_placement="sampling", round_end="enough")
    arb.on_message(Submit(spec(5, 3)), 0.0)
    ((_, inq),) = port.take(SampleInquiry)
    a, b = inq.nodes
    arb.on_message(SampleReply(inq.token, [a], np.array([[2.0]]), np.array([[4.0]])), 0.001)
    assert port.take(SampleDecision) == []
    (zero,) = [h for h, (dl, k) in port.timers.items() if k[0] == "jmsample" and dl == 0.0]
    arb.on_timer(port.timers.pop(zero)[1], 0.001)
    ((_, dec),) = port.take(SampleDecision)
    assert dec.containers.nodes == [a] and arb.jobs[5].status == "running"
    assert not [k for _, k in port.timers.values() if k[0] == "jmsample"]  # the timeout is cancelled
    arb.on_message(SampleReply(inq.token, [b], np.array([[4.0]]), np.array([[4.0]])), 0.0012)  # late: released
    ((_, late),) = port.take(SampleDecision)
    assert late.cancel == [b] and len(late.containers) == 0

    arb, port = make(n=8, jm_placement="sampling", round_end="timeout")
    arb.on_message(Submit(spec(5, 3)), 0.0)
    ((_, inq),) = port.take(SampleInquiry)
    a, b = inq.nodes
    arb.on_message(SampleReply(inq.token, [a, b], np.array([[1.0], [3.0]]), np.array([[4.0], [4.0]])), 0.001)
    assert port.take(SampleDecision) == []
    (timer,) = [k for _, k in port.timers.values() if k[0] == "jmsample"]
    arb.on_timer(timer, 0.003)
    ((_, dec),) = port.take(SampleDecision)
    assert dec.containers.nodes == [b] and dec.cancel == [a]


def test_job_manager_share_limit():
    arb, port = make(jm_limit=np.array([2.0]))
    for j in range(4):
        arb.on_message(Submit(spec(j)), 0.0)
    hb(arb, [0], [4.0], 0.1)
    (r,) = port.take(HeartbeatReply)
    assert r[1].containers.tasks == [-1, -1]  # only two job managers may hold containers at once
    arb.on_message(JobDone(0, 0), 0.2)
    assert port.take(JobDoneAck)
    hb(arb, [1], [4.0], 0.3)
    (r,) = port.take(HeartbeatReply)
    assert r[1].containers.jobs == [2]


def test_leftover_tasks_served_on_heartbeats_in_distributed_mode():
    arb, port = make()
    running(arb, 1, 3, 10)
    request(arb, 1, 3, 10, 0.0)
    assert port.take(Allocate) == [] and port.take(Placed) == []
    hb(arb, [0], [2.0], 0.1)
    (r,) = port.take(HeartbeatReply)
    assert r[1].containers.tasks == [10, 11]
    (p,) = port.take(Placed)
    assert p[0] == "jm1" and p[1].tasks == [10, 11] and p[1].nodes == [0, 0]
    hb(arb, [3], [4.0], 0.2)
    (r,) = port.take(HeartbeatReply)
    assert r[1].containers.tasks == [12]


# --- centralized mode: parallel scheduler actors, optimistic commits ---------------------------------------------
def test_conflicting_commit_is_rejected_and_retried():
    arb, port = make(actors=2, match_cost=1e-3)
    go_central(arb, port)
    hb(arb, [0], [1.0], 0.0)
    port.take()
    running(arb, 1, 1, 10)
    running(arb, 2, 1, 20)
    request(arb, 1, 1, 10, 0.01)
    request(arb, 2, 1, 20, 0.0101)  # the second actor matches against its copy: the same free core of node 0
    assert len(arb.busy) == 2
    fire_commits(arb, port, 0.0101)
    assert allocated(port) == [10]  # the first commit wins
    assert arb.stats["commit_conflicts"] == 1 and arb.stats["conflict_retries"] == 1
    assert arb.n_queued == 1 and not arb.busy  # retried at once: no room left, it waits for the view to grow


def test_conflict_retry_places_the_request_when_room_appears():
    arb, port = make(actors=2, match_cost=1e-3)
    go_central(arb, port)
    hb(arb, [0], [1.0], 0.0)
    port.take()
    running(arb, 1, 1, 10)
    running(arb, 2, 1, 20)
    request(arb, 1, 1, 10, 0.01)
    request(arb, 2, 1, 20, 0.0101)
    fire_commits(arb, port, 0.0101)
    assert allocated(port) == [10]
    hb(arb, [3], [2.0], 0.02)  # node 3 reports free cores: the blocked request is matched again
    fire_commits(arb, port, 0.02)
    msgs = port.take(Allocate)
    assert [m.containers.tasks for _, m in msgs] == [[20]] and msgs[0][1].containers.nodes == [3]
    assert [m.tasks for _, m in port.take(Placed)] == [[10], [20]]


def test_gang_request_is_all_or_nothing():
    arb, port = make(actors=2, match_cost=1e-3, per_task=1e-3)
    go_central(arb, port)
    hb(arb, [0, 1], [2.0, 1.0], 0.0)
    port.take()
    running(arb, 1, 3, 10)
    running(arb, 2, 1, 20)
    request(arb, 1, 3, 10, 0.01, gang=True)  # fits exactly: 2 on node 0, 1 on node 1; commits at +4 ms
    request(arb, 2, 1, 20, 0.0101)  # commits first (+2 ms) and takes one of those cores
    fire_commits(arb, port, 0.0101)
    assert allocated(port) == [20]  # nothing of the gang: its commit conflicted as a whole
    assert arb.stats["gang_conflicts"] == 1
    hb(arb, [2], [1.0], 0.05)  # one more core: 3 free in all again
    fire_commits(arb, port, 0.05)
    assert sorted(allocated(port)) == [10, 11, 12]


def test_incremental_commit_applies_the_placements_that_still_fit():
    arb, port = make(actors=2, match_cost=1e-3, per_task=1e-3)
    go_central(arb, port)
    hb(arb, [0, 1], [2.0, 1.0], 0.0)
    port.take()
    running(arb, 1, 3, 10)
    running(arb, 2, 1, 20)
    request(arb, 1, 3, 10, 0.01)
    request(arb, 2, 1, 20, 0.0101)
    fire_commits(arb, port, 0.0101)
    got = allocated(port)
    assert 20 in got and len(got) == 3  # two of job 1's tasks committed, the conflicting one retried
    assert arb.stats["commit_conflicts"] == 1
    assert arb.n_queued == 1


def test_view_counts_unacknowledged_allocations_and_node_rejections():
    arb, port = make(actors=1)
    go_central(arb, port)
    hb(arb, [0], [2.0], 0.0)
    port.take()
    running(arb, 1, 2, 10)
    request(arb, 1, 2, 10, 0.01)
    fire_commits(arb, port, 0.01)
    (a,) = port.take(Allocate)
    seqs = a[1].containers.seqs
    assert seqs == [1, 2] and arb.view.free[0, 0] == 0.0
    hb(arb, [0], [2.0], 0.02, acks=[0])  # the node had not seen them yet: still booked
    assert arb.view.free[0, 0] == 0.0
    hb(arb, [0], [0.0], 0.03, acks=[2])
    assert arb.view.free[0, 0] == 0.0
    # a node that refuses an allocation (stale view) reports its real free room; the task is queued again
    c = select_containers(a[1].containers, [1])
    arb.on_message(AllocRejected(c, np.array([[0.0]])), 0.04)
    assert arb.stats["allocations_rejected_by_nodes"] == 1 and arb.n_queued == 1


def test_free_view_commit_and_match():
    v = FreeView(3, 1)
    v.heartbeat([0, 1, 2], np.array([[2.0], [1.0], [0.0]]), [0, 0, 0])
    ok = v.commit(np.array([0, 0, 0]), np.ones((3, 1)), all_or_nothing=False)
    assert ok.tolist() == [True, True, False]
    assert v.commit(np.array([0, 0, 1]), np.ones((3, 1)), all_or_nothing=True).all()
    assert not v.commit(np.array([1, 1]), np.ones((2, 1)), all_or_nothing=True).any()
    snap = v.free.copy()
    out = match(
        snap, v.usable(), np.ones((4, 1)), np.zeros(4, dtype=np.uint32), np.full(3, ALL), np.random.default_rng(0)
    )
    assert sorted(out.tolist()) == [-1, 0, 0, 1]  # three fit; the copy is used up, not the view
    assert v.free[:, 0].tolist() == [2.0, 1.0, 0.0]


# --- mode, failures, recovery ---------------------------------------------------------------------------------------
def test_mode_switch_is_broadcast_with_hysteresis():
    arb, port = make()
    running(arb, 1, 1, 10)
    arb.on_message(TrackerStats(0, np.array([14.4]), np.array([16.0]), {}, True), 0.0)  # 90 %
    assert sorted((d, m.central) for d, m in port.take(ModeChange)) == [("jm1", True), ("nm0", True)]
    assert arb.central and [m.central for _, m in port.take(LoadInfo)] == [True]
    arb.on_message(TrackerStats(0, np.array([13.8]), np.array([16.0]), {}, True), 0.1)  # 86 %: stays
    assert arb.central and port.take(ModeChange) == []
    arb.on_message(TrackerStats(0, np.array([13.5]), np.array([16.0]), {}, True), 0.2)  # 84 %: back
    assert not arb.central
    assert sorted(d for d, _ in port.take(ModeChange)) == ["jm1", "nm0"]
    assert arb.stats["mode_switches"] == 2 and arb.stats["time_central_ms"] == 200


def test_lost_node_and_job_manager_reports():
    arb, port = make()
    arb.jobs[1] = JobRec(spec(1), 0, "running", "jm1", 2, 0)
    arb.jobs[2] = JobRec(spec(2), 0, "running", "jm2", 3, 0)
    arb.on_message(Report(0, 7, "nodes", nodes=[3]), 1.0)
    assert [m.rid for _, m in port.take(ReportAck)] == [7]
    assert [(d, m.nodes) for d, m in port.take(NodesLost)] == [("jm1", [3])]
    assert arb.jobs[2].status == "queued" and arb.jobs[2].attempt == 1  # its job manager died with the node
    arb.on_message(Report(0, 8, "jm", job=1, attempt=0), 1.1)
    assert arb.jobs[1].attempt == 1 and arb.stats["jm_restarts"] == 2
    hb(arb, [0], [4.0], 1.2)
    (r,) = port.take(HeartbeatReply)
    assert sorted(r[1].containers.owners) == ["macrm/jm1", "macrm/jm2"]


def test_restarted_arbitrator_recovers_hard_state_and_buffers_until_then():
    arb, port = make(restarted=True)
    assert [m.address for _, m in port.take(Recover)] == ["arb"]
    arb.on_message(Submit(spec(9)), 0.1)  # buffered until the snapshot
    assert port.take(Accepted) == []
    state = {"epoch": 2, "jobs": {1: [spec(1), 0, "running", "jm1", 0, 0], 4: [spec(4), 1, "queued", "", -1, -1]}}
    arb.on_message(Snapshot(state), 0.2)
    assert arb.epoch == 3 and arb.view.next_seq[0] == 3 << 32
    assert [m.job for _, m in port.take(Accepted)] == [9]
    assert sorted(d for d, m in port.sent if type(m).__name__ == "ArbitratorUp") == ["jm1", "tr0"]
    hb(arb, [0], [4.0], 0.3)
    (r,) = port.take(HeartbeatReply)
    assert r[1].containers.jobs == [4, 9] and r[1].containers.owners[0] == "macrm/jm4"
