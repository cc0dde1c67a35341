"""The live GM/LM additions, driven by hand-written messages (sans-I/O, RecordingPort)."""

from __future__ import annotations

import numpy as np

from megha.live.masters import LiveGlobalMaster, LiveLocalMaster, host_address
from megha.live.messages import HostBeat, HostKill, HostLaunch, JobBatch, Relaunch, split_batch
from megha.live.runtime import ForwardingRecorder
from megha.model.topology import Datacenter
from megha.schedulers.common.messages import Finished, JobArrival, Kill
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.messages import LaunchRequest, StateDelta, SyncRequest, TaskDone
from megha.sim.component import RecordingPort


def _layout(masks=None, n=8, lms=1, gms=2) -> MeghaLayout:
    m = np.asarray(masks if masks is not None else [0b11] * n, dtype=np.uint32)
    return MeghaLayout.build(Datacenter(worker_masks=m), lms, gms)


def _lm(layout, timeout=1.0):
    lm = LiveLocalMaster(0, layout, ForwardingRecorder(), heartbeat=1.0, host_timeout=timeout)
    port = RecordingPort()
    lm.attach(port)
    lm.on_start(0.0)
    return lm, port


def test_launches_go_to_the_host_serving_each_worker_and_wait_for_unregistered_hosts():
    lay = _layout()
    lm, port = _lm(lay)
    lm.on_message(HostBeat("a", 1, 0, [0, 1, 2, 3], [], 0.2), 0.1)
    lm.on_message(LaunchRequest(0, 1, [10, 11], [1, 6], [5.0, 5.0], [0, 0]), 0.2)
    sent = port.take(HostLaunch)
    assert sent == [(host_address(lay, "a"), HostLaunch("a", 1, [10], [1], [5.0], lm.address, None))]
    lm.on_message(HostBeat("b", 1, 0, [4, 5, 6, 7], [], 0.2), 0.3)  # worker 6's host registers: parked launch
    assert port.take(HostLaunch) == [(host_address(lay, "b"), HostLaunch("b", 1, [11], [6], [5.0], lm.address, None))]


def test_dead_host_tasks_are_relaunched_on_a_suitable_worker_or_handed_back():
    # workers 0-3 on host a, 4-7 on host b; only worker 5 has all of worker 0's constraints
    masks = [0b01, 0b10, 0b10, 0b10, 0b10, 0b11, 0b10, 0b10]
    lay = _layout(masks)
    lm, port = _lm(lay, timeout=1.0)
    lm.on_message(HostBeat("a", 1, 0, [0, 1, 2, 3], [], 0.2), 0.0)
    lm.on_message(HostBeat("b", 1, 0, [4, 5, 6, 7], [], 0.2), 0.0)
    lm.on_message(LaunchRequest(0, 1, [10, 11], [0, 1], [5.0, 5.0], [0, 0]), 0.1)
    port.take()
    lm.on_message(LaunchRequest(0, 2, [12, 13, 14], [4, 6, 7], [5.0] * 3, [0] * 3), 0.1)
    port.take()
    for k in range(1, 8):  # host b keeps beating (running its tasks), host a is silent
        running = [12, 13, 14] + ([10] if k > 5 else [])
        lm.on_message(HostBeat("b", 1, 0, [4, 5, 6, 7], running, 0.2), 0.2 * k)
        lm.on_timer("hosts", 0.2 * k)
    launches = port.take(HostLaunch)
    # task 10 ran on worker 0 (constraints 0b01): only worker 5 has them all; task 11 (0b10): no free worker
    assert launches == [(host_address(lay, "b"), HostLaunch("b", 1, [10], [5], [5.0], lm.address, None))]
    back = [(d, m) for d, m in port.take() if isinstance(m, Relaunch)]
    assert len(back) == 1 and back[0][1].tasks == [11] and back[0][1].masks == [0b10]
    assert back[0][0] == lay.gm_address(0)
    assert lm.down[:4].all() and not lm.cluster.try_place(2, 99, None, 0, 0)  # dead workers are not placeable
    # a late report from the dead host is dropped; the relaunched run's report counts
    lm.on_message(Finished([10], [0]), 2.0)
    assert not port.take(TaskDone) and lm.counters["stale_finished_dropped"] == 1
    lm.on_message(Finished([10], [5]), 2.1)
    done = port.take(TaskDone)
    assert done and done[0][1].tasks == [10]
    # the host comes back: its workers are free again and every GM hears of it
    lm.on_message(HostBeat("a", 2, 0, [0, 1, 2, 3], [], 0.2), 3.0)
    assert not lm.down.any() and lm.cluster.truth([0, 1]) == [True, True]
    assert set(lm.pending_for(0)) >= {0, 1, 2, 3}


def test_host_restart_with_a_new_epoch_loses_its_tasks():
    lay = _layout()
    lm, port = _lm(lay)
    lm.on_message(HostBeat("a", 1, 0, list(range(8)), [], 0.2), 0.0)
    lm.on_message(LaunchRequest(1, 1, [10], [3], [5.0], [0]), 0.1)
    port.take()
    lm.on_message(HostBeat("a", 2, 0, list(range(8)), [], 0.2), 0.3)
    assert next(m for _, m in port.take(HostLaunch)).tasks == [10]  # relaunched on a free worker
    assert lm.counters["tasks_relaunched"] == 1


def test_lm_validation_rejects_foreign_workers_and_gms():
    lay = _layout(n=8, lms=2)
    lm, _ = _lm(lay)
    for bad in (
        LaunchRequest(0, 1, [1], [7], [1.0], [0]),
        LaunchRequest(5, 1, [1], [0], [1.0], [0]),
        HostBeat("x", 1, 1, [0], [], 0.2),
        Finished([1], [6]),
    ):
        try:
            lm.validate(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad} was accepted")


def test_gm_rebuilds_from_snapshots_drops_duplicate_tasks_and_requeues_handed_back_tasks():
    lay = _layout(n=8, lms=2, gms=2)
    gm = LiveGlobalMaster(0, lay, ForwardingRecorder(), req_base=1000)
    port = RecordingPort()
    gm.attach(port)
    gm.on_start(0.0)
    assert len(port.take(SyncRequest)) == 2
    job = JobArrival(1, np.array([5, 6]), np.array([1.0, 1.0]), np.array([0, 0], dtype=np.uint32))
    gm.on_message(job, 0.1)
    assert not port.take(LaunchRequest)  # empty view until the LMs answer
    gm.on_timer("sync", 0.5)
    assert len(port.take(SyncRequest)) == 2  # asks again
    for lm in range(2):
        lo, hi = int(lay.lm_lo[lm]), int(lay.lm_hi[lm])
        gm.on_message(StateDelta(lm, list(range(lo, hi)), [True] * (hi - lo), True, None, 0), 0.6)
    reqs = [m for _, m in port.take(LaunchRequest)]
    assert sorted(t for r in reqs for t in r.tasks) == [5, 6] and all(r.req > 1000 for r in reqs)
    gm.on_message(job, 0.7)  # the client resubmits: already held
    assert not port.take(LaunchRequest) and gm.counters["duplicate_tasks_dropped"] == 2
    gm.on_timer("sync", 1.0)
    assert not port.take(SyncRequest)  # synced: no more asking
    gm.on_message(Relaunch(0, [5], [1.0], [0]), 1.1)
    again = [m for _, m in port.take(LaunchRequest)]
    assert [t for r in again for t in r.tasks] == [5]


def test_kill_goes_to_the_host_running_the_task():
    lay = _layout()
    lm, port = _lm(lay)
    lm.on_message(HostBeat("a", 1, 0, list(range(8)), [], 0.2), 0.0)
    lm.on_message(LaunchRequest(0, 1, [10], [3], [5.0], [0]), 0.1)
    port.take()
    lm.to_workers(Kill([10], lm.address), 0.2)
    assert port.take(HostKill) == [(host_address(lay, "a"), HostKill("a", 1, [10], lm.address))]


def test_beats_stop_stale_runs_and_relaunch_launches_that_never_arrived():
    lay = _layout()
    lm, port = _lm(lay)
    lm.on_message(HostBeat("a", 1, 0, list(range(8)), [], 0.2), 0.0)
    lm.on_message(LaunchRequest(0, 1, [10, 11], [3, 4], [5.0, 5.0], [0, 0]), 0.1)
    port.take()
    # the host runs task 10 and a task 99 the LM never gave it (a launch re-sent by a standby that took over)
    lm.on_message(HostBeat("a", 1, 0, list(range(8)), [10, 99], 0.2), 0.2)
    assert port.take(HostKill) == [(host_address(lay, "a"), HostKill("a", 1, [99], lm.address))]
    assert lm.counters["stale_runs_stopped"] == 1
    # task 11 never shows up in the host's beats (the one above was the first): after MISSED_BEATS beats spanning
    # LAUNCH_TIMEOUT seconds it is relaunched; before, it is only late (a durable link delivers it)
    from megha.live.masters import LAUNCH_TIMEOUT, MISSED_BEATS

    for k in range(MISSED_BEATS + 3):
        lm.on_message(HostBeat("a", 1, 0, list(range(8)), [10], 0.2), 0.4 + 0.2 * k)
    assert not port.take(HostLaunch), "a late launch was counted as lost"
    lm.on_message(HostBeat("a", 1, 0, list(range(8)), [10], 0.2), 0.2 + LAUNCH_TIMEOUT + 0.1)
    again = [m for _, m in port.take(HostLaunch)]
    assert [t for m in again for t in m.tasks] == [11] and lm.counters["launches_lost"] == 1
    assert lm.counters["tasks_relaunched"] == 1 and 11 in lm.active
    assert any(item[0] == "lost" and item[2] == [11] for item in lm.rec.items)


def test_gm_in_resource_mode_rejects_jobs_without_demands():
    m = np.full(8, 0b11, dtype=np.uint32)
    lay = MeghaLayout.build(Datacenter(worker_masks=m).with_resources({"cpu": 4.0, "mem": 8.0}), 1, 1)
    gm = LiveGlobalMaster(0, lay, ForwardingRecorder())
    gm.attach(RecordingPort())
    job = JobArrival(1, np.array([5, 6]), np.array([1.0, 1.0]), np.array([0, 0], dtype=np.uint32))
    try:
        gm.validate(job)
    except ValueError as e:
        assert "resource mode" in str(e)
    else:
        raise AssertionError("a job without demands was accepted in resource mode")
    ok = JobArrival(
        1, np.array([5, 6]), np.array([1.0, 1.0]), np.array([0, 0], dtype=np.uint32), np.array([[1.0, 1.0], [2.0, 1.0]])
    )
    gm.validate(ok)


def _batch(jobs, sizes, tasks, demands=None):
    n = len(tasks)
    return JobBatch(
        np.array(jobs),
        np.array(sizes),
        np.array(tasks),
        np.ones(n),
        np.zeros(n, dtype=np.uint32),
        demands,
        np.zeros(len(jobs), dtype=np.int64),
        np.ones(len(jobs)),
        np.zeros(len(jobs), dtype=np.int64),
    )


def _synced_gm(lay):
    gm = LiveGlobalMaster(0, lay, ForwardingRecorder())
    port = RecordingPort()
    gm.attach(port)
    gm.on_start(0.0)
    for lm in range(lay.n_lms):
        lo, hi = int(lay.lm_lo[lm]), int(lay.lm_hi[lm])
        gm.on_message(StateDelta(lm, list(range(lo, hi)), [True] * (hi - lo), True, None, 0), 0.1)
    port.take(SyncRequest)
    return gm, port


def test_gm_places_a_job_batch_as_its_jobs_with_one_launch_request_per_lm():
    lay = _layout(n=8, lms=2, gms=1)
    gm, port = _synced_gm(lay)
    gm.on_message(_batch([1, 2, 3], [2, 1, 1], [10, 11, 20, 30]), 0.2)
    reqs = [m for _, m in port.take(LaunchRequest)]
    assert len(reqs) <= 2 and sorted(t for r in reqs for t in r.tasks) == [10, 11, 20, 30]
    gm2, port2 = _synced_gm(lay)  # the same placements as job by job
    for j in split_batch(_batch([1, 2, 3], [2, 1, 1], [10, 11, 20, 30])):
        gm2.on_message(j, 0.2)
    alone = {t: w for _, m in port2.take(LaunchRequest) for t, w in zip(m.tasks, m.workers, strict=True)}
    assert alone == {t: w for r in reqs for t, w in zip(r.tasks, r.workers, strict=True)}
    gm.on_message(_batch([4, 5], [1, 1], [10, 40]), 0.3)  # task 10 again: dropped, 40 placed
    assert [t for _, m in port.take(LaunchRequest) for t in m.tasks] == [40]
    assert gm.counters["duplicate_tasks_dropped"] == 1


def test_a_malformed_job_batch_is_rejected_with_a_clear_error():
    lay = _layout(n=8, lms=1, gms=1)
    gm, _ = _synced_gm(lay)
    for bad, fragment in [
        (_batch([1, 2], [2, 2], [10, 11, 12]), "do not add up"),
        (_batch([1, 2], [3, 0], [10, 11, 12]), "do not add up"),
        (_batch([1], [-1, 4], [10, 11, 12]), "differ in length"),
        (_batch([1], [1], [-5]), "task id"),
    ]:
        try:
            gm.validate(bad)
        except ValueError as e:
            assert fragment in str(e), (fragment, str(e))
        else:
            raise AssertionError(f"accepted {bad}")


def test_a_stale_run_of_a_task_the_lm_no_longer_holds_is_reported_lost():
    """A late launch started on a slow host after the LM gave it up: the client saw it start after the loss, so
    the LM reports the stopped run's end (else a task handed back to a GM that died was never resubmitted). A
    stale run of a task the LM runs on another host is only stopped."""
    lay = _layout()
    lm, port = _lm(lay)
    lm.on_message(HostBeat("a", 1, 0, list(range(4)), [], 0.2), 0.0)
    lm.on_message(HostBeat("b", 1, 0, list(range(4, 8)), [], 0.2), 0.0)
    lm.on_message(LaunchRequest(0, 1, [10], [5], [5.0], [0]), 0.1)  # task 10 runs on host b
    lm.rec.take()
    port.take()
    lm.on_message(HostBeat("a", 1, 0, list(range(4)), [10, 99], 0.2), 0.3)
    assert [m.tasks for _, m in port.take(HostKill)] == [[10, 99]]
    lost = [it for it in lm.rec.take() if it[0] == "lost"]
    assert [it[2] for it in lost] == [[99]] and "stale run" in lost[0][4]
