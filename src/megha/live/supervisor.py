"""``megha live up`` / ``down``: a supervisor process that runs a whole local deployment.

The supervisor (``python -m megha.live.supervisor CONFIG``, started in its own session by ``up``) starts
nats-server (bound to ``broker.bind``, loopback by default; it refuses a port already in use — join an existing
broker with ``up --broker URL`` instead) from a generated configuration file: JetStream in
``state_dir/jetstream``, per-role credentials and subject permissions (:mod:`megha.live.security`), TLS when
configured. It creates the deployment's empty streams, then starts the services — standby LMs, active LMs, GMs,
worker hosts — each as ``python -m megha.live.service``. It restarts a GM, a worker host or the broker that dies
(``ha.restart``; a restarted GM rebuilds its view from the LMs, a restarted host re-registers, a restarted broker
keeps its streams) and, whenever an LM process ends (killed, or deposed after a failover), starts a new standby
for that LM (``ha.new_standby``), which catches up from the LM's replication log. It records pids in
``state_dir/services.json`` and logs in ``state_dir/logs/``. SIGTERM (``down``) stops every service, then the
broker.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from megha.live.config import LiveConfig, load_config

log = logging.getLogger("megha.live.supervisor")


def nats_server_binary(cfg: LiveConfig) -> str | None:
    """Path of the nats-server executable, or None when it is not installed."""
    return shutil.which(cfg.broker.server_bin)


def port_open(host: str, port: int, timeout: float = 0.2) -> bool:
    """Whether something accepts TCP connections at ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def nats_argv(cfg: LiveConfig, binary: str, conf: Path | None = None, store: Path | None = None) -> list[str]:
    """nats-server's command line: the configuration file when there is one (credentials never appear here)."""
    if conf is not None:
        return [binary, "-c", str(conf)]
    b = cfg.broker
    store = store or Path(cfg.state_dir) / "jetstream"
    return [binary, "-a", b.bind, "-p", str(b.port), "-js", "-sd", str(store)]


def nats_env(cfg: LiveConfig) -> dict[str, str] | None:
    """nats-server's environment: this one, with ``GOMAXPROCS`` from ``broker.threads`` (``None``: unchanged)."""
    n = cfg.broker.gomaxprocs()
    return None if n is None else {**os.environ, "GOMAXPROCS": str(n)}


def service_specs(cfg: LiveConfig, config_path: str | None) -> list[tuple[str, list[str], bool]]:
    """(name, argv, restart?) of every service, in start order."""
    base = [sys.executable, "-m", "megha.live.service"]
    cfgarg = ["--config", str(config_path)] if config_path else []
    out = []
    roles = ("standby", "active") if cfg.ha.lm_standby else ("solo",)
    for role in roles:
        for lm in range(cfg.megha.lms):
            out.append((f"lm{lm}-{role}", [*base, "lm", *cfgarg, "--index", str(lm), "--role", role], False))
    for g in range(cfg.megha.gms):
        out.append((f"gm{g}", [*base, "gm", *cfgarg, "--index", str(g)], True))
    for h in range(cfg.workers.hosts):
        out.append((f"host{h}", [*base, "worker", *cfgarg, "--index", str(h)], True))
    return out


def standby_argv(cfg: LiveConfig, config_path: str | None, lm: int) -> list[str]:
    """The command line of one more standby of LM ``lm``."""
    cfgarg = ["--config", str(config_path)] if config_path else []
    return [sys.executable, "-m", "megha.live.service", "lm", *cfgarg, "--index", str(lm), "--role", "standby"]


class Supervisor:
    """Runs a deployment's processes: the broker (unless joining one), LMs, GMs, worker hosts; restarts them."""

    def __init__(self, cfg: LiveConfig, config_path: str | None) -> None:
        self.cfg = cfg
        self.config_path = config_path
        self.state = Path(cfg.state_dir)
        self.logs = self.state / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen] = {}
        self.specs = {n: (argv, r) for n, argv, r in service_specs(cfg, config_path)}
        self.restarts: dict[str, int] = {}
        self.failovers: dict[str, int] = {}
        self.metrics_ports: dict[str, int] = {}
        self._next_metrics = cfg.metrics.port
        self.broker: subprocess.Popen | None = None
        self.broker_argv: list[str] | None = None
        self.broker_restarts = 0
        self.stopping = False

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        if self.cfg.metrics.port and "megha.live.service" in argv:
            port = self.metrics_ports.get(name)
            if port is None:
                port = self.metrics_ports[name] = self._next_metrics
                self._next_metrics += 1
            argv = [*argv, "--metrics-port", str(port)]
        f = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
        env = nats_env(self.cfg) if name == "nats-server" else None
        return subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)

    def _save(self) -> None:
        doc = {
            "supervisor": os.getpid(),
            "broker": self.broker.pid if self.broker else None,
            "services": {n: p.pid for n, p in self.procs.items()},
            "restarts": self.restarts,
            "failovers": self.failovers,
            "broker_restarts": self.broker_restarts,
            "metrics": self.metrics_ports,
            "url": self.cfg.broker.resolved_url(),
        }
        tmp = self.state / "services.json.tmp"
        tmp.write_text(json.dumps(doc, indent=2))
        tmp.replace(self.state / "services.json")

    def start_broker(self) -> None:
        """Start nats-server with a generated configuration (credentials, permissions, JetStream, TLS)."""
        b = self.cfg.broker
        if b.kind != "nats" or not b.start_server:
            return
        binary = nats_server_binary(self.cfg)
        if binary is None:
            raise RuntimeError("nats-server is not installed (apt-get install -y nats-server); use --broker URL")
        if port_open(b.bind, b.port):
            raise RuntimeError(f"port {b.bind}:{b.port} is already in use; join that broker with --broker URL")
        from megha.live.security import generate_credentials, write_nats_config

        store = self.state / "jetstream"
        shutil.rmtree(store, ignore_errors=True)  # a new deployment starts with empty streams
        creds = generate_credentials(self.cfg) if b.auth and not (b.user or b.token) else None
        conf = write_nats_config(self.cfg, creds, store)
        self.broker_argv = nats_argv(self.cfg, binary, conf)
        self._start_broker_proc()

    def _start_broker_proc(self) -> None:
        b = self.cfg.broker
        self.broker = self._spawn("nats-server", self.broker_argv)
        end = time.monotonic() + 10
        while not port_open(b.bind, b.port):
            if time.monotonic() > end or self.broker.poll() is not None:
                raise RuntimeError(f"nats-server did not start (see {self.logs / 'nats-server.log'})")
            time.sleep(0.05)

    def prepare_streams(self) -> None:
        """Create the deployment's (empty) streams and election store, as the supervisor identity."""
        import asyncio

        from megha.live.deploy import make_transport

        async def go() -> None:
            tr = make_transport(self.cfg, "supervisor", give_up_after=30.0, role="supervisor")
            await tr.start()
            try:
                await tr.ensure_streams(reset=True)
            finally:
                await tr.close()

        asyncio.run(go())

    def start(self) -> None:
        """Start the broker (unless joining one), create the streams, start every service and save the state file."""
        self.start_broker()
        self.prepare_streams()
        for name, (argv, _) in self.specs.items():
            self.procs[name] = self._spawn(name, argv)
        self._save()

    def watch(self) -> None:
        """Until stopped: restart the broker and the services that exit (an LM with standbys gets a new standby
        instead), except those held down."""
        while not self.stopping:
            time.sleep(0.2)
            broker_down = self.broker is not None and self.broker.poll() is not None
            if broker_down and not self.stopping and not self.held("nats-server"):
                if self.cfg.ha.restart:
                    log.warning("nats-server exited (%s): restarting it", self.broker.returncode)
                    self.broker_restarts += 1
                    try:
                        self._start_broker_proc()
                    except RuntimeError as e:
                        log.error("%s", e)
                self._save()
            for name, p in list(self.procs.items()):
                if p.poll() is None or self.stopping:
                    continue
                if name.startswith("lm"):
                    lm = int(name[2:].split("-", 1)[0])
                    del self.procs[name]
                    if self.cfg.ha.lm_standby and self.cfg.ha.new_standby:
                        k = self.failovers.get(f"lm{lm}", 0) + 1
                        self.failovers[f"lm{lm}"] = k
                        new = f"lm{lm}-standby{k + 1}"
                        log.warning("%s exited (%s): starting a new standby %s", name, p.returncode, new)
                        self.specs[new] = (standby_argv(self.cfg, self.config_path, lm), False)
                        self.procs[new] = self._spawn(new, self.specs[new][0])
                    else:
                        log.warning("%s exited (%s)", name, p.returncode)
                    self._save()
                    continue
                argv, restart = self.specs[name]
                if restart and self.cfg.ha.restart and self.held(name):
                    continue  # down on purpose for a while (a replayed fault's down_for)
                if restart and self.cfg.ha.restart:
                    log.warning("%s exited (%s): restarting it", name, p.returncode)
                    self.restarts[name] = self.restarts.get(name, 0) + 1
                    self.procs[name] = self._spawn(name, argv)
                else:
                    log.warning("%s exited (%s)", name, p.returncode)
                    del self.procs[name]
                self._save()

    def held(self, name: str) -> bool:
        """Whether ``name`` must stay down for now: ``state_dir/hold/<name>`` holds the time (seconds since the
        epoch) before which it is not restarted (:func:`hold`)."""
        p = self.state / "hold" / name
        try:
            until = float(p.read_text())
        except (OSError, ValueError):
            return False
        if time.time() < until:
            return True
        p.unlink(missing_ok=True)
        return False

    def stop(self, *_: object) -> None:
        """Ask :meth:`watch` to return (the SIGTERM/SIGINT handler)."""
        self.stopping = True

    def shutdown(self) -> None:
        """Terminate every service (killed after 5 s) and the broker this supervisor started; remove the state and
        pid files."""
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        end = time.monotonic() + 5
        for p in self.procs.values():
            try:
                p.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
        if self.broker is not None and self.broker.poll() is None:
            self.broker.terminate()
            try:
                self.broker.wait(3)
            except subprocess.TimeoutExpired:
                self.broker.kill()
        for f in ("services.json", "supervisor.pid"):
            (self.state / f).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> None:
    """``python -m megha.live.supervisor [CONFIG]``: run a deployment's processes until SIGTERM (log, pid and errors
    in its state directory)."""
    argv = sys.argv[1:] if argv is None else argv
    config_path = argv[0] if argv else None
    cfg = load_config(config_path)
    state = Path(cfg.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s supervisor %(levelname)s %(message)s",
        filename=str(state / "supervisor.log"),
    )
    (state / "supervisor.pid").write_text(str(os.getpid()))
    sup = Supervisor(cfg, config_path)
    signal.signal(signal.SIGTERM, sup.stop)
    signal.signal(signal.SIGINT, sup.stop)
    try:
        sup.start()
        sup.watch()
    except Exception as e:
        log.error("supervisor failed: %s", e)
        (state / "supervisor.error").write_text(str(e))
        raise
    finally:
        sup.shutdown()


def supervisor_pid(cfg: LiveConfig) -> int | None:
    """The pid of the deployment's running supervisor, or None."""
    p = Path(cfg.state_dir) / "supervisor.pid"
    try:
        pid = int(p.read_text())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except OSError:
        return None
    return pid


async def wait_credentials(cfg: LiveConfig, role: str = "client", timeout: float = 60.0) -> None:
    """Wait until a supervisor just launched has written ``role``'s credentials (a client that connected before
    would try without them). No wait when the deployment names its own user or token."""
    import asyncio

    from megha.live.security import read_credentials

    b = cfg.broker
    if b.kind == "inproc" or b.user or b.token or not b.auth or not b.start_server:
        return
    end = time.monotonic() + timeout
    while read_credentials(cfg, role) is None and time.monotonic() < end and failure(cfg) is None:
        await asyncio.sleep(0.05)


def failure(cfg: LiveConfig) -> str | None:
    """Why the supervisor launched for ``cfg`` stopped (None: it has not failed)."""
    try:
        return (Path(cfg.state_dir) / "supervisor.error").read_text() or "the supervisor failed"
    except OSError:
        return None


def hold(cfg: LiveConfig, name: str, seconds: float) -> None:
    """Keep service ``name`` (``gm0``, ``host1``, ``nats-server``...) down for ``seconds`` once it dies: the
    supervisor restarts it only afterwards (how replayed faults get their ``down_for``)."""
    d = Path(cfg.state_dir) / "hold"
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{name}.tmp"
    tmp.write_text(repr(time.time() + max(0.0, seconds)))
    tmp.replace(d / name)


def launch(cfg: LiveConfig, config_path: str | None) -> int:
    """Start the supervisor in its own session; returns its pid."""
    if supervisor_pid(cfg) is not None:
        raise RuntimeError(f"a deployment is already up (state in {cfg.state_dir}); run `megha live down` first")
    state = Path(cfg.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    (state / "supervisor.error").unlink(missing_ok=True)
    argv = [sys.executable, "-m", "megha.live.supervisor"] + ([str(config_path)] if config_path else [])
    with open(state / "supervisor.out", "ab") as f:
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    return p.pid


def terminate(cfg: LiveConfig, timeout: float = 15.0) -> bool:
    """Stop the deployment's supervisor (and with it every service); False when none was running."""
    pid = supervisor_pid(cfg)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our own child (tests): reap it
                return True
        except ChildProcessError:
            pass
        try:
            os.kill(pid, 0)
        except OSError:
            return True
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    return True


if __name__ == "__main__":
    main()
