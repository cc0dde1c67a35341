"""YARN-like RM and node managers driven by hand-written messages: heartbeat-gated allocation, queues."""

from __future__ import annotations

import numpy as np
import pytest

from megha.errors import SimulationError
from megha.metrics.recorder import TaskRecorder
from megha.model import bitset
from megha.schedulers.centralized.heartbeats import HeartbeatSchedule, first_set_from
from megha.schedulers.centralized.messages import NodeHeartbeat
from megha.schedulers.centralized.nodemanager import NodeManagers
from megha.schedulers.centralized.rm import ResourceManager
from megha.schedulers.common.messages import JobArrival, Launch
from megha.sim.component import RecordingPort

U32 = np.uint32


def attach(comp, seed=0):
    comp.attach(RecordingPort(seed))
    comp.on_start(0.0)
    return comp


def job(j, tasks, masks=None, durations=None, user=0, demands=None):
    tasks = np.asarray(tasks, dtype=np.int64)
    masks = np.zeros(tasks.size, dtype=U32) if masks is None else np.asarray(masks, dtype=U32)
    durs = np.ones(tasks.size) if durations is None else np.asarray(durations, dtype=float)
    return JobArrival(j, tasks, durs, masks, user=user, demands=demands)


def make_rm(phases, masks=None, queue="fifo", am=0.0, capacity=None, n_tasks=20, scan="first"):
    phases = np.asarray(phases, dtype=float)
    masks = np.zeros(phases.size, dtype=U32) if masks is None else np.asarray(masks, dtype=U32)
    rec = TaskRecorder(np.zeros(n_tasks))
    sched = HeartbeatSchedule(phases, 1.0)
    rm = attach(
        ResourceManager(
            "rm",
            "nm",
            "nm",
            masks,
            capacity,
            sched,
            rec,
            queue=queue,
            am_overhead=am,
            heartbeat_latency=0.0005,
            scan=scan,
        )
    )
    return rm, rec


def launches(port):
    out = []
    for dst, msg in port.take():
        assert dst == "nm" and isinstance(msg, Launch)
        out.extend(zip(np.asarray(msg.tasks).tolist(), np.asarray(msg.workers).tolist(), strict=True))
    return out


def test_heartbeat_schedule_next_tick_and_rotation():
    s = HeartbeatSchedule(np.array([0.1, 0.5, 0.9]), 1.0)
    assert s.next_tick(1, 0.2) == pytest.approx(0.5)
    assert s.next_tick(0, 0.2) == pytest.approx(1.1)
    assert s.next_tick(2, 0.9) == pytest.approx(0.9)
    assert s.rotation(0.2) == 1 and s.rotation(0.95) == 3


def test_first_set_from_wraps_around():
    rng = np.random.default_rng(0)
    for _ in range(500):
        b = rng.random(int(rng.integers(1, 200))) < rng.random()
        w = bitset.pack(b)
        start = int(rng.integers(0, w.size * 64))
        idx = np.flatnonzero(b)
        after = idx[idx >= start]
        exp = -1 if idx.size == 0 else int(after[0] if after.size else idx[0])
        assert first_set_from(w, start) == exp


def test_arriving_task_waits_for_the_next_heartbeat_of_a_free_suitable_node():
    rm, rec = make_rm([0.1, 0.5, 0.9], masks=[0b0, 0b1, 0b1])
    rm.on_message(job(0, [0], masks=[0b1]), 0.6)
    assert rm.port.take() == []  # nothing is allocated outside a heartbeat
    ((delay, key),) = rm.port.timers.values()
    assert key == ("hb", 2) and delay == pytest.approx(0.3 + 0.0005)  # node 2 beats at 0.9, node 1 only at 1.5
    rm.on_timer(key, 0.9005)
    assert launches(rm.port) == [(0, 2)]
    assert rec.scheduled[0] == 0.9005


def test_tasks_of_a_job_claim_distinct_nodes_in_heartbeat_order():
    rm, _ = make_rm([0.1, 0.5, 0.9])
    rm.on_message(job(0, [0, 1, 2, 3]), 0.3)
    keys = sorted(rm.port.timers.values())
    assert [k for _, k in keys] == [("hb", 1), ("hb", 2), ("hb", 0)]
    assert rm.queued() == 1  # the fourth task has no free node
    for _, k in keys:
        rm.on_timer(k, 0.0)
    assert sorted(launches(rm.port)) == [(0, 1), (1, 2), (2, 0)]


def booked(rm):
    """Nodes the RM booked (one heartbeat timer each), in the order it booked them."""
    return [key[1] for _, (_, key) in sorted(rm.port.timers.items())]


def test_heartbeats_with_a_lag_drift_against_the_clock():
    s = HeartbeatSchedule.random(4, 1.0, np.random.default_rng(0), lag=0.25)
    assert s.period == 1.25
    # the node heartbeating first after a whole second changes from second to second
    firsts = {int(s.order[s.rotation(float(k)) % 4]) for k in range(8)}
    assert len(firsts) > 1
    fixed = HeartbeatSchedule.random(4, 1.0, np.random.default_rng(0))
    assert len({int(fixed.order[fixed.rotation(float(k)) % 4]) for k in range(8)}) == 1


def test_rotate_and_first_book_the_node_heartbeating_soonest():
    for scan in ("rotate", "first"):
        rm, _ = make_rm([0.1, 0.5, 0.9], scan=scan)
        rm.on_message(job(0, [0]), 0.3)
        assert booked(rm) == [1]


def test_random_scan_spreads_arrivals_over_the_nodes():
    rm, _ = make_rm(np.linspace(0.0, 0.99, 40), scan="random", n_tasks=40)
    rm.on_message(job(0, [0]), 0.0)
    first = booked(rm)
    for j in range(1, 20):
        rm2, _ = make_rm(np.linspace(0.0, 0.99, 40), scan="random", n_tasks=40)
        rm2.attach(RecordingPort(j))
        rm2.on_start(0.0)
        rm2.on_message(job(0, [0]), 0.0)
        first += booked(rm2)
    assert len(set(first)) > 5


def test_fewest_tasks_queue_serves_the_job_with_the_fewest_queued_tasks():
    rm, _ = make_rm([0.1], queue="fewest-tasks")
    rm.on_message(job(0, [0]), 0.0)  # takes the only node
    rm.on_message(job(1, [1, 2, 3]), 0.01)
    rm.on_message(job(2, [4, 5]), 0.02)
    assert rm.queued() == 5
    for _, k in list(rm.port.timers.values()):
        rm.on_timer(k, 0.1)
    launches(rm.port)
    order = []
    for t in range(5):
        done = [0, *order][-1]
        rm.on_message(NodeHeartbeat(np.array([0]), np.array([done]), np.array([0])), 1.1 + t)
        ((task, _),) = launches(rm.port)
        order.append(task)
    assert order == [4, 5, 1, 2, 3]


def test_queued_task_is_allocated_when_a_heartbeat_reports_a_finished_container():
    rm, rec = make_rm([0.1, 0.5], masks=[0b1, 0b0])
    rm.on_message(job(0, [0, 1]), 0.0)
    for _, k in list(rm.port.timers.values()):
        rm.on_timer(k, 0.6)
    launches(rm.port)
    rm.on_message(job(1, [2], masks=[0b1]), 1.0)  # needs node 0, busy
    rm.on_message(job(2, [3]), 1.1)  # fits anywhere, all busy
    assert rm.queued() == 2 and rm.port.take() == []
    rm.on_message(NodeHeartbeat(np.array([1]), np.array([1]), np.array([1])), 2.5)  # node 1 frees
    assert launches(rm.port) == [(3, 1)]  # task 2 does not fit node 1: FIFO first fitting
    assert rec.known[1] == 2.5
    rm.on_message(NodeHeartbeat(np.array([0]), np.array([0]), np.array([0])), 3.1)
    assert launches(rm.port) == [(2, 0)]
    rm.on_message(NodeHeartbeat(np.array([0]), np.array([2]), np.array([0])), 5.1)
    assert launches(rm.port) == [] and rm.queued() == 0
    rm.on_message(job(3, [4]), 5.2)
    _, key = list(rm.port.timers.values())[-1]
    assert key == ("hb", 0)  # node 0 is free again and takes new arrivals at its next heartbeat


def test_fair_queue_serves_the_user_with_fewest_running_containers():
    for queue, expected in (("fair", 3), ("fifo", 2)):
        rm, _ = make_rm([0.1, 0.5], queue=queue)
        rm.on_message(job(0, [0, 1], user=1), 0.0)
        for _, k in list(rm.port.timers.values()):
            rm.on_timer(k, 1.0)
        launches(rm.port)
        rm.on_message(job(1, [2], user=1), 1.2)
        rm.on_message(job(2, [3], user=2), 1.3)
        rm.on_message(NodeHeartbeat(np.array([0]), np.array([0]), np.array([0])), 2.0)
        # user 1 still runs one container, user 2 none: fair serves user 2 first, FIFO the older task
        assert launches(rm.port) == [(expected, 0)]


def test_am_overhead_delays_a_jobs_requests():
    rm, _ = make_rm([0.1], am=2.0)
    rm.on_message(job(0, [0]), 0.0)
    ((delay, key),) = rm.port.timers.values()
    assert key == ("am", 0) and delay == 2.0
    rm.port.timers.clear()
    rm.on_timer(key, 2.0)
    ((delay, key),) = rm.port.timers.values()
    assert key == ("hb", 0) and delay == pytest.approx(0.1 + 0.0005)


def test_resource_mode_packs_several_containers_per_node():
    cap = np.array([[4.0, 4.0], [4.0, 4.0]])
    rm, _ = make_rm([0.2, 0.6], capacity=cap)
    dem = np.array([[2.0, 1.0]] * 5)
    rm.on_message(job(0, [0, 1, 2, 3, 4], demands=dem), 0.0)
    assert rm.queued() == 1
    for _, k in list(rm.port.timers.values()):
        rm.on_timer(k, 1.0)
    got = launches(rm.port)
    assert sorted(w for _, w in got) == [0, 0, 1, 1]
    rm.on_message(NodeHeartbeat(np.array([0]), np.array([got[0][0]]), np.array([0]), dem[:1]), 1.2)
    assert launches(rm.port) == [(4, 0)]


def test_node_manager_reports_at_the_first_tick_after_the_container_ends():
    rec = TaskRecorder(np.zeros(5))
    nm = attach(NodeManagers("nm", "rm", HeartbeatSchedule(np.array([0.5, 0.25]), 1.0), 2, rec))
    nm.on_message(Launch(np.array([3]), np.array([0]), np.array([1.2]), "nm"), 0.0)
    assert rec.start[3] == 0.0
    ((delay, key),) = nm.port.timers.values()
    assert delay == pytest.approx(1.5)
    nm.on_timer(key, 1.5)
    ((dst, hb),) = nm.port.take()
    assert dst == "rm" and list(hb.tasks) == [3] and list(hb.nodes) == [0]
    assert rec.end[3] == pytest.approx(1.2)  # the true end, reported later


def test_node_manager_rejects_over_commit():
    rec = TaskRecorder(np.zeros(5))
    nm = attach(NodeManagers("nm", "rm", HeartbeatSchedule(np.array([0.5]), 1.0), 1, rec))
    nm.on_message(Launch(np.array([0]), np.array([0]), np.array([1.0]), "nm"), 0.0)
    with pytest.raises(
        SimulationError, match=r"^nm: worker 0 over-committed at t=0\.100000: task 1 launched while it runs task 0$"
    ):
        nm.on_message(Launch(np.array([1]), np.array([0]), np.array([1.0]), "nm"), 0.1)
    nmr = attach(
        NodeManagers("nm", "rm", HeartbeatSchedule(np.array([0.5]), 1.0), 1, rec, capacity=np.array([[2.0, 2.0]]))
    )
    with pytest.raises(
        SimulationError,
        match=r"^nm: worker 0 over-committed at t=0\.000000: used \[3\.0, 3\.0\] > capacity \[2\.0, 2\.0\]$",
    ):
        nmr.on_message(Launch(np.array([0, 1]), np.array([0, 0]), np.ones(2), "nm", np.ones((2, 2)) * 1.5), 0.0)


def test_compiled_node_scan_matches_first_set_from():
    from megha.schedulers.centralized._kernels import first_and_from

    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(1, 5))
        a = rng.integers(0, 2**63, n, dtype=np.uint64) & rng.choice(np.array([0, 2**64 - 1], dtype=np.uint64), n)
        s = rng.integers(0, 2**63, n, dtype=np.uint64) | rng.integers(0, 2**63, n, dtype=np.uint64)
        if rng.random() < 0.3:  # sparse: a single bit
            a = np.zeros(n, dtype=np.uint64)
            a[int(rng.integers(n))] = np.uint64(1) << np.uint64(int(rng.integers(64)))
        start = int(rng.integers(n * 64))
        assert first_and_from(a, s, start) == first_set_from(a & s, start)
