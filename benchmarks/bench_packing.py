"""Throughput of the packing schedulers on the slotted core (target: BF-J/S, 1,000 servers, 1,000,000 jobs ≤ 60 s).

Workload: Poisson arrivals, sizes uniform on [0.1, 0.9], geometric service with mean 100 slots, traffic
intensity ρ = 0.9 (λ = ρ·L·μ/E[size] = 18 jobs per slot for L = 1,000). Prints jobs per second per policy
and the ratio to BF-J/S.

    python benchmarks/bench_packing.py                 # BF-J/S on 1,000,000 jobs + every policy on 200,000
    python benchmarks/bench_packing.py --jobs 200000   # smaller
    python benchmarks/bench_packing.py --servers 10000 --policies bf-js,vqs-bf
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from megha.schedulers.packing.policies import POLICIES, make_policy
from megha.schedulers.packing.slotted import run_slotted
from megha.schedulers.packing.workloads import synthetic


def workload(servers: int, jobs: int, rho: float = 0.9, seed: int = 0):
    mean_size, mean_service = 0.5, 100.0
    rate = rho * servers / (mean_size * mean_service)
    horizon = int(jobs / rate)
    return synthetic(
        rate, horizon, np.random.default_rng(seed), sizes=("uniform", 0.1, 0.9), service=("geometric", mean_service)
    )


def bench(name: str, servers: int, wl, J: int = 4) -> dict:
    t0 = time.perf_counter()
    r = run_slotted(make_policy(name, servers, J=J), wl)
    dt = time.perf_counter() - t0
    return {
        "policy": name,
        "jobs": wl.n,
        "seconds": dt,
        "jobs_per_s": wl.n / dt,
        "mean_queue": r.mean_queue(),
        "event_slots": int(r.slots.size),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=1_000_000, help="jobs of the BF-J/S headline run")
    ap.add_argument("--others", type=int, default=200_000, help="jobs of the per-policy comparison (0: skip)")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()

    wl = workload(a.servers, a.jobs)
    print(
        f"BF-J/S headline: {a.servers:,} servers, {wl.n:,} jobs, rho 0.9 "
        f"({wl.offered_load(a.servers):.3f} measured), {int(wl.arrival[-1]) + 1:,} slots"
    )
    best = None
    for _ in range(a.repeat):
        r = bench("bf-js", a.servers, wl)
        best = r if best is None or r["seconds"] < best["seconds"] else best
    print(
        f"  bf-js: {best['seconds']:.1f} s  ({best['jobs_per_s']:,.0f} jobs/s, mean queue "
        f"{best['mean_queue']:.1f}, {best['event_slots']:,} slots with events)  target <= 60 s: "
        f"{'OK' if best['seconds'] <= 60 else 'MISSED'}"
    )
    if a.others:
        wl = workload(a.servers, a.others)
        print(f"\nper policy: {a.servers:,} servers, {wl.n:,} jobs")
        rows = [bench(p, a.servers, wl) for p in a.policies.split(",")]
        ref = next((r["jobs_per_s"] for r in rows if r["policy"] == "bf-js"), rows[0]["jobs_per_s"])
        print(f"  {'policy':8s} {'seconds':>8s} {'jobs/s':>10s} {'vs bf-js':>9s} {'mean queue':>11s}")
        for r in rows:
            print(
                f"  {r['policy']:8s} {r['seconds']:8.2f} {r['jobs_per_s']:10,.0f} {r['jobs_per_s'] / ref:9.2f} "
                f"{r['mean_queue']:11.1f}"
            )


if __name__ == "__main__":
    main()
