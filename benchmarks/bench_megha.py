"""Megha simulator speed on the papers' workloads (prints tasks/s, wall time, peak memory; no assertions).

    python benchmarks/bench_megha.py              # GOOG_subtrace on the 10,000-worker 5x5 cluster, and syn_1000
    python benchmarks/bench_megha.py --quick      # the first 2,000 Google jobs only

Targets (issue 3): GOOG_subtrace (312,558 tasks, 10,000 constrained workers, 5 GMs x 5 LMs) in <= 15 s
(>= 20,000 tasks/s; the authors' simulator runs it at ~100 tasks/s); syn_1000 (2,000,000 tasks) in <= 3 min;
memory for the GOOG run <= 2 GB.
"""

from __future__ import annotations

import argparse
import resource
import time

from megha.config import RunConfig
from megha.metrics.report import summarize
from megha.sim.run import simulate


def bench(label: str, cfg: RunConfig) -> None:
    t = time.perf_counter()
    r = simulate(cfg)
    wall = time.perf_counter() - t
    s = summarize(r)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    d = s["delay"]
    print(
        f"{label}: {r.workload.n_tasks:,} tasks, {r.events:,} events in {wall:.1f} s = "
        f"{r.workload.n_tasks / wall:,.0f} tasks/s ({r.events / wall:,.0f} events/s); peak RSS {rss:,.0f} MB; "
        f"delay p50 {d['p50']:.4g} s p99 {d['p99']:.4g} s; inconsistencies {s['counters'].get('inconsistencies', 0):,}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--policy", default="random")
    args = ap.parse_args()
    opts = {"policy": args.policy}
    goog = RunConfig(scheduler="megha", trace="sample:GOOG_subtrace", cluster="sample:megha_G5L5S10000",
                     options=opts, max_jobs=2000 if args.quick else None)
    bench("megha GOOG_subtrace 10k 5x5", goog)
    if not args.quick:
        syn = RunConfig(scheduler="megha", trace="sample:syn_1000", cluster="sample:megha_G5L5S10000", options=opts)
        bench("megha syn_1000 10k 5x5", syn)


if __name__ == "__main__":
    main()
