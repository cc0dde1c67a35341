"""Snapshots of a replicated LM (replication-log compaction): data only, round trip, refusals."""

from __future__ import annotations

from collections import Counter, deque

import msgpack
import numpy as np
import pytest

from megha.live import snapshot
from megha.live.masters import LiveLocalMaster
from megha.live.runtime import ForwardingRecorder
from megha.model.topology import Datacenter
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.messages import LaunchRequest
from megha.sim.component import RecordingPort


def test_values_round_trip():
    state = {
        "a": np.arange(5, dtype=np.int64),
        "b": [1, 2.5, "x", None, True, b"\x00", (1, (2, 3))],
        "c": {(1, 2): {3}, "k": deque([1, 2], maxlen=4)},
        "d": Counter(x=2),
        "e": np.float64(1.5),
        "f": 1 << 100,
        "g": np.random.default_rng(3),
    }
    back = snapshot.load_state(snapshot.dump_state(state))
    assert np.array_equal(back["a"], state["a"]) and back["a"].dtype == np.int64
    assert back["b"] == state["b"] and back["c"] == state["c"] and back["c"]["k"].maxlen == 4
    assert back["d"] == Counter(x=2) and type(back["d"]) is Counter
    assert back["e"] == 1.5 and type(back["e"]) is np.float64 and back["f"] == 1 << 100
    assert back["g"].integers(1 << 30) == np.random.default_rng(3).integers(1 << 30)


def test_an_lm_restored_from_its_snapshot_has_the_same_state_and_decides_the_same():
    lay = MeghaLayout.build(Datacenter(worker_masks=np.full(8, 0b11, dtype=np.uint32)), 1, 1)

    def lm():
        m = LiveLocalMaster(0, lay, ForwardingRecorder(), heartbeat=1.0, host_timeout=1.0)
        port = RecordingPort()
        m.attach(port)
        m.on_start(0.0)
        return m, port

    a, pa = lm()
    a.on_message(LaunchRequest(0, 1, [10, 11], [0, 1], [1.0, 1.0], [0, 0]), 0.1)
    data = snapshot.dump_state(snapshot.component_state(a))
    b, pb = lm()
    for k, v in snapshot.load_state(data).items():
        setattr(b, k, v)
    assert snapshot.dump_state(snapshot.component_state(b)) == data
    pa.take()
    pb.take()
    req = LaunchRequest(0, 2, [12, 13], [2, 1], [1.0, 1.0], [0, 0])  # worker 1 is busy: one is rejected
    a.on_message(req, 0.2)
    b.on_message(req, 0.2)
    assert repr(pa.take()) == repr(pb.take())


def test_what_is_not_data_is_refused():
    with pytest.raises(snapshot.SnapshotError, match="not written"):
        snapshot.dump_state({"f": lambda: 1})
    shared = [1]
    with pytest.raises(snapshot.SnapshotError, match="reachable twice"):
        snapshot.dump_state({"x": shared, "y": shared})
    for bad in (
        [["x", ["o", "os", "system", []]]],
        [["x", ["o", "subprocess", "Popen", []]]],
        [["x", ["a", "|O", [1], b"\x00" * 8]]],
        [["x", ["zz", 1]]],
    ):
        with pytest.raises(snapshot.SnapshotError):
            snapshot.load_state(msgpack.packb(bad))
    with pytest.raises(snapshot.SnapshotError):
        snapshot.load_state(b"\xc1")


@pytest.mark.parametrize("setting", [{"shares": [0.5, 0.5]}, {"handoff_after": 1.0}], ids=["shares", "handoff"])
def test_an_lm_with_fairness_or_handed_over_tasks_restores_from_its_snapshot(setting):
    """Fairness usage and the tasks handed over to the LM (waiting for a worker) are in the snapshot."""
    from megha.live.config import LiveMeghaOptions
    from megha.live.messages import HostBeat
    from megha.schedulers.common.messages import Finished
    from megha.schedulers.megha.messages import Handoff
    from megha.schedulers.megha.wiring import megha_parts

    lay = MeghaLayout.build(Datacenter(worker_masks=np.zeros(2, dtype=np.uint32)), 1, 2)
    parts = megha_parts(LiveMeghaOptions(gms=2, lms=1, **setting), lay)

    def lm():
        m = parts.lm(0, ForwardingRecorder(), cls=LiveLocalMaster)
        port = RecordingPort()
        m.attach(port)
        m.on_start(0.0)
        m.on_message(HostBeat("a", 1, 0, [0, 1], [], 0.2), 0.0)
        return m, port

    a, pa = lm()
    a.on_message(LaunchRequest(1, 1, [10, 11], [0, 1], [1.0, 1.0], [1, 1]), 0.1)
    if "handoff_after" in setting:
        a.on_message(Handoff(0, [12], [1.0], [0], [0], [0.0]), 0.2)  # no free worker: it waits
    data = snapshot.dump_state(snapshot.component_state(a))
    b, pb = lm()
    for k, v in snapshot.load_state(data).items():
        setattr(b, k, v)
    assert snapshot.dump_state(snapshot.component_state(b)) == data
    pa.take()
    pb.take()
    done = Finished([10], [0], None)
    a.on_message(done, 1.0)
    b.on_message(done, 1.0)
    assert repr(pa.take()) == repr(pb.take())
    if "handoff_after" in setting:  # the waiting task took the freed worker in both
        assert b.handed == {} and b.counters["handoff_launches"] == 1
    else:
        assert b.usage.tolist() == a.usage.tolist() == [0.0, 1.0]
