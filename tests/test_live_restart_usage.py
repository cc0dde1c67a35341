"""A restarted live GM rebuilds its users' fairness usage from what the LMs hold (Megha paper §IV-C with §IV-D's
stateless GM): its users' running tasks count as they did before the crash, so it asks for no preemption its users
do not need, and a held task the LMs preempt goes back to its user's queue (once) instead of being lost."""

from __future__ import annotations

from collections.abc import Iterable

import msgpack
import numpy as np
import pytest

from megha.live import wire
from megha.live.config import LiveMeghaOptions
from megha.live.masters import LiveGlobalMaster, LiveLocalMaster
from megha.live.messages import Holding, HostBeat, HostKill, HostLaunch, Relaunch
from megha.live.runtime import ForwardingRecorder
from megha.model.topology import Datacenter
from megha.schedulers.common.messages import JobArrival, Killed
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.messages import LaunchRequest, Preempted, PreemptRequest, StateDelta
from megha.schedulers.megha.wiring import MeghaParts, megha_parts
from megha.sim.component import RecordingPort

WORKERS = 4
HOST = "h"


class Net:
    """GMs and LMs wired through recording ports; messages are delivered in order until none is left. Messages to
    the worker host are kept apart (the test answers for the host)."""

    def __init__(self, parts: MeghaParts) -> None:
        self.parts = parts
        self.by_addr: dict[str, object] = {}
        self.ports: dict[str, RecordingPort] = {}
        self.host: list = []
        self.seen: list = []  # every message delivered: (destination, message)

    def add(self, comp, now: float) -> None:
        port = RecordingPort()
        comp.attach(port)
        self.by_addr[comp.address] = comp
        self.ports[comp.address] = port
        comp.on_start(now)

    def pump(self, now: float) -> None:
        moved = True
        while moved:
            moved = False
            for port in list(self.ports.values()):
                for dst, msg in port.take():
                    moved = True
                    if isinstance(msg, HostLaunch | HostKill):
                        self.host.append(msg)
                        continue
                    comp = self.by_addr.get(dst)
                    if comp is None:  # a GM that is down: the message is lost
                        continue
                    self.seen.append((dst, msg))
                    comp.validate(msg)
                    comp.on_message(msg, now)

    def beat(self, lm: LiveLocalMaster, now: float) -> None:
        """The LM's heartbeat (acknowledges the launch requests it processed)."""
        lm.on_timer("heartbeat", now)
        self.pump(now)


def _parts() -> MeghaParts:
    # user 0's queue at GM 0, user 1's at GM 1; user 0 may hold half of the workers, user 1 a quarter
    lay = MeghaLayout.build(Datacenter(worker_masks=np.zeros(WORKERS, dtype=np.uint32)), 1, 2)
    return megha_parts(LiveMeghaOptions(gms=2, lms=1, shares=[0.5, 0.25], user_gms=[0, 1]), lay)


def _job(job: int, tasks: Iterable[int], user: int) -> JobArrival:
    t = np.array(list(tasks), dtype=np.int64)
    return JobArrival(job, t, np.full(t.size, 30.0), np.zeros(t.size, dtype=np.uint32), None, user, 30.0, 0)


def _start(parts: MeghaParts) -> tuple[Net, LiveLocalMaster, list[LiveGlobalMaster]]:
    net = Net(parts)
    lm = parts.lm(0, ForwardingRecorder(), cls=LiveLocalMaster, host_timeout=1000.0)
    net.add(lm, 0.0)
    lm.on_message(HostBeat(HOST, 1, 0, list(range(WORKERS)), [], 0.2), 0.0)
    gms = [parts.gm(g, ForwardingRecorder(), cls=LiveGlobalMaster) for g in range(2)]
    for gm in gms:
        net.add(gm, 0.0)
    net.pump(0.0)
    return net, lm, gms


def _restart_gm0(net: Net, now: float) -> LiveGlobalMaster:
    """GM 0's process dies and starts again: a new instance at the same address, request ids above the old."""
    old = net.by_addr.pop(net.parts.layout.gm_address(0))
    new = net.parts.gm(0, ForwardingRecorder(), cls=LiveGlobalMaster, req_base=old.req_seq + 1000)
    net.add(new, now)
    net.pump(now)
    return new


def test_restarted_gm_rebuilds_its_users_usage_and_asks_for_no_needless_preemption():
    net, lm, (gm0, gm1) = _start(_parts())
    gm0.on_message(_job(0, [10, 11], 0), 1.0)  # user 0: two tasks, exactly its share
    gm1.on_message(_job(1, [20, 21], 1), 1.0)  # user 1: two tasks, one over its share
    net.pump(1.0)
    net.beat(lm, 1.5)
    before = gm0.own_usage.copy()
    assert before.tolist() == [2.0, 0.0] and sorted(gm0.running) == [10, 11]

    gm0 = _restart_gm0(net, 2.0)
    assert gm0.own_usage.tolist() == before.tolist()  # rebuilt from the LM's Holding
    assert sorted(gm0.running) == [10, 11]
    assert gm0.counters["tasks_held_by_lms"] == 2 and gm0.counters["held_tasks_adopted"] == 2

    # user 0 submits one more task: no worker is free and user 0 is at its share, so it waits (it would without
    # the restart): no preemption of user 1 is asked for
    net.seen.clear()
    gm0.on_message(_job(2, [12], 0), 3.0)
    net.pump(3.0)
    assert not [m for _, m in net.seen if isinstance(m, PreemptRequest)]
    assert gm0.counters["preemption_attempts"] == 0 and len(gm0.queue) == 1

    # a held task finishes: its usage ends, and the queued task takes the worker
    lm.on_message(_finished([10], [_worker_of(lm, 10)]), 4.0)
    net.pump(4.0)
    net.beat(lm, 4.5)
    assert 10 not in gm0.running and sorted(gm0.running) == [11, 12]
    assert gm0.own_usage.tolist() == [2.0, 0.0]


def test_held_task_preempted_after_a_gm_restart_is_queued_again_once():
    parts = _parts()
    net, lm, (gm0, gm1) = _start(parts)
    gm0.on_message(_job(0, [10, 11, 12], 0), 1.0)  # user 0: three tasks (over its share of two)
    gm1.on_message(_job(1, [20], 1), 1.0)  # user 1: one task (its share)
    net.pump(1.0)
    net.beat(lm, 1.5)
    gm0 = _restart_gm0(net, 2.0)
    assert gm0.own_usage.tolist() == [3.0, 0.0]

    # user 1's task ends; it submits two more: one takes the free worker, the other is under user 1's share and
    # no worker is free, so GM 1 asks the LM to preempt a task of user 0 (over its share): one GM 0 placed before
    # its restart
    lm.on_message(_finished([20], [_worker_of(lm, 20)]), 3.0)
    net.pump(3.0)
    net.beat(lm, 3.5)
    net.host.clear()
    gm1.on_message(_job(3, [21, 22], 1), 4.0)  # one takes the free worker, the other preempts a task of user 0
    net.pump(4.0)
    kills = [m for m in net.host if isinstance(m, HostKill)]
    assert len(kills) == 1 and len(kills[0].tasks) == 1
    victim = kills[0].tasks[0]
    assert victim in (10, 11, 12)
    lm.on_message(Killed([victim], [_worker_of(lm, victim)], None), 4.1)  # the host stopped it
    net.pump(4.1)
    # the restarted GM 0 got Preempted for a task an earlier incarnation placed: back in user 0's queue
    assert any(isinstance(m, Preempted) for _, m in net.seen)
    assert gm0.counters["tasks_requeued_after_preemption"] == 1
    assert victim not in gm0.running and gm0.own_usage.tolist() == [2.0, 0.0]
    assert len(gm0.queue) == 1
    # once a worker of user 0 frees, the preempted task is placed again (not dropped as held by an LM)
    other = next(t for t in (10, 11, 12) if t != victim)
    net.seen.clear()
    lm.on_message(_finished([other], [_worker_of(lm, other)]), 5.0)
    net.pump(5.0)
    relaunched = [m for _, m in net.seen if isinstance(m, LaunchRequest) and victim in list(m.tasks)]
    assert len(relaunched) == 1 and relaunched[0].gm == 0 and relaunched[0].req > 1000
    assert gm0.counters["duplicate_tasks_dropped"] == 0


def test_holding_carries_each_tasks_user_and_is_checked():
    parts = _parts()
    net, lm, (gm0, _) = _start(parts)
    gm0.on_message(_job(0, [10], 0), 1.0)
    net.pump(1.0)
    net.seen.clear()
    from megha.schedulers.megha.messages import SyncRequest

    lm.on_message(SyncRequest(0), 2.0)
    held = [m for _, m in lm.port.take(Holding)]
    assert len(held) == 1 and list(held[0].tasks) == [10] and list(held[0].users) == [0]
    assert list(held[0].durations) == [30.0] and held[0].demands is None
    new = parts.gm(0, ForwardingRecorder(), cls=LiveGlobalMaster)
    new.validate(held[0])
    with pytest.raises(ValueError, match="another GM"):
        new.validate(Holding(0, [10], [1], [30.0], [0]))  # user 1's queue is at GM 1
    with pytest.raises(ValueError, match="differ in length"):
        new.validate(Holding(0, [10, 11], [0], [30.0], [0]))
    with pytest.raises(ValueError, match="user"):
        new.validate(Holding(0, [10], None, None, None))  # fairness on: each held task's user is needed


def test_holding_columns_travel_on_the_wire_and_are_left_out_without_fairness():
    full = Holding(1, [7, 8], [0, 1], [2.5, 3.0], [0, 5], np.ones((2, 2)))
    got = wire.decode(wire.encode(full, "s", "d")).msg
    assert list(got.tasks) == [7, 8] and list(got.users) == [0, 1] and list(got.durations) == [2.5, 3.0]
    assert list(got.masks) == [0, 5] and got.demands.shape == (2, 2)
    # without fairness shares the body is what it was before the columns existed (and such a body is read)
    plain = wire.encode(Holding(1, [7, 8]), "s", "d")
    body = msgpack.unpackb(plain, raw=False, strict_map_key=False)[7]
    assert sorted(body) == ["lm", "tasks"]
    got = wire.decode(plain).msg
    assert list(got.tasks) == [7, 8] and got.users is None and got.durations is None and got.demands is None
    with pytest.raises(wire.WireError, match="differ in length"):
        wire.decode(wire.encode(Holding(1, [7, 8], [0], [2.5, 3.0], [0, 5]), "s", "d"))
    with pytest.raises(wire.WireError, match="rows"):
        wire.decode(wire.encode(Holding(1, [7, 8], [0, 1], [2.5, 3.0], [0, 5], np.ones((3, 2))), "s", "d"))
    with pytest.raises(wire.WireError, match=r"Holding\.users"):
        wire.decode(wire.encode(Holding(1, [7], [0.5], [2.5], [0]), "s", "d"))
    with pytest.raises(wire.WireError, match="missing fields"):
        wire.decode(msgpack.packb([wire.VERSION, "Holding", "s", "d", 0, 0, 0, {"lm": 1, "users": [0]}]))


def test_a_preempted_task_a_restarted_gm_never_heard_of_is_reported_lost_not_dropped():
    """Preempted before the restarted GM's LMs reported it (the LM no longer holds it when it answers the sync
    request): the GM has no entry to queue it with, so it reports the run lost and the client submits it again."""
    parts = _parts()
    gm = parts.gm(0, ForwardingRecorder(), cls=LiveGlobalMaster, req_base=1000)
    port = RecordingPort()
    gm.attach(port)
    gm.on_start(0.0)
    gm.on_message(Holding(0, [], [], [], []), 0.1)
    gm.on_message(StateDelta(0, list(range(WORKERS)), [True] * WORKERS, True, np.zeros(2), 0), 0.1)
    msg = Preempted(0, np.array([10], dtype=np.int64), 0)
    gm.validate(msg)
    gm.on_message(msg, 0.2)  # no error (before: RuntimeError, the task lost)
    assert gm.counters["preempted_tasks_unknown"] == 1
    assert [it[0] for it in gm.rec.items if 10 in it[2]] == ["lost"]


def _worker_of(lm: LiveLocalMaster, t: int) -> int:
    return int(lm.active[t][0])


def _finished(tasks: list[int], workers: list[int]):
    from megha.schedulers.common.messages import Finished

    return Finished(tasks, workers, None)


def test_a_preempted_task_whose_launch_was_not_yet_acknowledged_is_queued_again():
    """The Preempted message acknowledges the launch it follows: a task this GM booked whose acknowledgement had not
    arrived yet is this GM's, queued again at once (not taken for one it never heard of and reported lost)."""
    parts = _parts()
    gm = parts.gm(0, ForwardingRecorder(), cls=LiveGlobalMaster)
    port = RecordingPort()
    gm.attach(port)
    gm.on_start(0.0)
    gm.on_message(Holding(0, [], [], [], []), 0.1)
    gm.on_message(StateDelta(0, list(range(WORKERS)), [True] * WORKERS, True, np.zeros(2), 0), 0.1)
    gm.on_message(_job(0, [10], 0), 1.0)
    (_, req), *_ = port.take(LaunchRequest)
    assert 10 not in gm.running  # not acknowledged yet
    gm.on_message(Preempted(0, np.array([10], dtype=np.int64), req.req), 1.5)
    assert gm.counters["preempted_tasks_unknown"] == 0 and gm.counters["tasks_requeued_after_preemption"] == 1
    assert not [it for it in gm.rec.items if it[0] == "lost"]
    assert [list(m.tasks) for _, m in port.take(LaunchRequest)] == [[10]]  # placed again at once (workers free)


def test_a_held_task_handed_back_to_a_restarted_gm_is_placed_again():
    """A task an earlier incarnation placed, which the restarted GM counts as running (from the LM's Holding), then
    handed back (its worker host died, no other worker free): placed again, not dropped as still held by the LM.
    Before: the hand-back found the task's running entry, left it marked as held, and the placement dropped it (a
    fairness chaos run lost 4 of 96 tasks this way)."""
    parts = _parts()
    gm = parts.gm(0, ForwardingRecorder(), cls=LiveGlobalMaster, req_base=1000)
    port = RecordingPort()
    gm.attach(port)
    gm.on_start(0.0)
    gm.on_message(Holding(0, [10], [0], [30.0], [0]), 0.1)
    gm.on_message(StateDelta(0, list(range(WORKERS)), [False, True, True, True], True, np.array([1.0, 0.0]), 0), 0.1)
    assert gm.counters["held_tasks_adopted"] == 1 and gm.own_usage.tolist() == [1.0, 0.0]
    back = Relaunch(0, [10], [30.0], [0], None, [0])
    gm.validate(back)
    gm.on_message(back, 2.0)
    assert gm.counters["duplicate_tasks_dropped"] == 0
    assert [list(m.tasks) for _, m in port.take(LaunchRequest)] == [[10]]
    assert gm.own_usage.tolist() == [0.0, 0.0]  # running again once its new launch is acknowledged
