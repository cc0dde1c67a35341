"""Node heartbeat schedule shared by the YARN-like resource manager and its node managers.

Node ``i`` heartbeats at times ``phase[i] + k·period`` (phases spread uniformly at random over one period, as
nodes that registered at unrelated times do). With a *lag* the interval is ``period + lag``: a node manager times
its next heartbeat from the moment it sent (or got the answer to) the previous one, so heartbeats drift against
the clock and the node that heartbeats first after a given instant of the clock rotates through the cluster (with
1 s heartbeats and a 1 ms lag, once every 1,001 s). Without it, arrivals on whole seconds (as in the traces) meet
the same node first every time. Heartbeats that carry nothing new — no finished container, and
nothing queued at the RM that the node could take — have no effect, so they are not simulated: node managers
send a heartbeat only at the first tick after a container finished, and the RM acts at a free node's next tick
when it has a task for it (the RM tells node managers their heartbeat interval, so it knows the schedule).
"""

from __future__ import annotations

import numpy as np

HEARTBEAT_LAG = 0.001
"""Seconds a node manager's heartbeat interval exceeds its period (``scan=rotate``)."""


class HeartbeatSchedule:
    """Phases of the nodes' periodic heartbeats and the next tick of any node."""

    def __init__(self, phases: np.ndarray, period: float) -> None:
        if period <= 0:
            raise ValueError(f"heartbeat period must be > 0, got {period}")
        self.period = float(period)
        self.phases = np.asarray(phases, dtype=np.float64)
        self.order = np.argsort(self.phases, kind="stable")  # nodes by phase
        self.sorted_phases = self.phases[self.order]
        self._ph = self.phases.tolist()

    @classmethod
    def random(cls, n_nodes: int, period: float, rng: np.random.Generator, lag: float = 0.0) -> HeartbeatSchedule:
        """Phases uniformly at random over one period; heartbeats every ``period + lag`` seconds."""
        if lag < 0:
            raise ValueError(f"heartbeat lag must be >= 0, got {lag}")
        return cls(rng.random(n_nodes) * period, period + lag)

    def next_tick(self, node: int, now: float) -> float:
        """The first heartbeat time of ``node`` at or after ``now``."""
        return now + (self._ph[node] - now) % self.period

    def rotation(self, now: float) -> int:
        """Position (in phase order) of the first node whose next tick is the soonest after ``now``."""
        return int(np.searchsorted(self.sorted_phases, now % self.period, side="left"))


def first_set_from(words: np.ndarray, start: int) -> int:
    """Index of the first set bit at or after ``start``, wrapping around to the beginning; -1 if none."""
    nz = np.flatnonzero(words)
    if nz.size == 0:
        return -1
    wi = start >> 6
    k = int(nz.searchsorted(wi))
    if k < nz.size:
        j = int(nz[k])
        w = int(words[j])
        if j == wi:
            off = start & 63
            hi = (w >> off) << off
            if hi:
                return j * 64 + ((hi & -hi).bit_length() - 1)
            if k + 1 < nz.size:
                j = int(nz[k + 1])
                w = int(words[j])
                return j * 64 + ((w & -w).bit_length() - 1)
        else:
            return j * 64 + ((w & -w).bit_length() - 1)
    j = int(nz[0])  # wrap around (may be the low bits of the start word)
    w = int(words[j])
    return j * 64 + ((w & -w).bit_length() - 1)
