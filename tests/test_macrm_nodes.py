"""MACRM node managers driven by hand-written messages: the per-node rules of thesis Fig. 3.3 and §3.1.5."""

from __future__ import annotations

import numpy as np
import pytest

from megha.errors import SimulationError
from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.messages import Finished
from megha.schedulers.macrm.messages import (
    Adopt,
    Allocate,
    AllocRejected,
    Containers,
    Heartbeat,
    HeartbeatReply,
    JobState,
    LaunchRejected,
    NodeCrash,
    SampleDecision,
    SampleInquiry,
    SampleReply,
    SpawnJM,
    TaskCrash,
    TaskFailed,
    Terminate,
    empty_containers,
)
from megha.schedulers.macrm.nodes import NodeManagers
from megha.sim.component import RecordingPort

ONE = np.array([1.0])


def make(n=3, cap=4.0, central=False, hold=0.01, hb_blocks_sampling=True):
    rec = TaskRecorder(np.zeros(64))
    nm = NodeManagers(
        "nm",
        0,
        0,
        np.full((n, 1), cap),
        np.zeros((n, 1)),
        rec,
        "tracker",
        "arb",
        "runtime",
        heartbeat=1.0,
        hold_timeout=hold,
        hb_reply_timeout=0.1,
        central=central,
        hb_blocks_sampling=hb_blocks_sampling,
    )
    port = RecordingPort()
    nm.attach(port)
    nm.on_start(0.0)
    return nm, port, rec


def tasks(nodes, ids, owner="jmA", dur=1.0, dem=1.0, seqs=None, job=0, attempt=0):
    k = len(nodes)
    return Containers(
        list(nodes),
        list(ids),
        [job] * k,
        [attempt] * k,
        [0] * k,
        [dur] * k,
        np.full((k, 1), dem),
        [owner] * k,
        list(seqs or [0] * k),
        [None] * k,
    )


def inquiry(port, nm, jm, token, nodes, now, need=ONE):
    nm.on_message(SampleInquiry(jm, 0, 0, token, list(nodes), need), now)
    replies = port.take(SampleReply)
    assert all(d == jm for d, _ in replies)
    return [n for _, m in replies for n in m.nodes]


def test_one_pending_sampling_at_a_time():
    nm, port, _ = make()
    assert inquiry(port, nm, "jmA", ("A", 1), [0, 1], 0.1) == [0, 1]
    # nodes 0 and 1 hold for jmA: they ignore jmB's inquiry; node 2 answers
    assert inquiry(port, nm, "jmB", ("B", 1), [0, 1, 2], 0.1002) == [2]
    assert nm.stats["ignored_pending"] == 2
    # jmA allocates on node 0 and cancels node 1: both are free to answer again
    nm.on_message(SampleDecision(("A", 1), tasks([0], [5]), [1]), 0.102)
    assert inquiry(port, nm, "jmC", ("C", 1), [0, 1], 0.103) == [0, 1]
    assert nm.free_of(0)[0] == 3.0


def test_response_timeout_releases_the_node_and_stale_decisions_do_not():
    nm, port, _ = make(hold=0.01)
    assert inquiry(port, nm, "jmA", ("A", 1), [0], 0.0) == [0]
    (key,) = [k for _, k in port.timers.values() if k[0] == "hold"]
    nm.on_timer(key, 0.01)
    assert nm.stats["hold_timeouts"] == 1
    assert inquiry(port, nm, "jmB", ("B", 1), [0], 0.011) == [0]
    # jmA's late cancel does not release jmB's pending sampling
    nm.on_message(SampleDecision(("A", 1), empty_containers(1), [0]), 0.012)
    assert inquiry(port, nm, "jmC", ("C", 1), [0], 0.013) == []


def test_one_response_timeout_per_inquiry_for_the_nodes_still_holding():
    nm, port, _ = make(hold=0.01)
    assert inquiry(port, nm, "jmA", ("A", 1), [0, 1, 2], 0.0) == [0, 1, 2]
    (key,) = [k for _, k in port.timers.values() if k[0] == "hold"]  # one timer for the three nodes
    nm.on_message(SampleDecision(("A", 1), empty_containers(1), [1]), 0.005)
    assert [k for _, k in port.timers.values() if k[0] == "hold"] == [key]
    nm.on_timer(key, 0.01)  # nodes 0 and 2 time out; node 1 was released already
    assert nm.stats["hold_timeouts"] == 2
    assert inquiry(port, nm, "jmB", ("B", 1), [0, 1, 2], 0.011) == [0, 1, 2]
    # every node released before the timeout: the timer is cancelled
    nm.on_message(SampleDecision(("B", 1), empty_containers(1), [0, 1, 2]), 0.012)
    assert not [k for _, k in port.timers.values() if k[0] == "hold" and k[1] == ("B", 1)]
    assert nm.stats["hold_timeouts"] == 2


def test_no_answer_without_free_resources():
    nm, port, _ = make(cap=2.0)
    nm.on_message(Allocate(tasks([0, 0], [1, 2])), 0.0)
    assert inquiry(port, nm, "jmA", ("A", 1), [0, 1], 0.1) == [1]
    assert nm.stats["ignored_full"] == 1
    # a request larger than the free room gets no answer either
    assert inquiry(port, nm, "jmB", ("B", 1), [2], 0.1, need=np.array([3.0])) == []


def test_heartbeat_missed_while_sampling_pending_is_sent_when_it_resolves():
    nm, port, _ = make()
    assert inquiry(port, nm, "jmA", ("A", 1), [0], 0.0) == [0]
    nm.on_timer(("hb", 0), 0.005)
    assert port.take(Heartbeat) == [] and nm.missed[0]
    nm.on_message(SampleDecision(("A", 1), tasks([0], [7]), []), 0.006)
    (hb,) = [m for _, m in port.take(Heartbeat)]
    assert hb.nodes == [0] and hb.free[0][0] == 3.0 and hb.used[0][0] == 1.0
    assert not nm.missed[0]


def test_no_answers_while_waiting_for_a_heartbeat_reply():
    nm, port, _ = make()
    nm.on_timer(("hb", 2), 0.5)
    (hb,) = [m for _, m in port.take(Heartbeat)]
    assert hb.nodes == [2]
    assert inquiry(port, nm, "jmA", ("A", 1), [2], 0.5005) == []
    assert nm.stats["ignored_waiting"] == 1
    # the reply may carry an allocation from the arbitrator (here: a task)
    nm.on_message(HeartbeatReply([2], tasks([2], [9], owner="jmZ", seqs=[1])), 0.5015)
    assert nm.arb_seq[2] == 1 and nm.free_of(2)[0] == 3.0
    assert inquiry(port, nm, "jmA", ("A", 2), [2], 0.502) == [2]


def test_without_the_heartbeat_rule_a_node_answers_while_its_heartbeat_is_out():
    """hb_blocks_sampling=False (the thesis's Sparrow: no heartbeats to wait for): only the pending-sampling and
    free-resource rules of Fig. 3.3 stay, so a second sampler still collides with the first."""
    nm, port, _ = make(hb_blocks_sampling=False)
    nm.on_timer(("hb", 2), 0.5)
    assert [m.nodes for _, m in port.take(Heartbeat)] == [[2]]
    assert nm.waiting[2] == 1
    assert inquiry(port, nm, "jmA", ("A", 1), [2], 0.5005) == [2]
    assert nm.stats["ignored_waiting"] == 0
    assert inquiry(port, nm, "jmB", ("B", 1), [2], 0.5006) == []  # one pending sampling at a time
    assert nm.stats["ignored_pending"] == 1


def test_lost_heartbeat_reply_stops_blocking_after_a_timeout():
    nm, port, _ = make()
    nm.on_timer(("hb", 1), 1.0)
    port.take()
    assert inquiry(port, nm, "jmA", ("A", 1), [1], 1.05) == []
    assert inquiry(port, nm, "jmA", ("A", 2), [1], 1.2) == [1]
    assert nm.stats["hb_reply_timeouts"] == 1


def test_distributed_mode_heartbeats_are_only_periodic():
    nm, port, _ = make()
    nm.on_message(Allocate(tasks([0], [3], dur=1.0)), 0.0)
    port.take()
    nm.on_timer(("end", 1.0), 1.0)
    assert port.take(Heartbeat) == []
    (fin,) = port.take(Finished)
    assert fin[0] == "jmA" and list(fin[1].tasks) == [3]


def test_centralized_mode_event_driven_heartbeat_on_container_exit():
    nm, port, rec = make(central=True)
    nm.on_message(Allocate(tasks([0], [3], dur=1.0)), 0.0)
    port.take()
    hb_timer = [h for h, (_, k) in port.timers.items() if k == ("hb", 0)]
    nm.on_timer(("end", 1.0), 1.0)
    (hb,) = [m for _, m in port.take(Heartbeat)]
    assert hb.nodes == [0] and hb.free[0][0] == 4.0
    assert nm.stats["heartbeats_event"] == 1
    assert all(h not in port.timers for h in hb_timer)  # the periodic timer was restarted
    assert [d for (d, k) in port.timers.values() if k == ("hb", 0)] == [1.0]
    assert rec.finishes[3] == 1


def test_centralized_mode_full_node_halves_its_heartbeat_interval():
    nm, port, _ = make(cap=2.0, central=True)
    nm.on_message(Allocate(tasks([1, 1], [1, 2], dur=50.0)), 0.0)
    port.take()
    nm.on_timer(("hb", 1), 0.7)
    assert port.take(Heartbeat) == []
    assert [d for (d, k) in port.timers.values() if k == ("hb", 1)][-1] == 0.5
    nm.on_timer(("hb", 1), 1.2)  # still full: sends this time
    (hb,) = [m for _, m in port.take(Heartbeat)]
    assert hb.nodes == [1] and hb.free[0][0] == 0.0
    assert nm.stats["heartbeats_halved"] == 1
    nm.on_timer(("hb", 0), 0.3)  # a node with free resources sends on time
    assert [m.nodes for _, m in port.take(Heartbeat)] == [[0]]


def test_allocations_that_do_not_fit_are_rejected_to_their_sender():
    nm, port, _ = make(cap=2.0)
    nm.on_message(SampleDecision(("A", 1), tasks([0, 0, 0], [1, 2, 3]), []), 0.0)
    (rej,) = port.take(LaunchRejected)
    assert rej[0] == "jmA" and rej[1].tasks == [3]
    nm.on_message(Allocate(tasks([0, 1], [4, 5], owner="jmB", seqs=[1, 1])), 0.1)
    (ar,) = port.take(AllocRejected)
    assert ar[0] == "arb" and ar[1].containers.tasks == [4] and ar[1].free[0, 0] == 0.0
    assert nm.arb_seq[0] == 1


def test_task_failure_and_node_crash():
    nm, port, rec = make()
    jm_spec = (object(), 0.5, False)
    c = tasks([0, 0, 1], [1, 2, 3])
    c.tasks.append(-1)
    c.nodes.append(0)
    c.jobs.append(7)
    c.attempts.append(0)
    c.users.append(0)
    c.durations.append(0.0)
    c.demands = np.vstack([c.demands, [[1.0]]])
    c.owners.append("jm7.0")
    c.seqs.append(0)
    c.specs = [None, None, None, jm_spec]
    nm.on_message(Allocate(c), 0.0)
    (spawn,) = port.take(SpawnJM)
    assert spawn[1].address == "jm7.0" and spawn[1].load == 0.5
    nm.on_message(TaskCrash([3]), 0.5)
    (tf,) = port.take(TaskFailed)
    assert tf[1].tasks == [3] and rec.preemptions[3] == 1
    nm.on_message(NodeCrash([0]), 0.6)
    assert rec.fault_kills[1] == 1 and rec.fault_kills[2] == 1 and rec.preemptions[1:3].sum() == 0
    assert [m.address for _, m in port.take(Terminate)] == ["jm7.0"]
    assert inquiry(port, nm, "jmA", ("A", 1), [0, 1], 0.7) == [1]
    nm.on_timer(("end", 1.0), 1.0)  # the crashed tasks never report
    assert port.take(Finished) == []


def test_adopt_redirects_running_tasks_and_fences_the_old_attempt():
    nm, port, _ = make()
    nm.on_message(Allocate(tasks([0, 1], [1, 2], dur=1.0, job=4)), 0.0)
    nm.on_message(Allocate(tasks([1], [3], dur=5.0, job=4)), 0.0)
    nm.on_timer(("end", 1.0), 1.0)
    port.take()
    nm.on_message(Adopt("jm4.1", 4, 1), 2.0)
    (js,) = port.take(JobState)
    assert js[0] == "jm4.1" and js[1].running == [3] and js[1].nodes == [1] and sorted(js[1].finished) == [1, 2]
    nm.on_message(Allocate(tasks([2], [9], job=4, attempt=0)), 2.1)  # from the dead attempt: refused
    assert [m.containers.tasks for _, m in port.take(AllocRejected)] == [[9]]
    nm.on_timer(("end", 5.0), 5.0)
    (fin,) = port.take(Finished)
    assert fin[0] == "jm4.1"


def test_what_nodes_hold_is_kept_in_the_worker_ledger():
    nm, _, _ = make(cap=2.0)
    led = nm.ledger
    assert led.row_lists and led.used is nm.used and led.cap_rows is nm.capl and led.over_eps == 1e-7
    nm.on_message(SampleDecision(("A", 1), tasks([0, 1], [1, 2], dem=0.75), []), 0.0)
    assert led.used == [[0.75], [0.75], [0.0]]
    nm.on_timer(("end", 1.0), 1.0)
    assert led.used == [[0.0], [0.0], [0.0]]
    led.used[2] = [2.0 + 1e-6]  # what the inline check after a start raises: the ledger's one error
    with pytest.raises(SimulationError, match=r"^nm: worker 2 over-committed at t=1\.500000: used \[2\.000001\]"):
        led.over_row(2, 1.5)
