"""Leave no process behind: a reaper for tests (and scripts) that start live deployments.

A deployment started by ``megha live up`` runs in its own session (the supervisor, nats-server, every service
and every task a worker host starts); a test that fails half-way, or a supervisor killed with ``-9``, would
leave all of it running. :func:`reaped` marks everything started inside it with an environment variable (every
child process inherits it, however deep, whatever session it moves to) and, on the way out, kills every process
that still carries the mark, so even processes reparented to init are found.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

MARK = "MEGHA_LIVE_REAP"


def marked(token: str) -> list[int]:
    """Pids of the live processes (other than this one) whose environment carries ``MARK=token``."""
    needle = f"{MARK}={token}".encode()
    out = []
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            env = (d / "environ").read_bytes()
            stat = (d / "stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":  # a zombie: nothing left to kill
            continue
        if needle in env.split(b"\0"):
            out.append(int(d.name))
    return out


def reap(token: str, grace: float = 2.0) -> list[int]:
    """SIGTERM every process marked with ``token``, SIGKILL what is left after ``grace`` seconds; returns the
    pids found (those that were still running)."""
    found = marked(token)
    for pid in found:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + grace
    left = found
    while left and time.monotonic() < end:
        time.sleep(0.05)
        _collect(found)
        left = marked(token)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    end = time.monotonic() + 5.0
    while marked(token) and time.monotonic() < end:
        time.sleep(0.05)
        _collect(found)
    _collect(found)
    return found


def _collect(pids: list[int]) -> None:
    """Collect those of ``pids`` that are our own dead children (so they do not linger as zombies)."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


@contextlib.contextmanager
def reaped() -> Iterator[str]:
    """Everything started inside is killed on the way out, even when the body fails; yields the mark's token.

    Available only where ``/proc`` is (Linux); elsewhere it only runs the body."""
    if not Path("/proc/self/environ").exists():
        yield ""
        return
    token = uuid.uuid4().hex
    old = os.environ.get(MARK)
    os.environ[MARK] = token
    try:
        yield token
    finally:
        if old is None:
            os.environ.pop(MARK, None)
        else:
            os.environ[MARK] = old
        reap(token)


def free_port() -> int:
    """A loopback TCP port nothing listened on a moment ago (another process may take it: see :func:`start_nats`)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nats(
    store: Path, port: int | None = None, timeout: float = 30.0, tries: int = 5, conf: Path | None = None
) -> tuple[subprocess.Popen, int]:
    """Start a JetStream nats-server on loopback with its store in ``store``; returns it and its port.

    A port chosen free may be taken before the server binds it (other test runs share the machine); then the
    server exits and another port is tried (unless ``port`` was given: a restart must keep its port). Waits until
    *this* server accepts connections, never mistaking another process listening on the port for it. ``conf``: a
    configuration file (users...) read too."""
    binary = shutil.which("nats-server")
    if binary is None:
        raise RuntimeError("nats-server is not installed")
    last = ""
    for _ in range(tries):
        p_port = port or free_port()
        logfile = Path(f"{store}.log")
        logfile.parent.mkdir(parents=True, exist_ok=True)
        with open(logfile, "ab") as log:
            p = subprocess.Popen(
                [
                    binary,
                    *(["-c", str(conf)] if conf else []),
                    "-a",
                    "127.0.0.1",
                    "-p",
                    str(p_port),
                    "-js",
                    "-sd",
                    str(store),
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if p.poll() is not None:
                last = logfile.read_text(errors="replace")[-300:]
                break
            if _listening(p.pid, p_port):
                return p, p_port
            time.sleep(0.05)
        else:
            p.kill()
            p.wait()
            raise RuntimeError(f"nats-server did not listen on port {p_port} within {timeout} s")
        if port is not None and "address already in use" not in last:
            break
    raise RuntimeError(f"nats-server did not start: {last}")


def _listening(pid: int, port: int) -> bool:
    """Whether process ``pid`` listens on TCP ``port`` (a socket of its own in LISTEN state)."""
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
    except OSError:
        return _connectable(port)
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port and f[9] in inodes:
                return True
    return False


def _connectable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def stop(p: subprocess.Popen | None, grace: float = 5.0) -> None:
    """Terminate ``p`` (kill it after ``grace`` seconds) and collect it."""
    if p is None or p.poll() is not None:
        return
    p.terminate()
    try:
        p.wait(grace)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
