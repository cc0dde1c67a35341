"""A short `megha live chaos` run (loopback, fixed seed, generous timeouts): random kill -9 of GMs, LMs (active
and standby), worker hosts and the broker while work is submitted; nothing lost, nothing run twice."""

from __future__ import annotations

import asyncio
import shutil

import pytest

pytest.importorskip("nats", reason="nats-py is not installed")
pytestmark = pytest.mark.skipif(shutil.which("nats-server") is None, reason="nats-server is not installed")

from megha.live.chaos import run_chaos  # noqa: E402
from megha.live.testing import reaped  # noqa: E402


@pytest.fixture(autouse=True)
def _no_leftover_processes():
    """Whatever a test starts (nats-server, supervisor, services) is killed when it ends, even when it fails."""
    with reaped():
        yield


def test_short_chaos_run_loses_nothing_and_runs_nothing_twice(tmp_path):
    doc = asyncio.run(asyncio.wait_for(run_chaos(14.0, seed=5, rate=12.0, state_dir=str(tmp_path / "st")), 400))
    kinds = {f["kind"] for f in doc["faults"]}
    assert {"broker", "lm", "gm", "host"} <= kinds, doc["faults"]
    assert doc["submitted"] > 100
    assert doc["lost"] == 0 and doc["duplicated"] == 0, doc
    assert doc["completed"] == doc["submitted"]
