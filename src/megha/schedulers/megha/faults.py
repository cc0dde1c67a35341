"""Megha under faults (Megha 2020 §IV-D, "High Availability"), for fault schedules (``megha simulate --faults``).

* ``worker`` — workers die: each LM relaunches the tasks of its failed workers by handing them back to the GM that
  placed them, which puts them at the head of its queue and places them again on any worker their constraints
  allow (the paper: "the LM must relaunch all tasks previously running on the worker with the help of its active
  task list"); the LM marks the dead workers used until they come back, so every GM learns of the loss from the
  next update. The work done by the lost runs is thrown away.
* ``partition`` — every worker of one LM's cluster dies at once (target: the LM's index).
* ``gm`` — a GM crashes and restarts *stateless* after ``down_for`` (0: at once): its view is rebuilt from full
  LM snapshots before it places anything; the work handed to it (queued tasks, requests in flight) survives, as a
  client would resubmit it. Messages that reached it while it was down wait for the new GM.
* ``lm`` — the runner's generic crash: the LM's standby takes over ``down_for`` seconds later (the failover
  timeout) with the replicated state (both receive every update, paper §IV-D); tasks on its workers keep running
  and their completions wait for the standby.

Worker faults need the simulator's in-process LM workers (the default; not with a per-message processing model).
"""

from __future__ import annotations

from megha.errors import InputError
from megha.model.workload import Workload
from megha.schedulers.megha.gm import GlobalMaster
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.simlm import SimLocalMaster
from megha.sim.component import Host

KINDS = {
    "worker": "the worker dies: its LM hands its tasks back to their GMs (re-placed first, same constraints); "
    "the work done is lost; the worker takes no task until it comes back",
    "partition": "every worker of one LM's cluster dies (target: the LM's index)",
    "gm": "the GM restarts stateless after down_for: its view rebuilt from LM snapshots, its queue kept",
}


class MeghaFaults:
    """The :class:`~megha.model.faults.FaultHandler` of a Megha deployment."""

    def __init__(
        self, engine: Host, layout: MeghaLayout, gms: list[GlobalMaster], lms: list, workload: Workload
    ) -> None:
        self.engine = engine
        self.workload = workload
        self.layout = layout
        self.gms = gms
        self.lms = lms
        self.in_process = all(isinstance(lm, SimLocalMaster) for lm in lms)
        self.kinds = dict(KINDS) if self.in_process else {"gm": KINDS["gm"]}

    def population(self, kind: str) -> int:
        """How many targets of ``kind`` the deployment has: workers, partitions (LM clusters) or GMs."""
        return {"worker": self.layout.n_workers, "partition": self.layout.n_lms, "gm": len(self.gms)}[kind]

    def _workers(self, kind: str, targets: tuple[int, ...]) -> dict[int, list[int]]:
        """The failed workers, by LM."""
        lay = self.layout
        if kind == "partition":
            return {lm: list(range(int(lay.lm_lo[lm]), int(lay.lm_hi[lm]))) for lm in targets}
        out: dict[int, list[int]] = {}
        for w in targets:
            lm = int(lay.lm_of[w])
            out.setdefault(lm, []).append(w)
        return out

    def workers(self, kind: str, targets: tuple[int, ...]) -> list[int]:
        """The workers a fault of ``kind`` on ``targets`` takes down (a GM crash takes none)."""
        if kind not in ("worker", "partition"):
            return []  # a GM crash takes no worker down
        return [w for ws in self._workers(kind, targets).values() for w in ws]

    def fail(self, kind: str, targets: tuple[int, ...], now: float) -> None:
        """Targets fail at ``now``: a GM is suspended; the LMs of failed workers relaunch their tasks through the GMs
        that placed them (in-process LM workers only)."""
        if kind == "gm":
            for g in targets:
                self.engine.suspend(self.gms[g].address)
            return
        if not self.in_process:
            raise InputError("Megha's worker faults need in-process LM workers (no per-message processing model)")
        w = self.workload

        def task_info(t: int) -> tuple[float, int]:
            return float(w.task_duration[t]), int(w.masks[t])

        for lm, ws in self._workers(kind, targets).items():
            self.lms[lm].fail_workers(ws, now, task_info)

    def restore(self, kind: str, targets: tuple[int, ...], now: float) -> None:
        """Targets come back at ``now``: a GM restarts as a successor that rebuilds its view from the LMs (its counters
        kept, ``restarts`` + 1); workers are usable again."""
        if kind == "gm":
            for g in targets:
                old = self.gms[g]
                self.engine.resume(old.address)
                new = old.successor()
                new.counters.update(old.counters)
                new.counters["restarts"] += 1
                self.gms[g] = self.engine.replace(new)
            return
        for lm, ws in self._workers(kind, targets).items():
            self.lms[lm].restore_workers(ws, now)
