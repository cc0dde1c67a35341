"""``megha live up`` / ``down``: a supervisor process that runs a whole local deployment.

The supervisor (``python -m megha.live.supervisor CONFIG``, started in its own session by ``up``) starts
nats-server when the configuration asks for it and it is installed (bound to ``broker.bind``, loopback by
default, with the configured credentials), then the services in order — standby LMs, active LMs, GMs, worker
hosts — each as ``python -m megha.live.service``. It restarts a GM or a worker host that dies (``ha.restart``;
a restarted GM rebuilds its view from the LMs, a restarted host re-registers), but not an LM: its standby
takes over. It records pids in ``state_dir/services.json`` and logs in ``state_dir/logs/``. SIGTERM (``down``)
stops every service, then the broker.
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
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def nats_argv(cfg: LiveConfig, binary: str) -> list[str]:
    b = cfg.broker
    argv = [binary, "-a", b.bind, "-p", str(b.port)]
    if b.token:
        argv += ["--auth", b.token]
    elif b.user:
        argv += ["--user", b.user, "--pass", b.password]
    return argv


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


class Supervisor:
    def __init__(self, cfg: LiveConfig, config_path: str | None) -> None:
        self.cfg = cfg
        self.config_path = config_path
        self.state = Path(cfg.state_dir)
        self.logs = self.state / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen] = {}
        self.specs = {n: (argv, r) for n, argv, r in service_specs(cfg, config_path)}
        self.restarts: dict[str, int] = {}
        self.broker: subprocess.Popen | None = None
        self.stopping = False

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        f = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
        return subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def _save(self) -> None:
        doc = {
            "supervisor": os.getpid(),
            "broker": self.broker.pid if self.broker else None,
            "services": {n: p.pid for n, p in self.procs.items()},
            "restarts": self.restarts,
            "url": self.cfg.broker.resolved_url(),
        }
        tmp = self.state / "services.json.tmp"
        tmp.write_text(json.dumps(doc, indent=2))
        tmp.replace(self.state / "services.json")

    def start_broker(self) -> None:
        b = self.cfg.broker
        if b.kind != "nats" or not b.start_server:
            return
        binary = nats_server_binary(self.cfg)
        if binary is None:
            log.warning("nats-server is not installed: expecting a broker at %s", b.resolved_url())
            return
        if port_open(b.bind, b.port):
            log.warning("something already listens on %s:%d: using it as the broker", b.bind, b.port)
            return
        self.broker = self._spawn("nats-server", nats_argv(self.cfg, binary))
        end = time.monotonic() + 5
        while not port_open(b.bind, b.port):
            if time.monotonic() > end or self.broker.poll() is not None:
                raise RuntimeError(f"nats-server did not start (see {self.logs / 'nats-server.log'})")
            time.sleep(0.05)

    def start(self) -> None:
        self.start_broker()
        for name, (argv, _) in self.specs.items():
            self.procs[name] = self._spawn(name, argv)
            if name.endswith("-standby") and name == f"lm{self.cfg.megha.lms - 1}-standby":
                time.sleep(1.0)  # standbys subscribe before the actives start
        self._save()

    def watch(self) -> None:
        while not self.stopping:
            time.sleep(0.2)
            for name, p in list(self.procs.items()):
                if p.poll() is None or self.stopping:
                    continue
                argv, restart = self.specs[name]
                if restart and self.cfg.ha.restart:
                    log.warning("%s exited (%s): restarting it", name, p.returncode)
                    self.restarts[name] = self.restarts.get(name, 0) + 1
                    self.procs[name] = self._spawn(name, argv)
                else:
                    log.warning("%s exited (%s)", name, p.returncode)
                    del self.procs[name]
                self._save()

    def stop(self, *_: object) -> None:
        self.stopping = True

    def shutdown(self) -> None:
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
    finally:
        sup.shutdown()


def read_state(cfg: LiveConfig) -> dict | None:
    """The running deployment's ``services.json`` (None when it is not up)."""
    p = Path(cfg.state_dir) / "services.json"
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def supervisor_pid(cfg: LiveConfig) -> int | None:
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


def launch(cfg: LiveConfig, config_path: str | None) -> int:
    """Start the supervisor in its own session; returns its pid."""
    if supervisor_pid(cfg) is not None:
        raise RuntimeError(f"a deployment is already up (state in {cfg.state_dir}); run `megha live down` first")
    state = Path(cfg.state_dir)
    state.mkdir(parents=True, exist_ok=True)
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
