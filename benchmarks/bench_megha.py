"""Megha simulator speed on the papers' workloads (prints tasks/s, wall time, peak memory; no assertions).

    python benchmarks/bench_megha.py              # GOOG_subtrace on the 10,000-worker 5x5 cluster, and syn_1000
    python benchmarks/bench_megha.py --quick      # the first 2,000 Google jobs only
    python benchmarks/bench_megha.py --only goog --repeat 3
    python benchmarks/bench_megha.py --only goog --alternate 2   # compiled run and components, alternately

The lean configuration (the paper profile's defaults) runs as one compiled simulation (``schedulers/megha/_lean``);
``--components`` runs the GM and LM components instead (``MEGHA_LEAN=0``), ``--alternate N`` both, N times each,
alternately (CPU seconds drift on a shared machine: compare neighbours). Every run prints its fingerprint.

Targets (issue 3): GOOG_subtrace (312,558 tasks, 10,000 constrained workers, 5 GMs x 5 LMs) in <= 15 s
(>= 20,000 tasks/s; the authors' simulator runs it at ~100 tasks/s); syn_1000 (2,000,000 tasks) in <= 3 min;
memory for the GOOG run <= 2 GB.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from megha.config import RunConfig
from megha.metrics.fingerprint import fingerprint
from megha.metrics.report import summarize
from megha.runner import simulate


def bench(label: str, cfg: RunConfig) -> None:
    """One run: wall and CPU seconds (CPU is the figure to compare on a shared machine), rates, peak RSS."""
    t = time.perf_counter()
    c = time.process_time()
    r = simulate(cfg)
    cpu = time.process_time() - c
    wall = time.perf_counter() - t
    s = summarize(r)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    d = s["delay"]
    n = r.workload.n_tasks
    print(
        f"{label}: {n:,} tasks, {r.events:,} events ({r.events / n:.2f}/task) in {wall:.1f} s wall, {cpu:.1f} s CPU "
        f"= {n / cpu:,.0f} tasks/s CPU ({n / wall:,.0f} wall; {r.events / cpu:,.0f} events/s CPU); "
        f"peak RSS {rss:,.0f} MB; delay p50 {d['p50']:.4g} s p99 {d['p99']:.4g} s; "
        f"inconsistencies {s['counters'].get('megha', {}).get('inconsistencies', 0):,}; "
        f"{'compiled' if r.extras.get('compiled_run') else 'components'}; fingerprint {fingerprint(r)}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--policy", default="random")
    ap.add_argument("--only", choices=["goog", "syn"], default=None, help="run one of the two workloads")
    ap.add_argument("--repeat", type=int, default=1, help="repeat each run (timings are noisy on a shared machine)")
    ap.add_argument("--components", action="store_true", help="run the GM/LM components (MEGHA_LEAN=0)")
    ap.add_argument("--alternate", type=int, default=0, help="compiled run and components alternately, N times")
    args = ap.parse_args()
    if args.components:
        os.environ["MEGHA_LEAN"] = "0"
    opts = {"policy": args.policy}
    goog = RunConfig(
        scheduler="megha",
        trace="sample:GOOG_subtrace",
        cluster="sample:megha_G5L5S10000",
        options=opts,
        max_jobs=2000 if args.quick else None,
    )
    if args.alternate:
        for _ in range(args.alternate):
            for lean in ("1", "0"):
                os.environ["MEGHA_LEAN"] = lean
                bench("megha GOOG_subtrace 10k 5x5", goog)
        return
    if args.only in (None, "goog"):
        for _ in range(args.repeat):
            bench("megha GOOG_subtrace 10k 5x5", goog)
    if not args.quick and args.only in (None, "syn"):
        syn = RunConfig(scheduler="megha", trace="sample:syn_1000", cluster="sample:megha_G5L5S10000", options=opts)
        for _ in range(args.repeat):
            bench("megha syn_1000 10k 5x5", syn)


if __name__ == "__main__":
    main()
