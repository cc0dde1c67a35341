"""The MACRM resource arbitrator (thesis §3.2.2, Fig. 3.9): user interface, queue-actor, rack-actor, scheduler actors.

* **Admission** (user-interface-actor): a submitted job is recorded in the replicated store (ZooKeeper) and queued
  for a container for its job manager.
* **Queue-actor**: one central queue, ``fifo`` or ``fair`` (users ordered by dominant share of the cluster, from
  the trackers' per-user statistics plus the arbitrator's own allocations since). It holds job-manager container
  requests and the task requests of job managers (leftovers after sampling retries, everything in centralized mode).
  In *distributed* mode it is served when a tracker forwards the heartbeat of a node with free resources: the
  allocations travel in the heartbeat's reply (the node ignores samplings until then, Fig. 3.3).
* **Rack-actor**: the view of free resources (:class:`~megha.schedulers.macrm.view.FreeView`) fed by forwarded
  heartbeats (event-driven in centralized mode).
* **Scheduler actors** (``actors`` of them, in *centralized* mode, and for gang requests in any mode): each takes the
  next request, matches it against a copy of the view (``match_cost`` + ``match_cost_per_task`` × tasks of
  simulated time), then commits atomically: all-or-nothing for gang requests, incremental otherwise; conflicting
  placements go back to the queue and are matched again. A request that finds no room waits until the view grows.
* **Mode** (cluster-manager-actor): the load from the trackers' statistics drives the switch to centralized
  allocation at ``switch_load`` (free < 10 %) and back below ``switch_load − hysteresis``
  (:class:`~megha.schedulers.macrm.policy.ModeSwitch`); job managers and node managers are told.
* **Failures**: node and job-manager losses reported by trackers; a lost job manager gets a new container
  (next attempt). The arbitrator's hard state (jobs, their job-manager attempts and containers) is persisted; a
  restarted arbitrator recovers it from the store, rebuilds its soft state from heartbeats and statistics, and
  announces itself so job managers resubmit their queued requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sortedcontainers import SortedDict

from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.messages import JobArrival
from megha.schedulers.macrm.messages import (
    Accepted,
    Alive,
    Allocate,
    AllocRejected,
    ArbitratorUp,
    Containers,
    ExpectJM,
    ForwardedHeartbeat,
    Forwarding,
    HeartbeatReply,
    JobDone,
    JobDoneAck,
    LoadInfo,
    ModeChange,
    NodesLost,
    Persist,
    Placed,
    Recover,
    Report,
    ReportAck,
    SampleDecision,
    SampleInquiry,
    SampleReply,
    Snapshot,
    Submit,
    TaskRequest,
    TrackerStats,
    TrackerUp,
    concat_containers,
    empty_containers,
    select_containers,
)
from megha.schedulers.macrm.policy import ROUND_ENDS, ModeSwitch, cluster_load, round_action
from megha.schedulers.macrm.view import FreeView, match
from megha.sim.component import Component

_EPS = 1e-9


@dataclass(eq=False)
class Item:
    """A queued request: a job-manager container (``tasks == [-1]``) or some tasks of one job."""

    seq: int
    job: int
    attempt: int
    user: int
    owner: str  # the job manager the tasks report to (the new one for a JM container)
    tasks: list[int]
    durations: list[float]
    demands: np.ndarray
    masks: np.ndarray
    gang: bool = False
    spec: JobArrival | None = None
    blocked: bool = False
    taken: bool = False
    removed: bool = False
    min_dem: np.ndarray = field(default=None)  # type: ignore[assignment]
    and_mask: int = 0
    sampling: tuple | None = None  # token of the sampling placing this job-manager container (jm_placement)

    def refresh(self) -> None:
        self.min_dem = self.demands.min(axis=0)
        m = int(np.bitwise_and.reduce(self.masks)) if self.masks.size else 0
        self.and_mask = m

    @property
    def is_jm(self) -> bool:
        return self.tasks[0] < 0


@dataclass
class JobRec:
    spec: JobArrival
    attempt: int = 0
    status: str = "queued"  # queued | running | done
    jm: str = ""
    node: int = -1
    tracker: int = -1
    runs: dict = field(default_factory=dict)  # task -> latest run requested by the current attempt (soft state)


class ResourceArbitrator(Component):
    """The central authority: admission, job-manager containers, central queue, view, scheduler actors, mode."""

    kind = "macrm-arbitrator"

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
            "tasks_requested": 0,
            "nodes_lost": 0,
            "mode_switches": 0,
            "time_central_ms": 0,
            "recoveries": 0,
            "max_queue": 0,
        }
        self._central_since: float | None = None
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

    # --- lifecycle ---------------------------------------------------------------------------------------------
    @property
    def central(self) -> bool:
        return self.switch.central

    def on_start(self, now: float) -> None:
        self.port.set_timer(self.alive_interval, ("alive",))
        if self.recovering:
            self.port.send(self.supervisor, Recover(self.address))
        else:
            self._persist("epoch", self.epoch)

    def _persist(self, op: str, *args) -> None:
        self.port.send(self.supervisor, Persist(op, args))

    def on_message(self, msg, now: float) -> None:
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

    def on_timer(self, key, now: float) -> None:
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

    # --- recovery ----------------------------------------------------------------------------------------------
    def _recover(self, state: dict, now: float) -> None:
        self.recovering = False
        self.stats["recoveries"] += 1
        self._forwarding = None  # tell every tracker what this incarnation wants
        self.epoch = int(state.get("epoch", 0)) + 1
        self._persist("epoch", self.epoch)
        self.view.next_seq = [self.epoch << 32] * self.n  # above anything the previous incarnation allocated
        for job in sorted(state.get("jobs", {})):
            spec, attempt, status, jm, node, tracker = state["jobs"][job]
            if status == "done":
                continue
            rec = JobRec(spec, attempt, status, jm, node, tracker)
            self.jobs[job] = rec
            if status == "queued":
                self._queue_jm(job, rec)
            else:
                self.jm_used += self.jm_demand
        if self.central:
            self._dispatch(now)
        up = ArbitratorUp(self.epoch)
        watch: dict[int, list] = {}
        for job, rec in self.jobs.items():
            if rec.status == "running" and rec.tracker >= 0:
                watch.setdefault(rec.tracker, []).append((rec.jm, job, rec.attempt))
        for g, t in enumerate(self.trackers):
            self.port.send(t, up)
            # a tracker restarted while this arbitrator was down lost its TrackerUp: it must still watch the job
            # managers of its nodes (a dead one sends no heartbeat to be learned from)
            if watch.get(g):
                self.port.send(t, ExpectJM(watch[g]))
        for rec in self.jobs.values():
            if rec.status == "running":
                self.port.send(rec.jm, up)

    # --- admission ---------------------------------------------------------------------------------------------
    def _submit(self, spec: JobArrival, now: float) -> None:
        if spec.job not in self.jobs:
            rec = JobRec(spec)
            self.jobs[spec.job] = rec
            self._persist("submit", spec.job, spec)
            self.stats["jobs_admitted"] += 1
            self._queue_jm(spec.job, rec)
            if self.central:
                self._dispatch(now)
        self.port.send(self.client, Accepted(spec.job))

    def _jm_address(self, job: int, attempt: int) -> str:
        return f"{self.jm_prefix}{job}"  # one address per job: attempts are told apart by number

    def _queue_jm(self, job: int, rec: JobRec, front: bool = False) -> None:
        spec = rec.spec
        it = Item(
            self._next_seq(front),
            job,
            rec.attempt,
            spec.user,
            self._jm_address(job, rec.attempt),
            [-1],
            [0.0],
            self.jm_demand[None, :].copy(),
            np.zeros(1, dtype=np.uint32),
            spec=spec,
        )
        self._enqueue(it)

    def _next_seq(self, front: bool) -> int:
        if front:
            self._front -= 1
            return self._front
        self._seq += 1
        return self._seq

    def _jm_room(self) -> bool:
        """Job-manager containers may hold at most ``jm_limit`` (YARN's maximum AM share): a cluster full of job
        managers waiting for their tasks would deadlock. One job manager may always run."""
        if self.jm_limit is None or not (self.jm_used > _EPS).any():
            return True
        return bool((self.jm_used + self.jm_demand <= self.jm_limit + _EPS).all())

    def _jm_released(self) -> None:
        self.jm_used = np.maximum(self.jm_used - self.jm_demand, 0.0)
        self._dirty = True
        self._jm_scan = True

    # --- queue -------------------------------------------------------------------------------------------------
    def _enqueue(self, it: Item) -> None:
        it.refresh()
        u = it.user if self.policy == "fair" else 0
        q = self.queues.get(u)
        if q is None:
            q = self.queues[u] = SortedDict()
        q[it.seq] = it
        self.n_queued += 1
        self._dirty = True
        if it.is_jm:
            self._jm_scan = True
        if self.n_queued > self.stats["max_queue"]:
            self.stats["max_queue"] = self.n_queued

    def _dequeue(self, it: Item) -> None:
        if it.removed:
            return
        it.removed = True
        u = it.user if self.policy == "fair" else 0
        del self.queues[u][it.seq]
        self.n_queued -= 1

    def _user_order(self) -> list[int]:
        if len(self.queues) <= 1:
            return list(self.queues)
        total = self.phys_total
        share: dict[int, float] = {}
        for u in self.queues:
            used = np.zeros(self.n_res)
            for st in self.tstats.values():
                v = st.users.get(u)
                if v is not None:
                    used = used + v
            ex = self.user_extra.get(u)
            if ex is not None:
                used = used + ex
            share[u] = float(np.max(np.where(total > 0, used / np.where(total > 0, total, 1.0), 0.0)))
        return sorted((u for u, q in self.queues.items() if q), key=lambda u: (share[u], u))

    def _items(self):
        for u in self._user_order():
            q = self.queues.get(u)
            if q:
                yield from list(q.values())

    def _purge_job(self, job: int) -> None:
        for q in self.queues.values():
            for it in [it for it in q.values() if it.job == job]:
                self._dequeue(it)

    # --- job managers' requests --------------------------------------------------------------------------------
    def _task_request(self, msg: TaskRequest, now: float) -> None:
        rec = self.jobs.get(msg.job)
        if rec is None or rec.status != "running" or rec.attempt != msg.attempt or not msg.tasks:
            return
        # a task is requested once per run: drop repeats (a resubmission racing with the original request)
        seen = rec.runs
        keep = [k for k, t in enumerate(msg.tasks) if (msg.runs[k] if msg.runs else 0) > seen.get(t, -1)]
        if len(keep) < len(msg.tasks):
            self.stats["duplicate_requests_dropped"] += len(msg.tasks) - len(keep)
        if not keep:
            return
        for k in keep:
            seen[msg.tasks[k]] = msg.runs[k] if msg.runs else 0
        self.stats["task_requests"] += 1
        self.stats["tasks_requested"] += len(keep)
        dem = np.asarray(msg.demands, dtype=np.float64).reshape(len(msg.tasks), -1)
        it = Item(
            self._next_seq(False),
            msg.job,
            msg.attempt,
            msg.user,
            msg.jm,
            [msg.tasks[k] for k in keep],
            [msg.durations[k] for k in keep],
            dem[keep],
            np.asarray(msg.masks, dtype=np.uint32)[keep],
            gang=msg.gang,
        )
        self._check_gang(it)
        self._enqueue(it)
        if self.central or it.gang:
            self._dispatch(now)

    def _check_gang(self, it: Item) -> None:
        """A gang that could not fit even if every task left the cluster (only the job managers' containers stay)
        would wait forever (resource hoarding): serve it incrementally instead."""
        if not it.gang or self.capacity is None or len(it.tasks) < 2:
            return
        room = self.capacity.copy()
        for rec in self.jobs.values():
            if rec.status == "running" and rec.node >= 0:
                room[rec.node] -= self.jm_demand
        fit = match(room, ~self.view.dead, it.demands, it.masks, self.worker_masks, self.port.rng, best_fit=True)
        if (fit < 0).any():
            it.gang = False
            it.blocked = False
            self.stats["gang_infeasible"] += 1

    # --- heartbeats: rack-actor view and heartbeat-driven queue serving ----------------------------------------
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

    def _serve_node(self, node: int, now: float) -> Containers | None:
        """Queue-actor, distributed mode: allocate queued requests that fit ``node`` (policy order)."""
        view = self.view
        if not view.present[node] or view.dead[node]:
            return None
        wm = int(self.worker_masks[node])
        free = view.free[node]  # a row of the view: allocations below update it
        parts: list[Containers] = []
        for it in self._items():
            if it.gang or it.taken or it.removed or (it.is_jm and self.sample_jms):
                continue
            if (free + _EPS < it.min_dem).any() or (it.and_mask & ~wm):
                continue
            if it.is_jm and not self._jm_room():
                continue
            room = free.copy()
            picked: list[int] = []
            for k in range(len(it.tasks)):
                d = it.demands[k]
                if (room + _EPS >= d).all() and not (int(it.masks[k]) & ~wm):
                    room -= d
                    picked.append(k)
            if picked:
                parts.append(self._allocate([(it, k) for k in picked], [node] * len(picked), now))
                self._take_from(it, picked)
            if not (free > _EPS).any():
                break
        if not parts:
            return None
        return concat_containers(parts, self.n_res)

    def _take_from(self, it: Item, picked: list[int]) -> None:
        """Remove tasks ``picked`` from a queued item (the item leaves the queue when empty)."""
        if len(picked) == len(it.tasks):
            self._dequeue(it)
            return
        drop = set(picked)
        keep = [k for k in range(len(it.tasks)) if k not in drop]
        it.tasks = [it.tasks[k] for k in keep]
        it.durations = [it.durations[k] for k in keep]
        it.demands = it.demands[keep]
        it.masks = it.masks[keep]
        it.refresh()

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

    # --- scheduler actors --------------------------------------------------------------------------------------
    def _unblock(self, nodes: list[int]) -> None:
        """Requests blocked for lack of room may fit the nodes whose free resources grew."""
        f = self.view.free[nodes]
        wm = self.worker_masks[nodes]
        for q in self.queues.values():
            for it in q.values():
                if (
                    it.blocked
                    and (((f + _EPS >= it.min_dem).all(axis=1)) & ((np.uint32(it.and_mask) & ~wm) == 0)).any()
                ):
                    it.blocked = False
                    self._dirty = True

    def _dispatch(self, now: float) -> None:
        """Give idle scheduler actors the next requests (policy order) they can match."""
        self._dirty = False
        if not self.idle or not self.n_queued:
            return
        central = self.central
        view = self.view
        usable = view.usable()
        for it in self._items():
            if not self.idle:
                break
            if it.taken or it.blocked or it.removed or not (central or it.gang) or it.sampling is not None:
                continue
            if it.is_jm and not self._jm_room():
                continue
            snap = view.free.copy()  # the actor's copy of the view of free resources
            nodes = match(snap, usable, it.demands, it.masks, self.worker_masks, self.port.rng)
            matched = nodes >= 0
            if it.gang and not matched.all():  # a tighter packing may still hold the whole gang
                nodes = match(
                    view.free.copy(), usable, it.demands, it.masks, self.worker_masks, self.port.rng, best_fit=True
                )
                matched = nodes >= 0
            if (it.gang and not matched.all()) or not matched.any():
                it.blocked = True  # wait until the view grows (and retry now and then: matching is heuristic)
                self.stats["actor_match_failures"] += 1
                if not self._retry_armed:
                    self._retry_armed = True
                    self.port.set_timer(self.retry_interval, ("retry",))
                continue
            actor = self.idle.pop()
            it.taken = True
            self.busy[actor] = (it, nodes)
            self.stats["actor_matches"] += 1
            self.port.set_timer(self.match_cost + self.match_cost_per_task * len(it.tasks), ("commit", actor))

    def _commit(self, actor: int, now: float) -> None:
        it, nodes = self.busy.pop(actor)
        self.idle.append(actor)
        it.taken = False
        if it.removed:
            self._dispatch(now)
            return
        if it.is_jm and not self._jm_room():
            self._dispatch(now)
            return
        sel = np.flatnonzero(nodes >= 0)
        ok = self.view.commit(nodes[sel], it.demands[sel], all_or_nothing=it.gang)
        n_bad = int((~ok).sum())
        if n_bad:
            self.stats["commit_conflicts"] += n_bad
            self.stats["conflict_retries"] += 1
            if it.gang:
                self.stats["gang_conflicts"] += 1
        good = sel[ok].tolist()
        if good:
            self.stats["actor_commits"] += 1
            rows = [(it, k) for k in good]
            c = self._allocate(rows, [int(nodes[k]) for k in good], now)
            self._add_out(c)
            self._take_from(it, good)
        self._dispatch(now)

    def _add_out(self, c: Containers) -> None:
        if not len(c):
            return
        g = self.group_of[c.nodes]
        for grp in np.unique(g).tolist():
            idx = np.flatnonzero(g == grp).tolist()
            self._out.setdefault(grp, []).append(c if len(idx) == len(c) else select_containers(c, idx))

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
            fw = Forwarding(want)
            for t in self.trackers:
                self.port.send(t, fw)
        if self._out:
            out, self._out = self._out, {}
            for grp, parts in out.items():
                self.port.send(self.groups[grp], Allocate(concat_containers(parts, self.n_res)))
        if self._placed:
            placed, self._placed = self._placed, {}
            for (owner, attempt), (ts, ns) in placed.items():
                self.port.send(owner, Placed(attempt, ts, ns))

    # --- job-manager containers by random sampling (jm_placement="sampling") ------------------------------------
    def _sample_jms(self, now: float) -> None:
        """Sample ``jm_samples`` random live nodes for each queued job-manager container (power of two choices);
        the least loaded responder gets it, a round without responders is sampled again after the timeout. The
        round ends as the job managers' rounds do (``round_end``; one responder is "enough")."""
        live = np.flatnonzero(~self.view.dead)
        if live.size == 0:
            return
        pending = len(self._jm_sampling)
        for it in self._items():
            if not it.is_jm or it.taken or it.removed or it.sampling is not None:
                continue
            if (
                self.jm_limit is not None
                and ((self.jm_used > _EPS).any() or pending)
                and not (self.jm_used + (pending + 1) * self.jm_demand <= self.jm_limit + _EPS).all()
            ):
                break
            k = min(self.jm_samples, int(live.size))
            nodes = np.sort(self.port.rng.choice(live, size=k, replace=False))
            self._jm_token += 1
            token = ("arb", self.epoch, self._jm_token)
            it.sampling = token
            grp = self.group_of[nodes]
            for g in np.unique(grp).tolist():
                self.port.send(
                    self.groups[g],
                    SampleInquiry(self.address, it.job, it.attempt, token, nodes[grp == g].tolist(), self.jm_demand),
                )
            timer = self.port.set_timer(self.sampling_timeout, ("jmsample", token))
            self._jm_sampling[token] = {
                "item": it,
                "n": int(k),
                "resp": [],
                "free": [],
                "timer": timer,
                "deferred": False,
            }
            self.stats["jm_samplings"] += 1
            pending += 1

    def _jm_reply(self, msg: SampleReply, now: float) -> None:
        s = self._jm_sampling.get(msg.token)
        if s is None:  # too late (or a previous incarnation's): release the nodes holding for us
            self._jm_cancel(msg.token, list(msg.nodes))
            return
        s["resp"].extend(msg.nodes)
        s["free"].append(np.asarray(msg.free, dtype=np.float64) / np.maximum(np.asarray(msg.capacity), _EPS))
        act = round_action(self.round_end, len(s["resp"]), s["n"], lambda: True)  # any responder holds the container
        if act == "place":
            self._jm_decide(msg.token, now)
        elif act == "defer" and not s["deferred"]:
            s["deferred"] = True  # answers arriving at this same instant are still compared
            self.port.set_timer(0.0, ("jmsample", msg.token))

    def _jm_cancel(self, token, nodes: list[int], skip: int = -1) -> None:
        grp = self.group_of[nodes] if nodes else np.zeros(0, dtype=np.int64)
        for g in np.unique(grp).tolist():
            sel = [n for n, x in zip(nodes, grp.tolist(), strict=True) if x == g and n != skip]
            if sel:
                self.port.send(self.groups[g], SampleDecision(token, empty_containers(self.n_res), sel))

    def _jm_decide(self, token, now: float) -> None:
        s = self._jm_sampling.pop(token)
        self.port.cancel_timer(s["timer"])
        it: Item = s["item"]
        it.sampling = None
        resp: list[int] = s["resp"]
        if it.removed or it.taken or self.central or not resp:
            self._jm_cancel(token, resp)
            if not resp:
                self.stats["jm_sampling_failures"] += 1
            self._jm_scan = True  # sample again (or leave it to the scheduler actors in centralized mode)
            return
        free_frac = np.concatenate(s["free"]).min(axis=1)
        node = int(resp[int(np.argmax(free_frac))])  # the least loaded responder
        c = self._allocate([(it, 0)], [node], now)
        self._take_from(it, [0])
        g = int(self.group_of[node])
        self.port.send(
            self.groups[g], SampleDecision(token, c, [n for n in resp if n != node and int(self.group_of[n]) == g])
        )
        others = [n for n in resp if int(self.group_of[n]) != g]
        self._jm_cancel(token, others)

    # --- rejections by nodes (stale view) ----------------------------------------------------------------------
    def _alloc_rejected(self, msg: AllocRejected, now: float) -> None:
        c = msg.containers
        self.stats["allocations_rejected_by_nodes"] += len(c)
        grew: list[int] = []
        by_item: dict[tuple[int, int, str], list[int]] = {}
        for k in range(len(c)):
            node = c.nodes[k]
            if self.view.rejected(node, c.seqs[k], msg.free[k]):
                grew.append(node)
            rec = self.jobs.get(c.jobs[k])
            if rec is None or rec.status == "done" or rec.attempt != c.attempts[k]:
                continue
            if c.tasks[k] < 0:  # the job manager's container did not start: a new attempt gets a new one
                self._jm_released()
                rec.attempt += 1
                rec.runs = {}
                rec.status = "queued"
                self._persist("requeue", c.jobs[k], rec.attempt)
                self._queue_jm(c.jobs[k], rec, front=True)
                continue
            by_item.setdefault((c.jobs[k], c.attempts[k], c.owners[k]), []).append(k)
        for (job, att, owner), ks in by_item.items():
            it = Item(
                self._next_seq(True),
                job,
                att,
                c.users[ks[0]],
                owner,
                [c.tasks[k] for k in ks],
                [c.durations[k] for k in ks],
                c.demands[ks],
                np.array(
                    [int(self.jobs[job].spec.masks[_local(self.jobs[job].spec, c.tasks[k])]) for k in ks],
                    dtype=np.uint32,
                ),
            )
            self._enqueue(it)
        if grew:
            self._unblock(grew)
        if self.central:
            self._dispatch(now)

    # --- statistics and mode -----------------------------------------------------------------------------------
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

    def close_stats(self, now: float) -> None:
        """Account the time spent in centralized mode up to ``now`` (end of run)."""
        if self._central_since is not None:
            self.stats["time_central_ms"] += round((now - self._central_since) * 1000)
            self._central_since = now

    # --- failures ----------------------------------------------------------------------------------------------
    def _report(self, msg: Report, now: float) -> None:
        self.port.send(self.trackers[msg.tracker], ReportAck(msg.rid))
        if msg.kind == "nodes":
            lost = [n for n in msg.nodes if not self.view.dead[n]]
            if not lost:
                return
            self.stats["nodes_lost"] += len(lost)
            for n in lost:
                self.view.kill(n)
            nl = NodesLost(lost)
            lost_set = set(lost)
            for job, rec in list(self.jobs.items()):
                if rec.status != "running":
                    continue
                if rec.node in lost_set:  # its job manager died with the node
                    self._jm_lost(job, rec.attempt)
                else:
                    self.port.send(rec.jm, nl)
        elif msg.kind == "jm":
            self._jm_lost(msg.job, msg.attempt)

    def _jm_lost(self, job: int, attempt: int) -> None:
        rec = self.jobs.get(job)
        if rec is None or rec.status != "running" or rec.attempt != attempt:
            return
        self.stats["jm_restarts"] += 1
        self._jm_released()
        self._purge_job(job)
        rec.attempt += 1
        rec.status = "queued"
        rec.runs = {}
        self._persist("requeue", job, rec.attempt)
        self._queue_jm(job, rec, front=True)

    def _job_done(self, msg: JobDone, now: float) -> None:
        rec = self.jobs.get(msg.job)
        if rec is not None and rec.attempt == msg.attempt and rec.status != "done":
            rec.status = "done"
            self._jm_released()
            self._persist("done", msg.job)
            self._purge_job(msg.job)
            del self.jobs[msg.job]
            if self.n_queued and self.idle:
                self._dispatch(now)
        self.port.send(self._jm_address(msg.job, msg.attempt), JobDoneAck(msg.job, msg.attempt))

    # --- inspection --------------------------------------------------------------------------------------------
    def queued(self) -> int:
        return self.n_queued


def _local(spec: JobArrival, task: int) -> int:
    """Index of global task ``task`` in the job's arrays (tasks of a job are contiguous ids, possibly filtered)."""
    k = int(np.searchsorted(spec.tasks, task))
    return k
