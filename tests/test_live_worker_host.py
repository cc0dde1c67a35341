"""The worker host's sleep tasks: one heap of end times and one loop timer (no timer object per task)."""

from __future__ import annotations

import asyncio

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
        h.on_message(Launch([1, 2, 3, 4], [0, 1, 2, 3], [0.06, 0.01, 0.03, 0.02], "lm"), 0.0)
        assert len(h.running) == 4
        h.on_message(Kill([3], "lm"), 0.0)  # its heap entry goes stale
        assert [list(m.tasks) for _, m in port.take(Killed)] == [[3]]
        h.on_message(Launch([3], [2], [0.005], "lm"), 0.0)  # launched again: only the new run's end counts
        await asyncio.sleep(0.2)
        done = _finished(port)
        assert sorted(done) == [1, 2, 3, 4]
        assert done.index(3) < done.index(2) < done.index(4) < done.index(1)
        dur = {1: 0.06, 2: 0.01, 3: 0.005, 4: 0.02}
        for t, d in dur.items():
            assert ends[t] >= d - 1e-6  # never before its own end
        assert not h.running and not h.slot
        assert h.counters["tasks_finished"] == 4

    asyncio.run(go())


def test_a_task_launched_with_an_earlier_end_rearms_the_timer_and_shutdown_stops_everything():
    async def go() -> None:
        h, port = _host()
        h.on_message(Launch([1], [0], [5.0], "lm"), 0.0)
        h.on_message(Launch([2], [1], [0.01], "lm"), 0.0)  # ends long before task 1: the timer moves earlier
        await asyncio.sleep(0.1)
        assert _finished(port) == [2]
        assert list(h.running) == [1]
        h.shutdown()
        assert not h.running and h._end_timer is None and not h._ends
        await asyncio.sleep(0.02)
        assert _finished(port) == []

    asyncio.run(go())
