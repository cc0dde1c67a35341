"""``megha live chaos --faults FILE.toml``: a simulator fault schedule replayed against a live local deployment.

The file is the one ``megha simulate --faults`` reads (:mod:`megha.model.faults`: ``[[fault]] at/kind/target/
down_for``, ``[[random]] kind/mtbf/down_for/until``, ``seed``), expanded exactly as the simulator expands it (same
seed, same draws, over the same population), then played in real time against a deployment started as separate
processes over nats-server on loopback (as ``megha live chaos`` does), while a workload runs: the bundled trace
given with ``--trace`` (time-compressed by ``--compress``), or a steady synthetic one (``--seconds``/``--rate``).

Times: the schedule's seconds after the first arrival are divided by ``--compress`` (1 for the synthetic workload:
its times are live seconds), ``down_for`` too. How each kind is done live:

* ``gm`` — kill -9 GM ``target``'s process; the supervisor restarts it ``down_for`` later (a restarted GM rebuilds
  its view from the LMs, as Megha 2020 §IV-D says);
* ``lm`` — kill -9 the process that is LM ``target``'s *active* instance now; its standby takes over after
  ``ha.failover_timeout`` and the supervisor starts a new standby (``down_for`` is not used: the live failover
  timeout is the deployment's);
* ``worker`` — kill -9 the worker host process(es) serving the target workers; every worker of such a host fails
  with it (a host is the unit that fails live); restarted ``down_for`` later;
* ``partition`` — kill -9 the worker hosts of LM ``target``'s group (the deployment uses ``workers.layout =
  "by-lm"``, so those hosts serve that LM's workers and no other's); restarted ``down_for`` later;
* ``broker`` (live only) — kill -9 nats-server; restarted ``down_for`` later with its streams.

Other kinds (a PigeonC ``master``, YARN ``rm``...) are an error naming the kind. Faults that never end (``down_for``
omitted for ``worker``/``partition``) are refused: a live deployment restarts what died.

The report has the shape of ``megha live chaos --json`` (``submitted``, ``completed``, ``lost``, ``duplicated``,
``faults``) plus ``fault_summary`` with the fields of ``megha simulate --faults``'s ``summary.json`` ``faults``
(``injected``, ``by_kind``, ``task_runs_lost``, ``tasks_reexecuted``, ``work_lost_s``, ``jobs_touched``,
``delay_touched``, ``delay_untouched``, ``events`` with each fault's measured ``recovery_s``), in live seconds;
``time_scale`` (= ``--compress``) converts them to the trace's seconds. Live figures include what a real run
adds (process restarts take seconds, a host death cuts every run on it), so they sit beside the simulated ones,
not on top of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from megha.errors import InputError
from megha.live.chaos import kill_pid
from megha.live.config import LiveConfig
from megha.model.faults import FaultEvent, FaultSchedule, load_schedule

if TYPE_CHECKING:
    from megha.live.client import LiveClient, LiveRun
    from megha.metrics.result import RunResult
    from megha.schedulers.megha.layout import MeghaLayout

#: fault kinds a live deployment can replay -> what happens (shown in errors)
LIVE_KINDS = {
    "gm": "kill -9 the GM process; restarted after down_for",
    "lm": "kill -9 the LM's active process; its standby takes over, a new standby starts",
    "worker": "kill -9 the worker hosts serving the target workers; restarted after down_for",
    "partition": "kill -9 the worker hosts of the LM's group; restarted after down_for",
    "broker": "kill -9 nats-server (live only); restarted after down_for",
}
CRASH_KINDS = ("gm", "lm", "broker")  # a component down: jobs in the system meanwhile are touched


def replay_config(state_dir: str, hosts: int = 4, port: int | None = None) -> LiveConfig:
    """The deployment a fault file is replayed against: ``megha live chaos``'s, with hosts laid out by LM."""
    from megha.live.chaos import chaos_config

    cfg = chaos_config(state_dir, port)
    return cfg.model_copy(update={"workers": cfg.workers.model_copy(update={"hosts": hosts, "layout": "by-lm"})})


def check_schedule(schedule: FaultSchedule) -> None:
    """Fail clearly on a kind the live runtime cannot do, or on a fault that never ends."""
    schedule.check_kinds("megha live", LIVE_KINDS)
    for e in (*schedule.faults, *schedule.random):
        if e.kind in ("worker", "partition") and not math.isfinite(e.down_for):
            raise InputError(
                f"{schedule.source}: {e.where}: a live {e.kind} fault needs a finite down_for (a live deployment "
                f"restarts what died; faults for good are a simulator feature)"
            )


def expand(schedule: FaultSchedule, cfg: LiveConfig, span: float) -> list[FaultEvent]:
    """The concrete faults over arrivals spanning ``span`` seconds of schedule time (as the simulator draws them)."""
    population = {
        "gm": cfg.megha.gms,
        "lm": cfg.megha.lms,
        "worker": int(cfg.datacenter.workers or 0),
        "partition": cfg.megha.lms,
        "broker": 1,
    }
    return schedule.expand(0.0, span, population)


@dataclass
class _Injected:
    event: FaultEvent
    at: float  # wall time it was injected (time.time())
    names: list[str]  # the processes killed
    pids: list[int]
    recovered_at: float | None = None


def _services(state: Path) -> dict:
    try:
        return json.loads((state / "services.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def _active_lm_pid(cl: LiveClient, address: str) -> int | None:
    """The pid of the process that reported last as LM ``address``'s active instance."""
    best = None
    for st in list(cl.statuses.values()):
        if st.src == address and st.role == "active" and (best is None or st.t > best.t):
            best = st
    return None if best is None else best.info.get("pid")


def inject(ev: FaultEvent, cfg: LiveConfig, cl: LiveClient, layout: MeghaLayout, scale: float) -> _Injected | None:
    """Do fault ``ev`` now (see the module docs); None when there was nothing to kill."""
    from megha.live import supervisor
    from megha.live.deploy import hosts_of_workers

    state = Path(cfg.state_dir)
    doc = _services(state)
    procs = doc.get("services", {})
    down = ev.down_for / scale
    names: list[str] = []
    pids: list[int] = []
    if ev.kind == "broker":
        supervisor.hold(cfg, "nats-server", down)
        if kill_pid(doc.get("broker")):
            names, pids = ["nats-server"], [doc["broker"]]
    elif ev.kind == "gm":
        for g in ev.targets:
            supervisor.hold(cfg, f"gm{g}", down)
            if kill_pid(procs.get(f"gm{g}")):
                names.append(f"gm{g}")
                pids.append(procs[f"gm{g}"])
    elif ev.kind == "lm":
        for lm in ev.targets:
            pid = _active_lm_pid(cl, layout.lm_address(lm))
            name = next((n for n, p in procs.items() if p == pid), None)
            if name is None:  # not heard from yet: the process started as the active
                name = f"lm{lm}-active"
                pid = procs.get(name)
            if kill_pid(pid):
                names.append(name)
                pids.append(pid)
    else:
        n_hosts, mode = cfg.workers.hosts, cfg.workers.layout
        if ev.kind == "worker":
            hosts = hosts_of_workers(layout, n_hosts, ev.targets, mode)
        else:
            hosts = sorted({h for lm in ev.targets for h in range(n_hosts) if h % layout.n_lms == lm})
        for h in hosts:
            supervisor.hold(cfg, f"host{h}", down)
            if kill_pid(procs.get(f"host{h}")):
                names.append(f"host{h}")
                pids.append(procs[f"host{h}"])
    if not names:
        return None
    return _Injected(ev, time.time(), names, pids)


def recovered(f: _Injected, cfg: LiveConfig, cl: LiveClient, layout: MeghaLayout) -> bool:
    """Whether what fault ``f`` killed is back: a new process reports in its place (the broker: the client has
    reconnected since)."""
    if f.event.kind == "broker":
        since = time.time() - (time.monotonic() - cl.transport.connected_since)
        return cl.transport.connected and since > f.at
    heard = {(st.src, st.info.get("pid"), st.role) for st in list(cl.statuses.values()) if st.t > f.at}
    if f.event.kind == "lm":
        return all(
            any(src == layout.lm_address(lm) and role == "active" and pid not in f.pids for src, pid, role in heard)
            for lm in f.event.targets
        )
    procs = _services(Path(cfg.state_dir)).get("services", {})
    new = [procs.get(n) for n in f.names]
    return all(p is not None and p not in f.pids for p in new) and {p for _, p, _ in heard} >= set(new)


def fault_report(run: LiveRun, res: RunResult, injected: list[_Injected], scale: float) -> dict:
    """``megha simulate --faults``'s ``faults`` fields for a live run (live seconds; see the module docs)."""
    from megha.metrics.summary import fault_summary, job_table

    rec = res.recorder
    t0 = run.t0
    lost = np.zeros(res.workload.n_tasks, dtype=np.int64)
    for _, _, kind, ids, _, note in run.log:
        if kind == "lost" and note != "preempted":
            np.add.at(lost, ids, 1)
    rec.fault_kills = lost.astype(np.int32)  # runs cut short by a fault (the live recorder files them as "lost")
    rec.work_lost = float(
        sum(np.nansum(t - np.where(np.isfinite(st), st, t)) for _ids, st, _w, t in rec.preempted_runs)
    )
    log = [
        {
            "at": f.at - t0,
            "kind": f.event.kind,
            "targets": list(f.event.targets),
            "down_for": f.event.down_for / scale,
            "recovered_at": None if f.recovered_at is None else f.recovered_at - t0,
            "crash": f.event.kind in CRASH_KINDS,
            "source": f"{f.event.source}: killed {', '.join(f.names)}",
        }
        for f in injected
    ]
    jobs = job_table(res.workload, rec, res.feasible)
    doc = fault_summary(log, jobs, res.workload, rec, 0.0)
    doc.pop("tasks_stranded", None)
    doc.pop("stranded_task_ids", None)
    return doc


async def run_fault_file(
    path: str,
    trace: str | None = None,
    compress: float = 1.0,
    seconds: float = 30.0,
    rate: float = 12.0,
    hosts: int = 4,
    max_jobs: int | None = None,
    state_dir: str | None = None,
    report: Callable[[str], object] | None = None,
) -> dict:
    """Replay the fault schedule in ``path`` against a local deployment (see the module docs); returns the report."""
    from megha.live import supervisor
    from megha.live.chaos import outcome
    from megha.live.client import LiveClient, prepare_workload, synthetic_workload, to_run_result, with_constraints
    from megha.live.deploy import datacenter_of, layout_of, make_transport

    schedule = load_schedule(path)
    check_schedule(schedule)
    if compress <= 0:
        raise InputError(f"--compress must be > 0, got {compress}")
    tmp = None
    if state_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="megha-replay-")
        state_dir = tmp.name
    cfg = replay_config(state_dir, hosts)
    if hosts < cfg.megha.lms:
        raise InputError(f"--hosts must be at least the number of LMs ({cfg.megha.lms}), got {hosts}")
    dc = datacenter_of(cfg)
    layout = layout_of(cfg, dc)
    if trace is not None:
        w = prepare_workload(cfg, trace, dc, compress, max_jobs)
        scale = compress
    else:
        per_job = 4
        n_jobs = max(1, int(rate * seconds / per_job))
        w = with_constraints(cfg, synthetic_workload(n_jobs, per_job, 0.65, seconds, seed=schedule.seed, jitter=0.5))
        scale = 1.0
    first = float(w.job_arrival.min())
    span = (float(w.job_arrival.max()) - first) * scale  # in schedule seconds
    events = expand(schedule, cfg, span)
    cfg_path = Path(state_dir) / "replay.json"
    cfg_path.parent.mkdir(parents=True, exist_ok=True)
    cfg_path.write_text(cfg.model_dump_json())
    supervisor.launch(cfg, str(cfg_path))
    injected: list[_Injected] = []
    try:
        await supervisor.wait_credentials(cfg)
        cl = LiveClient(cfg, make_transport(cfg, "replay-client", give_up_after=60, role="client"), layout)
        await cl.start()
        await cl.wait_ready(120)
        job = asyncio.ensure_future(cl.run(w, dc, stall_timeout=120, ready_timeout=90))
        while getattr(cl, "run_t0", None) is None and not job.done():
            await asyncio.sleep(0.02)
        t0 = getattr(cl, "run_t0", None) or time.time()
        pending: list[_Injected] = []
        for ev in events:
            due = t0 + first + ev.at / scale
            while time.time() < due and not job.done():
                await asyncio.sleep(min(0.05, max(0.0, due - time.time())))
                pending = _probe(pending, cfg, cl, layout)
            if job.done():
                break
            f = inject(ev, cfg, cl, layout, scale)
            if f is None:
                continue
            injected.append(f)
            pending.append(f)
            if report is not None:
                report(f"{f.at - t0:7.2f} s  {ev.kind:9s} {', '.join(f.names)}  ({ev.source})")
        while not job.done():
            await asyncio.sleep(0.05)
            pending = _probe(pending, cfg, cl, layout)
        run = await job
        end = time.time() + 30
        while pending and time.time() < end:  # recoveries still on their way
            await asyncio.sleep(0.1)
            pending = _probe(pending, cfg, cl, layout)
        await cl.close()
        res = to_run_result(run, cfg, dc, trace or "synthetic")
    finally:
        supervisor.terminate(cfg)
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.cleanup()
    doc = outcome(run, res, w)
    doc.update(
        {
            "fault_file": str(path),
            "trace": trace,
            "time_scale": scale,
            "seed": schedule.seed,
            "faults": [
                {
                    "kind": f.event.kind,
                    "target": ", ".join(f.names),
                    "targets": list(f.event.targets),
                    "at": round(f.at - run.t0, 3),
                    "scheduled_at": f.event.at,
                    "down_for": f.event.down_for,
                    "recovery_s": None if f.recovered_at is None else round(f.recovered_at - f.at, 3),
                }
                for f in injected
            ],
            "fault_summary": fault_report(run, res, injected, scale),
        }
    )
    return doc


def _probe(pending: list[_Injected], cfg: LiveConfig, cl: LiveClient, layout: MeghaLayout) -> list[_Injected]:
    left = []
    for f in pending:
        if recovered(f, cfg, cl, layout):
            f.recovered_at = time.time()
        else:
            left.append(f)
    return left


def replay_main(
    path: str,
    trace: str | None,
    compress: float,
    seconds: float,
    rate: float,
    hosts: int,
    max_jobs: int | None,
    as_json: bool,
) -> int:
    """``megha live chaos --faults``: run, print, and exit 1 when a task was lost or ran twice."""
    import logging

    logging.basicConfig(level=logging.ERROR)
    schedule = load_schedule(path)  # errors before anything starts
    check_schedule(schedule)
    if hosts < 2:
        raise InputError(f"--hosts must be >= 2 (one per LM), got {hosts}")
    if trace is not None:
        from megha.samples import resolve

        resolve(trace, "trace")
    doc = asyncio.run(
        run_fault_file(path, trace, compress, seconds, rate, hosts, max_jobs, report=None if as_json else print)
    )
    if as_json:
        print(json.dumps(doc))
    else:
        fs = doc["fault_summary"]
        print(
            f"submitted {doc['submitted']}, completed {doc['completed']}, lost {doc['lost']}, "
            f"duplicated {doc['duplicated']}; faults injected {fs['injected']} {fs['by_kind']}; "
            f"task runs lost {fs['task_runs_lost']}, tasks re-executed {fs['tasks_reexecuted']}, "
            f"work lost {fs['work_lost_s']:.1f} task-s; jobs touched {fs['jobs_touched']}"
        )
        for key in ("delay_touched", "delay_untouched"):
            d = fs[key]
            if d.get("count"):
                print(f"  {key}: p50 {d['p50']:.3f} s, p99 {d['p99']:.3f} s ({d['count']} jobs, live seconds)")
        rec = [f["recovery_s"] for f in doc["faults"] if f["recovery_s"] is not None]
        if rec:
            print(f"  recovery: median {float(np.median(rec)):.2f} s, max {max(rec):.2f} s (live seconds)")
        for t, events in doc["duplicated_tasks"].items():
            print(f"task {t} ran twice: {'; '.join(events)}")
    return 0 if doc["lost"] == 0 and doc["duplicated"] == 0 else 1
