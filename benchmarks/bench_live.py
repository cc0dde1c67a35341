"""Live runtime benchmark: placement latency (submit → task start) at sustained task rates.

    python benchmarks/bench_live.py [--mode nats|procs|inproc] [--rates 1000,2000,3000] [--seconds 4]

``nats`` (default): GM, LMs and the worker host run in this process and every message goes through a
nats-server on loopback (started here when needed); ``procs``: every service is its own process (as
``megha live up`` runs them); ``inproc``: the in-process bus (no broker). Target (issue 8): median ≤ 5 ms and
p99 ≤ 50 ms at a sustained 1,000 tasks/s with the broker; the highest sustained rate is printed, and per rate
the CPU seconds per 1,000 tasks of the broker (JetStream), the services and the client, with the load average.
The datacenter has enough workers that at most half are busy at the highest rate (``--workers`` sets it). Same as
``megha live bench``.
"""

from __future__ import annotations

import argparse

from megha.live.bench import main

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--mode", default="nats", choices=("nats", "procs", "inproc"))
    p.add_argument("--rates", default="1000,2000,3000")
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--tasks-per-job", type=int, default=1)
    p.add_argument("--lm-standby", action="store_true", help="every LM with a standby (replication on the path)")
    p.add_argument("--hops", action="store_true", help="median of each hop of the path, from the broker's store times")
    p.add_argument("--workers", type=int, default=0, help="datacenter size (0: at most half busy at the highest rate)")
    a = p.parse_args()
    main([float(r) for r in a.rates.split(",")], a.seconds, a.mode, a.tasks_per_job, a.lm_standby, a.hops, a.workers)
