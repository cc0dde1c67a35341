"""Engine throughput: messages and timers per CPU-second through the event queue (prints, no assertions).

    python benchmarks/bench_engine.py [--events N] [--repeat R]

Sixteen relay components pass messages (or re-arm timers) until ``--events`` have run, with 10 or 10,000 events
pending. A bare ``heapq`` loop doing the same pushes and pops is printed beside it, as the floor of what a
Python heap costs. Rates are events per CPU-second (the median of ``--repeat`` runs): the machine is shared, and
wall time varies with its load. Target (issue 14): at least 1.5M messages per second with 10,000 pending.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import statistics
import time

from megha.sim.component import Component
from megha.sim.engine import Engine


class Relay(Component):
    """Forwards every message to the next relay, or re-arms its timer, while the shared budget lasts."""

    kind = "relay"

    def __init__(self, address: str, peers: list[str], budget: list[int]) -> None:
        super().__init__(address)
        self.peers = peers
        self.budget = budget
        self.k = 0

    def on_message(self, msg, now: float) -> None:
        if self.budget[0] > 0:
            self.budget[0] -= 1
            self.k = (self.k + 1) % len(self.peers)
            self.port.send(self.peers[self.k], msg)

    def on_timer(self, key, now: float) -> None:
        if self.budget[0] > 0:
            self.budget[0] -= 1
            self.port.set_timer(1.0 + (key % 7) * 0.001, key)


def run(events: int, pending: int, timers: bool) -> float:
    """Events per CPU-second of one engine run."""
    budget = [events]
    e = Engine(seed=1)
    names = [f"r{i}" for i in range(16)]
    comps = [e.add(Relay(n, names, budget)) for n in names]
    for i in range(pending):
        if timers:
            e.call_at(i * 1e-6, comps[i % 16], i)
        else:
            e.inject(i * 1e-6, names[i % 16], i)
    t = time.process_time()
    e.run()
    return e.events / (time.process_time() - t)


def bare(events: int, pending: int) -> float:
    """Events per CPU-second of a plain heapq loop: pop one, push one 0.5 ms later, until the budget is spent."""
    heap = [(i * 1e-6, i, None, i) for i in range(pending)]
    heapq.heapify(heap)
    seq = itertools.count(pending)
    n = 0
    t0 = time.process_time()
    while heap:
        t, _, h, p = heapq.heappop(heap)
        n += 1
        if events > 0:
            events -= 1
            heapq.heappush(heap, (t + 0.0005, next(seq), h, p))
    return n / (time.process_time() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for pending in (10, 10_000):
        for timers in (False, True):
            r = statistics.median(run(args.events, pending, timers) for _ in range(args.repeat))
            what = "timers  " if timers else "messages"
            print(f"engine {what} with {pending:>6,} pending: {r:>12,.0f} events per CPU-second", flush=True)
        b = statistics.median(bare(args.events, pending) for _ in range(args.repeat))
        print(f"bare heapq loop   with {pending:>6,} pending: {b:>12,.0f} events per CPU-second", flush=True)


if __name__ == "__main__":
    main()
