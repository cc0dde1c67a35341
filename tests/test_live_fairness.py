"""Fairness shares (Megha paper §IV-C, Algorithm 2) in a live deployment, built from the same options as the
simulator's: a light user is not starved by a heavy one that holds every worker, because the heavy user's tasks
are preempted (and run again later, once)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from megha.live.client import LiveClient, to_run_result
from megha.live.compare import simulate_same
from megha.live.config import LiveConfig, LiveMeghaOptions
from megha.live.deploy import LocalDeployment, datacenter_of, layout_of, parts_of
from megha.live.masters import LiveGlobalMaster, LiveLocalMaster
from megha.live.messages import Holding, HostBeat, HostKill, HostLaunch, Relaunch
from megha.live.runtime import ForwardingRecorder
from megha.model.topology import Datacenter
from megha.model.workload import Workload
from megha.schedulers.common.messages import Finished, JobArrival
from megha.schedulers.megha import MeghaOptions
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.messages import LaunchRequest, Preempted, PreemptReply, PreemptRequest, StateDelta
from megha.schedulers.megha.wiring import gm_settings, lm_settings, megha_layout, megha_parts
from megha.sim.component import RecordingPort

WORKERS = 8
HEAVY_TASKS, HEAVY_DURATION = 16, 3.0  # user 0: two waves over every worker
LIGHT_TASKS, LIGHT_DURATION, LIGHT_AT = 4, 0.2, 1.0  # user 1: arrives while user 0 holds every worker


def _cfg(**megha: object) -> LiveConfig:
    return LiveConfig(
        broker={"kind": "inproc"},
        datacenter={"workers": WORKERS, "constraints": False, "seed": 3},
        megha={"gms": 2, "lms": 2, "shares": [0.5, 0.5], "users": "round-robin", **megha},
        workers={"hosts": 1},
        ha={"lm_standby": False},
    )


def _heavy_then_light() -> Workload:
    """Job 0 (user 0 with ``users = "round-robin"``) fills every worker twice over; job 1 (user 1) comes later."""
    durs = np.r_[np.full(HEAVY_TASKS, HEAVY_DURATION), np.full(LIGHT_TASKS, LIGHT_DURATION)]
    return Workload(
        job_arrival=np.array([0.0, LIGHT_AT]),
        job_num_tasks=np.array([HEAVY_TASKS, LIGHT_TASKS], dtype=np.int64),
        job_mean_duration=np.array([HEAVY_DURATION, LIGHT_DURATION]),
        task_duration=durs,
        task_mask=None,
        task_demand=None,
        resource_names=(),
        name="heavy-then-light",
    )


async def _run(cfg: LiveConfig):
    dc = datacenter_of(cfg)
    layout = layout_of(cfg, dc)
    dep = await LocalDeployment(cfg, layout=layout).start()
    cl = LiveClient(cfg, dep.transport("client"), layout)
    await cl.start()
    try:
        run = await cl.run(_heavy_then_light(), dc, stall_timeout=60, ready_timeout=60)
        return to_run_result(run, cfg, dc, "heavy-then-light"), run
    finally:
        await cl.close()
        await dep.close()


@pytest.mark.parametrize("preemption", [True, False])
def test_light_user_preempts_heavy_user_live(preemption: bool, tmp_path: Path):
    cfg = _cfg(preemption=preemption)
    res, run = asyncio.run(_run(cfg))
    assert res.unfinished_reason is None
    rec = res.recorder
    assert (rec.finishes == 1).all()  # preempted tasks ran again, each completed exactly once
    assert run.workload.job_user.tolist() == [0, 1]  # users given as the simulator gives them (round robin)
    heavy, light = np.arange(HEAVY_TASKS), np.arange(HEAVY_TASKS + LIGHT_TASKS)[HEAVY_TASKS:]
    if preemption:
        # user 0 held every worker until its first task ended: user 1's tasks started before that because the LMs
        # preempted user 0's tasks for them
        assert res.counters["preemptions"] >= 1
        assert res.counters["tasks_requeued_after_preemption"] == res.counters["preemptions"]
        assert rec.start[light].max() < rec.end[heavy].min()
        # simulated on the same workload (``live submit --compare``): the same users, and preemption there too
        sim = simulate_same(res, cfg, tmp_path)
        assert sim.workload.job_user.tolist() == [0, 1] and sim.counters["preemptions"] >= 1
    else:  # user 1 waits for a worker user 0 gives up
        assert res.counters.get("preemptions", 0) == 0
        assert rec.start[light].min() >= rec.end[heavy].min()


def test_jobs_go_to_the_gm_of_their_user_and_nowhere_else():
    cfg = _cfg(user_gms=[1, 0])
    layout = layout_of(cfg)
    parts = parts_of(cfg, layout)
    gm1 = parts.gm(1, None, cls=LiveGlobalMaster)
    one = np.zeros(1, dtype=np.int64)
    ok = JobArrival(7, one, np.ones(1), np.zeros(1, dtype=np.uint32), None, 0, 1.0, 0)
    gm1.validate(ok)  # user 0's queue is at GM 1
    with pytest.raises(ValueError, match="another GM"):
        gm1.validate(JobArrival(7, one, np.ones(1), np.zeros(1, dtype=np.uint32), None, 1, 1.0, 0))
    assert parts.gm_of_user(np.array([0, 1, 1])).tolist() == [1, 0, 0]


def test_live_and_simulated_masters_have_the_same_settings():
    """The live GM and LM and the simulator's, built from the same options, carry the same settings and the same
    fairness state (shares, GM of each user queue, usage units)."""
    cfg = _cfg(user_gms=[1, 1], preempt_candidates=3, batch_size=11, policy="min-constraints", reply_always=True)
    dc = datacenter_of(cfg)
    sim_opts = MeghaOptions(**cfg.megha.sim_options(), gms=cfg.megha.gms, lms=cfg.megha.lms)
    live = parts_of(cfg, layout_of(cfg, dc))
    sim = megha_parts(sim_opts, megha_layout(dc, sim_opts))
    assert gm_settings(cfg.megha) == gm_settings(sim_opts) and lm_settings(cfg.megha) == lm_settings(sim_opts)
    for a, b in ((live.fair.shares, sim.fair.shares), (live.fair.user_gm, sim.fair.user_gm)):
        assert (a == b).all()
    assert live.fair.total == sim.fair.total == WORKERS
    lg, sg = live.gm(1, None, cls=LiveGlobalMaster), sim.gm(1, None)
    names = ("policy", "batch_size", "repartition", "preemption", "preempt_candidates", "fair_period", "my_users")
    assert [getattr(lg, k) for k in names] == [getattr(sg, k) for k in names]
    assert lg.my_users == [0, 1] and lg.preemption and lg.preempt_candidates == 3
    ll, sl = live.lm(0, None, cls=LiveLocalMaster), sim.lm(0, None)
    assert (ll.heartbeat, ll.reply_always) == (sl.heartbeat, sl.reply_always) == (1.0, True)
    assert ll.fair is live.fair and sl.fair is sim.fair and ll.usage.shape == sl.usage.shape == (2,)


def test_handed_back_task_returns_to_its_own_users_queue():
    """A task an LM hands back (its worker host died, no other worker free) goes back to its user's queue at the
    GM: the hand-back carries each task's user. Without it a GM restarted since the task was placed queued it as
    user 0, whose queue is at another GM: the task was lost with a KeyError."""
    lay = MeghaLayout.build(Datacenter(worker_masks=np.zeros(4, dtype=np.uint32)), 1, 2)
    opts = LiveMeghaOptions(gms=2, lms=1, shares=[0.5, 0.5])
    parts = megha_parts(opts, lay)
    # the LM: a host with all four workers runs tasks of user 1 (GM 1) on every worker, then dies
    lm = parts.lm(0, ForwardingRecorder(), cls=LiveLocalMaster, host_timeout=1.0)
    lport = RecordingPort()
    lm.attach(lport)
    lm.on_start(0.0)
    lm.on_message(HostBeat("a", 1, 0, [0, 1, 2, 3], [], 0.2), 0.0)
    lm.on_message(LaunchRequest(1, 1, [10, 11, 12, 13], [0, 1, 2, 3], [5.0] * 4, [1] * 4), 0.1)
    for k in range(1, 11):  # the host is silent for 2 s
        lm.on_timer("hosts", 0.2 * k)
    back = [m for _, m in lport.take() if isinstance(m, Relaunch)]
    assert len(back) == 1 and sorted(back[0].tasks) == [10, 11, 12, 13] and back[0].users == [1] * 4
    # GM 1, restarted since it placed them: it does not know the tasks, an LM tells it it holds them
    gm = parts.gm(1, ForwardingRecorder(), cls=LiveGlobalMaster, req_base=1000)
    gport = RecordingPort()
    gm.attach(gport)
    gm.on_start(0.0)
    gm.on_message(Holding(0, [10, 11, 12, 13]), 0.1)
    gm.on_message(StateDelta(0, [0, 1, 2, 3], [True] * 4, True, np.zeros(2), 0), 0.2)
    gm.validate(back[0])
    gm.on_message(back[0], 2.1)
    reqs = [m for _, m in gport.take(LaunchRequest)]
    assert sorted(t for r in reqs for t in r.tasks) == [10, 11, 12, 13]
    assert all(u == 1 for r in reqs for u in r.users)
    with pytest.raises(ValueError, match="user queue"):
        gm.validate(Relaunch(0, [10], [5.0], [0]))


def test_a_preempted_run_lost_with_its_host_goes_back_to_its_own_gm():
    """A victim whose worker host dies before it reports the kill: the LM has already taken it off the worker (the
    preempting task holds it now), so losing it must neither free that worker under the preempting task nor relaunch
    the victim as the preempting task's GM and user. Before: both happened (the victim ran as user 1's task, the
    preempting task was handed back with user -1 and rejected by its GM: lost; the worker stayed busy for ever once
    the relaunched victim finished, because its kill was still pending). Found by the fairness chaos scenario."""
    lay = MeghaLayout.build(Datacenter(worker_masks=np.zeros(2, dtype=np.uint32)), 1, 2)
    parts = megha_parts(LiveMeghaOptions(gms=2, lms=1, shares=[0.5, 0.5]), lay)  # user u's queue at GM u
    lm = parts.lm(0, ForwardingRecorder(), cls=LiveLocalMaster, host_timeout=1000.0)
    port = RecordingPort()
    lm.attach(port)
    lm.on_start(0.0)
    lm.on_message(HostBeat("a", 1, 0, [0, 1], [], 0.2), 0.0)
    lm.on_message(LaunchRequest(0, 1, [10, 11], [0, 1], [5.0, 5.0], [0, 0]), 0.1)  # user 0 holds both workers
    lm.on_message(HostBeat("a", 1, 0, [0, 1], [10, 11], 0.2), 0.2)
    port.take()
    pre = PreemptRequest(1, np.array([20]), np.array([5.0]), np.array([0], dtype=np.uint32), 1, 0, None, 0.0)
    lm.validate(pre)
    lm.on_message(pre, 0.3)  # user 1 (under its share) preempts one task of user 0
    victim = next(m for _, m in port.take(HostKill)).tasks[0]
    w = 0 if victim == 10 else 1
    assert lm.active[20][0] == w and victim in lm.kill_pending
    port.take()
    lm.on_message(HostBeat("a", 2, 0, [0, 1], [], 0.2), 0.4)  # the host restarted before it reported the kill
    sent = port.take()
    # the victim goes back to its own GM as a preempted task (GM 0 queues it again); the preempting task, lost with
    # the host, is relaunched as GM 1's task of user 1; nothing runs as another GM's or user's task
    back = [(d, m) for d, m in sent if isinstance(m, Preempted)]
    assert [(d, list(m.tasks)) for d, m in back] == [(lay.gm_address(0), [victim])]
    relaunched = [m for _, m in sent if isinstance(m, HostLaunch)]
    assert sorted(t for m in relaunched for t in m.tasks) == sorted([20, 21 - victim])
    assert not [m for _, m in sent if isinstance(m, Relaunch)]
    assert not lm.kill_pending and victim not in lm.active
    assert lm._owner(20, lm.active[20][0]) == 1 and lm.usage.tolist() == [1.0, 1.0]
    # both runs end: every worker is free again, usage back to zero
    for t in (20, 21 - victim):
        lm.on_message(Finished([t], [lm.active[t][0]], None), 1.0)
    assert lm.usage.tolist() == [0.0, 0.0]
    assert lm.status_info()["busy_workers"] == 0


def _gm_with_busy_workers(g: int) -> tuple[LiveGlobalMaster, RecordingPort]:
    """GM ``g`` of a 2-worker, 1-LM deployment (user u's queue at GM u, shares 0.5/0.5), synchronised with an LM
    whose workers both run tasks of user 0."""
    lay = MeghaLayout.build(Datacenter(worker_masks=np.zeros(2, dtype=np.uint32)), 1, 2)
    parts = megha_parts(LiveMeghaOptions(gms=2, lms=1, shares=[0.5, 0.5]), lay)
    gm = parts.gm(g, ForwardingRecorder(), cls=LiveGlobalMaster)
    port = RecordingPort()
    gm.attach(port)
    gm.on_start(0.0)
    gm.on_message(Holding(0, [], [], [], []), 0.1)
    gm.on_message(StateDelta(0, [0, 1], [False, False], True, np.array([2.0, 0.0]), 0), 0.1)
    port.take()
    return gm, port


def test_a_task_placed_by_preemption_and_handed_back_is_queued_again():
    """A task the LM started by preempting another (never booked by the GM itself) whose worker host then died with
    no other worker free: the LM hands it back, and its GM queues it again. Before: the GM had no entry for it (it
    kept entries only of the tasks it booked) and dropped the hand-back as a resubmission of a task it already had:
    the task was lost (fairness chaos scenario: 3 of 420 tasks)."""
    gm, port = _gm_with_busy_workers(1)
    gm.on_message(JobArrival(3, np.array([30]), np.array([5.0]), np.zeros(1, dtype=np.uint32), None, 1, 5.0, 0), 1.0)
    (_, req), *_ = port.take(PreemptRequest)  # user 1 is under its share: GM 1 asks the LM to preempt user 0
    assert list(req.tasks) == [30] and req.victim == 0
    gm.on_message(PreemptReply(0, 30, True, 30, np.zeros(0, dtype=np.int64), [], np.array([1.0, 1.0]), 0, 0), 1.1)
    assert 30 in gm.running  # it runs, placed by the LM
    back = Relaunch(0, [30], [5.0], [0], None, [1])  # its host died, no worker free: handed back
    gm.validate(back)
    gm.on_message(back, 2.0)
    assert gm.counters["duplicate_tasks_dropped"] == 0 and gm.counters["tasks_handed_back"] == 1
    assert 30 not in gm.running and len(gm.queue) + len(gm.preempting) == 1  # waiting again, once
