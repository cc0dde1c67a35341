"""What MACRM's agents run on (not part of the thesis's agents themselves): the users' client, the supervisor with
the replicated store (ZooKeeper + Akka supervision, thesis §3.1.1 and §3.2.1), the container runtime that starts and
kills processes, and the fault-injection helpers the tests and experiments use.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from megha.schedulers.common.messages import JobArrival
from megha.schedulers.macrm.cadence import Cadence, Chain
from megha.schedulers.macrm.jobmanager import JMContext, JobManager
from megha.schedulers.macrm.messages import (
    Accepted,
    Alive,
    JMExit,
    NodeCrash,
    Persist,
    Recover,
    Restart,
    Snapshot,
    SpawnJM,
    Submit,
    TaskCrash,
    Terminate,
)
from megha.schedulers.macrm.period import Period
from megha.sim.component import Component, Host


class Crashed(Component):
    """A dead process at an address: every message and timer is dropped."""

    crash_kind = None  # already dead

    def __init__(self, address: str, kind: str) -> None:
        super().__init__(address)
        self.kind = kind
        self.dropped = 0

    def on_message(self, msg: Any, now: float) -> None:
        self.dropped += 1

    def on_timer(self, key: Hashable, now: float) -> None:
        pass


class _SlotPort:
    """The port a job-manager process gets inside its slot: timers are tagged with the process's incarnation."""

    __slots__ = ("inc", "rng", "slot")

    def __init__(self, slot: JMSlot, inc: int) -> None:
        self.slot = slot
        self.inc = inc
        self.rng = slot.port.rng

    def send(self, dst: str, msg: Any) -> None:
        self.slot.port.send(dst, msg)

    def set_timer(self, delay: float, key: Hashable) -> int:
        return self.slot.port.set_timer(delay, (self.inc, key))

    def cancel_timer(self, handle: int) -> None:
        self.slot.port.cancel_timer(handle)

    def set_timer_at(self, at: float, key: Hashable) -> int:
        """Simulator only (fast-forward, cadence.py): a timer at an absolute time."""
        return self.slot.port.set_timer_at(at, (self.inc, key))

    def route(self, dst: str, name: str, cls: type) -> tuple | bool:
        """Simulator only: the slot's direct delivery route (``SimPort.route``) for a message the process sends
        (the process's messages leave from the slot); False without one."""
        route = getattr(self.slot.port, "route", None)
        return route(dst, name, cls) if route is not None else False


class JMSlot(Component):
    """The address of one job's job manager: hosts the current job-manager process (attempt), if any.

    Messages to a job whose job manager is not running are dropped (dead letters); a killed process's timers die
    with it. Starting a process here needs no change to the engine's component table.
    """

    kind = "macrm-jm"
    crash_kind = None  # fault schedules kill job managers as MACRM does ('jm', faults.py)

    def __init__(self, address: str) -> None:
        super().__init__(address)
        self.current: JobManager | None = None
        self.inc = 0
        self.dropped = 0

    def install(self, jm: JobManager | None, now: float) -> None:
        """Run ``jm`` here (None: the current process dies)."""
        self.inc += 1
        self.current = jm
        if jm is not None:
            jm.attach(_SlotPort(self, self.inc))
            jm.on_start(now)

    def on_message(self, msg: Any, now: float) -> None:
        if self.current is None:
            self.dropped += 1
        else:
            self.current.on_message(msg, now)

    def on_message_finished(self, tasks: list[int], now: float) -> None:
        """A :class:`~megha.schedulers.common.messages.Finished` message's tasks, delivered directly by the node
        managers in the simulator (``SimPort.route``): what :meth:`on_message` does with the message."""
        cur = self.current
        if cur is None:
            self.dropped += 1
        elif not cur.exited:  # cur.on_finished(tasks, now)
            cur._finished(tasks, now)

    def on_message_finished_one(self, task: int, now: float) -> None:
        """:meth:`on_message_finished` of one task's :class:`~megha.schedulers.common.messages.Finished` (the
        payload is the task id)."""
        cur = self.current
        if cur is None:
            self.dropped += 1
        elif not cur.exited:
            cur._finished_one(task, now)

    def on_timer(self, key: Hashable, now: float) -> None:
        inc, k = key
        if self.current is not None and inc == self.inc:
            self.current.on_timer(k, now)


class Client(Component):
    """The users' agent: submits each job to the arbitrator and resubmits until it is accepted."""

    kind = "macrm-client"

    def __init__(self, address: str, arbitrator: str, retry: float = 0.5) -> None:
        super().__init__(address)
        self.arbitrator = arbitrator
        self.retry = float(retry)
        self.pending: dict[int, JobArrival] = {}
        self._timer = False
        self.resubmissions = 0

    def on_message(self, msg: Any, now: float) -> None:
        if isinstance(msg, JobArrival):
            self.pending[msg.job] = msg
            self.port.send(self.arbitrator, Submit(msg))
            if not self._timer:
                self._timer = True
                self.port.set_timer(self.retry, ("retry",))
        elif isinstance(msg, Accepted):
            self.pending.pop(msg.job, None)
        else:
            super().on_message(msg, now)

    def on_timer(self, key: Hashable, now: float) -> None:
        self._timer = False
        if not self.pending:
            return
        for job in sorted(self.pending):
            self.resubmissions += 1
            self.port.send(self.arbitrator, Submit(self.pending[job]))
        self._timer = True
        self.port.set_timer(self.retry, ("retry",))


class Supervisor(Component):
    """Watches the arbitrator and the trackers (periodic :class:`Alive`), restarts a silent one, and keeps the
    arbitrator's persisted hard state (the ZooKeeper role)."""

    kind = "macrm-supervisor"
    crash_kind = None  # ZooKeeper is itself replicated: outside the thesis's failure model (faults.py)

    def __init__(
        self, address: str, runtime: str, watched: list[str], alive_timeout: float = 1.0, check_interval: float = 0.25
    ) -> None:
        super().__init__(address)
        if alive_timeout <= 0 or check_interval <= 0:
            raise ValueError(f"{address}: alive timeout and check interval must be > 0")
        self.runtime = runtime
        self.watched = list(watched)
        self.alive_timeout = float(alive_timeout)
        self.check_interval = float(check_interval)
        self.last: dict[str, float] = {}
        self.epoch = 0
        self.jobs: dict[int, list] = {}
        self.restarts: dict[str, int] = {}
        self.detection: list[float] = []  # seconds from last sign of life to restart
        self.cad = None  # fast-forward (cadence.py): alive signals are virtual, checks find nothing until faults
        self.check_chain: Chain | None = None

    def on_start(self, now: float) -> None:
        for a in self.watched:
            self.last[a] = now
        if self.cad is None or self.cad.eager:
            self.port.set_timer(self.check_interval, ("check",))
        else:
            self.check_chain = Chain(Period(self.check_interval), now + self.check_interval)

    def go_eager(self, now: float) -> None:
        """Fast-forward ends: the supervisor's liveness checks become a real timer again."""
        if self.check_chain is not None:
            self.port.set_timer_at(self.check_chain.close(now), ("check",))

    def settle(self, now: float) -> None:
        """Nothing to count: the supervisor's checks send no message."""
        pass

    def on_message(self, msg: Any, now: float) -> None:
        tp = type(msg)
        if tp is Alive:
            self.last[msg.address] = now
        elif tp is Persist:
            self._apply(msg.op, msg.args)
        elif tp is Recover:
            jobs = {j: list(r) for j, r in self.jobs.items()}
            self.port.send(msg.address, Snapshot({"epoch": self.epoch, "jobs": jobs}))
        else:
            super().on_message(msg, now)

    def _apply(self, op: str, args: tuple) -> None:
        if op == "epoch":
            self.epoch = int(args[0])
        elif op == "submit":
            job, spec = args
            self.jobs[job] = [spec, 0, "queued", "", -1, -1]
        elif op == "jm":
            job, attempt, jm, node, tracker = args
            r = self.jobs[job]
            r[1:] = [attempt, "running", jm, node, tracker]
        elif op == "requeue":
            job, attempt = args
            r = self.jobs[job]
            r[1] = attempt
            r[2] = "queued"
        elif op == "done":
            self.jobs.pop(args[0], None)
        else:
            raise ValueError(f"{self.address}: unknown store operation {op!r}")

    def on_timer(self, key: Hashable, now: float) -> None:
        for a in self.watched:
            if now - self.last[a] > self.alive_timeout:
                self.detection.append(now - self.last[a])
                self.restarts[a] = self.restarts.get(a, 0) + 1
                self.last[a] = now  # a full timeout for the new instance
                self.port.send(self.runtime, Restart(a))
        self.port.set_timer(self.check_interval, ("check",))


class Runtime(Component):
    """The container runtime: starts job-manager processes, kills processes, restarts agents.

    It is the one place that touches the engine (creating and replacing components), as an operating system or an
    actor system's supervisor would; the agents only send it messages.
    """

    kind = "macrm-runtime"
    crash_kind = None  # the machines' operating system: outside the thesis's failure model (faults.py)

    def __init__(
        self, address: str, engine: Host, jm_ctx: JMContext, factories: dict[str, Callable[[], Component]]
    ) -> None:
        super().__init__(address)
        self.engine = engine
        self.jm_ctx = jm_ctx
        self.factories = factories
        self.jms: list[JobManager] = []  # every job-manager process started (all attempts)
        self.killed = 0
        self.restarted = 0

    def on_message(self, msg: Any, now: float) -> None:
        tp = type(msg)
        if tp is SpawnJM:
            jm = JobManager(msg.address, self.jm_ctx, msg.job, msg.attempt, msg.node, msg.load, msg.central)
            self.jms.append(jm)
            self.engine.components[msg.address].install(jm, now)
        elif tp is Terminate:
            self.kill(msg.address)
        elif tp is Restart:
            self.restarted += 1
            self.swap(self.factories[msg.address]())
        else:
            super().on_message(msg, now)

    def swap(self, comp: Component) -> None:
        """Put a fresh process at ``comp.address``: messages in flight go to it, the old process's timers do not."""
        e = self.engine
        if comp.address not in e.components:
            e.add(comp)
            return
        marker = e.next_handle()  # every timer set from here on belongs to the new process
        e.replace(comp)
        for seq, target in e.pending_timers():
            if target is comp and seq < marker:
                e.cancel_timer(seq)

    def kill(self, address: str) -> bool:
        """Kill the process at ``address`` (a job manager's leaves its address empty, another agent becomes
        :class:`Crashed`); False if nothing was running there."""
        comp = self.engine.components.get(address)
        if isinstance(comp, JMSlot):
            if comp.current is None:
                return False
            self.killed += 1
            comp.install(None, self.engine.now)
            return True
        if comp is None or isinstance(comp, Crashed):
            return False
        self.killed += 1
        self.swap(Crashed(address, comp.kind))
        return True


class MacrmFaults:
    """Fault injection for ``simulate(cfg, actions=[(t, fn)])``: ``fn(engine, deployment, now)`` may call, via
    ``deployment.extras["macrm"]``, :meth:`kill_node`, :meth:`fail_task`, :meth:`kill_jm`, :meth:`kill_tracker` and
    :meth:`kill_arbitrator`."""

    def __init__(
        self,
        engine: Host,
        runtime: Runtime,
        groups: list[str],
        group_of: np.ndarray,
        trackers: list[str],
        arbitrator: str,
        cadence: Cadence | None = None,
    ) -> None:
        self.engine = engine
        self.cadence = cadence  # fast-forward: turned off before any fault (silence must be observable)
        self.runtime = runtime
        self.groups = groups
        self.group_of = group_of
        self.trackers = trackers
        self.arbitrator = arbitrator
        self.log: list[tuple[float, str, object]] = []

    def kill_node(self, nodes: int | list[int]) -> None:
        """Crash machines: their node managers, containers and job managers die."""
        self._eager()
        nodes = [nodes] if isinstance(nodes, int | np.integer) else list(nodes)
        now = self.engine.now
        by_group: dict[int, list[int]] = {}
        for n in nodes:
            by_group.setdefault(int(self.group_of[n]), []).append(int(n))
        for g, ns in by_group.items():
            self.engine.inject(now, self.groups[g], NodeCrash(ns))
        self.log.append((now, "node", nodes))

    def fail_task(self, tasks: int | list[int]) -> None:
        """The processes of running tasks fail now (their node managers report it)."""
        tasks = [tasks] if isinstance(tasks, int | np.integer) else list(tasks)
        now = self.engine.now
        for g in self.groups:
            self.engine.inject(now, g, TaskCrash([int(t) for t in tasks]))
        self.log.append((now, "task", tasks))

    def _eager(self) -> None:
        if self.cadence is not None:
            self.cadence.go_eager(self.engine.now)

    def live_jm(self, job: int) -> JobManager | None:
        """The job's current job manager process, if one is running."""
        best = None
        for jm in self.runtime.jms:
            live = jm.job == job and not jm.exited and self.engine.components[jm.address].current is jm
            if live and (best is None or jm.attempt > best.attempt):
                best = jm
        return best

    def kill_jm(self, job: int) -> bool:
        """The job manager's process dies (its container is released); False if none is running."""
        self._eager()
        jm = self.live_jm(job)
        if jm is None:
            return False
        self.runtime.kill(jm.address)
        self.engine.inject(self.engine.now, self.groups[jm.group], JMExit(jm.job, jm.attempt))
        self.log.append((self.engine.now, "jm", job))
        return True

    def kill_tracker(self, index: int = 0) -> None:
        """Resource tracker ``index`` dies now (the supervisor detects it and restarts it)."""
        self._eager()
        self.runtime.kill(self.trackers[index])
        self.log.append((self.engine.now, "tracker", index))

    def kill_arbitrator(self) -> None:
        """The resource arbitrator dies now (the supervisor restarts it from the replicated store)."""
        self._eager()
        self.runtime.kill(self.arbitrator)
        self.log.append((self.engine.now, "arbitrator", None))
