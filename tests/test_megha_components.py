"""Megha GM and LM driven by hand-written messages (no engine)."""

from __future__ import annotations

import numpy as np
import pytest

from megha.metrics.recorder import TaskRecorder
from megha.model.matching import Policy
from megha.model.topology import Datacenter
from megha.schedulers.common.messages import Finished, JobArrival, Kill, Killed, Launch
from megha.schedulers.megha.fairness import FairShare
from megha.schedulers.megha.gm import GlobalMaster
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.lm import LocalMaster
from megha.schedulers.megha.messages import (
    LaunchReply,
    LaunchRequest,
    Preempted,
    PreemptReply,
    PreemptRequest,
    StateDelta,
    SyncRequest,
    TaskDone,
)
from megha.sim.component import RecordingPort

# 8 workers: LM0 = workers 0-3 (partition of GM0: 0,1; of GM1: 2,3), LM1 = workers 4-7 (GM0: 4,5; GM1: 6,7)
MASKS = np.array([0b01, 0b11, 0b01, 0b11, 0b01, 0b01, 0b11, 0b01], dtype=np.uint32)


def layout(capacity=None):
    names = ("cpu", "mem") if capacity is not None else ()
    dc = Datacenter(worker_masks=MASKS, capacity=capacity, resource_names=names)
    return MeghaLayout.build(dc, 2, 2)


def recorder(n=32):
    return TaskRecorder(np.zeros(n))


def gm(g=0, lay=None, rec=None, **kw):
    lay = lay or layout()
    m = GlobalMaster(g, lay, rec or recorder(), policy=Policy.FIRST, **kw)
    port = RecordingPort()
    m.attach(port)
    return m, port


def lm(idx=0, lay=None, rec=None, **kw):
    lay = lay or layout()
    m = LocalMaster(idx, lay, rec or recorder(), heartbeat=5.0, **kw)
    port = RecordingPort()
    m.attach(port)
    m.on_start(0.0)
    return m, port


def job(tasks, masks=None, durs=None, demands=None, j=0):
    tasks = np.array(tasks, dtype=np.int64)
    return JobArrival(
        job=j,
        tasks=tasks,
        durations=np.array(durs or [1.0] * tasks.size),
        masks=np.array(masks or [0] * tasks.size, dtype=np.uint32),
        demands=None if demands is None else np.array(demands, dtype=np.float64),
    )


def requests(port):
    return [m for _, m in port.take(LaunchRequest)]


def test_layout_orders():
    lay = layout()
    assert lay.int_orders[0][0].tolist() == [0, 2]  # GM0: (LM0, p0), (LM1, p0)
    assert lay.int_orders[0][1].tolist() == [2, 0]
    assert lay.ext_orders[0][0].tolist() == [1, 3]  # GM0 external: (LM0, p1), (LM1, p1)
    assert lay.part_of.tolist() == [0, 0, 1, 1, 0, 0, 1, 1]


def test_internal_match_round_robin_over_lms():
    g, port = gm()
    g.on_message(job([0, 1]), 0.0)
    reqs = requests(port)
    # first task on LM0's internal partition, second on LM1's (round robin over LMs)
    assert [(r.workers, port_dst) for r, port_dst in zip(reqs, ["lm0", "lm1"], strict=True)] == [
        ([0], "lm0"),
        ([4], "lm1"),
    ]
    assert g.counters["repartition_requests"] == 0


def test_constraints_respected():
    g, port = gm()
    g.on_message(job([0], masks=[0b10]), 0.0)  # needs constraint 1: workers 1, 3, 6
    (r,) = requests(port)
    assert r.workers == [1]


def test_external_match_is_a_repartition():
    g, port = gm()
    g.on_message(job([0, 1, 2, 3]), 0.0)  # fills GM0's internal partitions: 0, 4, 1, 5
    assert sorted(w for r in requests(port) for w in r.workers) == [0, 1, 4, 5]
    g.on_message(job([4], j=1), 0.1)
    (r,) = requests(port)
    assert r.workers[0] in (2, 3, 6, 7)
    assert g.counters["repartition_requests"] == 1


def test_no_match_waits_then_gets_the_freed_worker():
    g, port = gm(repartition=False)
    g.on_message(job([0, 1, 2, 3]), 0.0)
    requests(port)
    g.on_message(job([4], masks=[0b10], j=1), 0.1)  # only worker 1 (busy) suits it internally
    assert requests(port) == [] and len(g.queue) == 1
    g.on_message(TaskDone(0, np.array([2]), np.array([0]), None, 1), 1.0)  # worker 0 freed: does not fit
    assert requests(port) == []
    assert g.view.is_free(0)
    g.on_message(TaskDone(0, np.array([1]), np.array([1]), None, 1), 1.5)  # worker 1 freed: work conserving
    (r,) = requests(port)
    assert r.tasks == [4] and r.workers == [1]
    assert len(g.queue) == 0


def test_lm_validates_and_rejects_inconsistent_mappings():
    rec = recorder()
    l0, port = lm(rec=rec)
    ok = LaunchRequest(1, 1, np.array([10]), np.array([0]), np.array([1.0]), np.array([0]))
    l0.on_message(ok, 0.0)
    ((dst, launch),) = port.take(Launch)
    assert dst == "megha/workers0" and launch.tasks == [10]
    assert port.take(LaunchReply) == []  # accepted batches get no reply of their own
    assert l0.counters["repartitions"] == 1  # worker 0 is in GM0's partition, GM1 placed there
    bad = LaunchRequest(0, 7, np.array([11, 12]), np.array([0, 1]), np.array([1.0, 1.0]), np.array([0, 0]))
    l0.on_message(bad, 0.1)
    ((_, reply),) = port.take(LaunchReply)
    assert reply.rejected == [11] and reply.acked == 7
    # the delta carries the truth of the rejected worker (busy) to GM0
    assert dict(zip(reply.delta_workers, reply.delta_state, strict=True))[0] is False
    assert l0.counters["inconsistencies"] == 1


def test_gm_retries_rejected_task_against_refreshed_view():
    g, port = gm()
    g.on_message(job([0]), 0.0)
    (r,) = requests(port)
    assert r.workers == [0]
    reply = LaunchReply(0, r.req, np.array([0]), np.array([0, 4]), np.array([False, False]), None, r.req)
    g.on_message(reply, 0.001)
    (r2,) = requests(port)
    # 0 and 4 are busy now; round robin moved on to LM1, whose next internal worker is 5
    assert r2.tasks == [0] and r2.workers == [5]
    assert g.counters["rejections_received"] == 1 and "inconsistencies" not in g.counters  # the LM counts them


def test_rejected_task_goes_to_head_of_queue_when_nothing_fits():
    g, port = gm(repartition=False)
    g.on_message(job([5], masks=[0b10], j=1), 0.0)  # worker 1 is the only internal fit
    (r,) = requests(port)
    g.on_message(job([6], masks=[0b10], j=2), 0.0005)  # waits: worker 1 booked
    reply = LaunchReply(0, r.req, np.array([5]), np.array([1]), np.array([False]), None, r.req)
    g.on_message(reply, 0.001)
    assert [e[0] for e in g.queue.q.entries()] == [5, 6]


def test_delta_application_offers_freed_workers():
    g, port = gm(repartition=False)
    g.on_message(job([0, 1, 2, 3]), 0.0)
    reqs = requests(port)
    g.on_message(job([9], j=1), 0.1)
    assert len(g.queue) == 1
    # an LM update marks worker 5 busy (already) and worker 4 free: 4 is offered to the queued task ...
    last = max(r.req for r in reqs)
    g.on_message(StateDelta(1, np.array([4]), np.array([True]), False, None, last), 5.0)
    (r,) = requests(port)
    assert r.tasks == [9] and r.workers == [4]
    # ... but a worker with an own request in flight stays booked whatever the (older) truth says
    assert not g.view.apply_truth(4, True)


def test_lm_sends_only_other_gms_changes():
    l0, port = lm()
    l0.on_message(LaunchRequest(0, 1, np.array([1]), np.array([0]), np.array([1.0]), np.array([0])), 0.0)
    port.take()
    l0.on_message(Finished(np.array([1]), np.array([0])), 1.0)
    ((dst, done),) = port.take(TaskDone)
    assert dst == "megha/gm0" and done.tasks == [1]
    # GM1 must hear worker 0 changed; GM0 learned it through TaskDone
    assert l0.pending_for(0) == [] and l0.pending_for(1) == [0]
    l0.on_timer("heartbeat", 5.0)
    sent = port.take(StateDelta)
    assert [d for d, _ in sent] == ["megha/gm1"]
    assert sent[0][1].workers == [0] and sent[0][1].state == [True]


def test_sync_request_gets_full_snapshot_and_restarted_gm_rebuilds_view():
    l0, port = lm()
    l0.on_message(LaunchRequest(1, 1, np.array([1]), np.array([2]), np.array([1.0]), np.array([0])), 0.0)
    port.take()
    l0.on_message(SyncRequest(0), 1.0)
    ((_, snap),) = port.take(StateDelta)
    assert snap.full and snap.workers == [0, 1, 2, 3]
    assert snap.state == [True, True, False, True]
    g, gport = gm(fresh_view=False)
    g.on_start(0.0)
    assert [d for d, _ in gport.take(SyncRequest)] == ["megha/lm0", "megha/lm1"]
    assert g.view.n_free == 0
    g.on_message(snap, 1.0)
    assert [g.view.is_free(w) for w in range(4)] == [True, True, False, True]


def test_resource_mode_places_several_tasks_and_carves_logical_nodes():
    cap = np.tile([4.0, 8.0], (8, 1))
    lay = layout(cap)
    l0, port = lm(lay=lay)
    req = LaunchRequest(
        1,
        1,
        np.array([1, 2, 3]),
        np.array([0, 0, 0]),
        np.ones(3),
        np.zeros(3, dtype=np.int64),
        np.array([[1.0, 2.0], [2.0, 2.0], [2.0, 1.0]]),
    )
    l0.on_message(req, 0.0)
    ((_, reply),) = port.take(LaunchReply)
    assert reply.rejected == [3]  # 1 + 2 cores placed, the third does not fit
    assert l0.cluster.free[0].tolist() == [1.0, 4.0]
    # worker 0 is in GM0's partition: GM1's tasks run on logical nodes carved out of it
    assert l0.cluster.lent[0].tolist() == [3.0, 4.0]
    assert l0.cluster.logical == {1: (0, 1), 2: (0, 1)}
    assert l0.counters["repartitions"] == 2
    l0.on_message(Finished(np.array([1]), np.array([0]), np.array([[1.0, 2.0]])), 1.0)
    assert l0.cluster.lent[0].tolist() == [2.0, 2.0] and 1 not in l0.cluster.logical


def test_resource_mode_gm_packs_a_node():
    cap = np.tile([4.0, 8.0], (8, 1))
    g, port = gm(lay=layout(cap))
    g.on_message(job([0, 1, 2], demands=[[2.0, 1.0]] * 3), 0.0)
    placed = {t: w for r in requests(port) for t, w in zip(r.tasks, r.workers, strict=True)}
    # round robin over LMs, and a node with room takes a second task (fine-grained allocation)
    assert placed == {0: 0, 1: 4, 2: 0}
    assert g.view.free[0].tolist() == [0.0, 6.0]


def fair_lm(shares=(0.5, 0.5)):
    fair = FairShare(np.array(shares), np.array([0, 1]), 8.0)
    return lm(fair=fair)


def test_preemption_verified_kills_victim_and_launches_requester():
    l0, port = fair_lm()
    # user 1 (GM1) holds all four workers of LM0
    l0.on_message(LaunchRequest(1, 1, np.arange(4), np.arange(4), np.ones(4), np.ones(4, dtype=np.int64)), 0.0)
    port.take()
    # candidate 20 needs constraint 2 (no worker has it), candidate 21 constraint 1 (workers 1 and 3)
    l0.on_message(
        PreemptRequest(0, np.array([20, 21]), np.ones(2), np.array([0b100, 0b10], dtype=np.uint32), 0, 1), 1.0
    )
    sent = port.take()
    kinds = [type(m).__name__ for _, m in sent]
    assert kinds[:2] == ["Kill", "Launch"] and kinds[-1] == "PreemptReply"
    kill = sent[0][1]
    assert kill.tasks == [1]  # the victim's task on worker 1
    reply = sent[-1][1]
    assert reply.ok and reply.worker == 1 and reply.task == 21 and reply.request == 20
    assert l0.usage.tolist() == [1.0, 3.0]
    # the pool confirms the kill: the victim's GM is told to requeue its task
    l0.on_message(Killed(np.array([1]), np.array([1])), 1.001)
    ((dst, pre),) = port.take(Preempted)
    assert dst == "megha/gm1" and pre.tasks == [1]


def test_preemption_refused_when_victim_is_not_over_share():
    l0, port = fair_lm(shares=(0.0, 1.0))
    l0.on_message(LaunchRequest(1, 1, np.arange(4), np.arange(4), np.ones(4), np.ones(4, dtype=np.int64)), 0.0)
    port.take()
    l0.on_message(PreemptRequest(0, np.array([20]), np.ones(1), np.zeros(1, dtype=np.uint32), 0, 1), 1.0)
    ((_, reply),) = port.take(PreemptReply)
    assert not reply.ok
    assert port.take(Kill) == []


def test_gm_asks_for_preemption_only_when_under_share():
    fair = FairShare(np.array([0.5, 0.5]), np.array([0, 1]), 8.0)
    g, port = gm(fair=fair, job_user=np.array([0, 0]), repartition=True)
    g.lm_usage[:] = [[0.0, 4.0], [0.0, 4.0]]  # user 1 holds everything according to the LMs
    for w in range(8):
        g.view.forget(w)
    g.on_message(job([0]), 0.0)
    ((dst, pre),) = port.take(PreemptRequest)
    assert pre.victim == 1 and dst in ("megha/lm0", "megha/lm1")
    assert g.counters["preemption_attempts"] == 1
    g.on_message(PreemptReply(0, 0, True, 0, worker=1), 0.001)
    assert g.own_usage.tolist() == [1.0, 0.0]


@pytest.mark.parametrize("policy", ["random", "min-constraints"])
def test_policies_choose_suitable_workers(policy):
    g, port = gm()
    g.policy = Policy(policy)
    g.on_message(job([0], masks=[0b01]), 0.0)
    (r,) = requests(port)
    w = r.workers[0]
    assert w in (0, 1)
    if policy == "min-constraints":
        assert w == 0  # worker 0 has 1 constraint, worker 1 has 2


def test_victims_must_keep_their_share_after_giving_up_the_units():
    fair = FairShare(np.array([0.1, 0.15, 0.75]), np.array([0, 0, 1]), 6.0)
    usage = np.array([0.0, 1.0, 2.0])  # user 1 holds one task against a share of 0.9 tasks
    # one task over 0.9 is a violation, but taking it leaves user 1 at 0 < 0.9: two such users would preempt each
    # other for ever (the livelock the property test found); user 2 is under its share: nobody is a victim
    assert fair.victims(0, usage) == [1]
    assert fair.victims(0, usage, units=1.0) == []
    usage = np.array([0.0, 3.0, 2.0])  # 3 tasks against 0.9: it can give one up and stay above its share
    assert fair.victims(0, usage, units=1.0) == [1]
    assert fair.victims(1, usage, units=1.0) == []  # never the requester itself


def test_preemption_refused_when_it_would_push_the_victim_below_its_share():
    # LM0's cluster is 4 of 8 workers; user 1's share is 3 of them, it holds all 4: it can lose one, not two
    l0, port = fair_lm(shares=(0.25, 0.75))
    l0.on_message(LaunchRequest(1, 1, np.arange(4), np.arange(4), np.ones(4), np.ones(4, dtype=np.int64)), 0.0)
    port.take()
    l0.on_message(PreemptRequest(0, np.array([20]), np.ones(1), np.zeros(1, dtype=np.uint32), 0, 1), 1.0)
    ((_, ok),) = port.take(PreemptReply)
    assert ok.ok and l0.usage.tolist() == [1.0, 3.0]
    port.take()
    l0.on_message(PreemptRequest(0, np.array([21]), np.ones(1), np.zeros(1, dtype=np.uint32), 0, 1), 1.0)
    ((_, no),) = port.take(PreemptReply)
    assert not no.ok and port.take(Kill) == []
    assert no.victim_masks is None


def test_preemption_refused_for_constraints_says_which_workers_the_victim_holds():
    l0, port = fair_lm(shares=(0.25, 0.25))
    l0.on_message(LaunchRequest(1, 1, np.arange(4), np.arange(4), np.ones(4), np.ones(4, dtype=np.int64)), 0.0)
    port.take()
    # constraint 2: no worker has it
    l0.on_message(PreemptRequest(0, np.array([20]), np.ones(1), np.array([0b100], dtype=np.uint32), 0, 1), 1.0)
    ((_, no),) = port.take(PreemptReply)
    assert not no.ok and port.take(Kill) == []
    # the constraint masks of the victim's workers here, for the GM's next choice of candidates
    assert sorted(no.victim_masks.tolist()) == [0b01, 0b11]


def test_lm_judges_the_victims_share_with_the_gms_view_of_other_lms():
    # user 1 holds 2 of LM0's 4 workers: exactly its share of this cluster (0.5), so on its own the LM refuses ...
    l0, port = fair_lm(shares=(0.5, 0.5))
    l0.on_message(LaunchRequest(1, 1, np.arange(2), np.arange(2), np.ones(2), np.ones(2, dtype=np.int64)), 0.0)
    port.take()
    l0.on_message(PreemptRequest(0, np.array([20]), np.ones(1), np.zeros(1, dtype=np.uint32), 0, 1), 1.0)
    assert not port.take(PreemptReply)[0][1].ok
    # ... but the requesting GM saw it hold 3 more workers on LM1: 5 of 8 against a share of 4, so one can go
    l0.on_message(PreemptRequest(0, np.array([21]), np.ones(1), np.zeros(1, dtype=np.uint32), 0, 1, None, 3.0), 1.0)
    ((_, reply),) = port.take(PreemptReply)
    assert reply.ok and reply.task == 21 and l0.usage.tolist() == [1.0, 1.0]


def test_gm_sends_its_view_of_the_victim_elsewhere_and_uses_refusal_hints():
    fair = FairShare(np.array([0.5, 0.5]), np.array([0, 1]), 8.0)
    g, port = gm(fair=fair, job_user=np.array([0, 0, 0]), repartition=True)
    g.lm_usage[:] = [[0.0, 4.0], [0.0, 3.0]]  # user 1 holds 7 of 8 workers
    for w in range(8):
        g.view.forget(w)
    # a task needing constraint 2 (no worker has it) and then two needing nothing
    g.on_message(job([0], masks=[0b100]), 0.0)
    ((dst, pre),) = port.take(PreemptRequest)
    assert dst == "megha/lm0" and pre.victim == 1 and pre.victim_elsewhere == 3.0
    # LM0 refuses: the victim's workers there have masks 0b01 and 0b11; LM1 is asked next
    g.on_message(PreemptReply(0, 0, False, victim_masks=np.array([0b01, 0b11], dtype=np.uint32)), 0.001)
    ((dst, pre),) = port.take(PreemptRequest)
    assert dst == "megha/lm1" and pre.victim_elsewhere == 4.0
    g.on_message(PreemptReply(1, 0, False), 0.002)
    assert len(g.queue) == 1
    g.on_message(job([1, 2], masks=[0b100, 0]), 0.003)  # user 0 is busy with no preemption: both wait ...
    port.take()
    g.preempting.clear()
    g._fair_not_before = 0.0
    # ... and the next retry offers the task the victim's workers suit (task 2), not only the oldest ones
    g._fair_retry(1.0)
    ((_, pre),) = port.take(PreemptRequest)
    assert 2 in pre.tasks.tolist()


def test_mutual_preemption_of_fractional_shares_ends():
    # the property test's counter-example: shares of 0.6 and 0.9 workers on 6 workers made users 0 and 2 preempt
    # each other for ever (192 preemptions in 200 s); now every task finishes and preemption stops
    import tempfile
    from pathlib import Path

    from megha.config import RunConfig
    from megha.runner import simulate

    jobs = [
        (0.0, [0.05]),
        (0.58, [2.69, 5.91, 0.64, 0.33, 3.81, 1.1, 4.33]),
        (0.0, [6.0]),
        (0.0, [0.33, 4.8, 2.84]),
        (5.81, [3.92, 4.15, 4.48]),
    ]
    d = Path(tempfile.mkdtemp())
    (d / "w.tr").write_text("".join(f"{a} {len(ds)} 1 " + " ".join(map(str, ds)) + "\n" for a, ds in jobs))
    cfg = RunConfig(
        scheduler="megha",
        trace=str(d / "w.tr"),
        workers=6,
        gms=3,
        lms=2,
        seed=6,
        options={"shares": [0.1, 0.25, 0.15, 0.5], "user_gms": [0, 1, 1, 2], "heartbeat": 1.0},
    )
    r = simulate(cfg, actions=[(200.0, lambda engine, dep, now: engine.stop())])
    assert r.unfinished_reason is None
    assert (r.recorder.finishes[r.feasible] == 1).all()
    assert r.counters["preemptions"] <= 2
