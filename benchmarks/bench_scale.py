"""How each scheduler's cost grows with the datacenter: every scheduler at 10k, 50k and 100k workers.

    python benchmarks/bench_scale.py                              # every scheduler, 10k / 50k / 100k workers
    python benchmarks/bench_scale.py --only megha,sparrow --sizes 10000,50000
    python benchmarks/bench_scale.py --tasks-per-worker 5 --timeout 300 --markdown
    python benchmarks/bench_scale.py --trace sample:GOOG_subtrace --sizes 10000 --repeat 3 --targets

Each size gets a generated workload of proportional load (Poisson arrivals offering about 70 % of the workers,
``--tasks-per-worker`` tasks per worker, placement constraints synthesized as for every trace; see
:mod:`megha.workload.generate`). Each (scheduler, size) runs as its own ``megha simulate`` process, so the CPU
seconds and peak RSS are those of the whole process (imports, loading, simulation, outputs). The table gives tasks
per CPU-second of the whole process and of the simulation alone (``summary.json``'s ``cpu_seconds``: building and
running the scheduler, without loading inputs or writing outputs) beside wall time (this machine is shared: wall
time varies with its load), engine events per task, peak RSS, and the fingerprint of the per-task outputs, so a
speed change that altered results shows. Schedulers that only run in resource mode (MACRM) get ``--resources``. A
run over ``--timeout`` seconds is reported as such.

``--trace`` runs one given trace (a file, or ``sample:NAME``) at every size instead of the generated workloads.
``--repeat N`` runs each (scheduler, size) N times one after the other and reports the run of median CPU time, with
the range beside it (on a shared machine the same run's CPU time moves by 10–50 % between minutes); the runs must
give one fingerprint, else the row says so. ``--targets`` adds the whole-process rates that issue 14 asks on
GOOG_subtrace with 10k workers (megha 50k tasks per CPU-second; megha-central, pigeonc, sparrow and yarn 40k; the
packing schedulers 20k; flow and macrm 10k) and whether the row reaches its target.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from megha.schedulers import registry
from megha.workload.generate import poisson_workload
from megha.workload.tracefile import write_columnar

# issue 14's whole-process rates (tasks per CPU-second) on GOOG_subtrace with 10k workers
TARGETS = {
    "megha": 50_000,
    "megha-central": 40_000,
    "pigeonc": 40_000,
    "sparrow": 40_000,
    "yarn": 40_000,
    "bf-j": 20_000,
    "bf-js": 20_000,
    "bf-s": 20_000,
    "vqs": 20_000,
    "vqs-bf": 20_000,
    "fifo-ff": 20_000,
    "flow": 10_000,
    "macrm": 10_000,
}


def run_one(name: str, trace: Path | str, workers: int, out: Path, timeout: float) -> dict:
    """One ``megha simulate`` process; its own CPU seconds and peak RSS, from the kernel's accounting (wait4)."""
    spec = registry.get(name)
    cmd = [sys.executable, "-m", "megha.cli", "simulate", "-s", name, "-t", str(trace), "--workers", str(workers)]
    cmd += ["--quiet", "--out", str(out), "--force"]
    if "slot" not in spec.modes:
        cmd += ["--resources"]
    out.mkdir(parents=True, exist_ok=True)
    log = out.parent / f"{out.name}.log"
    t = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
        while True:  # wait4 gives this child's own CPU time and peak RSS
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t > timeout:
                proc.kill()
                os.wait4(proc.pid, 0)
                return {"scheduler": name, "workers": workers, "status": f"timeout ({timeout:.0f} s)"}
            time.sleep(0.1)
    wall = time.perf_counter() - t
    cpu = usage.ru_utime + usage.ru_stime
    if os.waitstatus_to_exitcode(status) != 0:
        return {"scheduler": name, "workers": workers, "status": "error: " + log.read_text().strip()[-200:]}
    s = json.loads((out / "summary.json").read_text())
    return {
        "scheduler": name,
        "workers": workers,
        "status": "ok" if s.get("completed", True) else "unfinished",
        "tasks": s["tasks"],
        "cpu_s": cpu,
        "wall_s": wall,
        "tasks_per_cpu_s": s["tasks"] / cpu if cpu > 0 else None,
        "sim_cpu_s": s.get("cpu_seconds"),
        "sim_tasks_per_cpu_s": s.get("tasks_per_cpu_second"),
        "events_per_task": s["events"] / max(s["tasks"], 1),
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "delay_p50": s["delay"].get("p50"),
        "delay_p99": s["delay"].get("p99"),
        "fingerprint": s.get("fingerprint"),
    }


def run_repeated(name: str, trace: Path | str, workers: int, out: Path, timeout: float, repeat: int) -> dict:
    """``repeat`` runs of :func:`run_one`; the run of median CPU time, with every run's CPU seconds in ``cpu_runs``
    (a row whose runs disagree on the fingerprint gets the status ``fingerprint varies``)."""
    runs = [run_one(name, trace, workers, out, timeout) for _ in range(repeat)]
    bad = [r for r in runs if r["status"] != "ok"]
    if bad:
        return bad[0]
    runs.sort(key=lambda r: r["cpu_s"])
    row = dict(runs[(len(runs) - 1) // 2])
    row["cpu_runs"] = [r["cpu_s"] for r in runs]
    if len({r["fingerprint"] for r in runs}) > 1:
        row["status"] = "fingerprint varies: " + ", ".join(sorted({str(r["fingerprint"]) for r in runs}))
    return row


def table(rows: list[dict], markdown: bool, targets: bool = False) -> str:
    head = [
        "scheduler",
        "workers",
        "tasks",
        "tasks/CPU-s",
        "sim tasks/CPU-s",
        "CPU s",
        "wall s",
        "events/task",
        "peak RSS MB",
        "fingerprint",
    ]
    ranged = any(len(r.get("cpu_runs", ())) > 1 for r in rows)
    if ranged:
        head.insert(6, "CPU s range")
    if targets:
        head += ["target", "holds"]
    lines = []
    for r in rows:
        if r["status"] != "ok":
            lines.append([r["scheduler"], f"{r['workers']:,}", r["status"], *[""] * (len(head) - 3)])
            continue
        line = [
            r["scheduler"],
            f"{r['workers']:,}",
            f"{r['tasks']:,}",
            f"{r['tasks_per_cpu_s']:,.0f}",
            f"{r['sim_tasks_per_cpu_s']:,.0f}" if r.get("sim_tasks_per_cpu_s") else "",
            f"{r['cpu_s']:.1f}",
            f"{r['wall_s']:.1f}",
            f"{r['events_per_task']:.2f}",
            f"{r['peak_rss_mb']:,.0f}",
            r["fingerprint"] or "",
        ]
        if ranged:
            cpu = r.get("cpu_runs") or [r["cpu_s"]]
            line.insert(6, f"{min(cpu):.1f}–{max(cpu):.1f}")
        if targets:
            goal = TARGETS.get(r["scheduler"])
            line += [f"{goal:,}", "yes" if r["tasks_per_cpu_s"] >= goal else "no"] if goal else ["", ""]
        lines.append(line)
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(x) + " |" for x in lines]
        return "\n".join(out)
    widths = [max(len(h), *(len(x[i]) for x in lines)) if lines else len(h) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    return "\n".join([fmt.format(*head), *(fmt.format(*x) for x in lines)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated scheduler names (default: every registered scheduler)")
    ap.add_argument("--sizes", default="10000,50000,100000", help="comma-separated worker counts")
    ap.add_argument("--tasks-per-worker", type=float, default=20.0)
    ap.add_argument("--load", type=float, default=0.7, help="offered load of the generated workloads")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds of wall time per run")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    ap.add_argument("--trace", help="run this trace (a file or sample:NAME) at every size instead of generated ones")
    ap.add_argument("--repeat", type=int, default=1, help="runs per (scheduler, size); the median CPU run is shown")
    ap.add_argument("--targets", action="store_true", help="add issue 14's rate targets and whether each holds")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    names = args.only.split(",") if args.only else registry.names()
    for n in names:
        registry.get(n)  # unknown names fail before anything runs
    sizes = [int(x) for x in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for size in sizes:
            trace: Path | str
            if args.trace:
                trace = args.trace
            else:
                trace = d / f"poisson-{size}.parquet"
                write_columnar(
                    poisson_workload(size, load=args.load, tasks_per_worker=args.tasks_per_worker, seed=args.seed),
                    trace,
                )
            for name in names:
                r = run_repeated(name, trace, size, d / f"{name}-{size}", args.timeout, args.repeat)
                rows.append(r)
                done = r.get("tasks_per_cpu_s")
                rate = f"{done:,.0f} tasks/CPU-s" if done else r["status"]
                print(f"{name} at {size:,} workers: {rate}", file=sys.stderr, flush=True)
    print(table(rows, args.markdown, args.targets))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MEGHA_PROGRESS", "0")
    sys.exit(main())
