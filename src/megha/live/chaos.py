"""``megha live chaos``: a local deployment under a steady workload while random services die.

A deployment (2 GMs, 2 LMs each with a standby, 2 worker hosts, 100 workers) is started as separate processes
over nats-server on a free loopback port (``megha live up`` with a temporary state directory). A client submits
a steady workload (``rate`` tasks/s of 0.3–1 s sleeps) for ``seconds`` seconds; meanwhile, at random times
(every 1.5–3.5 s, seeded), one fault: ``broker`` (nats-server kill -9, sometimes after hanging it with SIGSTOP
for up to 2.5 s; the supervisor restarts it), ``gm`` (kill -9 a random GM), ``lm`` (kill -9 a random LM process,
active or standby, so the same LM can fail again and again), ``host`` (kill -9 a random worker host). Faults come
in rounds that contain every kind once, in random order. Then the client waits for every task and the deployment
is stopped.

Scenarios (``scenario``): ``plain`` (the above); ``fairness`` — fairness shares ``[0.5, 0.5]`` for two users (user
``k mod 2`` for job ``k``, each user's queue at its own GM), 24 workers and a workload of 2-task jobs of user 0
alternating with 6-task jobs of user 1 (tasks of 1.5-4.5 s, so many outlive a GM's restart) at about the
datacenter's capacity with ``rate`` 9, so user 1 goes over its share, user 0's tasks preempt it, and a GM killed
meanwhile restarts with its users' usage rebuilt from its LMs' reports (``held_tasks_adopted``) and hears of
preemptions of tasks its previous incarnation placed;
``handoff`` — the same workload without shares and ``handoff_after`` 0.5 s, so tasks that wait are handed to LMs
(which hold them across a GM's restart). Fairness shares and ``handoff_after`` do not combine (the GM refuses
it), hence two scenarios.

The report: ``submitted`` (tasks), ``completed`` (tasks whose completion was reported), ``lost`` (submitted, never
completed), ``duplicated`` (completed more than once, or started again while an earlier run of it had not been
reported lost or preempted: a task that ran twice), ``host_overcommits`` (launches onto a busy slot the worker
hosts' own ledgers counted, the highest count each host incarnation reported), ``overlapping_runs`` (workers on
which a run started before the previous run there was reported finished: exact without preemption, see
:func:`overcommitted_workers`), ``preempted_runs``, ``handed_over`` / ``handoff_launches`` and ``faults``
(``{kind, target, at}``, ``at`` in seconds since the workload started).
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
    from megha.live.client import LiveClient, LiveRun
    from megha.metrics.result import RunResult
    from megha.model.workload import Workload

KINDS = ("broker", "gm", "lm", "host")
SCENARIOS = ("plain", "fairness", "handoff")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chaos_config(state_dir: str, port: int | None = None, scenario: str = "plain") -> LiveConfig:
    """The deployment of a chaos run (see the module docs for the scenarios)."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown chaos scenario {scenario!r} (one of {', '.join(SCENARIOS)})")
    megha: dict = {"gms": 2, "lms": 2, "heartbeat": 0.5, "policy": "min-constraints"}
    workers = 100
    if scenario == "fairness":
        megha |= {"shares": [0.5, 0.5], "users": "round-robin"}
        workers = 24
    elif scenario == "handoff":
        megha |= {"handoff_after": 0.5}
        workers = 24
    return LiveConfig(
        name="chaos",
        broker={"port": port or _free_port()},
        datacenter={"workers": workers},
        megha=megha,
        workers={"hosts": 2},
        ha={"failover_timeout": 0.6, "host_timeout": 1.5},
        state_dir=state_dir,
    )


def two_user_workload(rate: float, seconds: float, seed: int, duration: float = 3.0) -> Workload:
    """Jobs of 2 tasks (even jobs: user 0 with round-robin users) alternating with jobs of 6 tasks (odd jobs: user 1),
    ``rate`` tasks/s in all over ``seconds`` seconds, task durations ``duration`` x a uniform factor in [0.5, 1.5]."""
    from megha.model.workload import Workload

    n_jobs = max(2, 2 * int(rate * seconds / 8))
    sizes = np.where(np.arange(n_jobs) % 2 == 0, 2, 6).astype(np.int64)
    rng = np.random.default_rng(seed)
    dur = duration * rng.uniform(0.5, 1.5, size=int(sizes.sum()))
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    return Workload(
        job_arrival=np.linspace(0.0, seconds, n_jobs, endpoint=False),
        job_num_tasks=sizes,
        job_mean_duration=np.add.reduceat(dur, starts) / sizes,
        task_duration=dur,
        name=f"two users {n_jobs} jobs",
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
    scenario: str = "plain",
) -> dict:
    """Run the chaos experiment (see the module docs); returns the report."""
    from megha.live import supervisor
    from megha.live.client import LiveClient, synthetic_workload, to_run_result, with_constraints
    from megha.live.deploy import datacenter_of, layout_of, make_transport

    tmp = None
    if state_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="megha-chaos-")
        state_dir = tmp.name
    cfg = chaos_config(state_dir, scenario=scenario)
    path = Path(state_dir) / "chaos.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(cfg.model_dump_json())
    supervisor.launch(cfg, str(path))
    await supervisor.wait_credentials(cfg)
    rng = np.random.default_rng(seed)
    faults: list[dict] = []
    host_over: dict[tuple[str, int], int] = {}  # (worker host, incarnation) -> over-commits its ledger counted
    watch = None
    try:
        dc = datacenter_of(cfg)
        layout = layout_of(cfg, dc)
        cl = LiveClient(cfg, make_transport(cfg, "chaos-client", give_up_after=60, role="client"), layout)
        await cl.start()
        await cl.wait_ready(90)
        if scenario == "plain":
            per_job = 4
            n_jobs = max(1, int(rate * seconds / per_job))
            w = with_constraints(cfg, synthetic_workload(n_jobs, per_job, 0.65, seconds, seed=seed, jitter=0.5))
        else:
            w = with_constraints(cfg, two_user_workload(rate, seconds, seed))
        job = asyncio.ensure_future(cl.run(w, dc, stall_timeout=90, ready_timeout=60))
        watch = asyncio.ensure_future(_watch_host_ledgers(cl, host_over))
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
        _note_host_ledgers(run.statuses, host_over)
        await cl.close()
        res = to_run_result(run, cfg, dc, "chaos")
    finally:
        if watch is not None:
            watch.cancel()
        supervisor.terminate(cfg)
        if tmp is not None:
            tmp.cleanup()
    doc = outcome(run, res, w, sum(host_over.values()))
    if doc["lost"]:  # where the lost tasks may be: the masters' last status reports
        doc["services"] = {k: st.info for k, st in sorted(run.statuses.items()) if st.kind in ("gm", "lm")}
    return {"seconds": seconds, "seed": seed, "rate": rate, "scenario": scenario, **doc, "faults": faults}


def _note_host_ledgers(statuses: dict, seen: dict[tuple[str, int], int]) -> None:
    """Keep the highest over-commit count each worker host incarnation reported (a killed host's count survives
    it: its next incarnation starts from zero)."""
    for addr, st in list(statuses.items()):
        if st.kind == "worker":
            n = int(st.info.get("counters", {}).get("overcommits", 0))
            key = (addr, st.epoch)
            seen[key] = max(seen.get(key, 0), n)


async def _watch_host_ledgers(cl: LiveClient, seen: dict[tuple[str, int], int]) -> None:
    while True:
        _note_host_ledgers(cl.statuses, seen)
        await asyncio.sleep(0.2)


def outcome(run: LiveRun, res: RunResult, w: Workload, host_overcommits: int | None = None) -> dict:
    """What a chaos run did to the tasks: submitted, completed, lost, duplicated (completed more than once, or
    started again while an earlier run of it had not been reported lost), over-committed workers (the worker
    hosts' ledgers: ``host_overcommits``, by default the hosts' last reports; and runs that overlap on a worker by
    the reported events, :func:`overcommitted_workers`), and the story of a few duplicates."""
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
    ran_twice = (starts > lost_runs + 1)[feas]  # a preempted run is reported lost (note "preempted")
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
    over = overcommitted_workers(run)
    host_over = int(res.counters.get("overcommits", 0)) if host_overcommits is None else host_overcommits

    def story_of_worker(w: int) -> list[str]:
        out: list[str] = []
        mine: set[int] = set()  # tasks started on worker w
        for x in sorted(run.log, key=lambda x: (x[0], x[1])):
            if x[2] == "started" and x[4] is not None and w in set(np.asarray(x[4]).tolist()):
                ts = np.asarray(x[3])[np.asarray(x[4]) == w].tolist()
                out.append(f"{x[0] - t0:.2f} started {ts}")
                mine |= set(ts)
            elif x[2] in ("finished", "lost") and mine & set(np.asarray(x[3]).tolist()):
                out.append(f"{x[0] - t0:.2f} {x[2]} {sorted(mine & set(np.asarray(x[3]).tolist()))} {x[5]}")
        return out

    return {
        "submitted": int(feas.sum()),
        "completed": int((fin >= 1).sum()),
        "lost": int((fin == 0).sum()),
        "duplicated": int(((fin > 1) | ran_twice).sum()),
        "host_overcommits": int(host_over),
        "overlapping_runs": len(over),  # workers; see overcommitted_workers for the one case it over-reports
        "overlapping_workers": {str(w): story_of_worker(w) for w in over[:3]},
        "preempted_runs": int(
            sum(ids.size for _, _, kind, ids, _, note in run.log if kind == "lost" and note == "preempted")
        ),
        "handed_over": int(res.counters.get("handoffs", 0)),  # by the GMs' last incarnations
        "handoff_launches": int(res.counters.get("handoff_launches", 0)),  # started by the LMs
        "held_tasks_adopted": int(res.counters.get("held_tasks_adopted", 0)),  # by restarted GMs (last incarnations)
        "runs_lost_to_faults": int(res.counters.get("runs_lost", 0)),
        "resubmitted": int(sum(v for k, v in res.counters.items() if k.startswith("tasks_resubmitted"))),
        "unfinished_reason": res.unfinished_reason,
        "duplicated_tasks": story,
        "lost_tasks": story_of(lost_ids),
    }


def overcommitted_workers(run: LiveRun) -> list[int]:
    """Workers on which a run started before the previous run there was reported finished (a worker running two
    tasks at once). The finish is reported by the LM once it heard of it, after the run ended, and a worker is given
    again only after that, so the check needs no tolerance; a run that ended otherwise (lost with its worker host,
    preempted, never reported) has no known end and is not compared. One case over-reports: a preemption victim
    that finished while the kill was on its way is reported finished when its LM hears of it, after the preempting
    task may have started on its worker (which the host freed first): with preemption, only the worker hosts'
    ledgers (``host_overcommits``) are exact."""
    runs: dict[int, list[tuple[float, float]]] = {}  # worker -> (start, reported finish or inf)
    open_run: dict[int, tuple[int, float]] = {}  # task -> (worker, start) of its current run
    for t, _, kind, ids, aux, _note in sorted(run.log, key=lambda x: (x[0], x[1])):
        if kind == "started" and aux is not None:
            for task, w in zip(np.asarray(ids).tolist(), np.asarray(aux).tolist(), strict=True):
                open_run[task] = (w, t)
        elif kind in ("finished", "lost"):
            for task in np.asarray(ids).tolist():
                r = open_run.pop(task, None)
                if r is not None:
                    runs.setdefault(r[0], []).append((r[1], t if kind == "finished" else np.inf))
    bad = []
    for w, rs in runs.items():
        rs.sort()
        busy_until = -np.inf  # the latest reported finish of the runs started so far on this worker
        for start, end in rs:
            if start < busy_until:
                bad.append(w)
                break
            if np.isfinite(end):
                busy_until = max(busy_until, end)
    return sorted(bad)


def main(seconds: float, seed: int, as_json: bool, rate: float = 20.0, scenario: str = "plain") -> int:
    """Run one chaos test of ``seconds`` (``scenario``, ``seed``); prints the report (as JSON if ``as_json``) and
    returns the exit status."""
    import logging

    logging.basicConfig(level=logging.ERROR)
    doc = asyncio.run(run_chaos(seconds, seed, rate, report=None if as_json else print, scenario=scenario))
    if as_json:
        print(json.dumps(doc))
    else:
        kinds = {k: sum(1 for f in doc["faults"] if f["kind"] == k) for k in KINDS}
        print(
            f"submitted {doc['submitted']}, completed {doc['completed']}, lost {doc['lost']}, "
            f"duplicated {doc['duplicated']}; faults {len(doc['faults'])} ({kinds}); "
            f"runs cut short by faults {doc['runs_lost_to_faults']}; over-commits at hosts {doc['host_overcommits']}, "
            f"overlapping runs {doc['overlapping_runs']}"
        )
        for t, events in doc["duplicated_tasks"].items():
            print(f"task {t} ran twice: {'; '.join(events)}")
        for t, events in doc.get("lost_tasks", {}).items():
            print(f"task {t} never completed: {'; '.join(events)}")
    over = doc["host_overcommits"] + (doc["overlapping_runs"] if doc["preempted_runs"] == 0 else 0)
    return 0 if doc["lost"] == 0 and doc["duplicated"] == 0 and over == 0 else 1
