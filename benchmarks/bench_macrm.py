"""Benchmark: MACRM's simulation throughput (tasks and events per second) in distributed and centralized mode.

Scenarios (each printed with simulated tasks per second of wall time and of process CPU time, events per second and per
task, the mean service time and the fingerprint of the per-task outputs (:mod:`megha.metrics.fingerprint`: a speed
change must leave it as it was), and yarn / sparrow on the same input for the ratio):

* ``google``    — the Google sub-trace's first jobs on 500 nodes of the Google machine mix at 60 % initial load,
                  Table 4.3 requests (distributed mode: sampling);
* ``ch3-60``    — chapter 3's 200 four-core machines at 60 % load, Poisson jobs of 9 one-core tasks (sampling);
* ``ch3-95``    — the same at 95 % load (centralized mode: scheduler actors and event-driven heartbeats);
* ``syn1000``   — ``megha simulate``'s path (RunConfig): jobs of 1,000 one-second tasks every second
                  (``sample:syn_1000``) on 1,000 uniform nodes of 12 cores, 0.5 core per task.

    python benchmarks/bench_macrm.py               # all scenarios, best of 3
    python benchmarks/bench_macrm.py google --jobs 3000 --repeat 1

``--event-runs`` instead measures how batchable the event stream of ``megha simulate -s macrm --resources`` on
GOOG_subtrace (10,000 workers, the first ``--jobs`` jobs, default 2,000) is, a deterministic measure for moving handler
families into compiled kernels that each take a run of consecutive events: per handler (a message handler by message
type, a timer by its key's kind) its events, the mean length of its runs of consecutive events (any component, and
one component), and the same for families of handlers (one kernel would take their events in order). It runs the
engine's loop with a recorder (same events, fingerprint and event count as ``megha simulate``; CPU times are not
comparable)::

    python benchmarks/bench_macrm.py --event-runs --jobs 2000
"""

from __future__ import annotations

import argparse
import heapq
import time
from collections import Counter

import numpy as np

from megha.config import RunConfig
from megha.experiments.macrm import (
    MACRM_CH4,
    NET,
    WARMUP,
    _google_trace,
    cluster,
    gaussian_background,
    google_jobs,
    google_machines,
    poisson_jobs,
    service_times,
    shift,
    simulate_inputs,
    slot_background,
)
from megha.metrics.fingerprint import fingerprint
from megha.runner import simulate


def inputs(name: str, jobs: int):
    rng = np.random.default_rng(0)
    if name == "google":
        phys = google_machines(500)
        dc = cluster(phys, gaussian_background(phys, 0.6, rng), ("cpu", "mem"), "google500")
        w = google_jobs(rng, jobs, WARMUP, 0.5, 60.0, phys.sum(axis=0), max_share=0.05, trace=_google_trace())
        return w, dc, dict(MACRM_CH4)
    load = 0.6 if name == "ch3-60" else 0.95
    dc = cluster(np.full((200, 1), 4.0), slot_background(200, 4, load, rng), ("cpu",), "ch3")
    w = shift(poisson_jobs(jobs, rng, mean_gap=1.0 if load < 0.9 else 0.5), WARMUP)
    return w, dc, {"heartbeat": 1.0, "sampling_timeout": 0.005, "jm_demand": {"cpu": 1.0}}


def run(name: str, sched: str, jobs: int, repeat: int) -> dict:
    best = None
    for _ in range(repeat):
        c0 = time.process_time()
        if name == "syn1000":
            opts = {} if sched != "macrm" else {"jm_demand": {"cpu": 0.1, "mem": 0.1}}
            cfg = RunConfig(
                scheduler=sched,
                trace="sample:syn_1000",
                workers=1000,
                resources=True,
                capacity={"cpu": 12.0, "mem": 16.0},
                demand={"cpu": 0.5, "mem": 0.5},
                constraints=False,
                max_jobs=jobs,
                options=opts,
            )
            res = simulate(cfg)
        else:
            w, dc, opts = inputs(name, jobs)
            res = simulate_inputs(
                w,
                dc,
                sched,
                opts if sched == "macrm" else ({"heartbeat": 2.0} if sched == "yarn" else {}),
                network_delay=NET,
            )
        cpu = time.process_time() - c0
        n = res.workload.n_tasks
        st = service_times(res)
        out = {
            "tasks": n,
            "wall": res.wall_seconds,
            "cpu": cpu,
            "events": res.events,
            "sim_s": res.end_time,
            "service_ms": 1000 * float(np.nanmean(st)),
            "done": res.unfinished_reason is None,
            "fp": fingerprint(res),
        }
        if best is None or out["cpu"] < best["cpu"]:
            best = out
    return best


# handler families a compiled kernel could take as one batch (names as event_name gives them)
_NODE_SIDE = ("_deliver", "_ends_at", "tmr:hb", "tmr:vhb", "on_message_hb1", "msg:HeartbeatReply")
FAMILIES = {
    "news deliveries and container ends": ("_deliver", "_ends_at"),
    "node side (+ heartbeats, forwards, replies)": _NODE_SIDE,
    "node side + job managers' finished tasks": (*_NODE_SIDE, "on_message_finished_one"),
}


def event_name(handler: object, payload: object) -> str:
    """A name for an event's handler: ``msg:<type>`` for ``on_message``, ``tmr:<kind>`` for ``on_timer`` (the key's
    first field), else the handler's own name (direct handlers: ``_deliver``, ``_ends_at``, ``on_message_hb1``...)."""
    name = getattr(handler, "__name__", None) or type(handler).__name__
    if name == "on_message":
        return "msg:" + type(payload).__name__
    if name == "on_timer":
        return "tmr:" + str(payload[0] if isinstance(payload, tuple) else payload)
    return name


def record_events(engine: object, out: list) -> None:
    """Make ``engine`` append ``(handler name, component address)`` to ``out`` for every event it runs: its drain
    loop (``Engine._drain``: the heap and the message lane by ``(time, seq)``, cancelled timers skipped) with a
    recorder, set on the instance (used as a ``simulate(..., instrument=...)`` hook)."""
    heap = engine._heap
    lane = engine._lane
    cancelled = engine._cancelled

    def drain(chunk: object, until: float) -> tuple[int, bool]:
        skipped = 0
        for _ in chunk:
            if heap and (not lane or heap[0] < lane[0]):
                if heap[0][0] > until:
                    return skipped, True
                t, seq, handler, payload = heapq.heappop(heap)
                if cancelled and seq in cancelled:
                    cancelled.discard(seq)
                    skipped += 1
                    continue
            elif lane:
                if lane[0][0] > until:
                    return skipped, True
                t, _, handler, payload = lane.popleft()
            else:
                return skipped, True
            out.append((event_name(handler, payload), getattr(getattr(handler, "__self__", None), "address", "?")))
            engine.now = t
            handler(payload, t)
        return skipped, False

    engine._drain = drain
    engine._drain_until = drain


def run_lengths(names: list[str], members: set[str]) -> list[int]:
    """Lengths of the runs of consecutive events whose name is in ``members``."""
    runs = []
    n = 0
    for name in names:
        if name in members:
            n += 1
        elif n:
            runs.append(n)
            n = 0
    if n:
        runs.append(n)
    return runs


def event_runs(jobs: int) -> None:
    """Print the batchability of the GOOG_subtrace event stream (first ``jobs`` jobs, see the module docstring)."""
    events: list[tuple[str, str]] = []
    cfg = RunConfig(
        scheduler="macrm", trace="sample:GOOG_subtrace", workers=10000, resources=True, max_jobs=jobs, seed=0
    )
    res = simulate(cfg, instrument=lambda engine: record_events(engine, events))
    names = [n for n, _ in events]
    print(
        f"macrm on GOOG_subtrace, first {jobs} jobs: {res.workload.n_tasks:,} tasks, {res.events:,} events "
        f"({res.events / res.workload.n_tasks:.2f} per task), fingerprint {fingerprint(res)}"
    )
    print(f"{'handler':40} {'events':>9} {'per task':>8} {'mean run':>9} {'mean run, one component':>24}")
    for name, k in Counter(names).most_common(20):
        runs = run_lengths(names, {name})
        own = 0  # runs of the handler on one component
        prev = None
        for ev in events:
            if ev[0] == name and ev != prev:
                own += 1
            prev = ev
        print(f"{name:40} {k:9,} {k / res.workload.n_tasks:8.2f} {k / len(runs):9.2f} {k / own:24.2f}")
    print(f"{'family':45} {'events':>9} {'share':>6} {'mean run':>9} {'in runs of >= 4':>16}")
    for fam, members in FAMILIES.items():
        runs = run_lengths(names, set(members))
        tot = sum(runs)
        long = sum(r for r in runs if r >= 4)
        print(f"{fam:45} {tot:9,} {tot / len(names):6.1%} {tot / len(runs):9.2f} {long / tot:16.1%}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenarios", nargs="*", default=["google", "ch3-60", "ch3-95", "syn1000"])
    ap.add_argument("--jobs", type=int, default=None, help="jobs per scenario")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--event-runs", action="store_true", help="the event stream's batchability (module docstring)")
    a = ap.parse_args()
    if a.event_runs:
        event_runs(a.jobs or 2000)
        return
    default_jobs = {"google": 1000, "ch3-60": 300, "ch3-95": 300, "syn1000": 60}
    print(
        f"{'scenario':10} {'scheduler':8} {'tasks':>7} {'sim s':>7} {'events':>9} {'tasks/s wall':>13} "
        f"{'tasks/s cpu':>12} {'events/s cpu':>13} {'ev/task':>7} {'service':>10} {'fingerprint':>16}  vs macrm (cpu)"
    )
    for sc in a.scenarios:
        jobs = a.jobs or default_jobs[sc]
        ref = None
        for sched in ("macrm", "yarn", "sparrow"):
            if sc.startswith("ch3") and sched != "macrm":
                continue
            r = run(sc, sched, jobs, a.repeat)
            ratio = (
                ""
                if ref is None
                else f"{ref['cpu'] / r['cpu']:.2f}x faster"
                if r["cpu"] < ref["cpu"]
                else f"{r['cpu'] / ref['cpu']:.2f}x slower"
            )
            ref = ref or r
            print(
                f"{sc:10} {sched:8} {r['tasks']:7d} {r['sim_s']:7.1f} {r['events']:9d} "
                f"{r['tasks'] / r['wall']:13,.0f} {r['tasks'] / r['cpu']:12,.0f} "
                f"{r['events'] / r['cpu']:13,.0f} {r['events'] / max(r['tasks'], 1):7.2f} {r['service_ms']:8.2f}ms "
                f"{r['fp']:>16}  "
                f"{ratio}{'' if r['done'] else '  (incomplete)'}",
                flush=True,
            )


if __name__ == "__main__":
    main()
