"""Sweep and converter benchmarks (issue 9 targets).

1. Sweep overhead per run: the same N small runs (a) one after another in this process (simulate + write_run,
   after a warm-up) and (b) as a sweep on a 1-process local pool (no report); overhead = (b − a) / N. Target:
   ≤ 0.5 s per run. Also shown: the sweep on 2 processes, the report build, and Ray when ``--ray`` is given.
2. Converting 1,000,000 synthetic Google 2011 task events (gzipped parts, written first) to the job table.
   Target: ≤ 30 s.

    python benchmarks/bench_sweep.py [--runs 24] [--events 1000000] [--ray] [--repeat 2]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path


def _spec(n: int) -> dict:
    seeds = list(range(n // 2))
    return {
        "sweep": {"name": "bench"},
        "base": {"trace": "sample:GOOG_subtrace", "max_jobs": 10, "gms": 2, "lms": 2, "workers": 100},
        "grid": {"seed": seeds},
        "runs": [{"scheduler": "megha"}, {"scheduler": "sparrow"}],
    }


def bench_overhead(n_runs: int, use_ray: bool, tmp: Path, repeat: int) -> None:
    from megha.config import RunConfig
    from megha.metrics.report import write_run
    from megha.runner import simulate
    from megha.sweep import run_sweep, worker
    from megha.sweep.report import build_report
    from megha.sweep.spec import parse

    plans = parse(_spec(n_runs)).expand()
    worker.warm_up()
    simulate(RunConfig(**plans[0].config))  # warm caches as the pool's warm-up does
    best_seq = best_sweep = float("inf")
    for rep in range(repeat):
        t0 = time.perf_counter()
        for p in plans:
            res = simulate(RunConfig(**p.config))
            write_run(res, tmp / f"seq{rep}" / p.id, plots=False)
        best_seq = min(best_seq, time.perf_counter() - t0)
        t0 = time.perf_counter()
        run_sweep(_spec(n_runs), tmp / f"sweep1-{rep}", workers=1, progress=False, log=lambda s: None, report=False)
        best_sweep = min(best_sweep, time.perf_counter() - t0)
    per = (best_sweep - best_seq) / n_runs
    print(f"{n_runs} runs in-process (simulate + write_run): {best_seq:.2f} s ({best_seq / n_runs * 1e3:.0f} ms/run)")
    print(f"same runs as a sweep on 1 local process:       {best_sweep:.2f} s (incl. pool start, aggregation)")
    print(f"sweep overhead per run: {per * 1e3:.0f} ms (target <= 500 ms)  {'OK' if per <= 0.5 else 'MISSED'}")
    t0 = time.perf_counter()
    run_sweep(_spec(n_runs), tmp / "sweep2", workers=2, progress=False, log=lambda s: None, report=False)
    t2 = time.perf_counter() - t0
    print(f"same sweep on 2 local processes: {t2:.2f} s (speed-up {best_sweep / t2:.2f}x on this 2-core machine)")
    t0 = time.perf_counter()
    build_report(tmp / "sweep2")
    print(f"report.html for {n_runs} runs: {time.perf_counter() - t0:.2f} s")
    if use_ray:
        import ray

        t0 = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        t_init = time.perf_counter() - t0
        t0 = time.perf_counter()
        run_sweep(_spec(n_runs), tmp / "sweep-ray", address="ray", progress=False, log=lambda s: None, report=False)
        tr = time.perf_counter() - t0
        ray.shutdown()
        print(
            f"same sweep on a local Ray (2 CPUs): {tr:.2f} s after ray.init {t_init:.1f} s; overhead per run vs "
            f"2 processes {(tr - t2) / n_runs * 1e3:.0f} ms"
        )


def bench_convert(n_events: int, tmp: Path) -> None:
    from megha.workload.converters import convert
    from megha.workload.converters.synthetic import write_google2011

    n_jobs = max(1, int(n_events / 26.3))  # ~26 events per synthetic job
    t0 = time.perf_counter()
    write_google2011(tmp / "g2011", n_jobs, seed=1, parts=8)
    t_gen = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in (tmp / "g2011" / "task_events").iterdir())
    t0 = time.perf_counter()
    rep = convert(tmp / "g2011", "google2011", tmp / "g2011.parquet", machines=tmp / "m.json", progress=False)
    dt = time.perf_counter() - t0
    print(f"generated {rep.records:,} Google 2011 task events ({size / 1e6:.1f} MB gzipped, 8 parts) in {t_gen:.1f} s")
    print(
        f"converted in {dt:.2f} s: {rep.records / dt:,.0f} events/s, {rep.jobs:,} jobs / {rep.tasks:,} tasks "
        f"(target <= 30 s for 1,000,000 events)  {'OK' if dt * 1e6 / rep.records <= 30 else 'MISSED'}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=24)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--ray", action="store_true", help="also time the sweep on a local Ray instance")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    try:
        bench_overhead(a.runs, a.ray, tmp, a.repeat)
        bench_convert(a.events, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
