"""Fault tests of the live runtime over the in-process bus (always run; bounded in time; no network).

Each test runs a small workload on a 200-worker deployment (2 GMs, 4 LMs with standbys, 2 worker hosts),
injects a fault mid-run, and checks that every task completed exactly once.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from megha.live import wire
from megha.live.client import LiveClient, synthetic_workload, to_run_result, with_constraints
from megha.live.config import LiveConfig
from megha.live.deploy import LocalDeployment, datacenter_of, layout_of
from megha.schedulers.megha.messages import LaunchRequest

FAST_HA = {"failover_timeout": 0.5, "host_timeout": 0.5}


def _cfg(**over) -> LiveConfig:
    data = {"broker": {"kind": "inproc"}, "ha": dict(FAST_HA), "megha": {"heartbeat": 0.5}}
    data.update(over)
    return LiveConfig(**data)


async def _run(
    cfg: LiveConfig,
    fault=None,
    at: float = 0.8,
    n_jobs: int = 30,
    per_job: int = 8,
    duration: float = 0.6,
    span: float = 1.5,
):
    dc = datacenter_of(cfg)
    layout = layout_of(cfg, dc)
    dep = await LocalDeployment(cfg, layout=layout).start()
    cl = LiveClient(cfg, dep.transport("client"), layout)
    await cl.start()
    w = with_constraints(cfg, synthetic_workload(n_jobs, per_job, duration, span, seed=1))
    try:
        job = asyncio.ensure_future(cl.run(w, dc, stall_timeout=15, ready_timeout=15))
        if fault is not None:
            await asyncio.sleep(0.3)
            while not cl.started.any():
                await asyncio.sleep(0.02)
            await asyncio.sleep(at)
            await fault(dep, cl)
        run = await asyncio.wait_for(job, 45)
        res = to_run_result(run, cfg, dc, "synthetic")
        return res, dep, cl
    finally:
        await cl.close()
        await dep.close()


def _exactly_once(res) -> None:
    assert res.unfinished_reason is None, res.unfinished_reason
    rec = res.recorder
    fin = rec.finishes[res.feasible]
    assert (fin == 1).all(), f"finished counts {np.unique(fin, return_counts=True)}"
    assert np.isfinite(rec.known[res.feasible]).all()
    assert res.counters["tasks_finished_twice"] == 0
    assert res.counters.get("overcommits", 0) == 0


def _dies_once_stored(rt, wanted, caught: dict) -> asyncio.Event:
    """Make the LM runtime ``rt`` die right after the broker stores the first batch of its replication records
    holding a record that ``wanted(record)`` accepts: that batch is stored, its acknowledgement never reaches the
    active, and nothing the active queued afterwards leaves (the process is gone). ``caught["batch"]`` is the batch's
    size; the event is set at that moment (the caller then kills the process for good)."""
    h = next(iter(rt.hosted.values()))
    tr = rt.transport
    subj = rt.repl_subject(h.address)
    orig = tr.publish_durable
    killed = asyncio.Event()

    def publish_durable(subject, data, headers=None, on_ack=None):
        if subject != subj or killed.is_set():
            return orig(subject, data, headers, on_ack)
        records = [wire.decode(r).msg for r in wire.decode(data).msg.records]
        if not any(wanted(r) for r in records):
            return orig(subject, data, headers, on_ack)
        orig(subject, data, headers, None)  # stored; the acknowledgement never reaches the active
        caught["batch"] = len(records)
        tr.closed = True  # the process is gone: nothing it queued leaves
        killed.set()

    tr.publish_durable = publish_durable
    return killed


def test_baseline_run_completes_exactly_once():
    # no fault, so no run may be lost; hosts are given 5 s (not FAST_HA's 0.5 s) before they count as dead: under
    # load this whole deployment's one process was seen stalled for 3.5 s, which the hosts' leases rightly punish
    res, _, _ = asyncio.run(_run(_cfg(ha={"failover_timeout": 0.5, "host_timeout": 5.0})))
    _exactly_once(res)
    assert res.counters.get("runs_lost", 0) == 0


def test_killed_worker_host_tasks_are_relaunched():
    # the host comes back later (as a supervisor restarts it): tasks whose only suitable workers were on it
    # wait for it; the others are relaunched at once by their LM or handed back to their GM
    async def kill(dep, cl):
        await dep.kill_host(0)
        await asyncio.sleep(1.2)
        await dep.restart_host(0)

    res, _, _ = asyncio.run(_run(_cfg(), kill))
    _exactly_once(res)
    c = res.counters
    assert c["hosts_lost"] >= 1
    assert c["runs_lost"] > 0
    assert c.get("tasks_relaunched", 0) + c.get("tasks_handed_back", 0) > 0
    assert 0 < (res.recorder.preemptions > 0).sum() <= c["runs_lost"]  # some lost launches never started


def test_restarted_gm_rebuilds_its_view_and_work_is_resubmitted():
    async def restart(dep, cl):
        await dep.kill_gm(0)
        await asyncio.sleep(0.6)
        await dep.restart_gm(0)

    res, _, _ = asyncio.run(_run(_cfg(), restart, n_jobs=40, span=2.5))
    _exactly_once(res)
    assert res.counters["gm_restarts_seen"] >= 1


def test_active_lm_dies_and_standby_takes_over():
    async def kill(dep, cl):
        await dep.kill_lm(0, "active")
        await dep.kill_lm(2, "active")

    res, _, _ = asyncio.run(_run(_cfg(), kill))
    _exactly_once(res)
    assert res.counters["service_takeovers"] >= 2


def test_active_lm_killed_after_its_records_are_stored_but_before_their_outputs_leave():
    """The gated-output rule at its tightest kill point: the broker stored a batch of the active's records, the
    active dies before it hears so, so the outputs that follow from them never leave it. The standby applies the
    records, takes over and re-sends those outputs; every receiver must take them (once): no gap, no task lost.
    (Found in CI: "1 message(s) of megha/lm2 → events/0 never arrived": the re-sent outputs carried the standby's
    own term 0, below the term 1 of the active's earlier outputs, and receivers dropped them as a deposed
    active's.)"""
    caught: dict = {}

    async def kill_after_store(dep, cl):
        killed = _dies_once_stored(dep.lms[(2, "active")], lambda r: r.what == "msg", caught)
        await asyncio.wait_for(killed.wait(), 20)
        await dep.kill_lm(2, "active")

    res, _, cl = asyncio.run(_run(_cfg(), kill_after_store))
    _exactly_once(res)
    assert caught, "the active never stored a batch of messages"
    assert res.counters["service_takeovers"] >= 1
    assert cl.rt.counters["gaps_skipped"] == 0, dict(cl.rt.counters)
    assert res.counters.get("service_gaps_skipped", 0) == 0


@pytest.mark.parametrize("point", ["before", "claimed", "fenced"])
def test_the_standby_dies_before_it_takes_over_and_a_new_standby_does(point):
    """Double failure: the active LM 1 dies, then its standby dies before it has taken over — ``before``: while it
    waits out the failover timeout; ``claimed``: right after it won the next term; ``fenced``: right after the
    broker stored its first record (the log is fenced) but before it re-sent anything. A new standby, started
    afterwards as the supervisor starts one after every death, reads the whole log and takes over; every task
    completes exactly once."""
    seen: dict = {}

    async def double_failure(dep, cl):
        rt = dep.lms[(1, "standby")]
        h = next(iter(rt.hosted.values()))
        tr = rt.transport
        dead = asyncio.Event()

        def die() -> None:
            tr.closed = True  # the process is gone: nothing it queued leaves
            seen["term"] = h.port.term
            dead.set()

        if point == "claimed":
            claim = tr.claim

            async def claim_then_die(key, term):
                won = await claim(key, term)
                if won and not dead.is_set():
                    die()
                    await asyncio.Event().wait()  # frozen until killed
                return won

            tr.claim = claim_then_die
        elif point == "fenced":
            publish_durable = tr.publish_durable
            subj = rt.repl_subject(h.address)

            def store_then_die(subject, data, headers=None, on_ack=None):
                if subject == subj and not dead.is_set():
                    publish_durable(subject, data, headers, None)
                    die()
                    return
                publish_durable(subject, data, headers, on_ack)

            tr.publish_durable = store_then_die
        await dep.kill_lm(1, "active")
        if point == "before":
            die()
        await asyncio.wait_for(dead.wait(), 20)
        await dep.kill_lm(1, "standby")
        key = await dep.start_standby(1)
        t = asyncio.get_running_loop().time()
        while dep.lm_role(1, key) != "active":
            assert asyncio.get_running_loop().time() - t < 30, "the new standby never took over"
            await asyncio.sleep(0.05)
        seen["new_term"] = next(iter(dep.lms[(1, key)].hosted.values())).port.term

    res, _, cl = asyncio.run(_run(_cfg(), double_failure))
    _exactly_once(res)
    assert seen["new_term"] >= 2 + (point != "before"), seen
    assert cl.rt.counters["gaps_skipped"] == 0, dict(cl.rt.counters)
    assert res.counters.get("service_gaps_skipped", 0) == 0


def test_malformed_messages_are_rejected_and_services_stay_up():
    async def garbage(dep, cl):
        tr = dep.transport("attacker")
        await tr.start()
        lay = dep.layout
        bad = [
            b"\x00\x01garbage",
            wire._packer.pack([99, "LaunchRequest", "x", lay.lm_address(0), 0, 1, 0, {}]),
            wire._packer.pack([1, "NoSuchMessage", "x", lay.gm_address(0), 0, 1, 0, {}]),
            wire._packer.pack([1, "LaunchRequest", "x", lay.lm_address(0), 0, 1, 0, {"gm": 0}]),
            wire._packer.pack(
                [
                    1,
                    "LaunchRequest",
                    "x",
                    lay.lm_address(0),
                    1,
                    1,
                    0,
                    {
                        "gm": 0,
                        "req": 5,
                        "tasks": [1, 2],
                        "workers": [0],
                        "durations": [1.0, 1.0],
                        "users": [0, 0],
                        "demands": None,
                    },
                ]
            ),
            wire.encode(LaunchRequest(0, 5, [1], [10_000], [1.0], [0]), "x", lay.lm_address(0), 1, 2),
            wire.encode(LaunchRequest(7, 5, [1], [0], [1.0], [0]), "x", lay.lm_address(0), 1, 3),
        ]
        for data in bad:
            for addr in (lay.gm_address(0), lay.lm_address(0), "megha/host/h0"):
                tr.publish_durable(cl.rt.inbox_subject(addr), data)
        await asyncio.sleep(0.05)
        cl.counters["garbage_sent"] += len(bad)

    res, _, _ = asyncio.run(_run(_cfg(), garbage))
    _exactly_once(res)
    assert res.counters["service_rejected_messages"] >= 7


@pytest.mark.parametrize("n", [3])
def test_wire_roundtrip_smoke(n):
    msg = LaunchRequest(1, n, [1, 2, 3], [4, 5, 6], [0.5, 1.0, 2.0], [0, 0, 1])
    env = wire.decode(wire.encode(msg, "a", "b", 7, 9, 0))
    assert env.msg == msg and env.seq == 9 and env.epoch == 7


def test_resource_mode_host_killed_tasks_complete_exactly_once():
    """Resource mode live: CPU/memory per worker and task; a killed worker host's tasks are relaunched."""

    async def kill(dep, cl):
        await dep.kill_host(0)
        await asyncio.sleep(1.2)
        await dep.restart_host(0)

    cfg = _cfg(
        datacenter={
            "workers": 40,
            "resources": True,
            "capacity": {"cpu": 4.0, "mem": 8.0},
            "demand": {"cpu": 1.0, "mem": 1.0},
        }
    )
    res, _, _ = asyncio.run(_run(cfg, kill))
    _exactly_once(res)
    assert res.counters["hosts_lost"] >= 1 and res.counters["runs_lost"] > 0


_NO_COMPILE_MID_RUN = """
import asyncio, json, sys
from numba.core.dispatcher import Dispatcher
from megha.live import deploy
from megha.live.client import LiveClient, synthetic_workload, with_constraints
from megha.live.config import LiveConfig

cfg = LiveConfig(**json.loads(sys.argv[1]))
deploy.warm_up(cfg)

def signatures():
    out = {}
    for name, mod in list(sys.modules.items()):
        if name.startswith("megha"):
            for k, v in list(vars(mod).items()):
                if isinstance(v, Dispatcher):
                    out[f"{name}.{k}"] = len(v.signatures)
    return out

async def main():
    dc = deploy.datacenter_of(cfg)
    layout = deploy.layout_of(cfg, dc)
    dep = await deploy.LocalDeployment(cfg, layout=layout).start()
    cl = LiveClient(cfg, dep.transport("client"), layout)
    await cl.start()
    try:
        before = signatures()
        await cl.run(with_constraints(cfg, synthetic_workload(20, 4, 0.05, 0.5, seed=2)), dc, stall_timeout=30)
        after = signatures()
    finally:
        await cl.close()
        await dep.close()
    print(json.dumps({k: [before.get(k, 0), n] for k, n in after.items() if n != before.get(k, 0)}))

asyncio.run(main())
"""


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"megha": {"policy": "min-constraints"}, "datacenter": {"resources": True}},
    ],
    ids=["default", "min-constraints-resources"],
)
def test_services_compile_every_kernel_before_they_go_live(settings):
    """In a fresh checkout the first placement compiled numba kernels mid-run: the one process of an in-process
    deployment stood still for 4 s under load, the hosts' leases expired and runs were cut short (seen in the
    no-fault baseline). After the services' warm-up, a run compiles nothing (a fresh interpreter, so that kernels
    earlier tests compiled do not hide a missing one)."""
    import json
    import subprocess
    import sys

    doc = {"broker": {"kind": "inproc"}, "ha": dict(FAST_HA), "megha": {"heartbeat": 0.5}}
    for k, v in settings.items():
        doc[k] = {**doc.get(k, {}), **v}
    r = subprocess.run(
        [sys.executable, "-c", _NO_COMPILE_MID_RUN, json.dumps(doc)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    compiled = json.loads(r.stdout.strip().splitlines()[-1])
    assert compiled == {}, f"compiled during the run (kernel: [signatures before, after]): {compiled}"


def test_a_first_message_to_a_receiver_that_the_dead_active_never_sent_is_taken_from_the_standby():
    """The active LM dies once its log holds the records of its first launch request, before the outputs leave:
    among them the LM's first message ever to a worker host (a launch). The standby re-sends them flagged as
    re-sent; the host, which never heard from this LM, must take the launch (it was alive when the launch was
    made, so it was meant for it) rather than drop it as meant for a predecessor. Dropped, the tasks only ran
    once the LM gave the launch up as lost, seconds later."""
    caught: dict = {}

    async def go():
        cfg = _cfg()
        dc = datacenter_of(cfg)
        layout = layout_of(cfg, dc)
        dep = await LocalDeployment(cfg, layout=layout).start()
        killed = _dies_once_stored(
            dep.lms[(1, "active")],
            lambda r: r.what == "msg" and wire.decode(r.data).type == "LaunchRequest",
            caught,
        )
        cl = LiveClient(cfg, dep.transport("client"), layout)
        await cl.start()
        w = with_constraints(cfg, synthetic_workload(30, 8, 0.6, 1.5, seed=1))
        try:
            job = asyncio.ensure_future(cl.run(w, dc, stall_timeout=15, ready_timeout=15))
            await asyncio.wait_for(killed.wait(), 30)
            await dep.kill_lm(1, "active")
            run = await asyncio.wait_for(job, 60)
            dropped = sum(r.counters["resent_dropped"] for r in dep.hosts.values())
            return to_run_result(run, cfg, dc, "synthetic"), dropped
        finally:
            await cl.close()
            await dep.close()

    res, dropped = asyncio.run(go())
    assert caught, "the active never logged a launch request"
    _exactly_once(res)
    assert res.counters["service_takeovers"] >= 1
    assert dropped == 0, f"worker hosts dropped {dropped} re-sent message(s) meant for them"


async def _until(cond, what: str, timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if cond():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(what)


def test_compacted_replication_log_a_standby_started_later_begins_at_the_snapshot():
    """Compaction (``ha.compact_every``): the active LM writes a snapshot every few records and the log before it
    is purged. The active dies, its standby takes over, a new standby starts — it can only begin at a snapshot
    (the records before it are gone) — and once the new active wrote more records the new standby takes over in
    turn: every task completes exactly once, and the log keeps few records."""
    state: dict = {}

    async def kill_twice(dep, cl):
        rt = dep.lms[(1, "active")]
        h = next(iter(rt.hosted.values()))
        state["written"] = h.counters["snapshots_written"]
        await dep.kill_lm(1, "active")
        key = await dep.start_standby(1)  # begins at a snapshot: the records before it are gone
        new = next(iter(dep.lms[(1, key)].hosted.values()))
        await _until(lambda: new.counters["snapshots_restored"] > 0, "the new standby never began at a snapshot")
        state["restored"] = new.counters["snapshots_restored"]
        # one of the two standbys takes over (usually the one that followed the active), then it dies too
        await _until(lambda: "active" in (dep.lm_role(1, "standby"), dep.lm_role(1, key)), "nobody took over")
        first, second = ("standby", key) if dep.lm_role(1, "standby") == "active" else (key, "standby")
        state["log"] = dep.broker.logs[rt.repl_subject(h.address)]
        await asyncio.sleep(0.5)  # the new active writes a few records
        await dep.kill_lm(1, first)
        await _until(lambda: dep.lm_role(1, second) == "active", "the last standby never took over")

    cfg = _cfg(ha={**FAST_HA, "compact_every": 10})
    res, _, _ = asyncio.run(_run(cfg, kill_twice, at=0.2, n_jobs=60, span=4.0))
    _exactly_once(res)
    assert state["written"] >= 1, "the active never wrote a snapshot"
    assert state["restored"] >= 1, "the standby started later never began at a snapshot"
    stored = [x for x in state["log"] if x is not None]
    assert len(stored) < len(state["log"]) / 2, (len(stored), len(state["log"]))
