"""``megha live bench``: placement latency (submit → task start) at sustained task rates.

A deployment is started — ``procs``: separate processes over NATS, as ``megha live up`` runs it; ``nats``
(default): the services in this process, every message still through nats-server on loopback; ``inproc``: the
in-process bus, then for each rate the client submits single-task jobs evenly for
``seconds`` seconds (short sleep tasks on enough unconstrained workers, so nothing waits for capacity: the
figure is the scheduler's placement path client → GM → LM → worker, three broker hops). "Enough" is
:func:`bench_workers`: at most half of the workers busy at the highest rate (the mean task takes 0.2 s, so
1,000 workers, the least, serve up to 2,500 tasks/s; at 5,000 tasks/s they were all busy and tasks queued for
free workers, which the latency then measured instead of the placement path). Latency per task is
its start time at the worker minus the client's send time (one clock: same machine). A rate is *sustained*
when every task started, the start rate kept up with the offered rate (≥ 95 %), and p99 ≤ 50 ms.

Each row also gives the CPU seconds spent per 1,000 tasks by the broker (nats-server: JetStream stores every
message, acknowledges it and feeds the consumers), by the services and by the client, and the machine's load
average: on a shared machine latency follows the load. ``lm_standby`` runs every LM with a standby (the active
writes its replication log and sends an output only once the records it follows from are stored). With ``hops``,
a row also gives the median of each hop and, read back from every stream of the deployment, the durable messages
per task of each type and the broker messages they were stored as (several in one bundle; each stored message costs
the broker one store, one acknowledgement and one delivery).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from megha.live import wire
from megha.live.client import LiveClient, synthetic_workload, to_run_result
from megha.live.config import LiveConfig
from megha.live.deploy import LocalDeployment, datacenter_of, layout_of, make_transport
from megha.live.transport import Transport, stream_names
from megha.live.worker import RUN_SHIFT

if TYPE_CHECKING:
    import subprocess

    from megha.model.topology import Datacenter

log = logging.getLogger("megha.live.bench")


BUSY_AT_MOST = 0.5  # share of the bench's workers busy at the highest rate
MIN_WORKERS = 1000


def bench_workers(rates: list[float], duration: float = 0.2) -> int:
    """Workers of the bench's datacenter: at least ``MIN_WORKERS``, and enough that at most ``BUSY_AT_MOST`` of them
    are busy at the highest rate (tasks of ``duration`` s on average), rounded up to a multiple of 100."""
    need = max(rates, default=0.0) * duration / BUSY_AT_MOST
    return max(MIN_WORKERS, int(-(-need // 100)) * 100)


def bench_config(
    port: int = 14322,
    workers: int = 1000,
    gms: int = 1,
    lms: int = 2,
    hosts: int = 1,
    broker: str = "nats",
    state_dir: str | None = None,
    lm_standby: bool = False,
) -> LiveConfig:
    """The bench's deployment: ``workers`` workers without constraints, ``gms`` × ``lms`` masters, ``hosts`` worker
    hosts, on a broker of ``broker`` kind."""
    return LiveConfig(
        name="bench",
        broker={"kind": broker, "port": port},
        datacenter={"workers": workers, "constraints": False},
        megha={"gms": gms, "lms": lms, "heartbeat": 1.0},
        workers={"hosts": hosts},
        ha={"lm_standby": lm_standby},
        state_dir=state_dir or tempfile.mkdtemp(prefix="megha-bench-"),
    )


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_cpu(pid: int | None) -> float:
    """CPU seconds (user + system) a live process used so far (0 when unknown or gone)."""
    if not pid:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return 0.0


def _proc_wakeups(pid: int | None) -> int:
    """Voluntary context switches of every thread of a live process so far (each one a wait for input ended: the
    process woke up); 0 when unknown or gone."""
    if not pid:
        return 0
    n = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        n += int(line.split()[1])
                        break
        except (OSError, ValueError):
            continue
    return n


class CpuMeter:
    """CPU seconds of the broker, the services and the client: ``broker`` and ``services`` are pids (read from
    /proc), or ``None`` for services that run in this process (then counted with the client)."""

    def __init__(self, broker: int | None, services: list[int] | None, names: list[str] | None = None) -> None:
        self.broker = broker
        self.services = services
        self.names = names or []

    def read(self) -> dict[str, float]:
        """CPU seconds so far: the broker's, the services' (total and each) and this process's."""
        each = [_proc_cpu(p) for p in self.services] if self.services else []
        return {
            "broker": _proc_cpu(self.broker),
            "services": sum(each),
            "client": time.process_time(),
            **{f"service {n}": c for n, c in zip(self.names, each, strict=False)},
        }

    def wakeups(self) -> dict[str, int]:
        """Wake-ups (voluntary context switches) so far of the client (this process), the broker and each service."""
        out = {"client": _proc_wakeups(os.getpid()), "broker": _proc_wakeups(self.broker)}
        for n, p in zip(self.names, self.services or [], strict=False):
            out[n] = _proc_wakeups(p)
        return out


def _service_pids(cfg: LiveConfig) -> tuple[int | None, list[int], list[str]]:
    try:
        doc = json.loads((Path(cfg.state_dir) / "services.json").read_text())
    except (OSError, ValueError):
        return None, [], []
    svc = doc.get("services", {})
    return doc.get("broker"), [int(p) for p in svc.values()], list(svc)


HOPS = ("client → GM", "GM → LM", "LM → host", "host → start")


async def _stream_ends(transport: Transport, cfg: LiveConfig) -> dict[str, int] | None:
    """Last stream position of each of the deployment's streams (``None`` without JetStream: the in-process
    bus)."""
    js = getattr(transport, "js", None)
    if js is None:
        return None
    out = {}
    for name in stream_names(cfg.name, cfg.broker.clients):
        with contextlib.suppress(Exception):
            out[name] = int((await js.stream_info(name)).state.last_seq)
    return out


async def _hop_times(transport: Transport, since: dict[str, int], n: int, counts: Counter | None = None) -> np.ndarray:
    """When the broker stored each task's submission, launch request and host launch (wall seconds; NaN when
    missing): rows are task indexes < ``n``, columns the three messages. Read from the deployment's streams after
    positions ``since`` (the broker's own clock: one clock with the client's and the host's on one machine).
    ``counts``: add the number of stored messages of each type (every durable message costs the broker one
    store and one acknowledgement)."""
    from nats.js.api import ConsumerConfig, DeliverPolicy

    out = np.full((n, 3), np.nan)
    js = transport.js
    col = {"JobArrival": 0, "JobBatch": 0, "LaunchRequest": 1, "HostLaunch": 2}
    mask = (1 << RUN_SHIFT) - 1
    for name, s0 in since.items():
        last = int((await js.stream_info(name)).state.last_seq)
        if last <= s0:
            continue
        subj = stream_names(transport.ns, 64).get(name)
        if subj is None:
            continue
        sub = await js.subscribe(
            subj,
            stream=name,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            config=ConsumerConfig(opt_start_seq=s0 + 1),
        )
        try:
            while True:
                msg = await sub.next_msg(timeout=5.0)
                md = msg.metadata
                parts = wire.unpack_bundle(msg.data)
                if counts is not None:
                    counts["(stored)"] += 1
                for data in parts if parts is not None else [msg.data]:
                    try:
                        env = wire.decode(data)
                    except wire.WireError:
                        env = None
                    if counts is not None:
                        counts[env.type if env is not None else "?"] += 1
                    k = col.get(env.type) if env is not None else None
                    if k is not None:
                        ids = np.asarray(env.msg.tasks, dtype=np.int64) & mask
                        ids = ids[ids < n]
                        t = md.timestamp.timestamp()
                        cur = out[ids, k]
                        out[ids, k] = np.where(np.isnan(cur), t, cur)
                if md.sequence.stream >= last:
                    break
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
    return out


async def _measure(
    cl: LiveClient,
    cfg: LiveConfig,
    dc: Datacenter,
    rate: float,
    seconds: float,
    duration: float,
    per_job: int,
    meter: CpuMeter | None = None,
    hops: bool = False,
) -> dict:
    n_jobs = max(1, int(rate * seconds / per_job))
    w = synthetic_workload(n_jobs, per_job, duration, seconds, seed=int(rate), jitter=0.2)
    ends = await _stream_ends(cl.transport, cfg) if hops else None
    c0 = meter.read() if meter is not None else None
    k0 = meter.wakeups() if meter is not None else None
    run = await cl.run(w, dc, stall_timeout=20, ready_timeout=30)
    c1 = meter.read() if meter is not None else None
    k1 = meter.wakeups() if meter is not None else None
    res = to_run_result(run, cfg, dc, "bench")
    rec = res.recorder
    lat = (rec.start - rec.arrival)[res.feasible]
    started = np.isfinite(lat)
    st = rec.start[res.feasible][started]
    span = float(st.max() - st.min()) if st.size > 1 else 0.0
    achieved = (st.size - 1) / span if span > 0 else float("nan")
    p50, p99 = (np.percentile(lat[started], [50, 99]) * 1e3).tolist() if started.any() else (np.nan, np.nan)
    row = {
        "rate": rate,
        "tasks": int(res.feasible.sum()),
        "started": int(started.sum()),
        "achieved_rate": achieved,
        "p50_ms": p50,
        "p99_ms": p99,
        "max_ms": float(np.nanmax(lat) * 1e3) if started.any() else float("nan"),
        "completed": res.unfinished_reason is None,
        "sustained": bool(started.all() and achieved >= 0.95 * rate and p99 <= 50.0),
        "busy_workers": rate * float(w.task_duration.mean()) / max(1, cfg.datacenter.workers),
        "load": os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"),
        **(
            {f"cpu_{k}_per_1000": (c1[k] - c0[k]) * 1000.0 / max(1, int(started.sum())) for k in c0 if " " not in k}
            if c0 is not None and c1 is not None
            else {}
        ),
    }
    if k0 is not None and k1 is not None and started.any():
        row["wakeups_per_task"] = {k: round((k1[k] - k0[k]) / int(started.sum()), 3) for k in k1 if k in k0}
    sc: dict[str, int] = {}
    for st in cl.statuses.values():
        for k, v in st.info.get("service_counters", {}).items():
            if k in ("republished", "publish_errors", "duplicates_dropped", "consumer_gaps"):
                sc[k] = sc.get(k, 0) + int(v)
    row["service_counters"] = sc
    if ends is not None:
        counts: Counter = Counter()
        stored = await _hop_times(cl.transport, ends, w.n_tasks, counts)
        per = max(1, int(started.sum()))
        stored_n = counts.pop("(stored)", 0)
        row["stored_per_task"] = {k: round(v / per, 4) for k, v in counts.most_common()}
        row["broker_messages_per_task"] = round(stored_n / per, 4)
        sub = run.t0 + rec.arrival
        seq = np.column_stack([sub, stored, run.t0 + rec.start])
        d = np.diff(seq, axis=1) * 1e3
        row["hops_p50_ms"] = {
            h: float(np.nanpercentile(d[:, i], 50)) if np.isfinite(d[:, i]).any() else float("nan")
            for i, h in enumerate(HOPS)
        }
    if c0 is not None and c1 is not None and any(" " in k for k in c0):
        row["cpu_per_service_per_1000"] = {
            k.split(" ", 1)[1]: round((c1[k] - c0[k]) * 1000.0 / max(1, int(started.sum())), 4) for k in c0 if " " in k
        }
    return row


async def run_bench(
    rates: list[float],
    seconds: float = 4.0,
    duration: float = 0.2,
    per_job: int = 1,
    mode: str = "nats",
    cfg: LiveConfig | None = None,
    report: Callable[[str], object] = print,
    lm_standby: bool = False,
    hops: bool = False,
    workers: int = 0,
) -> list[dict]:
    """Measure each rate in turn on one deployment; returns one row per rate. ``hops``: each row also gives the
    median time of each hop of the placement path, from the broker's store times (NATS modes). ``workers``: the
    datacenter's size (0: :func:`bench_workers`)."""
    cfg = cfg or bench_config(
        workers=workers or bench_workers(rates, duration),
        broker="inproc" if mode == "inproc" else "nats",
        lm_standby=lm_standby,
    )
    dc = datacenter_of(cfg)
    layout = layout_of(cfg, dc)
    dep = None
    sup = None
    broker_proc = None
    try:
        if mode == "procs":
            from megha.live import supervisor

            path = Path(cfg.state_dir) / "bench.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(cfg.model_dump_json())
            sup = supervisor.launch(cfg, str(path))
            await supervisor.wait_credentials(cfg, "service")
            transport = make_transport(cfg, "bench-client")
        else:
            if mode == "nats":
                broker_proc = _ensure_nats(cfg)
            dep = await LocalDeployment(cfg, layout=layout).start()
            transport = dep.transport("bench-client")
        cl = LiveClient(cfg, transport, layout)
        await cl.start()
        await cl.wait_ready(60)
        if mode == "procs":
            bpid, spids, names = _service_pids(cfg)
            meter = CpuMeter(bpid, spids, names)
        else:
            meter = CpuMeter(broker_proc.pid if broker_proc is not None else None, None)
        await _measure(cl, cfg, dc, min(rates), 1.0, duration, per_job)  # warm-up
        rows = []
        for r in rates:
            row = await _measure(cl, cfg, dc, r, seconds, duration, per_job, meter, hops=hops)
            report(row)
            rows.append(row)
            await asyncio.sleep(0.5)
        await cl.close()
        return rows
    finally:
        if dep is not None:
            await dep.close()
        if broker_proc is not None:
            broker_proc.terminate()
            broker_proc.wait(5)
        if sup is not None:
            from megha.live import supervisor

            with contextlib.suppress(Exception):
                supervisor.terminate(cfg)


def _ensure_nats(cfg: LiveConfig) -> subprocess.Popen | None:
    """Start nats-server on the configured loopback port unless one already listens there."""
    import subprocess

    from megha.live import supervisor

    b = cfg.broker
    if supervisor.port_open(b.bind, b.port):
        return None
    binary = supervisor.nats_server_binary(cfg)
    if binary is None:
        raise RuntimeError("nats-server is not installed (apt-get install -y nats-server)")
    p = subprocess.Popen(
        supervisor.nats_argv(cfg, binary),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=supervisor.nats_env(cfg),
    )
    end = time.monotonic() + 5
    while not supervisor.port_open(b.bind, b.port):
        if time.monotonic() > end:
            p.kill()
            raise RuntimeError("nats-server did not start")
        time.sleep(0.05)
    return p


def format_row(row: dict) -> str:
    """One rate's result as a line of text."""
    out = (
        f"rate {row['rate']:>7,.0f}/s  achieved {row['achieved_rate']:>8,.0f}/s  "
        f"p50 {row['p50_ms']:6.2f} ms  p99 {row['p99_ms']:7.2f} ms  max {row['max_ms']:7.1f} ms  "
        f"started {row['started']}/{row['tasks']}  {'sustained' if row['sustained'] else 'NOT sustained'}"
    )
    if "busy_workers" in row:
        out += f"  ({row['busy_workers']:.0%} of the workers busy)"
    if "cpu_client_per_1000" in row:
        here = " (+ services in-process)" if not row.get("cpu_services_per_1000") else ""
        out += (
            f"\n    CPU-s per 1,000 tasks: broker {row['cpu_broker_per_1000']:.3f}  "
            f"services {row['cpu_services_per_1000']:.3f}  client{here} {row['cpu_client_per_1000']:.3f}  "
            f"(load average {row['load']:.1f} on {os.cpu_count()} CPUs)"
        )
    if any(row.get("service_counters", {}).values()):
        out += "\n    services so far: " + "  ".join(f"{k} {v}" for k, v in row["service_counters"].items())
    if row.get("hops_p50_ms"):
        out += "\n    per hop p50 (to the broker storing the next message; ms): " + "  ".join(
            f"{k} {v:.3f}" for k, v in row["hops_p50_ms"].items()
        )
    if row.get("stored_per_task"):
        out += (
            "\n    durable messages per task: "
            + "  ".join(f"{k} {v:.3f}" for k, v in row["stored_per_task"].items())
            + f"  (total {sum(row['stored_per_task'].values()):.3f}, stored as {row['broker_messages_per_task']:.3f}"
            " broker messages)"
        )
    if row.get("cpu_per_service_per_1000"):
        out += "\n    per service: " + "  ".join(f"{k} {v:.3f}" for k, v in row["cpu_per_service_per_1000"].items())
    if row.get("wakeups_per_task"):
        out += "\n    wake-ups per task (voluntary context switches): " + "  ".join(
            f"{k} {v:.2f}" for k, v in row["wakeups_per_task"].items()
        )
    return out


def main(
    rates: list[float] | None = None,
    seconds: float = 4.0,
    mode: str = "nats",
    per_job: int = 1,
    lm_standby: bool = False,
    hops: bool = False,
    workers: int = 0,
) -> list[dict]:
    """Run the bench at each rate in ``rates`` for ``seconds`` and print one line per rate and the highest sustained
    rate; returns the rows."""
    logging.basicConfig(level=logging.WARNING)
    t = time.perf_counter()
    rows = asyncio.run(
        run_bench(
            rates or [1000, 2000, 3000],
            seconds,
            mode=mode,
            per_job=per_job,
            report=lambda r: print(format_row(r), flush=True),
            lm_standby=lm_standby,
            hops=hops,
            workers=workers,
        )
    )
    ok = [r["rate"] for r in rows if r["sustained"]]
    n_workers = workers or bench_workers(rates or [1000, 2000, 3000])
    print(
        f"highest sustained rate: {max(ok) if ok else 0:,.0f} tasks/s ({mode}, {per_job} task(s)/job"
        f"{', LMs with standbys' if lm_standby else ''}, {n_workers:,} workers); "
        f"bench took {time.perf_counter() - t:.1f} s"
    )
    return rows
