"""PigeonC and Pigeon under faults, for fault schedules (``megha simulate --faults``).

Neither the PigeonC paper (IoT 2023, seed 004) nor the authors' simulator models failures; the Pigeon paper (SoCC
2019) is not among the seeds. What follows is the established practice of two-level schedulers whose masters own
their workers (YARN's RM and node managers, Hydra's sub-cluster RMs), applied to Pigeon's roles:

* ``worker`` — workers die. The master of a dead worker is its only scheduler and runs it, so it knows at once: the
  task that was running there is lost (the run is recorded as lost, the work thrown away) and goes back to the
  *head* of its class's queue (short/high or long/low priority), so it is the next task of its class that a
  suitable worker of the group takes — at once if one is free. A dead worker takes nothing until it comes back,
  idle. A task (lost or queued) that no live worker of its master's group can run any more is handed back to its
  distributor, which sends it to another master (a task never waits for a worker that may not come back when
  another group can run it); with no live suitable worker anywhere, the distributor holds it until workers come
  back (:class:`~megha.schedulers.pigeon.messages.GroupBack`) — or the runner reports it stranded when they never do.
* ``partition`` — every worker of one master's group dies at once (target: the master's index).
* ``master`` — the master crashes and restarts from its log after ``down_for`` (0: at once) with its queues; the
  messages that reach it meanwhile wait for it (the runner's crash model), and the tasks on its workers keep
  running (their completions wait too). The distributors learn of the crash at once (a membership service; no
  detection delay is modelled) and route new tasks to the masters that are up with live suitable workers, so
  only the tasks already sent to the crashed master wait for it; a task that only the crashed master's group can
  run still goes there and waits.

While any worker or master is down, the distributors choose masters by the same rule as always (PigeonC: weighted
by suitable workers; Pigeon: the even spread) over the *live* suitable workers of the masters that are up (exact
counts, also with ``weights=reference``); with no fault down the choice is the usual one, draw for draw. Worker
faults need the simulator's in-process workers (the default; not with a per-message processing model); master
crashes work either way.
"""

from __future__ import annotations

import numpy as np

from megha.model.workload import Workload
from megha.schedulers.pigeon.distributor import MasterWeights, PigeonDistributor
from megha.schedulers.pigeon.master import PigeonMaster
from megha.schedulers.pigeon.simmaster import SimPigeonMaster
from megha.sim.component import Host

KINDS = {
    "worker": "the worker dies: its running task goes back to the head of its master's queue (same class), or to "
    "its distributor for another master when no live worker of the group can run it; the work done is lost",
    "partition": "every worker of one master's group dies (target: the master's index)",
    "master": "the master is down for down_for seconds (what reaches it waits; it restarts from its log); the "
    "distributors route new tasks to the other masters meanwhile",
}


class Health:
    """What the distributors know of failures: which masters are up and which workers are alive."""

    def __init__(self, weights: MasterWeights, n_workers: int) -> None:
        self.weights = weights
        self.alive = np.ones(n_workers, dtype=bool)
        self.master_up = np.ones(weights.n_masters, dtype=bool)
        self.degraded = False  # a worker or a master is down: the distributors use the live counts
        self._alive_vec: np.ndarray | None = None

    def changed(self) -> None:
        """Recompute after a failure or recovery whether anything is down (``degraded``) and, if so, the packed vector
        of live workers the distributors choose masters by."""
        self.degraded = not (self.alive.all() and self.master_up.all())
        self._alive_vec = self.weights.index.pack_workers(self.alive) if self.degraded else None

    def live_counts(self, mask: int) -> np.ndarray:
        """Live workers of each master's group that satisfy ``mask`` (whether the master is up or not)."""
        idx = self.weights.index
        live = idx.valid if self._alive_vec is None else self._alive_vec
        bits = np.bitwise_count(idx.static_vector(mask) & live)
        if idx.uniform_words:
            return bits.reshape(idx.n_segments, idx.uniform_words).sum(axis=1, dtype=np.int64)
        return np.add.reduceat(bits.astype(np.int64), idx.seg_word_start[:-1])


class PigeonFaults:
    """The :class:`~megha.model.faults.FaultHandler` of a PigeonC/Pigeon deployment."""

    def __init__(
        self,
        engine: Host,
        distributors: list[PigeonDistributor],
        masters: list[PigeonMaster],
        group_of: np.ndarray,
        weights: MasterWeights,
        workload: Workload,
        cutoff: float,
    ) -> None:
        self.engine = engine
        self.masters = masters
        self.group_of = np.asarray(group_of, dtype=np.int64)
        self.workload = workload
        self.cutoff = float(cutoff)
        self.health = Health(weights, self.group_of.size)
        for d in distributors:
            d.health = self.health
        self.in_process = all(isinstance(m, SimPigeonMaster) for m in masters)
        self.kinds = dict(KINDS) if self.in_process else {"master": KINDS["master"]}

    def population(self, kind: str) -> int:
        """How many targets of ``kind`` the deployment has: workers, or masters (``partition`` and ``master``: one per
        worker group)."""
        return {"worker": int(self.group_of.size), "partition": len(self.masters), "master": len(self.masters)}[kind]

    def _by_master(self, kind: str, targets: tuple[int, ...]) -> dict[int, list[int]]:
        if kind == "partition":
            return {g: np.flatnonzero(self.group_of == g).tolist() for g in targets}
        out: dict[int, list[int]] = {}
        for w in targets:
            out.setdefault(int(self.group_of[w]), []).append(int(w))
        return out

    def workers(self, kind: str, targets: tuple[int, ...]) -> list[int]:
        """The workers a fault of ``kind`` on ``targets`` takes down (a whole group for ``partition``; none for a master
        crash)."""
        if kind == "master":
            return []
        return [w for ws in self._by_master(kind, targets).values() for w in ws]

    def task_info(self, t: int) -> tuple[float, int, bool]:
        """A task's (duration, constraint mask, short): what its master knows of the tasks it launched."""
        w = self.workload
        return float(w.task_duration[t]), int(w.masks[t]), bool(w.job_mean_duration[w.task_job[t]] < self.cutoff)

    def fail(self, kind: str, targets: tuple[int, ...], now: float) -> None:
        """Targets fail at ``now``: a crashed master is suspended and the distributors route around it; dead workers are
        marked for the distributors, and their masters requeue the lost tasks (at the head) or hand back those no live
        worker of the group can run."""
        h = self.health
        if kind == "master":
            for g in targets:
                self.engine.suspend(self.masters[g].address)
                h.master_up[g] = False
            h.changed()
            return
        groups = self._by_master(kind, targets)
        for ws in groups.values():
            h.alive[ws] = False
        h.changed()
        for g, ws in groups.items():
            self.masters[g].fail_workers(ws, now, self.task_info)

    def restore(self, kind: str, targets: tuple[int, ...], now: float) -> None:
        """Targets come back at ``now``: a master resumes with its queues; workers come back idle and the distributors
        learn their groups can run more."""
        h = self.health
        if kind == "master":
            for g in targets:
                self.engine.resume(self.masters[g].address)
                h.master_up[g] = True
            h.changed()
            return
        groups = self._by_master(kind, targets)
        for ws in groups.values():
            h.alive[ws] = True
        h.changed()
        for g, ws in groups.items():
            self.masters[g].restore_workers(ws, now, g)
