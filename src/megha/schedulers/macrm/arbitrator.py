"""The MACRM resource arbitrator (thesis §3.2.2, Fig. 3.9): one component made of the arbitrator's actors.

* **User-interface actor** (:mod:`.admission`): admission, job-manager containers, failures, recovery.
* **Queue-actor** (:mod:`.queue`): the central queue (FIFO or fair share), served on forwarded heartbeats in
  distributed mode; job-manager containers may instead be placed by sampling (:mod:`.jmsampling`).
* **Rack-actor** (here and :class:`~megha.schedulers.macrm.view.FreeView`): the view of free resources fed by
  forwarded heartbeats (event-driven in centralized mode).
* **Scheduler actors** (:mod:`.actors`): parallel matching with optimistic, atomic commits in centralized mode and
  for gang requests.
* **Mode** (cluster-manager-actor, here): the load from the trackers' statistics drives the switch to centralized
  allocation at ``switch_load`` (free < 10 %) and back below ``switch_load − hysteresis``
  (:class:`~megha.schedulers.macrm.policy.ModeSwitch`); job managers and node managers are told.

The actors share the arbitrator's state and run one message at a time (the thesis's actors exchange messages inside
one process; their order of work within an event is the order of the calls here). Allocations committed during an
event leave at its end (:meth:`ResourceArbitrator._flush`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

import numpy as np
from sortedcontainers import SortedDict

from megha.metrics.recorder import TaskRecorder
from megha.schedulers.macrm.actors import SchedulerActors
from megha.schedulers.macrm.admission import AdmissionActor, JobRec
from megha.schedulers.macrm.cadence import Chain, eager_alive
from megha.schedulers.macrm.jmsampling import JMSampling
from megha.schedulers.macrm.messages import (
    Alive,
    Allocate,
    AllocRejected,
    Containers,
    ExpectJM,
    ForwardedHeartbeat,
    Forwarding,
    HeartbeatReply,
    JobDone,
    LoadInfo,
    ModeChange,
    Placed,
    Recover,
    Report,
    SampleReply,
    Snapshot,
    Submit,
    TaskRequest,
    TrackerStats,
    TrackerUp,
    concat_containers,
    empty_containers,
)
from megha.schedulers.macrm.multicast import Multicast, send_all
from megha.schedulers.macrm.period import Period
from megha.schedulers.macrm.policy import ROUND_ENDS, ModeSwitch, cluster_load
from megha.schedulers.macrm.queue import Item, QueueActor
from megha.schedulers.macrm.view import FreeView
from megha.sim.component import Component

__all__ = ["Item", "JobRec", "ResourceArbitrator"]


class ResourceArbitrator(AdmissionActor, QueueActor, SchedulerActors, JMSampling, Component):
    """The central authority: admission, job-manager containers, central queue, view, scheduler actors, mode."""

    kind = "macrm-arbitrator"
    crash_kind = None  # fault schedules kill the arbitrator as MACRM does ('arbitrator', faults.py)

    def __init__(
        self,
        address: str,
        recorder: TaskRecorder,
        n_nodes: int,
        worker_masks: np.ndarray,
        group_of_node: np.ndarray,
        groups: list[str],
        trackers: list[str],
        supervisor: str,
        client: str,
        jm_demand: np.ndarray,
        physical_total: np.ndarray,
        jm_prefix: str = "macrm/jm",
        queue: str = "fifo",
        actors: int = 4,
        match_cost: float = 1e-4,
        match_cost_per_task: float = 1e-6,
        switch: ModeSwitch | None = None,
        load_metric: str = "max",
        alive_interval: float = 0.25,
        restarted: bool = False,
        jm_limit: np.ndarray | None = None,
        capacity: np.ndarray | None = None,
        jm_placement: str = "heartbeat",
        jm_samples: int = 2,
        sampling_timeout: float = 0.005,
        round_end: str = "all",
    ) -> None:
        super().__init__(address)
        if queue not in ("fifo", "fair"):
            raise ValueError(f"{address}: queue must be 'fifo' or 'fair', got {queue!r}")
        if actors < 1:
            raise ValueError(f"{address}: need at least one scheduler actor, got {actors}")
        if jm_placement not in ("heartbeat", "sampling"):
            raise ValueError(f"{address}: jm_placement must be 'heartbeat' or 'sampling', got {jm_placement!r}")
        if round_end not in ROUND_ENDS:
            raise ValueError(f"{address}: round_end must be one of {ROUND_ENDS}, got {round_end!r}")
        self.rec = recorder
        self.n = int(n_nodes)
        self.worker_masks = np.asarray(worker_masks, dtype=np.uint32)
        self.group_of = np.asarray(group_of_node, dtype=np.int64)
        self.groups = list(groups)
        self.trackers = list(trackers)
        self.supervisor = supervisor
        self.client = client
        self.jm_demand = np.asarray(jm_demand, dtype=np.float64)
        self.n_res = int(self.jm_demand.size)
        self.phys_total = np.asarray(physical_total, dtype=np.float64)
        self.jm_prefix = jm_prefix
        self.policy = queue
        self.match_cost = float(match_cost)
        self.match_cost_per_task = float(match_cost_per_task)
        self.switch = switch if switch is not None else ModeSwitch()
        self.load_metric = load_metric
        self.alive_interval = float(alive_interval)
        self.restarted = restarted
        self.jm_limit = None if jm_limit is None else np.asarray(jm_limit, dtype=np.float64)
        self.jm_used = np.zeros(self.n_res)
        self.capacity = None if capacity is None else np.asarray(capacity, dtype=np.float64)
        self.view = FreeView(self.n, self.n_res)
        self.jobs: dict[int, JobRec] = {}
        self.queues: dict[int, SortedDict] = {}
        self.n_queued = 0
        self._seq = 0
        self._front = 0
        self.idle = list(range(actors))[::-1]
        self.busy: dict[int, tuple[Item, np.ndarray]] = {}
        self.tstats: dict[int, TrackerStats] = {}
        self.load = 0.0
        self.user_extra: dict[int, np.ndarray] = {}
        self.epoch = 0
        self.recovering = restarted
        self._buffer: list = []
        self._out: dict[int, list[Containers]] = {}  # group -> containers committed in this event
        self._placed: dict[tuple[str, int], tuple[list, list]] = {}
        self.stats = {
            "jobs_admitted": 0,
            "jm_containers": 0,
            "jm_restarts": 0,
            "heartbeat_allocations": 0,
            "actor_matches": 0,
            "actor_match_failures": 0,
            "actor_commits": 0,
            "commit_conflicts": 0,
            "conflict_retries": 0,
            "gang_conflicts": 0,
            "gang_infeasible": 0,
            "allocations_rejected_by_nodes": 0,
            "task_requests": 0,
            "duplicate_requests_dropped": 0,
            "tasks_stranded": 0,
            "tasks_requested": 0,
            "nodes_lost": 0,
            "mode_switches": 0,
            "time_central_ms": 0,
            "recoveries": 0,
            "max_queue": 0,
        }
        self._central_since: float | None = None
        self.cad = None  # fast-forward of periodic messages (cadence.py)
        self.multicast: Multicast | None = None  # one event for Forwarding to every tracker (multicast.py)
        self.last_switch = -math.inf  # when the mode last changed
        self.alive_chain: Chain | None = None
        self._retry_armed = False
        self.retry_interval = 1.0
        self._forwarding: bool | None = True  # trackers forward free nodes' heartbeats (their default)
        self._dirty = False  # new work for the scheduler actors may exist: dispatch at the end of the event
        # job-manager containers placed by random sampling (the thesis's Sparrow) instead of on heartbeats
        self.sample_jms = jm_placement == "sampling"
        self.jm_samples = int(jm_samples)
        self.sampling_timeout = float(sampling_timeout)
        self.round_end = round_end
        self._jm_scan = False
        self._jm_sampling: dict[tuple, dict] = {}
        self._jm_token = 0
        self.stats.update({"jm_samplings": 0, "jm_sampling_failures": 0})

    @property
    def central(self) -> bool:
        """Whether the arbitrator allocates in centralized mode (the mode switch, thesis §3.1.5)."""
        return self.switch.central

    def on_start(self, now: float) -> None:
        if self.cad is None or self.cad.eager:
            self.port.set_timer(self.alive_interval, ("alive",))
        else:  # fast-forward: virtual alive signals (cadence.py)
            self.alive_chain = Chain(Period(self.alive_interval), now + self.alive_interval)
        if self.recovering:
            self.port.send(self.supervisor, Recover(self.address))
        else:
            self._persist("epoch", self.epoch)

    def on_message(self, msg: Any, now: float) -> None:
        tp = type(msg)
        if self.recovering:
            if tp is Snapshot:
                self._recover(msg.state, now)
                buf, self._buffer = self._buffer, []
                for m in buf:
                    self.on_message(m, now)
            else:
                self._buffer.append(msg)
            return
        if tp is ForwardedHeartbeat:
            self._heartbeat(msg, now)
        elif tp is TrackerStats:
            self._tracker_stats(msg, now)
        elif tp is TaskRequest:
            self._task_request(msg, now)
        elif tp is Submit:
            self._submit(msg.job, now)
        elif tp is AllocRejected:
            self._alloc_rejected(msg, now)
        elif tp is SampleReply:
            self._jm_reply(msg, now)
        elif tp is JobDone:
            self._job_done(msg, now)
        elif tp is Report:
            self._report(msg, now)
        elif tp is TrackerUp:
            jms = [
                (r.jm, j, r.attempt) for j, r in self.jobs.items() if r.status == "running" and r.tracker == msg.tracker
            ]
            self.port.send(self.trackers[msg.tracker], ExpectJM(jms))
            self.port.send(self.trackers[msg.tracker], Forwarding(self._forwarding))
        else:
            super().on_message(msg, now)
        self._flush(now)

    def on_timer(self, key: Hashable, now: float) -> None:
        kind = key[0]
        if kind == "commit":
            if not self.recovering:
                self._commit(key[1], now)
                self._flush(now)
        elif kind == "retry":
            self._retry_armed = False
            if not self.recovering:
                for q in self.queues.values():
                    for it in q.values():
                        it.blocked = False
                        self._check_gang(it)
                self._dispatch(now)
                self._flush(now)
        elif kind == "alive":
            self.port.send(self.supervisor, Alive(self.address))
            self.port.set_timer(self.alive_interval, ("alive",))
        elif kind == "jmsample" and not self.recovering and key[1] in self._jm_sampling:
            self._jm_decide(key[1], now)
            self._flush(now)

    def _heartbeat(self, msg: ForwardedHeartbeat, now: float) -> None:
        grew = self.view.heartbeat(msg.nodes, msg.free, msg.acks)
        parts: list[Containers] = []
        if not self.central and self.n_queued:
            for node in msg.nodes:
                c = self._serve_node(node, now)
                if c is not None:
                    parts.append(c)
        containers = concat_containers(parts, self.n_res) if parts else None
        if containers is not None:
            self.stats["heartbeat_allocations"] += len(containers)
        self.port.send(msg.group, HeartbeatReply(msg.nodes, containers))
        if grew:
            self._unblock(grew)
            if self.n_queued and self.idle:
                self._dispatch(now)

    def _allocate(self, rows: list[tuple[Item, int]], nodes: list[int], now: float) -> Containers:
        """Book containers in the view and build them; JM containers become running job managers."""
        c = empty_containers(self.n_res)
        dem = np.empty((len(rows), self.n_res))
        decided: list[int] = []
        for r, ((it, k), node) in enumerate(zip(rows, nodes, strict=True)):
            d = it.demands[k]
            seq = self.view.assign(node, d)
            dem[r] = d
            t = it.tasks[k]
            c.nodes.append(node)
            c.tasks.append(t)
            c.jobs.append(it.job)
            c.attempts.append(it.attempt)
            c.users.append(it.user)
            c.durations.append(it.durations[k])
            c.owners.append(it.owner)
            c.seqs.append(seq)
            ex = self.user_extra.get(it.user)
            self.user_extra[it.user] = d.copy() if ex is None else ex + d
            if t < 0:
                self.jm_used += d
                rec = self.jobs[it.job]
                rec.status = "running"
                rec.jm = it.owner
                rec.node = node
                rec.tracker = int(self.group_of[node])
                self._persist("jm", it.job, it.attempt, it.owner, node, rec.tracker)
                self.port.send(self.trackers[rec.tracker], ExpectJM([(it.owner, it.job, it.attempt)]))
                self.stats["jm_containers"] += 1
                c.specs.append((it.spec, self.load, self.central))
            else:
                c.specs.append(None)
                decided.append(t)
                p = self._placed.get((it.owner, it.attempt))
                if p is None:
                    p = self._placed[(it.owner, it.attempt)] = ([], [])
                p[0].append(t)
                p[1].append(node)
        c.demands = dem
        if decided:
            self.rec.decided(decided, now)
        return c

    def _flush(self, now: float) -> None:
        if self._jm_scan:
            self._jm_scan = False
            if self.sample_jms and not self.central and self.n_queued:
                self._sample_jms(now)
        if self._dirty and self.idle and self.n_queued:
            self._dispatch(now)
        want = self.central or self.n_queued > 0
        if want != self._forwarding:
            self._forwarding = want
            send_all(self.port, self.multicast, self.trackers, Forwarding(want), now)
        if self._out:
            out, self._out = self._out, {}
            for grp, parts in out.items():
                self.port.send(self.groups[grp], Allocate(concat_containers(parts, self.n_res)))
        if self._placed:
            placed, self._placed = self._placed, {}
            for (owner, attempt), (ts, ns) in placed.items():
                self.port.send(owner, Placed(attempt, ts, ns))

    def _tracker_stats(self, msg: TrackerStats, now: float) -> None:
        prev = self.tstats.get(msg.tracker)
        if msg.complete or prev is None or not prev.complete:
            self.tstats[msg.tracker] = msg
            self.user_extra = {}
        used = np.sum([s.used for s in self.tstats.values()], axis=0)
        total = np.sum([s.total for s in self.tstats.values()], axis=0)
        self.load = cluster_load(used, total, self.load_metric)
        complete = len(self.tstats) == len(self.trackers) and all(s.complete for s in self.tstats.values())
        if complete and self.switch.update(self.load):  # decide on a complete view only (e.g. after a restart)
            self.stats["mode_switches"] += 1
            self.last_switch = now
            if self.central:
                self._central_since = now
            elif self._central_since is not None:
                self.stats["time_central_ms"] += round((now - self._central_since) * 1000)
                self._central_since = None
            self._dirty = True
            self._jm_scan = True
            mc = ModeChange(self.central, self.load)
            for g in self.groups:
                self.port.send(g, mc)
            for rec in self.jobs.values():
                if rec.status == "running":
                    self.port.send(rec.jm, mc)
            if self.central:
                self._dispatch(now)
        self.port.send(self.trackers[msg.tracker], LoadInfo(self.load, self.central))

    # --- fast-forward (cadence.py) ------------------------------------------------------------------------------
    def install_stats(self, msgs: list[TrackerStats]) -> None:
        """The statistics messages of one tick, as if each had been received (restores the view after a calm
        spell, during which they were virtual)."""
        for m in msgs:
            prev = self.tstats.get(m.tracker)
            if m.complete or prev is None or not prev.complete:
                self.tstats[m.tracker] = m
                self.user_extra = {}
        used = np.sum([s.used for s in self.tstats.values()], axis=0)
        total = np.sum([s.total for s in self.tstats.values()], axis=0)
        self.load = cluster_load(used, total, self.load_metric)

    def go_eager(self, now: float) -> None:
        """Fast-forward ends: the arbitrator's virtual alive signals become a real timer (:meth:`Cadence.go_eager
        <megha.schedulers.macrm.cadence.Cadence.go_eager>`)."""
        if self.alive_chain is not None:
            eager_alive(self, self.alive_chain, self.cad.d_as, now)

    def settle(self, now: float) -> None:
        """Count the virtual alive signals sent up to ``now`` (end of the run)."""
        if self.alive_chain is not None:
            self.cad.count(Alive, self.alive_chain.count_le(now))

    def close_stats(self, now: float) -> None:
        """Account the time spent in centralized mode up to ``now`` (end of run)."""
        if self._central_since is not None:
            self.stats["time_central_ms"] += round((now - self._central_since) * 1000)
            self._central_since = now

    def queued(self) -> int:
        """How many requests wait in the central queue."""
        return self.n_queued
