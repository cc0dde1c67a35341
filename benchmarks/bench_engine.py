"""Engine throughput: messages and timers per second through the event heap (prints, no assertions).

python benchmarks/bench_engine.py [--events N] [--pending P]
"""

from __future__ import annotations

import argparse
import time

from megha.sim.component import Component
from megha.sim.engine import Engine


class Relay(Component):
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
    budget = [events]
    e = Engine(seed=1)
    names = [f"r{i}" for i in range(16)]
    comps = [e.add(Relay(n, names, budget)) for n in names]
    for i in range(pending):
        if timers:
            e.call_at(i * 1e-6, comps[i % 16], i)
        else:
            e.inject(i * 1e-6, names[i % 16], i)
    t = time.perf_counter()
    e.run()
    dt = time.perf_counter() - t
    return e.events / dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    args = ap.parse_args()
    for pending in (10, 10_000):
        for timers in (False, True):
            r = run(args.events, pending, timers)
            print(f"engine {'timers' if timers else 'messages'} with {pending:>6,} pending: {r:,.0f} events/s")


if __name__ == "__main__":
    main()
