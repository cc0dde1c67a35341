"""The live runtime as an operator runs it: bad options, unreachable brokers, busy ports, credentials,
permissions, command allowlists and health reports (issue 15). Every test is bounded in time; the ones that
need nats-server skip without it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from megha.cli import app
from megha.live.client import LiveClient, one_job, to_run_result
from megha.live.config import LiveConfig
from megha.live.deploy import LocalDeployment, datacenter_of, layout_of
from megha.live.testing import reaped


@pytest.fixture(autouse=True)
def _no_leftover_processes():
    """Whatever a test starts (nats-server, supervisor, services) is killed when it ends, even when it fails."""
    with reaped():
        yield


NATS = shutil.which("nats-server")
needs_nats = pytest.mark.skipif(NATS is None, reason="nats-server is not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _megha(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "megha.cli", *args], capture_output=True, text=True, timeout=timeout)


def test_bench_rejects_bad_rates_with_a_clear_error():
    r = CliRunner().invoke(app, ["live", "bench", "--rates", "abc"])
    assert r.exit_code == 2, r.output
    assert "--rates" in r.output and "Traceback" not in r.output


def test_bench_sizes_its_datacenter_so_no_task_waits_for_a_free_worker():
    from megha.live.bench import bench_workers, format_row

    assert bench_workers([1000]) == 1000  # the least
    assert bench_workers([1000, 5000]) == 2000  # 5,000 tasks/s x 0.2 s: 1,000 busy, half of them
    assert bench_workers([7777]) == 3200
    r = CliRunner().invoke(app, ["live", "bench", "--workers", "-1"])
    assert r.exit_code == 2 and "--workers" in r.output
    row = {"rate": 1000.0, "achieved_rate": 990.0, "p50_ms": 1.0, "p99_ms": 5.0, "max_ms": 9.0, "started": 10}
    row |= {"tasks": 10, "sustained": True, "busy_workers": 0.2}
    assert "(20% of the workers busy)" in format_row(row)


def test_bench_reports_cpu_seconds_per_1000_tasks_and_the_load():
    from megha.live.bench import CpuMeter, format_row

    sum(i * i for i in range(200_000))  # some CPU time of our own
    m = CpuMeter(os.getpid(), [os.getpid()]).read()
    # the same process read twice, services first: the broker's reading may be a clock tick or two later
    assert m["broker"] > 0 and 0 <= m["broker"] - m["services"] <= 0.05 and m["client"] > 0
    assert CpuMeter(None, None).read()["broker"] == 0.0
    row = {"rate": 1000.0, "achieved_rate": 990.0, "p50_ms": 1.0, "p99_ms": 5.0, "max_ms": 9.0, "started": 10}
    row |= {"tasks": 10, "sustained": True, "load": 3.5, "cpu_broker_per_1000": 0.25}
    row |= {"cpu_services_per_1000": 0.5, "cpu_client_per_1000": 0.125}
    text = format_row(row)
    assert "broker 0.250" in text and "services 0.500" in text and "load average 3.5" in text
    w = CpuMeter(os.getpid(), [os.getpid()], ["me"]).wakeups()
    assert set(w) == {"client", "broker", "me"} and w["me"] >= w["client"] >= 0
    assert CpuMeter(None, None).wakeups()["broker"] == 0
    row |= {"wakeups_per_task": {"client": 0.5, "broker": 3.25}, "broker_messages_per_task": 1.5}
    row |= {"stored_per_task": {"LaunchRequest": 1.0, "Events": 0.75}}
    text = format_row(row)
    assert "broker 3.25" in text and "LaunchRequest 1.000" in text and "total 1.750, stored as 1.500" in text


def test_client_commands_time_out_when_no_broker_is_reachable(tmp_path: Path):
    port = _free_port()  # nothing listens there
    cfg = tmp_path / "d.json"
    cfg.write_text(json.dumps({"broker": {"port": port}, "state_dir": str(tmp_path / "st")}))
    for cmd in (["live", "status", "-c", str(cfg)], ["live", "submit", "-c", str(cfg), "--tasks", "1"]):
        t = time.monotonic()
        r = _megha(*cmd, timeout=60)
        assert r.returncode != 0
        assert "no NATS broker" in r.stderr + r.stdout, r.stderr[-2000:]
        assert "Traceback" not in r.stderr
        assert time.monotonic() - t < 40


def test_up_refuses_a_port_already_in_use(tmp_path: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        cfg = tmp_path / "d.json"
        cfg.write_text(json.dumps({"broker": {"port": port}, "state_dir": str(tmp_path / "st")}))
        try:
            r = CliRunner().invoke(app, ["live", "up", "-c", str(cfg), "--timeout", "5"])
        finally:
            CliRunner().invoke(app, ["live", "down", "-c", str(cfg)])
        assert r.exit_code == 2, r.output
        assert "in use" in r.output and "--broker" in r.output


def test_command_tasks_are_refused_unless_the_deployment_allows_the_executable(tmp_path: Path):
    marker = tmp_path / "ran"

    async def go(allowed: list[str]):
        cfg = LiveConfig(
            broker={"kind": "inproc"},
            datacenter={"workers": 10, "constraints": False},
            megha={"gms": 1, "lms": 1},
            workers={"hosts": 1, "allowed_commands": allowed},
            ha={"lm_standby": False},
        )
        dc = datacenter_of(cfg)
        layout = layout_of(cfg, dc)
        dep = await LocalDeployment(cfg, layout=layout).start()
        cl = LiveClient(cfg, dep.transport("client"), layout)
        await cl.start()
        try:
            run = await cl.run(one_job(2, 0.1), dc, kind="command", command=f"touch {marker}", stall_timeout=20)
            return to_run_result(run, cfg, dc, "one-job"), run
        finally:
            await cl.close()
            await dep.close()

    res, run = asyncio.run(go([]))
    assert res.unfinished_reason is None
    assert not marker.exists()
    assert len(run.failures) == 2 and all("not allowed" in why for why in run.failures.values())
    res, run = asyncio.run(go(["touch"]))
    assert not run.failures and marker.exists()


# --- a deployment started by `up` -------------------------------------------------------------------------------
@pytest.fixture
def deployment(tmp_path: Path):
    port = _free_port()
    doc = {
        "broker": {"port": port},
        "datacenter": {"workers": 40},
        "megha": {"gms": 2, "lms": 2, "heartbeat": 0.5},
        "workers": {"hosts": 1},
        "ha": {"failover_timeout": 0.5, "host_timeout": 1.0, "restart": False},
        "state_dir": str(tmp_path / "state"),
    }
    path = tmp_path / "deploy.json"
    path.write_text(json.dumps(doc))
    r = _megha("live", "up", "-c", str(path), "--timeout", "60", timeout=90)
    try:
        assert r.returncode == 0, r.stderr[-3000:]
        yield path, LiveConfig(**doc), port
    finally:
        _megha("live", "down", "-c", str(path), timeout=60)


@needs_nats
def test_up_generates_credentials_and_refuses_anonymous_and_unauthorised_clients(deployment):
    path, cfg, port = deployment
    state = Path(cfg.state_dir)
    creds = sorted(state.rglob("*.creds")) + sorted(state.rglob("*.json"))
    secret_files = [p for p in creds if "auth" in p.parts]
    assert secret_files, "no credentials in the state directory"
    for p in secret_files:
        assert p.stat().st_mode & 0o077 == 0, f"{p} is readable by others"
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    server_lines = [x for x in ps.splitlines() if "nats-server" in x and str(port) in x]
    assert all("--pass" not in x and "--auth" not in x and "--user" not in x for x in server_lines)

    async def anonymous() -> bool:
        import nats

        try:
            nc = await asyncio.wait_for(
                nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False, connect_timeout=2), 5
            )
        except Exception:
            return False
        await nc.close()
        return True

    assert not asyncio.run(anonymous()), "a client without credentials was let in"

    # a client identity cannot stop the deployment by publishing a shutdown on the control subject
    async def shutdown_as_client() -> None:
        from megha.live import wire
        from megha.live.deploy import make_transport
        from megha.live.messages import Control
        from megha.live.runtime import CONTROL
        from megha.live.transport import subject_of

        tr = make_transport(cfg, "client", role="client")
        await tr.start()
        tr.publish(subject_of(cfg.name, CONTROL), wire.encode(Control("shutdown"), "x", CONTROL))
        await tr.flush()
        await asyncio.sleep(1.0)
        await tr.close()

    asyncio.run(shutdown_as_client())
    r = _megha("live", "status", "-c", str(path), "--json", timeout=60)
    doc = json.loads(r.stdout)
    assert r.returncode == 0, r.stdout[-3000:]
    assert all(s["state"] == "up" for s in doc["services"]), doc["services"]


@needs_nats
def test_a_client_reads_only_its_own_runs_events(deployment):
    """Each client identity reads the task events of its own runs only (issue 15): client 1 gets nothing of client
    0's run, may not read client 0's events stream, the events subjects or any other identity's replies."""
    _, cfg, port = deployment

    async def go():
        import nats
        from nats.js.api import ConsumerConfig, DeliverPolicy

        from megha.live.deploy import make_transport
        from megha.live.security import read_credentials
        from megha.live.transport import events_stream, private_inbox

        a = LiveClient(cfg, make_transport(cfg, "a", role="client", client=0), layout_of(cfg))
        b = LiveClient(cfg, make_transport(cfg, "b", role="client", client=1), layout_of(cfg))
        got_b: list[bytes] = []
        b._on_events = lambda data, pos=0: got_b.append(data)
        await a.start()
        await b.start()
        assert (a.client_id, b.client_id) == (0, 1)
        # client 1 tries to eavesdrop with its own credentials
        creds = read_credentials(cfg, "client-1")
        errors: list[str] = []

        async def on_error(e: Exception) -> None:
            errors.append(str(e))

        nc = await nats.connect(
            f"nats://127.0.0.1:{port}",
            user=creds["user"],
            password=creds["password"],
            inbox_prefix=private_inbox(creds["user"]),
            error_cb=on_error,
            allow_reconnect=False,
        )
        sniffed: list[str] = []

        async def sniff(msg) -> None:
            sniffed.append(msg.subject)

        for subj in ("_INBOX.>", f"{cfg.name}.ev.>", f"{cfg.name}.ev.0", private_inbox(f"{cfg.name}-client") + ".>"):
            await nc.subscribe(subj, cb=sniff)
        js = nc.jetstream(timeout=3.0)
        stolen = None
        try:
            stolen = await js.add_consumer(
                events_stream(cfg.name, 0),
                ConsumerConfig(deliver_subject=nc.new_inbox(), deliver_policy=DeliverPolicy.ALL),
                timeout=3.0,
            )
        except Exception as e:  # refused (a permission violation: the request times out or errs)
            errors.append(f"consumer: {type(e).__name__}")
        own = await js.add_consumer(  # its own stream: allowed
            events_stream(cfg.name, 1), ConsumerConfig(deliver_subject=nc.new_inbox()), timeout=10.0
        )
        try:
            run = await a.run(one_job(6, 0.2), datacenter_of(cfg), stall_timeout=30, ready_timeout=30)
            res = to_run_result(run, cfg, datacenter_of(cfg), "one-job")
            await asyncio.sleep(0.5)
        finally:
            await nc.close()
            await a.close()
            await b.close()
        return res, got_b, sniffed, stolen, own, errors

    res, got_b, sniffed, stolen, own, errors = asyncio.run(asyncio.wait_for(go(), 120))
    assert res.unfinished_reason is None and (res.recorder.finishes[res.feasible] == 1).all()
    assert got_b == [], "client 1 received events of client 0's run"
    assert sniffed == [], f"client 1 read other identities' subjects: {sniffed[:5]}"
    assert stolen is None, "client 1 opened a consumer on client 0's events stream"
    assert own is not None
    assert any("ermission" in e for e in errors), errors


@needs_nats
def test_status_lists_a_dead_service_as_down_and_exits_non_zero(deployment):
    path, cfg, _port = deployment
    state = json.loads((Path(cfg.state_dir) / "services.json").read_text())
    os.kill(state["services"]["gm1"], 9)  # ha.restart is off: it stays down
    time.sleep(3.0)
    r = _megha("live", "status", "-c", str(path), "--json", timeout=60)
    assert r.returncode != 0
    doc = json.loads(r.stdout)
    by = {s["name"]: s for s in doc["services"]}
    assert by["gm1"]["state"] == "down" and by["gm0"]["state"] == "up"
    assert {"lm0-active", "lm0-standby", "lm1-active", "lm1-standby", "host0"} <= set(by)
    assert doc["healthy"] is False


def test_metrics_endpoint_lists_the_documented_metrics():
    import urllib.request

    from megha.live.metrics import serve_metrics

    async def go() -> str:
        cfg = LiveConfig(
            broker={"kind": "inproc"},
            datacenter={"workers": 20, "constraints": False},
            megha={"gms": 1, "lms": 1},
            workers={"hosts": 1},
            ha={"lm_standby": False},
        )
        dc = datacenter_of(cfg)
        layout = layout_of(cfg, dc)
        dep = await LocalDeployment(cfg, layout=layout).start()
        ports = [_free_port() for _ in range(3)]
        for rt, port in zip([*dep.gms.values(), *dep.lms.values(), *dep.hosts.values()], ports, strict=True):
            serve_metrics(rt, port)
        cl = LiveClient(cfg, dep.transport("client"), layout)
        await cl.start()
        try:
            await cl.run(one_job(6, 0.1), dc, stall_timeout=20)
            loop = asyncio.get_running_loop()
            texts = []
            for port in ports:
                url = f"http://127.0.0.1:{port}/metrics"
                body = await loop.run_in_executor(None, lambda u=url: urllib.request.urlopen(u, timeout=5).read())
                texts.append(body)
            return b"".join(texts).decode()
        finally:
            await cl.close()
            await dep.close()

    text = asyncio.run(go())
    for name in (
        "megha_gm_queue_length",
        "megha_placements_total",
        "megha_inconsistencies_total",
        "megha_rejections_received_total",
        "megha_failovers_total",
        "megha_lm_running_tasks",
        "megha_host_running_tasks",
        "megha_placement_latency_seconds_bucket",
    ):
        assert name in text, name
    placed = [ln for ln in text.splitlines() if ln.startswith("megha_placements_total{")]
    assert placed and float(placed[0].rsplit(" ", 1)[1]) == 6.0


@needs_nats
@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_tls_deployment_serves_clients_that_verify_the_broker(tmp_path: Path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert)),
            *("-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    doc = {
        "broker": {"port": _free_port(), "tls_cert": str(cert), "tls_key": str(key), "tls_ca": str(cert)},
        "datacenter": {"workers": 20},
        "megha": {"gms": 1, "lms": 1},
        "workers": {"hosts": 1},
        "ha": {"lm_standby": False},
        "state_dir": str(tmp_path / "state"),
    }
    path = tmp_path / "deploy.json"
    path.write_text(json.dumps(doc))
    try:
        r = _megha("live", "up", "-c", str(path), "--timeout", "60", timeout=90)
        assert r.returncode == 0, r.stderr[-3000:]
        r = _megha("live", "submit", "-c", str(path), "--tasks", "4", "--duration", "0.2", timeout=90)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "4/4 tasks completed" in r.stderr
    finally:
        _megha("live", "down", "-c", str(path), timeout=60)


# --- a client's identity and its reply subjects -------------------------------------------------------------------
@pytest.fixture
def secured_broker(tmp_path: Path):
    """nats-server started as `up` starts it (generated credentials and permissions), with the deployment's
    streams; yields the deployment's config."""
    from megha.live.supervisor import Supervisor

    cfg = LiveConfig(broker={"port": _free_port(), "clients": 2}, state_dir=str(tmp_path / "state"))
    sup = Supervisor(cfg, None)
    try:
        sup.start_broker()
        sup.prepare_streams()
        yield cfg
    finally:
        sup.shutdown()


@needs_nats
def test_a_client_whose_credentials_appear_while_it_connects_reads_its_events(secured_broker):
    """`up`'s readiness check may look for the client credentials just before the supervisor writes them and
    connect just after. Its reply subjects must then belong to the identity it connected as: a reply prefix chosen
    without credentials is refused by the client's permissions, every JetStream request went unanswered, and
    `up` failed after 30 s with "cannot read megha.ev.0 from the broker's streams: nats: timeout" (CI)."""
    from megha.live.deploy import make_transport
    from megha.live.transport import subject_of

    cfg = secured_broker

    async def go() -> None:
        tr = make_transport(cfg, "cli", give_up_after=20, role="client")
        written = tr.credentials
        looks = [0]

        def late():  # not there at the first look, there from the second on
            looks[0] += 1
            return None if looks[0] == 1 else written()

        tr.credentials = late
        await tr.start()
        try:
            await asyncio.wait_for(tr.consume(subject_of(cfg.name, "ev/0"), lambda d, p: None, None), 20)
        finally:
            await tr.close()

    asyncio.run(go())


@needs_nats
def test_reading_a_stream_the_identity_may_not_read_fails_within_its_timeout_naming_the_refusal(secured_broker):
    """A JetStream request the broker's permissions refuse is never answered: the client gives up after the time it
    was given (not a hidden 30 s) and says that the broker refused it."""
    from megha.live.deploy import make_transport
    from megha.live.transport import subject_of

    cfg = secured_broker

    async def go() -> str:
        tr = make_transport(cfg, "cli", give_up_after=20, role="client")  # client identity 0
        await tr.start()
        try:
            with pytest.raises(ConnectionError) as e:
                await asyncio.wait_for(tr.consume(subject_of(cfg.name, "ev/1"), lambda d, p: None, None, timeout=3), 20)
            return str(e.value)
        finally:
            await tr.close()

    t = time.monotonic()
    msg = asyncio.run(go())
    assert time.monotonic() - t < 15
    assert "ev.1" in msg and "refused" in msg and "ermissions" in msg, msg
