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
