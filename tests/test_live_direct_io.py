"""The NATS transport's direct paths (messages written from nats-py's buffer at the end of the loop iteration,
and handed to their handler as nats-py's reader parses them) keep every message, in order, with the queued path
taking over whenever messages wait before it. Real nats-server on loopback (skipped when missing)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

pytest.importorskip("nats", reason="nats-py is not installed")
pytestmark = pytest.mark.skipif(shutil.which("nats-server") is None, reason="nats-server is not installed")

from megha.live import wire  # noqa: E402
from megha.live.testing import reaped, start_nats, stop  # noqa: E402
from megha.live.transport import NatsTransport  # noqa: E402


@pytest.fixture(autouse=True)
def _no_leftover_processes():
    with reaped():
        yield


def test_direct_and_queued_publishes_keep_their_order(tmp_path: Path):
    broker, port = start_nats(tmp_path / "js")

    async def main():
        url = f"nats://127.0.0.1:{port}"
        a = NatsTransport(url, ns="dio", client_name="a")
        b = NatsTransport(url, ns="dio", client_name="b")
        try:
            await a.start()
            await b.start()
            assert a.direct and b.direct  # this nats-py has the internals the direct paths use
            await a.ensure_streams(reset=True)
            got: list[int] = []
            core: list[int] = []
            await b.consume("dio.q.x", lambda data, pos: got.append(int(data)), None)
            await b.subscribe("dio.core", lambda data: core.append(int(data)))
            await asyncio.sleep(0.2)
            n = 0
            for phase in range(6):
                # even phases: the direct path; odd ones: the queued path (the writer task and nats-py's publish),
                # and the first messages after it still queue behind what waits there
                a.direct = phase % 2 == 0
                for _ in range(300):
                    n += 1
                    a.publish_durable("dio.q.x", str(n).encode())
                    a.publish("dio.core", str(n).encode())
                    if n % 50 == 0:
                        await asyncio.sleep(0)
            await a.flush(20.0)
            for _ in range(200):
                if len(got) >= n and len(core) >= n:
                    break
                await asyncio.sleep(0.05)
            assert got == list(range(1, n + 1))
            assert core == list(range(1, n + 1))
            assert not a._outbox  # every durable message acknowledged
            assert a.counters["republished"] == 0
        finally:
            await a.close()
            await b.close()

    try:
        asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        stop(broker)


def test_durable_messages_of_one_iteration_leave_as_one_bundle_per_subject(tmp_path: Path):
    """The durable messages published in one loop iteration are stored as one broker message per subject; the
    receiver gets every part in order, each at the bundle's position, told that more parts follow at it but for the
    last. A core message sends the held ones first. A malformed bundle reaches the handler as it is (rejected
    there as a malformed message)."""
    broker, port = start_nats(tmp_path / "js")

    async def main():
        url = f"nats://127.0.0.1:{port}"
        a = NatsTransport(url, ns="bun", client_name="a")
        b = NatsTransport(url, ns="bun", client_name="b")
        try:
            await a.start()
            await b.start()
            await a.ensure_streams(reset=True)
            got: dict[str, list[tuple[bytes, int, bool]]] = {"x": [], "y": []}
            core: list[bytes] = []
            for s in ("x", "y"):
                await b.consume(f"bun.q.{s}", lambda data, pos, s=s: got[s].append((data, pos, b.more_at_pos)), None)
            await b.subscribe("bun.core", lambda data: core.append(data))
            await asyncio.sleep(0.2)
            for i in range(5):  # one iteration: x and y interleaved
                a.publish_durable("bun.q.x", b"x%d" % i)
                a.publish_durable("bun.q.y", b"y%d" % i)
            await asyncio.sleep(0)
            a.publish_durable("bun.q.x", b"x5")  # alone in its iteration: as itself
            await asyncio.sleep(0)
            a.publish_durable("bun.q.y", b"y5")
            a.publish("bun.core", b"c")  # sends y5 before it
            a.publish_durable("bun.q.y", b"y6")
            await a.flush(10.0)
            for _ in range(100):
                if len(got["x"]) >= 6 and len(got["y"]) >= 7:
                    break
                await asyncio.sleep(0.05)
            assert [d for d, _, _ in got["x"]] == [b"x%d" % i for i in range(6)]
            assert [d for d, _, _ in got["y"]] == [b"y%d" % i for i in range(7)]
            x, y = got["x"], got["y"]
            assert len({p for _, p, _ in x[:5]}) == 1 and x[5][1] > x[0][1]  # x0-x4 stored as one message
            assert [m for _, _, m in x] == [True, True, True, True, False, False]
            assert len({p for _, p, _ in y[:5]}) == 1 and len({y[5][1], y[6][1], y[0][1]}) == 3
            assert [m for _, _, m in y] == [True, True, True, True, False, False, False]
            assert a.counters["bundled"] == 10
            assert not a._outbox and a.counters["republished"] == 0
            info = await a.js.stream_info("MEGHA_BUN_Q")
            assert info.state.messages == 5  # x0-4, y0-4, x5, y5, y6
            assert core == [b"c"] and not b.more_at_pos

            bad: list[bytes] = []
            await b.consume("bun.q.z", lambda data, pos: bad.append(data), None)
            await asyncio.sleep(0.1)
            a.bundle = False
            a.publish_durable("bun.q.z", wire.BUNDLE_MARK + b"\xff\x00")
            await a.flush(10.0)
            for _ in range(100):
                if bad:
                    break
                await asyncio.sleep(0.05)
            assert bad == [wire.BUNDLE_MARK + b"\xff\x00"]
        finally:
            await a.close()
            await b.close()

    try:
        asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        stop(broker)
