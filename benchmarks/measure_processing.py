"""Measure every scheduler's CPU cost per message and per task, per component kind, at 10,000 and 100,000 workers.

Writes ``src/megha/data/processing_costs.json``, the table ``--processing measured`` charges (see
:mod:`megha.metrics.processing`). Each scheduler runs a generated workload (about 20,000 one-second tasks in jobs of
log-uniform size between 1 and 2,000 tasks, so per-task costs separate from per-message ones; Poisson arrivals at
10 % offered load for the datacenter's size; synthesized placement constraints) with a zero-cost processing model,
so the components are laid out as in a run that charges costs (Megha's LMs then host their workers as separate
components). Every ``on_message`` and ``on_timer`` call is timed with ``time.thread_time_ns`` (CPU time of the
simulator's thread: other processes on the machine do not count); per component kind a least-squares line
``base + per_item x len(message)`` is fitted.

    python benchmarks/measure_processing.py                  # every scheduler, 10k and 100k workers
    python benchmarks/measure_processing.py --only megha,yarn --sizes 10000 --tasks 5000 --out /tmp/costs.json
    python benchmarks/measure_processing.py --show           # the shipped table as Markdown
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from megha.config import RunConfig
from megha.metrics.fingerprint import fingerprint
from megha.metrics.processing import TABLE, Profiler
from megha.model.workload import Workload
from megha.runner import load_inputs, simulate_inputs
from megha.runner.inputs import STREAM_TASK_CONSTRAINTS, stream
from megha.schedulers import registry

OUT = Path(__file__).resolve().parent.parent / "src" / "megha" / "data" / TABLE
LOAD = 0.10  # offered load at every size
MAX_JOB = 2000  # job sizes log-uniform on [1, MAX_JOB] tasks, so per-task costs are separable from per-message ones
WORKLOAD = (
    "generated: jobs of log-uniform size in [1, 2,000] tasks (mean ~263), one-second tasks, Poisson arrivals at "
    "10 % offered load for the datacenter's size, synthesized placement constraints (resource mode for "
    "resource-only schedulers: 1 core and 0.25 GB per task on 64-core 16 GB workers)"
)


def workload(tasks: int, workers: int, seed: int) -> Workload:
    """About ``tasks`` tasks in jobs of log-uniform size, arriving as a Poisson process at :data:`LOAD`."""
    rng = np.random.default_rng([seed, workers])
    sizes: list[int] = []
    while sum(sizes) < tasks:
        sizes.append(int(np.exp(rng.uniform(0.0, np.log(MAX_JOB + 1)))))
    n = np.array(sizes, dtype=np.int64)
    rate = LOAD * workers / float(n.mean())  # jobs per second: rate x mean size x 1 s = LOAD x workers
    arrival = np.cumsum(rng.exponential(1.0 / rate, n.size))
    return Workload(
        job_arrival=arrival,
        job_num_tasks=n,
        job_mean_duration=np.ones(n.size),
        task_duration=np.ones(int(n.sum())),
        name=f"measure-{workers}",
    )


def measure(name: str, workers: int, tasks: int, seed: int) -> dict:
    spec = registry.get(name)
    resources = "slot" not in spec.modes
    cfg = RunConfig(
        scheduler=name,
        trace="sample:syn_250",  # a label only: the workload below is generated
        workers=workers,
        max_jobs=1,
        seed=seed,
        constraints=True,
        resources=resources,
        # active but free: the layout of a run that charges costs, no cost charged
        processing={"__profile__": 1e-12},
    )
    _, dc = load_inputs(cfg)
    w = workload(tasks, workers, seed).with_constraints(stream(seed, STREAM_TASK_CONSTRAINTS))
    if resources:
        dem = np.tile(np.array([cfg.demand[k] for k in dc.resource_names]), (w.n_tasks, 1))
        w = w.with_demands(dem, dc.resource_names)
    prof = Profiler()
    t0 = time.process_time()
    res = simulate_inputs(cfg, w, dc, instrument=prof.install)
    cpu = time.process_time() - t0
    table = prof.table()
    done = int(res.feasible.sum())
    msg_cpu = sum(k["messages"] * k["mean_cpu_s"] for k in table.values())
    tim_cpu = sum(k.get("timers", 0) * k.get("timer_mean_cpu_s", 0.0) for k in table.values())
    return {
        "kinds": table,
        "run": {
            "tasks": done,
            "jobs": w.n_jobs,
            "mode": "resource" if resources else "slot",
            "events": res.events,
            "simulated_seconds": res.end_time,
            "completed": res.unfinished_reason is None,
            "process_cpu_s": cpu,
            "handler_cpu_s": msg_cpu + tim_cpu,
            "message_cpu_per_task_s": msg_cpu / done if done else None,
            "timer_cpu_per_task_s": tim_cpu / done if done else None,
            "fingerprint": fingerprint(res),
        },
    }


def markdown(doc: dict) -> str:
    """The measured table: per scheduler and size, each component kind's base and per-item cost and the CPU time
    its messages took per task of the run."""
    lines = [
        "| scheduler | workers | component: base + per item (messages) | message CPU per task | timer CPU per task |",
        "| --- | --- | --- | --- | --- |",
    ]
    sizes = sorted(doc.get("sizes", {}), key=int)
    names = sorted({n for s in sizes for n in doc["sizes"][s]})
    for name in names:
        for s in sizes:
            kinds = doc["sizes"][s].get(name)
            if kinds is None:
                continue
            run = doc.get("runs", {}).get(s, {}).get(name, {})
            parts = "; ".join(
                f"{k} {1e6 * v['base']:.3g} µs + {1e6 * v['per_item']:.3g} µs ({v['messages']:,})"
                for k, v in kinds.items()
                if v["messages"]
            )
            per_task = run.get("message_cpu_per_task_s")
            tim = run.get("timer_cpu_per_task_s")
            lines.append(
                f"| {name} | {int(s):,} | {parts} | {'' if per_task is None else f'{1e6 * per_task:.3g} µs'} | "
                f"{'' if tim is None else f'{1e6 * tim:.3g} µs'} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated schedulers (default: every registered one)")
    ap.add_argument("--sizes", default="10000,100000", help="datacenter sizes (workers)")
    ap.add_argument("--tasks", type=int, default=20000, help="tasks per run (about)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--merge", action="store_true", help="keep the other entries of an existing --out")
    ap.add_argument("--show", action="store_true", help="print the table in --out as Markdown; measure nothing")
    a = ap.parse_args(argv)
    if a.show:
        print(markdown(json.loads(a.out.read_text())))
        return 0
    names = a.only.split(",") if a.only else registry.names()
    sizes = [int(s) for s in a.sizes.split(",")]
    doc = json.loads(a.out.read_text()) if a.merge and a.out.exists() else {}
    doc.update(
        {
            "method": (
                "CPU time (time.thread_time_ns) of every on_message / on_timer call of the scheduler's components in "
                f"a simulation of about {a.tasks:,} tasks ({WORKLOAD}), with a zero-cost processing model so the "
                "components are laid out as in a charged run; per component kind, least squares of cost = base + "
                "per_item x len(message) (both clamped at 0). Timers are reported, not charged. "
                "benchmarks/measure_processing.py"
            ),
            "measured_at": datetime.date.today().isoformat(),
            "machine": {
                "cpu": platform.processor() or platform.machine(),
                "cpus": os.cpu_count(),
                "python": sys.version.split()[0],
                "platform": platform.platform(),
            },
            "units": "seconds",
        }
    )
    doc.setdefault("sizes", {})
    for n in sizes:
        for name in names:
            t0 = time.process_time()
            try:
                m = measure(name, n, a.tasks, a.seed)
            except Exception as e:  # a scheduler that cannot run at this size is reported and skipped
                print(f"{name:14s} {n:>7,}  FAILED: {type(e).__name__}: {e}", flush=True)
                continue
            doc["sizes"].setdefault(str(n), {})[name] = m["kinds"]
            doc.setdefault("runs", {}).setdefault(str(n), {})[name] = m["run"]
            r = m["run"]
            kinds = ", ".join(
                f"{k} {1e6 * v['base']:.1f} µs + {1e6 * v['per_item']:.2f} µs/item ({v['messages']:,} msgs)"
                for k, v in m["kinds"].items()
                if v["messages"]
            )
            print(
                f"{name:14s} {n:>7,}  {r['tasks']:,} tasks, {r['tasks'] / max(r['process_cpu_s'], 1e-9):,.0f} "
                f"tasks/CPU-s ({time.process_time() - t0:.1f} CPU-s), messages "
                f"{1e6 * (r['message_cpu_per_task_s'] or 0):.1f} µs/task, fingerprint {r['fingerprint']}: {kinds}",
                flush=True,
            )
            a.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
