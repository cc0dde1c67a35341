"""Live runtime over a real NATS server on loopback (skipped when nats-server or nats-py is missing).

CI installs the broker with ``apt-get install -y nats-server``. Every test starts its own nats-server on a
free loopback port and stops it; every run is bounded in time.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("nats", reason="nats-py is not installed")
NATS = shutil.which("nats-server")
pytestmark = pytest.mark.skipif(NATS is None, reason="nats-server is not installed (apt-get install -y nats-server)")

from megha.live import supervisor  # noqa: E402
from megha.live.client import LiveClient, prepare_workload, synthetic_workload, to_run_result, with_constraints  # noqa: E402
from megha.live.config import LiveConfig  # noqa: E402
from megha.live.deploy import LocalDeployment, datacenter_of, layout_of, make_transport  # noqa: E402
from megha.live.testing import free_port, reaped, start_nats, stop  # noqa: E402


@pytest.fixture(autouse=True)
def _no_leftover_processes():
    """Whatever a test starts (nats-server, supervisor, services) is killed when it ends, even when it fails."""
    with reaped():
        yield


def _exactly_once(res) -> None:
    assert res.unfinished_reason is None, res.unfinished_reason
    fin = res.recorder.finishes[res.feasible]
    assert (fin == 1).all()
    assert np.isfinite(res.recorder.known[res.feasible]).all()


def _cfg(port: int, **over) -> LiveConfig:
    data = {
        "broker": {"kind": "nats", "port": port},
        "ha": {"failover_timeout": 0.5, "host_timeout": 0.5},
        "megha": {"heartbeat": 0.5},
    }
    data.update(over)
    return LiveConfig(**data)


def test_inprocess_services_over_nats_with_garbage_and_broker_restart(tmp_path: Path):
    """Services in this process, every message through nats-server; garbage is rejected; the broker restarts
    mid-run (clients reconnect with backoff) and the run still completes exactly once."""
    broker, port = start_nats(tmp_path / "js")

    async def main():
        cfg = _cfg(port, state_dir=str(tmp_path / "state"))
        dc = datacenter_of(cfg)
        layout = layout_of(cfg, dc)
        dep = await LocalDeployment(cfg, layout=layout).start()
        cl = LiveClient(cfg, dep.transport("client"), layout)
        await cl.start()
        w = with_constraints(cfg, synthetic_workload(20, 6, 0.5, 1.0, seed=3))
        try:
            res1 = to_run_result(await cl.run(w, dc, stall_timeout=15), cfg, dc, "synthetic")
            _exactly_once(res1)
            tr = make_transport(cfg, "attacker")
            await tr.start()
            for addr in (layout.gm_address(0), layout.lm_address(1), "megha/host/h1", "events"):
                tr.publish_durable(cl.rt.inbox_subject(addr), b"\xc1not msgpack")
            await tr.flush()
            await tr.close()
            # broker restart between runs: every connection reconnects by itself
            nonlocal broker
            stop(broker)
            await asyncio.sleep(0.3)
            broker, _ = start_nats(tmp_path / "js", port=port)
            await asyncio.sleep(1.5)
            res2 = to_run_result(await cl.run(w, dc, stall_timeout=15, ready_timeout=20), cfg, dc, "synthetic")
            _exactly_once(res2)
            assert res2.counters["service_rejected_messages"] >= 3
        finally:
            await cl.close()
            await dep.close()

    try:
        asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        stop(broker)


def test_up_submit_kill_processes_down(tmp_path: Path):
    """`megha live up` as processes; mid-run a worker-host process, a GM process and the active LM process are
    killed (SIGKILL); every task still completes exactly once; `down` stops everything."""
    port = free_port()
    cfg = _cfg(
        port,
        datacenter={"workers": 100},
        megha={"gms": 2, "lms": 2, "heartbeat": 0.5, "policy": "min-constraints"},
        state_dir=str(tmp_path / "state"),
    )
    path = tmp_path / "deploy.json"
    path.write_text(cfg.model_dump_json())
    supervisor.launch(cfg, str(path))
    t0 = time.monotonic()
    try:

        async def main():
            dc = datacenter_of(cfg)
            layout = layout_of(cfg, dc)
            await supervisor.wait_credentials(cfg)
            cl = LiveClient(cfg, make_transport(cfg, "client", give_up_after=60, role="client"), layout)
            await cl.start()
            await cl.wait_ready(60)
            w = with_constraints(cfg, synthetic_workload(24, 5, 1.0, 3.0, seed=5))
            job = asyncio.ensure_future(cl.run(w, dc, stall_timeout=20, gm_dead_after=10))
            while not cl.started.any():
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.8)
            pids = json.loads((Path(cfg.state_dir) / "services.json").read_text())["services"]
            # LM 0's active by its own reports (under load a standby may have taken over at start-up already)
            lm0 = [st for st in list(cl.statuses.values()) if st.src == layout.lm_address(0) and st.role == "active"]
            active = max(lm0, key=lambda st: st.t).info["pid"] if lm0 else pids["lm0-active"]
            for pid in (pids["host0"], pids["gm1"], active):
                os.kill(pid, signal.SIGKILL)
            run = await job
            await cl.close()
            return to_run_result(run, cfg, dc, "synthetic")

        res = asyncio.run(asyncio.wait_for(main(), 300 - (time.monotonic() - t0)))
        _exactly_once(res)
        assert res.counters["runs_lost"] > 0
        assert res.counters["service_takeovers"] >= 1
        state = json.loads((Path(cfg.state_dir) / "services.json").read_text())
        assert state["restarts"].get("gm1") == 1 and state["restarts"].get("host0") == 1
    finally:
        assert supervisor.terminate(cfg)
    assert not supervisor.port_open("127.0.0.1", port)


def test_sample_trace_live_matches_simulated_ordering(tmp_path: Path):
    """The bundled sample trace, time-compressed, over NATS: every task completes and the live run finishes
    its jobs in the same order as the simulation of the same trace (deterministic min-constraints choice)."""
    from megha.live.compare import compare_live_and_sim

    broker, port = start_nats(tmp_path / "js")

    async def main():
        cfg = _cfg(
            port,
            state_dir=str(tmp_path / "state"),
            megha={"gms": 2, "lms": 4, "heartbeat": 1.0, "policy": "min-constraints"},
            ha={"lm_standby": False},
        )
        dc = datacenter_of(cfg)
        layout = layout_of(cfg, dc)
        dep = await LocalDeployment(cfg, layout=layout).start()
        cl = LiveClient(cfg, dep.transport("client"), layout)
        await cl.start()
        try:
            w = prepare_workload(cfg, "sample:YH_small", dc, compress=10)
            return cfg, to_run_result(await cl.run(w, dc, stall_timeout=15), cfg, dc, "sample:YH_small")
        finally:
            await cl.close()
            await dep.close()

    try:
        cfg, res = asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        stop(broker)
    _exactly_once(res)
    doc = compare_live_and_sim(res, cfg, tmp_path / "cmp")
    assert doc["simulated"]["completed"] and doc["live"]["tasks_completed"] == doc["simulated"]["tasks_completed"]
    assert doc["ordering"]["completion"]["concordance"] >= 0.95
    assert (tmp_path / "cmp" / "live" / "summary.json").exists()
    assert (tmp_path / "cmp" / "delay_cdf.png").exists()


def test_reconnection_reads_renewed_credentials_and_a_refused_client_gives_up(tmp_path: Path):
    """The broker comes back with other credentials: a connection reconnects with the renewed ones as soon as they
    are written (re-read before every attempt), and a client whose credentials stay refused closes its connection
    after ``give_up_after`` instead of retrying for ever inside the NATS client."""
    from megha.live.transport import NatsTransport

    conf = tmp_path / "nats.conf"
    conf.write_text('authorization { users: [ {user: "u", password: "old"} ] }\n')
    broker, port = start_nats(tmp_path / "js", conf=conf)
    creds = {"user": "u", "password": "old"}

    async def until(cond, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while not cond() and time.monotonic() < end:
            await asyncio.sleep(0.05)
        return cond()

    async def main():
        nonlocal broker
        url = f"nats://127.0.0.1:{port}"
        renewing = NatsTransport(url, give_up_after=None, credentials=lambda: dict(creds))
        stuck = NatsTransport(url, give_up_after=2.0, credentials=lambda: {"user": "u", "password": "old"})
        await renewing.start()
        await stuck.start()
        try:
            stop(broker)
            conf.write_text('authorization { users: [ {user: "u", password: "new"} ] }\n')
            broker, _ = start_nats(tmp_path / "js", port=port, conf=conf)
            assert await until(lambda: stuck.gave_up and stuck.nc.is_closed, 60), "the refused client kept trying"
            assert not renewing.connected
            creds["password"] = "new"
            assert await until(lambda: renewing.connected, 60), "no reconnection with the renewed credentials"
        finally:
            await renewing.close()
            await stuck.close()

    try:
        asyncio.run(asyncio.wait_for(main(), 180))
    finally:
        stop(broker)
