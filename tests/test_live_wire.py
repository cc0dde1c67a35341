"""The live wire format: every message type round-trips; malformed input is rejected with a clear error."""

from __future__ import annotations

import contextlib

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from megha.live import messages as L
from megha.live import wire
from megha.schedulers.common import messages as C
from megha.schedulers.megha import messages as M


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    return a == b


SAMPLES = [
    C.JobArrival(
        3, np.array([1, 2], dtype=np.int64), np.array([0.5, 1.5]), np.array([0, 7], dtype=np.uint32), None, 1, 1.0, 0
    ),
    C.JobArrival(4, np.array([5]), np.array([2.0]), np.array([1], dtype=np.uint32), np.array([[1.0, 0.25]])),
    C.Launch([1, 2], [3, 4], [0.5, 1.0], "megha/lm0"),
    C.Launch(np.array([1]), np.array([3]), np.array([0.5]), "megha/lm0", np.array([[2.0, 1.0]])),
    C.Finished([1], [3]),
    C.Kill([1, 2], "megha/lm0"),
    C.Killed(np.array([1]), np.array([3]), None),
    M.LaunchRequest(0, 12, [1, 2], [3, 4], [1.0, 2.0], [0, 0]),
    M.LaunchReply(1, 12, [2], [4, 5], [True, False], None, 12),
    M.LaunchReply(1, 12, [], [4], np.array([[3.0, 1.0]]), np.array([0.1, 0.2]), 12),
    M.TaskDone(0, [1], [3], None, 9),
    M.StateDelta(0, [1, 2, 3], [True, True, False], True, None, 0),
    M.SyncRequest(1),
    M.PreemptRequest(0, np.array([1, 2]), np.array([1.0, 2.0]), np.array([0, 1], dtype=np.uint32), 0, 1),
    M.PreemptReply(0, 1, True, 1, np.array([3]), np.array([False]), None, 4, 3),
    M.PreemptRequest(0, np.array([1]), np.array([1.0]), np.array([4], dtype=np.uint32), 0, 1, None, 2.5),
    M.PreemptReply(0, 1, False, -1, np.array([3]), np.array([False]), None, 4, -1, np.array([1, 3], dtype=np.uint32)),
    M.Preempted(0, np.array([5, 6]), 2),
    M.Handoff(1, [3, 4], [1.0, 2.0], [0, 5], [0, 1], [0.5, 0.75]),
    L.HostBeat("h0", 7, 0, [0, 1, 2], [9], 0.2),
    L.HostLaunch("h0", 3, [1, 2], [3, 4], [0.5, 1.0], "megha/lm0", None),
    L.HostKill("h0", 3, [1], "megha/lm0"),
    L.Relaunch(0, [1, 2], [1.0, 2.0], [3, 4]),
    L.Relaunch(0, [1, 2], [1.0, 2.0], [3, 4], None, [0, 1]),
    L.Holding(1, [7, 8]),
    L.JobBatch(
        np.array([3, 4]),
        np.array([2, 1]),
        np.array([1, 2, 5]),
        np.array([0.5, 1.5, 2.0]),
        np.array([0, 7, 1], dtype=np.uint32),
        None,
        np.array([0, 1]),
        np.array([1.0, 2.0]),
        np.array([0, 0]),
    ),
    L.RunSpec(5, "command", "echo {task}", ""),
    L.Events("megha/gm0", [["started", 1.5, [1, 2], [3, 4], ""], ["failed", 2.0, [1], [2], "exit code 2"]]),
    L.Status("megha/lm0", "lm", "active", 1, 2.0, {"running": 3, "counters": {"x": 1}, "runs": [1, 2]}),
    L.Repl(0, 1, "msg", 1.0, "", b"\x01\x02"),
    L.ReplBatch(0, [b"\x01", b"\x02\x03"]),
    L.Control("shutdown"),
]


def test_every_registered_type_has_a_sample():
    assert {type(m).__name__ for m in SAMPLES} == set(wire.SCHEMAS)


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda m: type(m).__name__)
def test_roundtrip(msg):
    env = wire.decode(wire.encode(msg, "src", "dst", 5, 6, 1))
    assert (env.type, env.src, env.dst, env.epoch, env.seq, env.term) == (type(msg).__name__, "src", "dst", 5, 6, 1)
    for f in wire.SCHEMAS[env.type].names:
        assert _same(getattr(env.msg, f), getattr(msg, f)), f


def _raw(name, body, version=1):
    return msgpack.packb([version, name, "s", "d", 0, 1, 0, body], use_bin_type=True)


@pytest.mark.parametrize(
    "data, fragment",
    [
        (b"\xc1", "not a msgpack message"),
        (msgpack.packb({"a": 1}), "envelope"),
        (_raw("LaunchRequest", {}, version=2), "unsupported wire version"),
        (_raw("Pickle", {}), "unknown message type"),
        (_raw("SyncRequest", {"gm": "zero"}), "SyncRequest.gm"),
        (_raw("SyncRequest", {"gm": 0, "x": 1}), "unexpected fields"),
        (
            _raw(
                "LaunchRequest",
                {
                    "gm": 0,
                    "req": 1,
                    "tasks": [1, 2],
                    "workers": [1],
                    "durations": [1.0, 1.0],
                    "users": [0, 0],
                    "demands": None,
                },
            ),
            "differ in length",
        ),
        (
            _raw("Launch", {"tasks": [1], "workers": ["w"], "durations": [1.0], "reply_to": "x", "demands": None}),
            "Launch.workers",
        ),
        (
            _raw("TaskDone", {"lm": 0, "tasks": [1], "workers": [2], "demands": msgpack.ExtType(9, b""), "acked": 0}),
            "extension",
        ),
        (
            _raw(
                "TaskDone",
                {
                    "lm": 0,
                    "tasks": [1],
                    "workers": [2],
                    "acked": 0,
                    "demands": msgpack.ExtType(1, msgpack.packb(["<f8", [1, 2], b"\x00" * 8])),
                },
            ),
            "size",
        ),
        (
            _raw(
                "TaskDone",
                {
                    "lm": 0,
                    "tasks": [1],
                    "workers": [2],
                    "acked": 0,
                    "demands": msgpack.ExtType(1, msgpack.packb(["|O", [1], b"\x00" * 8])),
                },
            ),
            "header",
        ),
        (_raw("Holding", {"lm": 0, "tasks": msgpack.ExtType(2, b"")}), "dtype code"),
        (_raw("Holding", {"lm": 0, "tasks": msgpack.ExtType(2, b"\x63" + b"\x00" * 8)}), "dtype code"),
        (_raw("Holding", {"lm": 0, "tasks": msgpack.ExtType(2, b"\x00" + b"\x00" * 7)}), "whole number"),
        (_raw("Holding", {"lm": 0, "tasks": msgpack.ExtType(2, b"\x04" + b"\x00" * 8)}), "Holding.tasks"),
        (
            _raw("StateDelta", {"lm": 0, "workers": [1], "state": msgpack.ExtType(2, b"\x06\x02"), "full": True}),
            "boolean",
        ),
    ],
)
def test_malformed_messages_are_rejected(data, fragment):
    with pytest.raises(wire.WireError, match=fragment):
        wire.decode(data)


def test_one_dimensional_arrays_travel_compactly_and_old_form_is_accepted():
    tasks = np.array([5, 6, 7], dtype=np.int64)
    data = wire.encode(L.Holding(1, tasks), "s", "d")
    assert tasks.tobytes() in data and b"<i8" not in data  # extension type 2: a dtype byte, then the raw elements
    assert np.array_equal(wire.decode(data).msg.tasks, tasks)
    old = msgpack.ExtType(1, msgpack.packb(["<i8", [3], tasks.tobytes()]))
    assert np.array_equal(wire.decode(_raw("Holding", {"lm": 1, "tasks": old})).msg.tasks, tasks)
    for a in (np.array([1, 2], dtype=">i8"), np.arange(6)[::2], np.array([3], dtype=np.int16)):
        assert np.array_equal(wire.decode(wire.encode(L.Holding(1, a), "s", "d")).msg.tasks, a)


def test_unregistered_class_cannot_be_sent():
    with pytest.raises(wire.WireError):
        wire.encode(object(), "a", "b")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**62), min_size=0, max_size=50), st.floats(0, 1e6), st.booleans())
def test_property_launch_roundtrip(tasks, dur, as_array):
    n = len(tasks)
    t = np.array(tasks, dtype=np.int64) if as_array else tasks
    msg = M.LaunchRequest(1, 2, t, list(range(n)), [dur] * n, [0] * n)
    got = wire.decode(wire.encode(msg, "a", "b")).msg
    assert np.array_equal(np.asarray(got.tasks, dtype=np.int64), np.array(tasks, dtype=np.int64).reshape(-1))


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_property_random_bytes_never_crash_the_decoder(data):
    with contextlib.suppress(wire.WireError):
        wire.decode(data)


def test_a_resent_message_is_flagged_and_a_receiver_that_never_heard_the_stream_drops_it():
    """A standby taking over re-sends its active's recent outputs flagged: a receiver that knows the stream drops
    those it had (by sequence number) and takes the rest; one that started since (a restarted GM or worker host,
    no state for the stream) drops them all: they were meant for its predecessor."""
    import asyncio

    from megha.live.runtime import Runtime
    from megha.live.transport import InProcBroker

    data = wire.encode(L.Control("ping"), "megha/lm0", "megha/gm0", 7, 3, 2)
    again = wire.mark_resent(data)
    env, renv = wire.decode(data), wire.decode(again)
    assert not env.resent and renv.resent
    assert (renv.src, renv.dst, renv.epoch, renv.seq, renv.term, renv.msg) == (
        *[getattr(env, f) for f in ("src", "dst", "epoch", "seq", "term")],
        env.msg,
    )
    with pytest.raises(wire.WireError, match="re-sent"):
        wire.decode(again[:-1] + b"\x02")
    with pytest.raises(wire.WireError):
        wire.mark_resent(b"\x01")

    async def go() -> None:
        fresh = Runtime(InProcBroker().transport(), epoch=1)
        assert fresh.admit(renv, again) == []  # never heard of megha/lm0 → megha/gm0: for its predecessor
        assert fresh.counters["resent_dropped"] == 1
        known = Runtime(InProcBroker().transport(), epoch=1)
        first = wire.decode(wire.encode(L.Control("ping"), "megha/lm0", "megha/gm0", 7, 2, 2))
        assert len(known.admit(first)) == 1
        assert len(known.admit(renv, again)) == 1  # seq 3 follows 2: delivered
        assert known.admit(renv, again) == []  # a second time: a duplicate

    asyncio.run(go())


def test_a_re_sent_message_carries_when_it_was_made():
    data = wire.encode(L.Holding(1, [7]), "s", "d", 1, 2, 0)
    env = wire.decode(wire.mark_resent(data, 1234.5))
    assert env.resent and env.made_at == 1234.5 and env.msg.tasks == [7]
    old = wire.decode(wire.mark_resent(data))  # time unknown (the earlier form): a receiver that never heard drops it
    assert old.resent and old.made_at == 0.0
    with pytest.raises(wire.WireError, match="ninth envelope field"):
        wire.decode(b"\x99" + data[1:] + msgpack.packb("x"))


def test_bundles_round_trip_and_malformed_ones_are_refused():
    parts = [wire.encode(L.Control("ping"), "megha/lm0", "megha/gm0", 1, k, 0) for k in range(1, 4)]
    b = wire.pack_bundle(parts)
    assert b[:1] == wire.BUNDLE_MARK and wire.unpack_bundle(b) == parts
    assert wire.unpack_bundle(parts[0]) is None  # an envelope is not a bundle
    for bad in (wire.BUNDLE_MARK, wire.BUNDLE_MARK + b"\xff", wire.BUNDLE_MARK + msgpack.packb([1, 2])):
        assert wire.unpack_bundle(bad) is None
    assert wire.unpack_bundle(wire.BUNDLE_MARK + msgpack.packb([])) is None
    with pytest.raises(wire.WireError):
        wire.decode(b)  # a receiver that does not unpack it rejects it


def test_a_successor_reads_a_bundle_again_until_its_last_part_is_handled():
    import asyncio

    from megha.live.runtime import Runtime
    from megha.live.transport import InProcBroker

    async def go() -> None:
        rt = Runtime(InProcBroker().transport(), epoch=1)
        assert rt.resume_from(7) == 8
        rt.transport.more_at_pos = True  # parts of the bundle stored at 7 still to come
        assert rt.resume_from(7) == 7
        rt.transport.more_at_pos = False
        assert rt.resume_from(0) == 0

    asyncio.run(go())
