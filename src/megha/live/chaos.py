"""``megha live chaos``: a local deployment under a steady workload while random services die.

A deployment (2 GMs, 2 LMs each with a standby, 2 worker hosts, 100 workers) is started as separate processes
over nats-server on a free loopback port (``megha live up`` with a temporary state directory). A client submits
a steady workload (``rate`` tasks/s of 0.3–1 s sleeps) for ``seconds`` seconds; meanwhile, at random times
(every 1.5–3.5 s, seeded), one fault: ``broker`` (nats-server kill -9, sometimes after hanging it with SIGSTOP
for up to 2.5 s; the supervisor restarts it), ``gm`` (kill -9 a random GM), ``lm`` (kill -9 a random LM process,
active or standby, so the same LM can fail again and again), ``host`` (kill -9 a random worker host). Faults come
in rounds that contain every kind once, in random order. Then the client waits for every task and the deployment
is stopped.

The report: ``submitted`` (tasks), ``completed`` (tasks whose completion was reported), ``lost`` (submitted, never
completed), ``duplicated`` (completed more than once, or started again while an earlier run of it had not been
reported lost: a task that ran twice) and ``faults`` (``{kind, target, at}``, ``at`` in seconds since the
workload started).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from megha.live.config import LiveConfig

if TYPE_CHECKING:
    from megha.live.client import LiveRun
    from megha.metrics.result import RunResult
    from megha.model.workload import Workload

KINDS = ("broker", "gm", "lm", "host")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chaos_config(state_dir: str, port: int | None = None) -> LiveConfig:
    return LiveConfig(
        name="chaos",
        broker={"port": port or _free_port()},
        datacenter={"workers": 100},
        megha={"gms": 2, "lms": 2, "heartbeat": 0.5, "policy": "min-constraints"},
        workers={"hosts": 2},
        ha={"failover_timeout": 0.6, "host_timeout": 1.5},
        state_dir=state_dir,
    )


def kill_pid(pid: int | None) -> bool:
    """kill -9 ``pid``; False when there is none or it is already gone."""
    if not pid:
        return False
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except OSError:
        return False


async def _fault(kind: str, state: Path, rng: np.random.Generator) -> str | None:
    try:
        doc = json.loads((state / "services.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    procs = doc.get("services", {})
    if kind == "broker":
        pid = doc.get("broker")
        if not pid:
            return None
        if rng.random() < 0.5:  # a hung broker for a while, then dead
            hang = float(rng.uniform(0.5, 2.5))
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGSTOP)
            await asyncio.sleep(hang)
            kill_pid(pid)
            return f"nats-server (hung {hang:.1f} s)"
        return "nats-server" if kill_pid(pid) else None
    prefix = {"gm": "gm", "lm": "lm", "host": "host"}[kind]
    names = sorted(n for n in procs if n.startswith(prefix))
    if not names:
        return None
    name = names[int(rng.integers(len(names)))]
    return name if kill_pid(procs[name]) else None


async def run_chaos(
    seconds: float,
    seed: int,
    rate: float = 20.0,
    state_dir: str | None = None,
    report: Callable[[str], object] | None = None,
) -> dict:
    """Run the chaos experiment (see the module docs); returns the report."""
    from megha.live import supervisor
    from megha.live.client import LiveClient, synthetic_workload, to_run_result, with_constraints
    from megha.live.deploy import datacenter_of, layout_of, make_transport

    tmp = None
    if state_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="megha-chaos-")
        state_dir = tmp.name
    cfg = chaos_config(state_dir)
    path = Path(state_dir) / "chaos.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(cfg.model_dump_json())
    supervisor.launch(cfg, str(path))
    await supervisor.wait_credentials(cfg)
    rng = np.random.default_rng(seed)
    faults: list[dict] = []
    try:
        dc = datacenter_of(cfg)
        layout = layout_of(cfg, dc)
        cl = LiveClient(cfg, make_transport(cfg, "chaos-client", give_up_after=60, role="client"), layout)
        await cl.start()
        await cl.wait_ready(90)
        per_job = 4
        n_jobs = max(1, int(rate * seconds / per_job))
        w = with_constraints(cfg, synthetic_workload(n_jobs, per_job, 0.65, seconds, seed=seed, jitter=0.5))
        job = asyncio.ensure_future(cl.run(w, dc, stall_timeout=90, ready_timeout=60))
        while not cl.started.any() and not job.done():
            await asyncio.sleep(0.05)
        t0 = time.monotonic()
        round_: list[str] = []
        while time.monotonic() - t0 < seconds and not job.done():
            await asyncio.sleep(float(rng.uniform(1.5, 3.5)))
            if time.monotonic() - t0 >= seconds:
                break
            if not round_:
                round_ = [KINDS[i] for i in rng.permutation(len(KINDS))]
            kind = round_.pop()
            at = time.monotonic() - t0
            target = await _fault(kind, Path(state_dir), rng)
            if target is not None:
                faults.append({"kind": kind, "target": target, "at": round(at, 2)})
                if report is not None:
                    report(f"{at:6.1f} s  {kind:6s} {target}")
        run = await asyncio.wait_for(job, 240)
        await cl.close()
        res = to_run_result(run, cfg, dc, "chaos")
    finally:
        supervisor.terminate(cfg)
        if tmp is not None:
            tmp.cleanup()
    doc = outcome(run, res, w)
    return {"seconds": seconds, "seed": seed, "rate": rate, **doc, "faults": faults}


def outcome(run: LiveRun, res: RunResult, w: Workload) -> dict:
    """What a chaos run did to the tasks: submitted, completed, lost, duplicated (completed more than once, or
    started again while an earlier run of it had not been reported lost), and the story of a few duplicates."""
    rec = res.recorder
    feas = res.feasible
    fin = rec.finishes[feas]
    starts = np.zeros(w.n_tasks, dtype=np.int64)
    lost_runs = np.zeros(w.n_tasks, dtype=np.int64)
    for _, _, kind, ids, _, _ in run.log:
        if kind == "started":
            np.add.at(starts, ids, 1)
        elif kind == "lost":
            np.add.at(lost_runs, ids, 1)
    ran_twice = (starts > lost_runs + 1)[feas]
    dup_ids = np.flatnonzero(feas)[(fin > 1) | ran_twice][:5].tolist()
    lost_ids = np.flatnonzero(feas)[fin == 0][:5].tolist()
    t0 = min((x[0] for x in run.log), default=0.0)

    def story_of(ids: list[int]) -> dict[str, list[str]]:
        return {
            str(t): [
                f"{x[0] - t0:.2f} {x[2]}"
                + (f" w{int(x[4][list(x[3]).index(t)])}" if x[4] is not None else "")
                + f" {x[5]}"
                for x in sorted(run.log, key=lambda x: (x[0], x[1]))
                if t in set(np.asarray(x[3]).tolist())
            ]
            for t in ids
        }

    story = story_of(dup_ids)
    return {
        "submitted": int(feas.sum()),
        "completed": int((fin >= 1).sum()),
        "lost": int((fin == 0).sum()),
        "duplicated": int(((fin > 1) | ran_twice).sum()),
        "runs_lost_to_faults": int(res.counters.get("runs_lost", 0)),
        "resubmitted": int(sum(v for k, v in res.counters.items() if k.startswith("tasks_resubmitted"))),
        "unfinished_reason": res.unfinished_reason,
        "duplicated_tasks": story,
        "lost_tasks": story_of(lost_ids),
    }


def main(seconds: float, seed: int, as_json: bool, rate: float = 20.0) -> int:
    import logging

    logging.basicConfig(level=logging.ERROR)
    doc = asyncio.run(run_chaos(seconds, seed, rate, report=None if as_json else print))
    if as_json:
        print(json.dumps(doc))
    else:
        kinds = {k: sum(1 for f in doc["faults"] if f["kind"] == k) for k in KINDS}
        print(
            f"submitted {doc['submitted']}, completed {doc['completed']}, lost {doc['lost']}, "
            f"duplicated {doc['duplicated']}; faults {len(doc['faults'])} ({kinds}); "
            f"runs cut short by faults {doc['runs_lost_to_faults']}"
        )
        for t, events in doc["duplicated_tasks"].items():
            print(f"task {t} ran twice: {'; '.join(events)}")
        for t, events in doc.get("lost_tasks", {}).items():
            print(f"task {t} never completed: {'; '.join(events)}")
    return 0 if doc["lost"] == 0 and doc["duplicated"] == 0 else 1
