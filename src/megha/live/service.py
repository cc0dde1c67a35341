"""One service process: ``python -m megha.live.service gm|lm|worker --config FILE --index I [--role R]``.

The process connects to the broker (retrying with backoff), starts its component, and runs until SIGTERM or
SIGINT, a ``shutdown`` :class:`~megha.live.messages.Control` on the deployment's control subject (only the
supervisor's identity may publish there), or — an LM — until it is deposed by a standby that took over (exit
code 3; the supervisor then starts a new standby).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time

from megha.live import wire
from megha.live.config import LiveConfig, load_config
from megha.live.deploy import make_transport, quiet_gc, start_gm, start_host, start_lm
from megha.live.messages import Control
from megha.live.runtime import CONTROL

log = logging.getLogger("megha.live.service")

KINDS = ("gm", "lm", "worker")


async def serve(cfg: LiveConfig, kind: str, index: int, role: str = "solo", metrics_port: int = 0) -> int:
    """Run one service until told to stop; returns the process exit code (3: a deposed LM)."""
    if kind not in KINDS:
        raise ValueError(f"service kind must be one of {KINDS}")
    who = f"{kind}{index}" + (f"-{role}" if kind == "lm" else "")
    transport = make_transport(cfg, who, give_up_after=None)
    if kind == "gm":
        rt = await start_gm(cfg, index, transport)
    elif kind == "lm":
        rt = await start_lm(cfg, index, transport, role)
    else:
        rt = await start_host(cfg, index, transport)
    quiet_gc()
    stop = asyncio.Event()
    code = [0]

    def deposed() -> None:
        code[0] = 3
        stop.set()

    for h in rt.hosted.values():
        h.on_deposed = deposed
    if metrics_port:
        from megha.live.metrics import serve_metrics

        serve_metrics(rt, metrics_port, cfg.metrics.bind)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def on_control(data: bytes) -> None:
        try:
            env = wire.decode(data)
        except wire.WireError as e:
            log.warning("rejected control message: %s", e)
            return
        if isinstance(env.msg, Control) and env.msg.cmd == "shutdown":
            stop.set()

    await transport.subscribe(rt.subject(CONTROL), on_control)
    log.info("%s up (broker %s)", who, cfg.broker.kind)
    await stop.wait()
    for h in rt.hosted.values():
        if hasattr(h.comp, "shutdown"):
            h.comp.shutdown()
    await rt.close()
    return code[0]


def main(argv: list[str] | None = None) -> None:
    """``python -m megha.live.service KIND``: run one service (gm, lm or worker host) of the configured deployment
    until it is stopped."""
    p = argparse.ArgumentParser(prog="megha-live-service")
    p.add_argument("kind", choices=KINDS)
    p.add_argument("--config", default=None)
    p.add_argument("--index", type=int, default=0)
    p.add_argument("--role", default="solo", choices=("solo", "active", "standby"))
    p.add_argument("--metrics-port", type=int, default=0)
    a = p.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s {a.kind}{a.index} %(levelname)s %(message)s", stream=sys.stderr
    )
    cfg = load_config(a.config)
    prof_dir = os.environ.get("MEGHA_LIVE_PROFILE")
    prof = None
    if prof_dir:
        import cProfile

        prof = cProfile.Profile(time.process_time)  # CPU time: on a shared machine wall time mostly measures waiting
        prof.enable()
    try:
        code = asyncio.run(serve(cfg, a.kind, a.index, a.role, a.metrics_port))
    except ConnectionError as e:
        log.error("%s", e)
        code = 4
    if prof is not None:
        prof.disable()
        prof.dump_stats(os.path.join(prof_dir, f"{a.kind}{a.index}-{a.role}-{os.getpid()}.prof"))
    sys.exit(code)


if __name__ == "__main__":
    main()
