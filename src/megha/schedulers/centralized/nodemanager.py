"""Node managers of the YARN-like deployment: run containers, report finished ones at the next heartbeat tick.

One component hosts the node managers of all nodes. It runs the containers the RM launches (checking that the
RM never over-commits a node: one container per node in slot mode, demands within capacity in resource mode,
else the :class:`~megha.schedulers.common.ledger.WorkerLedger`'s :class:`~megha.errors.SimulationError`) and
reports each finished container to the RM at its node's first heartbeat tick after the container ended. Heartbeats
of nodes with nothing to report are not simulated (see :mod:`megha.schedulers.centralized.heartbeats`). A
container's end is recorded at its true end time.

Node failures (fault schedules, :mod:`megha.schedulers.centralized.faults`): :meth:`NodeManagers.fail_nodes` kills
a node's containers (their runs are recorded lost; a container that ended but whose heartbeat was not sent yet is
lost too: the RM never learned it finished); launches that reach a dead node are refused and reported
(:class:`~megha.schedulers.centralized.messages.LaunchFailed`). A node that comes back registers, empty, with the
RM (:meth:`NodeManagers.restore_nodes`) and refuses launches until the RM accepted the registration: launches the
RM allocated against the node's previous incarnation, still on their way, are refused as YARN refuses containers
allocated to a node's earlier instance. After an RM restart the node managers re-register with their running
containers (:class:`~megha.schedulers.centralized.messages.Resync`).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from megha.metrics.recorder import TaskRecorder
from megha.schedulers.centralized.heartbeats import HeartbeatSchedule
from megha.schedulers.centralized.messages import (
    LaunchFailed,
    NodeHeartbeat,
    NodesAccepted,
    NodesLost,
    NodesRegistered,
    Resync,
)
from megha.schedulers.common.ledger import WorkerLedger
from megha.schedulers.common.messages import Launch
from megha.sim.component import Component


class NodeManagers(Component):
    """All node managers of the cluster (one component)."""

    kind = "nodemanager"
    crash_kind = None  # the workers fail one by one (a family's worker faults), not as one component

    def __init__(
        self,
        address: str,
        rm: str,
        schedule: HeartbeatSchedule,
        n_nodes: int,
        recorder: TaskRecorder,
        capacity: np.ndarray | None = None,
    ) -> None:
        super().__init__(address)
        self.rm = rm
        self.schedule = schedule
        self.rec = recorder
        #: what each node holds (slot mode: its container; resource mode: its used vector), the dead nodes and the
        #: over-commit check; on_node / used / capacity / dead are the ledger's own objects
        self.ledger = WorkerLedger(address, n_nodes, capacity)
        self.capacity = self.ledger.capacity
        self.used = self.ledger.used
        self.on_node: list[int] | None = self.ledger.task  # slot mode: container running on each node
        self._due: dict[float, list] = {}  # tick -> [(task, node, end, demand)]
        self.heartbeats = 0
        self.running = 0
        self.n_nodes = int(n_nodes)
        # faults: each node's state version (2·incarnation + 1 up, 2·incarnation dead), dead nodes, nodes back up
        # whose registration the RM has not accepted yet
        self.ver: list[int] | None = None
        self.dead: set[int] = self.ledger.dead
        self.gated: set[int] = set()
        self.refused = 0

    def on_message(self, msg: Any, now: float) -> None:
        if not isinstance(msg, Launch):
            if isinstance(msg, NodesAccepted):
                ver = self.ver
                for w, v in zip(msg.nodes, msg.incs, strict=True):
                    if ver[w] == v:
                        self.gated.discard(w)
            elif isinstance(msg, Resync):
                self._resync(msg)
            else:
                super().on_message(msg, now)
            return
        tasks = msg.tasks if isinstance(msg.tasks, list) else msg.tasks.tolist()
        nodes = msg.workers if isinstance(msg.workers, list) else msg.workers.tolist()
        durations = msg.durations if isinstance(msg.durations, list) else msg.durations.tolist()
        if self.dead or self.gated:
            msg, tasks, nodes, durations = self._refuse(msg, tasks, nodes, durations)
            if not tasks:
                return
        self.ledger.claim(tasks, nodes, now, msg.demands)
        self.rec.started(tasks, now, nodes)
        self.running += len(tasks)
        due = self._due
        next_tick = self.schedule.next_tick
        dem = msg.demands
        for i, (t, w, d) in enumerate(zip(tasks, nodes, durations, strict=True)):
            e = now + d
            tick = next_tick(w, e)
            lst = due.get(tick)
            item = (t, w, e, None if dem is None else dem[i])
            if lst is None:
                due[tick] = [item]
                self.port.set_timer(tick - now, tick)
            else:
                lst.append(item)

    def on_timer(self, key: Hashable, now: float) -> None:
        items = self._due.pop(key)
        if not items:  # every container due at this tick died with its node
            return
        self.running -= len(items)
        if len(items) == 1:
            t, w, e, d = items[0]
            self._release(w, d)
            self.rec.finished([t], e)
            self.heartbeats += 1
            self.port.send(self.rm, NodeHeartbeat([w], [t], [w], None if d is None else d[None, :]))
            return
        items.sort(key=lambda x: x[2])
        for _, w, _, d in items:
            self._release(w, d)
        tasks = np.array([x[0] for x in items], dtype=np.int64)
        t_nodes = np.array([x[1] for x in items], dtype=np.int64)
        ends = [x[2] for x in items]
        lo = 0
        for i in range(1, len(items) + 1):  # record ends at their true times
            if i == len(items) or ends[i] != ends[lo]:
                self.rec.finished(tasks[lo:i], ends[lo])
                lo = i
        uniq = np.unique(t_nodes)
        self.heartbeats += int(uniq.size)
        dems = None if items[0][3] is None else np.array([x[3] for x in items])
        self.port.send(self.rm, NodeHeartbeat(uniq, tasks, t_nodes, dems))

    def _release(self, w: int, d: np.ndarray | None) -> None:
        if self.used is None:
            self.on_node[w] = -1
        else:
            self.used[w] -= d

    # --- node failures (fault schedules; see megha.schedulers.centralized.faults) ---------------------------------
    def _versions(self) -> list[int]:
        if self.ver is None:
            self.ver = [1] * self.n_nodes
        return self.ver

    def fail_nodes(self, nodes: list[int], now: float) -> NodesLost:
        """Nodes die at ``now``: their containers are lost (recorded as lost runs). Returns what the RM's liveness
        monitor reports."""
        ver = self._versions()
        dead = self.ledger.fail(nodes)
        gone = set(dead)
        for w in dead:
            ver[w] += 1
            self.gated.discard(w)
        lost = []
        for tick, items in self._due.items():
            if any(x[1] in gone for x in items):
                keep = []
                for x in items:
                    if x[1] in gone:
                        self._release(x[1], x[3])
                        lost.append((x[0], x[1], x[3]))
                    else:
                        keep.append(x)
                self._due[tick] = keep
        if lost:
            self.running -= len(lost)
            self.rec.lost([x[0] for x in lost], now)
        return NodesLost(dead, [ver[w] for w in dead], lost)

    def restore_nodes(self, nodes: list[int], now: float) -> None:
        """Dead nodes come back empty and register with the RM; they take launches once it accepted them."""
        ver = self._versions()
        back = self.ledger.restore(nodes)
        for w in back:
            ver[w] += 1
            self.gated.add(w)
        if back:
            self.port.send(self.rm, NodesRegistered(back, [ver[w] for w in back], [], []))

    def _refuse(self, msg: Launch, tasks: list, nodes: list, durations: list) -> tuple:
        """Launches to a dead node, or to one whose registration the RM has not accepted, do not start: reported."""
        bad = self.dead | self.gated
        keep = [i for i, w in enumerate(nodes) if w not in bad]
        if len(keep) == len(nodes):
            return msg, tasks, nodes, durations
        drop = [i for i, w in enumerate(nodes) if w in bad]
        dem = msg.demands
        self.refused += len(drop)
        self.port.send(
            self.rm,
            LaunchFailed(
                [tasks[i] for i in drop], [nodes[i] for i in drop], None if dem is None else [dem[i] for i in drop]
            ),
        )
        kd = None if dem is None else np.asarray(dem)[keep]
        msg = Launch([tasks[i] for i in keep], [nodes[i] for i in keep], [durations[i] for i in keep], msg.reply_to, kd)
        return msg, msg.tasks, msg.workers, msg.durations

    def _resync(self, msg: Resync) -> None:
        """The RM restarted: re-register every node (state version) with the containers running on it."""
        ver = list(self._versions())
        items = [x for lst in self._due.values() for x in lst]
        dems = (
            None if self.used is None else np.array([x[3] for x in items]).reshape(len(items), self.capacity.shape[1])
        )
        self.port.send(
            self.rm,
            NodesRegistered(
                list(range(self.n_nodes)), ver, [x[0] for x in items], [x[1] for x in items], dems, msg.epoch
            ),
        )
