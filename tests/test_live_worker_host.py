"""The worker host's sleep tasks: one heap of end times and one loop timer (no timer object per task)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np

from megha.live.runtime import ForwardingRecorder
from megha.live.worker import WorkerHost
from megha.model.topology import Datacenter
from megha.schedulers.common.messages import Finished, Kill, Killed, Launch
from megha.schedulers.megha.layout import MeghaLayout
from megha.sim.component import RecordingPort


def _host(n: int = 8) -> tuple[WorkerHost, RecordingPort]:
    lay = MeghaLayout.build(Datacenter(worker_masks=np.full(n, 0b1, dtype=np.uint32)), 1, 1)
    h = WorkerHost("a", lay, list(range(n)), epoch=1, beat=60.0)
    h.rec = ForwardingRecorder()
    port = RecordingPort()
    h.attach(port)
    return h, port


def _finished(port: RecordingPort) -> list[int]:
    return [t for _, m in port.take(Finished) for t in list(m.tasks)]


async def _until(cond: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait until ``cond()`` holds: the event loop may run late on a loaded machine, so no fixed sleep decides."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "timed out"
        await asyncio.sleep(0.005)


def test_sleep_tasks_end_after_their_duration_in_order_and_killed_ones_never_finish():
    async def go() -> None:
        h, port = _host()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        ends: dict[int, float] = {}
        inner = h._complete_many

        def spy(ts: list[int]) -> None:
            for t in ts:
                ends[t] = loop.time() - t0
            inner(ts)

        h._complete_many = spy
        # durations 20x the smallest that would do: between the two launches below the process may lose the CPU
        # for tens of milliseconds on a loaded machine, and task 3's new end must still come before task 2's
        h.on_message(Launch([1, 2, 3, 4], [0, 1, 2, 3], [1.2, 0.2, 0.6, 0.4], "lm"), 0.0)
        assert len(h.running) == 4
        h.on_message(Kill([3], "lm"), 0.0)  # its heap entry goes stale
        assert [list(m.tasks) for _, m in port.take(Killed)] == [[3]]
        h.on_message(Launch([3], [2], [0.1], "lm"), 0.0)  # launched again: only the new run's end counts
        await _until(lambda: h.counters["tasks_finished"] == 4 and not h._flush_armed)
        done = _finished(port)
        assert sorted(done) == [1, 2, 3, 4]
        assert done.index(3) < done.index(2) < done.index(4) < done.index(1)
        dur = {1: 1.2, 2: 0.2, 3: 0.1, 4: 0.4}
        for t, d in dur.items():
            assert ends[t] >= d - 1e-6  # never before its own end
        assert not h.running and h.ledger.busy() == 0
        assert h.counters["tasks_finished"] == 4

    asyncio.run(go())


def test_a_task_launched_with_an_earlier_end_rearms_the_timer_and_shutdown_stops_everything():
    async def go() -> None:
        h, port = _host()
        h.on_message(Launch([1], [0], [5.0], "lm"), 0.0)
        h.on_message(Launch([2], [1], [0.01], "lm"), 0.0)  # ends long before task 1: the timer moves earlier
        await _until(lambda: h.counters["tasks_finished"] == 1 and not h._flush_armed)
        assert _finished(port) == [2]
        assert list(h.running) == [1]
        h.shutdown()
        assert not h.running and h._end_timer is None and not h._ends
        await asyncio.sleep(0.02)
        assert _finished(port) == []

    asyncio.run(go())


def test_coalescing_windows_grow_with_the_rate_and_stay_put_at_moderate_rates():
    from megha.live.client import SUBMIT_WINDOW_MAX, submit_window
    from megha.live.runtime import adaptive_window
    from megha.live.worker import COMPLETION_WINDOW, COMPLETION_WINDOW_MAX

    assert adaptive_window(0.005, 0.02, 0.0) == 0.005
    assert adaptive_window(0.005, 0.02, 1000.0) == 0.005  # 1,000 tasks/s: as before
    assert adaptive_window(0.005, 0.02, 2000.0) == 0.01
    assert adaptive_window(0.005, 0.02, 1e6) == 0.02
    assert submit_window(1000.0) == 0.0 and submit_window(2000.0) == 0.0  # every job leaves when due
    assert 0 < submit_window(3500.0) < SUBMIT_WINDOW_MAX and submit_window(9000.0) == SUBMIT_WINDOW_MAX

    async def go() -> None:
        h, port = _host(2000)
        h.on_message(Launch(list(range(1000)), list(range(1000)), [0.001] * 1000, "lm"), 0.0)
        await _until(lambda: h.counters["tasks_finished"] == 1000 and not h._flush_armed)
        # 1,000 completions in one window: the next one is the longest
        assert sorted(t for t in _finished(port)) == list(range(1000))
        assert h._window == COMPLETION_WINDOW_MAX
        h.on_message(Launch([5000], [1500], [0.001], "lm"), 0.0)
        await _until(lambda: h.counters["tasks_finished"] == 1001 and not h._flush_armed)
        # one completion in a window: back to the shortest
        assert _finished(port) == [5000] and h._window == COMPLETION_WINDOW

    asyncio.run(go())


def test_a_services_event_window_grows_with_its_rate_of_events():
    from megha.live.messages import Events
    from megha.live.runtime import EVENT_WINDOW_MAX, Hosted, Runtime
    from megha.live.transport import InProcBroker
    from megha.sim.component import Component

    class Quiet(Component):
        def __init__(self) -> None:
            super().__init__("megha/quiet")
            self.rec = ForwardingRecorder()

    async def go() -> None:
        broker = InProcBroker()
        rt = Runtime(broker.transport(), epoch=1)
        got: list = []
        rt.send_raw = lambda dst, data: got.append(data)
        comp = Quiet()
        h = Hosted(rt, comp, 0)
        armed: list = []

        class HandLoop:  # the windows' timers, fired by hand: the test does not depend on the machine's load
            def call_later(self, delay: float, fn: Callable, *args: object) -> None:
                armed.append((delay, fn, args))

        rt.loop = HandLoop()
        comp.rec.started(list(range(2000)), 1.0, list(range(2000)))
        h.flush_events()  # held for the shortest window
        assert not got and [d for d, _, _ in armed] == [h.event_window]
        _, fn, args = armed.pop()
        fn(*args)
        assert got and h._event_win == EVENT_WINDOW_MAX  # 2,000 tasks in 10 ms: the longest window next time
        comp.rec.started([1], 1.0, [1])
        h.flush_events()
        assert [d for d, _, _ in armed] == [EVENT_WINDOW_MAX]  # held for the longest window
        _, fn, args = armed.pop()
        fn(*args)
        assert h._event_win == h.event_window  # one task in 40 ms: back to the shortest
        assert sum(len(it[2]) for d in got for it in _events(d, Events)) == 2001

    asyncio.run(go())


def _events(data: bytes, cls: type) -> list:
    from megha.live import wire

    env = wire.decode(data)
    return env.msg.items if isinstance(env.msg, cls) else []


def test_events_are_split_by_the_client_their_task_ids_belong_to():
    from megha.live.runtime import CLIENT_SHIFT, events_by_client

    a, b = 1 << CLIENT_SHIFT, 2 << CLIENT_SHIFT
    one = [["started", 1.0, [a + 1, a + 2], [5, 6], ""], ["finished", 2.0, [], [], ""], ["lost", 3.0, [a], [], "x"]]
    assert events_by_client(one) == [("events/1", one)]
    mixed = [["started", 1.0, [a + 1, b + 2, a + 3], [5, 6, 7], ""], ["lost", 3.0, [b], [], "x"]]
    assert events_by_client(mixed) == [
        ("events/1", [["started", 1.0, [a + 1, a + 3], [5, 7], ""]]),
        ("events/2", [["started", 1.0, [b + 2], [6], ""], ["lost", 3.0, [b], [], "x"]]),
    ]
    assert events_by_client([["lost", 1.0, [5], [], ""], ["lost", 1.0, [a], [], ""]])[0][0] == "events/0"
    assert events_by_client([]) == []


def test_a_launch_on_workers_of_another_host_or_with_a_bad_duration_is_refused():
    import pytest

    h, _ = _host(4)
    h.validate(Launch([1, 2], [0, 3], [1.0, 2.0], "lm"))
    with pytest.raises(ValueError, match="worker 7 is not hosted by a"):
        h.validate(Launch([1, 2], [0, 7], [1.0, 2.0], "lm"))
    with pytest.raises(ValueError, match="duration"):
        h.validate(Launch([1], [0], [float("nan")], "lm"))


def test_an_over_commit_is_counted_and_logged_with_the_ledgers_text_never_raised(caplog) -> None:
    import logging

    async def go() -> None:
        h, _ = _host()
        with caplog.at_level(logging.ERROR, logger="megha.live.worker"):
            h.on_message(Launch([1, 2], [0, 0], [60.0, 60.0], "lm"), 0.5)  # a scheduler's bug: both run
        assert h.counters["overcommits"] == 1 and sorted(h.running) == [1, 2]
        assert h.ledger.running_on(0) == 2
        assert any(
            "worker 0 over-committed at t=0.500000: task 2 launched while it runs task 1" in m for m in caplog.messages
        )
        h.shutdown()

    asyncio.run(go())
