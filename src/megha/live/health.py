"""``megha live status``: every service a deployment should have, whether it is up, and the tasks in flight.

The services publish a :class:`~megha.live.messages.Status` every ``status_period`` (0.5 s). A report is *fresh*
when younger than ``stale_after`` seconds. Expected services come from the configuration (each GM, each LM's
active and — with ``ha.lm_standby`` — a standby, each worker host) and, when the supervisor runs on this machine,
from its ``services.json`` (process names and pids). A service is ``up`` (fresh report), ``deposed`` (an LM
instance that stepped down) or ``down`` (no fresh report; ``last_seen`` says how long ago one was).

Tasks: per GM the tasks it holds (queued or placed, until done) by age (< 1 s, < 10 s, < 60 s, older) and the
*stuck* ones (queued longer than 60 s, or placed longer than their duration plus 60 s); per LM the runs lost
with a dead worker that wait to be placed again (``relaunch_pending``) and the runs lost so far
(``launches_lost``, ``hosts_lost``). The deployment is *healthy* when every expected service is up, every LM has
an active (and a standby when configured), and no task is stuck.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from megha.live.config import LiveConfig
from megha.live.messages import Status


def _services_json(cfg: LiveConfig) -> dict:
    try:
        return json.loads((Path(cfg.state_dir) / "services.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def evaluate(cfg: LiveConfig, statuses: dict[str, Status], stale_after: float = 3.0) -> dict:
    """The health document of a deployment from the latest status reports."""
    from megha.live.deploy import layout_of

    layout = layout_of(cfg)
    now = time.time()
    sj = _services_json(cfg)
    pid_name = {pid: name for name, pid in sj.get("services", {}).items()}
    by_src: dict[str, list[Status]] = {}
    for s in statuses.values():
        by_src.setdefault(s.src, []).append(s)
    services: list[dict] = []
    named: set[str] = set()

    def entry(name: str, kind: str, s: Status | None, role: str = "") -> dict:
        age = None if s is None else now - s.t
        state = "down" if s is None or age > stale_after else ("deposed" if s.role == "deposed" else "up")
        named.add(name)
        return {
            "name": name,
            "kind": kind,
            "state": state,
            "role": role or ("" if s is None else s.role),
            "last_seen": None if age is None else round(age, 2),
            "pid": None if s is None else s.info.get("pid"),
        }

    tasks = {"in_flight": 0, "age_1s": 0, "age_10s": 0, "age_60s": 0, "age_older": 0, "stuck": 0}
    for g in range(layout.n_gms):
        reps = sorted(by_src.get(layout.gm_address(g), []), key=lambda s: s.t)
        s = reps[-1] if reps else None
        services.append(entry(f"gm{g}", "gm", s))
        if s is not None and now - s.t <= stale_after:
            for k in tasks:
                tasks[k] += int(s.info.get(k, 0))
    lost = {"relaunch_pending": 0, "launches_lost": 0, "hosts_lost": 0}
    problems: list[str] = []
    for lm in range(layout.n_lms):
        reps = by_src.get(layout.lm_address(lm), [])
        latest: dict[str, Status] = {}
        for s in reps:  # one entry per instance (process)
            inst = str(s.info.get("instance", s.epoch))
            if inst not in latest or latest[inst].t < s.t:
                latest[inst] = s
        fresh = [s for s in latest.values() if now - s.t <= stale_after]
        actives = [s for s in fresh if s.role == "active"]
        standbys = [s for s in fresh if s.role == "standby"]
        for inst, s in sorted(latest.items(), key=lambda kv: kv[1].t):
            name = pid_name.get(s.info.get("pid")) or f"lm{lm}-{s.role}-{inst.rsplit('@', 1)[-1][-6:]}"
            if now - s.t > 60 and name not in pid_name.values():
                continue  # an instance gone long ago (replaced after a failover)
            services.append(entry(name, "lm", s))
        if not actives:
            problems.append(f"LM {lm} has no active instance")
            if not any(e["name"] == f"lm{lm}-active" for e in services):
                services.append(entry(f"lm{lm}-active", "lm", None, "active"))
        if cfg.ha.lm_standby and not standbys:
            problems.append(f"LM {lm} has no standby")
            if not any(e["name"] == f"lm{lm}-standby" for e in services):
                services.append(entry(f"lm{lm}-standby", "lm", None, "standby"))
        for s in actives[-1:]:
            c = s.info.get("counters", {})
            lost["relaunch_pending"] += int(s.info.get("relaunch_pending", 0))
            lost["launches_lost"] += int(c.get("launches_lost", 0))
            lost["hosts_lost"] += int(c.get("hosts_lost", 0))
    for h in range(cfg.workers.hosts):
        reps = sorted(by_src.get(f"{layout.prefix}/host/h{h}", []), key=lambda s: s.t)
        services.append(entry(f"host{h}", "worker", reps[-1] if reps else None))
    for name, pid in sj.get("services", {}).items():  # processes the supervisor runs that never reported
        if name not in named and not any(e["pid"] == pid for e in services):
            services.append(
                {"name": name, "kind": name[:2], "state": "down", "role": "", "last_seen": None, "pid": pid}
            )
    for e in services:
        if e["state"] != "up" and e["kind"] != "lm":
            problems.append(f"{e['name']} is {e['state']}")
        elif e["state"] == "down" and e["kind"] == "lm":
            problems.append(f"{e['name']} is down")
    if tasks["stuck"]:
        problems.append(f"{tasks['stuck']} task(s) stuck")
    return {
        "deployment": cfg.name,
        "broker": cfg.broker.resolved_url(),
        "healthy": not problems,
        "problems": problems,
        "services": services,
        "tasks": tasks,
        "lost": lost,
        "broker_restarts": sj.get("broker_restarts"),
        "failovers": sj.get("failovers"),
    }
