"""MACRM node managers (thesis Fig. 3.3, §3.1.5): one component models the node managers of one tracker's nodes.

Every node keeps its own state and follows the per-node rules exactly:

* **Sampling** (Fig. 3.3): a node answers a ``_ResourceSamplingInquiry`` only if it is not waiting for a
  heartbeat reply, has no pending sampling service, and has free resources for the request; answering makes the
  sampling *pending* until the job manager's allocation request or cancel arrives, or the node's response timeout
  (``hold_timeout``) fires. A heartbeat due while a sampling is pending is *missed* and sent as soon as the
  sampling resolves. A node ignores inquiries while it waits for its heartbeat's reply (the reply may carry an
  allocation from the arbitrator); a reply that never comes (tracker or arbitrator down) stops blocking the node
  after ``hb_reply_timeout``. With ``hb_blocks_sampling=False`` that last rule is off: the thesis's Sparrow has no
  heartbeats at all ("it does not monitor cluster nodes", §4.2.3), so nothing makes its nodes ignore a sampling;
  our heartbeats then only feed the trackers' liveness view and statistics (no allocation travels in them).
* **Heartbeats**: periodic, every ``heartbeat`` seconds (random phase per node). In centralized mode they are
  hybrid: a container exit triggers an immediate heartbeat (the periodic timer restarts), and a node with no free
  resources at its periodic tick skips it once and re-checks after half an interval, then sends.
* **Containers**: task and job-manager containers start only if they fit the node (allocatable capacity =
  ``capacity``; ``background`` is load held by processes outside the scheduler, reported in heartbeats as used).
  What does not fit is rejected back to its sender, so a stale view never over-commits a node; an independent
  invariant check raises :class:`~megha.errors.SimulationError` if a node ever holds more than its capacity.
* **Failures**: a task may fail mid-run (``task_failure_prob``, or injected); the node manager reports it to the job
  manager. A crashed node drops everything: its tasks' runs are recorded as preempted, its job managers are
  terminated, and it answers nothing (the trackers detect it by missing heartbeats).
* **Job-manager recovery**: containers are fenced by job attempt; a restarted job manager *adopts* the job's
  running tasks and learns which already finished (kept per job until the job is complete).
"""

from __future__ import annotations

import numpy as np

from megha.errors import SimulationError
from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.messages import Finished
from megha.schedulers.macrm.messages import (
    Adopt,
    Allocate,
    AllocRejected,
    Containers,
    Forget,
    Heartbeat,
    HeartbeatReply,
    JMExit,
    JobState,
    LaunchRejected,
    ModeChange,
    NodeCrash,
    SampleDecision,
    SampleInquiry,
    SampleReply,
    SpawnJM,
    TaskCrash,
    TaskFailed,
    Terminate,
    select_containers,
)
from megha.sim.component import Component

_EPS = 1e-9


class NodeManagers(Component):
    """The node managers of nodes ``lo .. lo + n - 1`` (one tracker's share of the cluster)."""

    kind = "macrm-nm"

    def __init__(
        self,
        address: str,
        group: int,
        lo: int,
        capacity: np.ndarray,
        background: np.ndarray,
        recorder: TaskRecorder,
        tracker: str,
        arbitrator: str,
        runtime: str,
        heartbeat: float = 1.0,
        hold_timeout: float = 0.012,
        hb_reply_timeout: float = 0.1,
        min_alloc: np.ndarray | None = None,
        task_failure_prob: float = 0.0,
        central: bool = False,
        track_users: bool = True,
        hb_blocks_sampling: bool = True,
    ) -> None:
        super().__init__(address)
        cap = np.asarray(capacity, dtype=np.float64)
        bg = np.asarray(background, dtype=np.float64)
        if cap.ndim != 2 or bg.shape != cap.shape:
            raise ValueError(f"{address}: capacity and background must be [n, R] arrays of the same shape")
        if heartbeat <= 0 or hold_timeout <= 0 or hb_reply_timeout <= 0:
            raise ValueError(f"{address}: heartbeat and timeouts must be > 0")
        self.group = group
        self.lo = int(lo)
        self.n = int(cap.shape[0])
        self.cap = cap  # allocatable
        self.bg = bg  # held outside the scheduler (initial load)
        self.phys = cap + bg  # physical capacity (load = (bg + used) / phys)
        self.used = np.zeros_like(cap)
        self.rec = recorder
        self.tracker = tracker
        self.arbitrator = arbitrator
        self.runtime = runtime
        self.hb = float(heartbeat)
        self.hold_timeout = float(hold_timeout)
        self.hb_reply_timeout = float(hb_reply_timeout)
        self.min_alloc = np.zeros(cap.shape[1]) if min_alloc is None else np.asarray(min_alloc, dtype=np.float64)
        self.fail_p = float(task_failure_prob)
        self.central = central
        self.track_users = track_users
        self.hb_blocks = hb_blocks_sampling
        n = self.n
        self.alive = [True] * n
        self.pending: list[tuple | None] = [None] * n  # token of the pending sampling service
        self.hold: list[int | None] = [None] * n  # its response-timeout timer
        self.waiting = [0] * n  # heartbeats sent whose reply has not come
        self.wait_since = [0.0] * n
        self.missed = [False] * n
        self.halved = [False] * n
        self.hb_timer: list[int | None] = [None] * n
        self.arb_seq = [0] * n  # last arbitrator allocation number received
        self.users: list[dict[int, np.ndarray]] = [{} for _ in range(n)]  # per-user usage of each node
        self.on_node: list[set[int]] = [set() for _ in range(n)]
        # task -> [local node, end, owner, job, attempt, user, demand, fails]
        self.containers: dict[int, list] = {}
        self.by_job: dict[int, set[int]] = {}
        self.finished_by_job: dict[int, list[int]] = {}
        self.job_attempt: dict[int, int] = {}
        self.jm_containers: dict[tuple[int, int], tuple[int, np.ndarray, str, int]] = {}
        self._ends: dict[float, list[int]] = {}
        # per-event outputs
        self._hb_out: list[int] = []
        self._hb_set: set[int] = set()
        self.stats: dict[str, int] = {
            "heartbeats": 0,
            "heartbeats_event": 0,
            "heartbeats_missed": 0,
            "heartbeats_halved": 0,
            "hb_reply_timeouts": 0,
            "inquiries": 0,
            "answered": 0,
            "ignored_pending": 0,
            "ignored_waiting": 0,
            "ignored_full": 0,
            "hold_timeouts": 0,
            "launched": 0,
            "rejected_jm": 0,
            "rejected_arbitrator": 0,
            "task_failures": 0,
            "tasks_lost_on_nodes": 0,
            "nodes_crashed": 0,
            "jms_started": 0,
        }

    # --- lifecycle ---------------------------------------------------------------------------------------------
    def on_start(self, now: float) -> None:
        phases = self.port.rng.random(self.n) * self.hb
        for i in range(self.n):
            self.hb_timer[i] = self.port.set_timer(float(phases[i]), ("hb", i))

    def on_message(self, msg, now: float) -> None:
        tp = type(msg)
        if tp is SampleInquiry:
            self._inquiry(msg, now)
        elif tp is SampleDecision:
            self._decision(msg, now)
        elif tp is HeartbeatReply:
            self._hb_reply(msg, now)
        elif tp is Allocate:
            self._start(msg.containers, now, from_arbitrator=True)
        elif tp is JMExit:
            self._jm_exit(msg.job, msg.attempt, now)
        elif tp is Adopt:
            self._adopt(msg)
        elif tp is Forget:
            self.finished_by_job.pop(msg.job, None)
            self.job_attempt.pop(msg.job, None)
        elif tp is ModeChange:
            self.central = msg.central
        elif tp is NodeCrash:
            self._crash(msg.nodes, now)
        elif tp is TaskCrash:
            self._fail_now(msg.tasks, now)
        else:
            super().on_message(msg, now)
        self._flush(now)

    def on_timer(self, key, now: float) -> None:
        kind = key[0]
        if kind == "end":
            self._ends_at(key[1], now)
        elif kind == "hb":
            self._hb_tick(key[1], now)
        elif kind == "hold":
            self._hold_expired(key[1], key[2], now)
        self._flush(now)

    # --- sampling (Fig. 3.3) -----------------------------------------------------------------------------------
    def _waiting(self, i: int, now: float) -> bool:
        if self.waiting[i] and now - self.wait_since[i] > self.hb_reply_timeout:
            self.waiting[i] = 0  # the reply is lost (tracker or arbitrator down): stop waiting for it
            self.stats["hb_reply_timeouts"] += 1
        return self.waiting[i] > 0

    def _inquiry(self, msg: SampleInquiry, now: float) -> None:
        st = self.stats
        lo = self.lo
        need = msg.need - _EPS
        answered: list[int] = []
        for node in msg.nodes:
            i = node - lo
            st["inquiries"] += 1
            if not self.alive[i]:
                continue
            if self.hb_blocks and self._waiting(i, now):
                st["ignored_waiting"] += 1
                continue
            if self.pending[i] is not None:
                st["ignored_pending"] += 1
                continue
            if not (self.cap[i] - self.used[i] >= need).all():
                st["ignored_full"] += 1
                continue
            self.pending[i] = msg.token
            self.hold[i] = self.port.set_timer(self.hold_timeout, ("hold", i, msg.token))
            answered.append(i)
        if answered:
            st["answered"] += len(answered)
            free = self.cap[answered] - self.used[answered]
            self.port.send(msg.jm, SampleReply(msg.token, [lo + i for i in answered], free, self.phys[answered]))

    def _release_sampling(self, i: int, token, now: float) -> None:
        if self.pending[i] is None or self.pending[i] != token:
            return
        self.pending[i] = None
        h = self.hold[i]
        if h is not None:
            self.port.cancel_timer(h)
            self.hold[i] = None
        if self.missed[i] and self.alive[i]:
            self._send_hb(i, now)

    def _decision(self, msg: SampleDecision, now: float) -> None:
        c = msg.containers
        if len(c):
            self._start(c, now, from_arbitrator=False)
        lo = self.lo
        for node in c.nodes:
            self._release_sampling(node - lo, msg.token, now)
        for node in msg.cancel:
            self._release_sampling(node - lo, msg.token, now)

    def _hold_expired(self, i: int, token, now: float) -> None:
        if self.pending[i] is None or self.pending[i] != token:
            return
        self.hold[i] = None
        self.stats["hold_timeouts"] += 1
        self._release_sampling(i, token, now)

    # --- heartbeats --------------------------------------------------------------------------------------------
    def _has_free(self, i: int) -> bool:
        free = self.cap[i] - self.used[i]
        return bool((free >= self.min_alloc - _EPS).all() and (free > _EPS).any())

    def _hb_tick(self, i: int, now: float) -> None:
        self.hb_timer[i] = None
        if not self.alive[i]:
            return
        if self.central and not self.halved[i] and not self._has_free(i):
            self.halved[i] = True  # full node: skip this heartbeat, look again after half an interval
            self.stats["heartbeats_halved"] += 1
            self.hb_timer[i] = self.port.set_timer(self.hb / 2, ("hb", i))
            return
        self.halved[i] = False
        if self.pending[i] is not None:
            self.missed[i] = True
            self.stats["heartbeats_missed"] += 1
            return
        self._send_hb(i, now)

    def _send_hb(self, i: int, now: float) -> None:
        if i in self._hb_set:
            return
        h = self.hb_timer[i]
        if h is not None:
            self.port.cancel_timer(h)
        self.missed[i] = False
        self.halved[i] = False
        self.waiting[i] += 1
        self.wait_since[i] = now
        self.hb_timer[i] = self.port.set_timer(self.hb, ("hb", i))
        self._hb_out.append(i)
        self._hb_set.add(i)

    def _container_exit(self, i: int, now: float) -> None:
        """Event-driven heartbeat in centralized mode (thesis §3.1.5)."""
        if not self.central or not self.alive[i]:
            return
        if self.pending[i] is not None:
            self.missed[i] = True
            return
        if i not in self._hb_set:
            self.stats["heartbeats_event"] += 1
        self._send_hb(i, now)

    def _hb_reply(self, msg: HeartbeatReply, now: float) -> None:
        lo = self.lo
        for node in msg.nodes:
            i = node - lo
            if self.waiting[i]:
                self.waiting[i] -= 1
        if msg.containers is not None and len(msg.containers):
            self._start(msg.containers, now, from_arbitrator=True)

    # --- containers --------------------------------------------------------------------------------------------
    def _start(self, c: Containers, now: float, from_arbitrator: bool) -> None:
        lo = self.lo
        rejected: list[int] = []
        st_t: list[int] = []
        st_w: list[int] = []
        rng = self.port.rng
        for k in range(len(c.nodes)):
            node = c.nodes[k]
            i = node - lo
            if not self.alive[i]:
                continue  # the message reached a dead machine: lost (the failure detector handles it)
            if c.seqs[k] > self.arb_seq[i]:  # an arbitrator allocation (also a sampled job-manager container)
                self.arb_seq[i] = c.seqs[k]
            t = c.tasks[k]
            job = c.jobs[k]
            att = c.attempts[k]
            d = c.demands[k]
            if t >= 0 and (self.job_attempt.get(job, 0) > att or t in self.containers):
                rejected.append(k)  # stale job manager attempt (fenced) or already running here
                continue
            free = self.cap[i] - self.used[i]
            if not (free + _EPS >= d).all():
                rejected.append(k)
                continue
            self.used[i] += d
            if (self.used[i] > self.cap[i] + 1e-7).any():
                raise SimulationError(
                    f"{self.address}: node {node} over-committed at t={now:.6f}: used "
                    f"{self.used[i].tolist()} > capacity {self.cap[i].tolist()}"
                )
            user = c.users[k]
            uu = self.users[i]
            prev = uu.get(user)
            uu[user] = d.copy() if prev is None else prev + d
            if t < 0:  # a job-manager container
                owner = c.owners[k]
                self.jm_containers[(job, att)] = (i, d.copy(), owner, user)
                self.stats["jms_started"] += 1
                spec, load, central = c.specs[k]
                self.port.send(self.runtime, SpawnJM(owner, spec, att, node, self.group, load, central))
                continue
            dur = c.durations[k]
            end = now + dur
            fails = False
            if self.fail_p > 0.0 and rng.random() < self.fail_p:
                fails = True
                end = now + dur * float(rng.random())
            self.containers[t] = [i, end, c.owners[k], job, att, user, d.copy(), fails]
            s = self.by_job.get(job)
            if s is None:
                self.by_job[job] = {t}
            else:
                s.add(t)
            self.on_node[i].add(t)
            lst = self._ends.get(end)
            if lst is None:
                self._ends[end] = [t]
                self.port.set_timer(end - now, ("end", end))
            else:
                lst.append(t)
            st_t.append(t)
            st_w.append(node)
        if st_t:
            self.stats["launched"] += len(st_t)
            self.rec.started(st_t, now, st_w)
        if rejected:
            if from_arbitrator:
                self.stats["rejected_arbitrator"] += len(rejected)
                sub = select_containers(c, rejected)
                free = np.array([self.cap[n - lo] - self.used[n - lo] for n in sub.nodes])
                self.port.send(self.arbitrator, AllocRejected(sub, free))
            else:
                self.stats["rejected_jm"] += len(rejected)
                by_owner: dict[str, tuple[list, list]] = {}
                jm_rej = [k for k in rejected if c.tasks[k] < 0]  # a sampled job-manager container: the arbitrator's
                if jm_rej:
                    sub = select_containers(c, jm_rej)
                    free = np.array([self.cap[n - lo] - self.used[n - lo] for n in sub.nodes])
                    self.port.send(self.arbitrator, AllocRejected(sub, free))
                for k in rejected:
                    if c.tasks[k] < 0:
                        continue
                    o = by_owner.setdefault(c.owners[k], ([], []))
                    o[0].append(c.tasks[k])
                    o[1].append(c.nodes[k])
                for owner, (ts, ns) in by_owner.items():
                    self.port.send(owner, LaunchRejected(ts, ns))

    def _remove(self, t: int) -> list:
        e = self.containers.pop(t)
        i = e[0]
        self.used[i] -= e[6]
        np.maximum(self.used[i], 0.0, out=self.used[i])
        uu = self.users[i]
        left = uu[e[5]] - e[6]
        if (left > _EPS).any():
            uu[e[5]] = left
        else:
            del uu[e[5]]
        self.on_node[i].discard(t)
        s = self.by_job.get(e[3])
        if s is not None:
            s.discard(t)
            if not s:
                del self.by_job[e[3]]
        return e

    def _ends_at(self, key: float, now: float) -> None:
        tasks = self._ends.pop(key, ())
        done: dict[str, tuple[list, list]] = {}
        failed: dict[str, tuple[list, list]] = {}
        fin: list[int] = []
        failed_ids: list[int] = []
        for t in tasks:
            e = self.containers.get(t)
            if e is None or e[1] != key:
                continue  # killed, or relaunched with another end
            self._remove(t)
            i = e[0]
            node = self.lo + i
            if e[7]:
                failed_ids.append(t)
                lst = failed.setdefault(e[2], ([], []))
            else:
                fin.append(t)
                fl = self.finished_by_job.get(e[3])
                if fl is None:
                    self.finished_by_job[e[3]] = [t]
                else:
                    fl.append(t)
                lst = done.setdefault(e[2], ([], []))
            lst[0].append(t)
            lst[1].append(node)
            self._container_exit(i, now)
        if fin:
            self.rec.finished(fin, now)
        if failed_ids:
            self.stats["task_failures"] += len(failed_ids)
            self.rec.preempted(failed_ids, now)
        for owner, (ts, ns) in done.items():
            self.port.send(owner, Finished(ts, ns))
        for owner, (ts, ns) in failed.items():
            self.port.send(owner, TaskFailed(ts, ns))

    def _fail_now(self, tasks: list[int], now: float) -> None:
        """Injected task failures: the processes die now."""
        failed: dict[str, tuple[list, list]] = {}
        ids: list[int] = []
        for t in tasks:
            e = self.containers.get(t)
            if e is None:
                continue
            self._remove(t)
            ids.append(t)
            lst = failed.setdefault(e[2], ([], []))
            lst[0].append(t)
            lst[1].append(self.lo + e[0])
            self._container_exit(e[0], now)
        if ids:
            self.stats["task_failures"] += len(ids)
            self.rec.preempted(ids, now)
        for owner, (ts, ns) in failed.items():
            self.port.send(owner, TaskFailed(ts, ns))

    def _jm_exit(self, job: int, attempt: int, now: float) -> None:
        entry = self.jm_containers.pop((job, attempt), None)
        if entry is None:
            return
        i, d, _, user = entry
        self.used[i] -= d
        np.maximum(self.used[i], 0.0, out=self.used[i])
        uu = self.users[i]
        left = uu.get(user, d) - d
        if (left > _EPS).any():
            uu[user] = left
        else:
            uu.pop(user, None)
        self._container_exit(i, now)

    # --- job-manager recovery ----------------------------------------------------------------------------------
    def _adopt(self, msg: Adopt) -> None:
        if self.job_attempt.get(msg.job, 0) < msg.attempt:
            self.job_attempt[msg.job] = msg.attempt
        running = sorted(self.by_job.get(msg.job, ()))
        nodes = []
        for t in running:
            e = self.containers[t]
            e[2] = msg.jm
            e[4] = msg.attempt
            nodes.append(self.lo + e[0])
        self.port.send(
            msg.jm, JobState(self.group, msg.attempt, running, nodes, list(self.finished_by_job.get(msg.job, ())))
        )

    # --- node failures -----------------------------------------------------------------------------------------
    def _crash(self, nodes: list[int], now: float) -> None:
        lost: list[int] = []
        for node in nodes:
            i = node - self.lo
            if not 0 <= i < self.n or not self.alive[i]:
                continue
            self.alive[i] = False
            self.stats["nodes_crashed"] += 1
            for h in (self.hb_timer[i], self.hold[i]):
                if h is not None:
                    self.port.cancel_timer(h)
            self.hb_timer[i] = None
            self.hold[i] = None
            self.pending[i] = None
            for t in sorted(self.on_node[i]):
                self._remove(t)
                lost.append(t)
            for key in [k for k, v in self.jm_containers.items() if v[0] == i]:
                _, _, owner, _ = self.jm_containers.pop(key)
                self.port.send(self.runtime, Terminate(owner))
            self.used[i] = 0.0
            self.users[i] = {}
        if lost:
            self.stats["tasks_lost_on_nodes"] += len(lost)
            self.rec.preempted(lost, now)

    # --- per-event output --------------------------------------------------------------------------------------
    def _flush(self, now: float) -> None:
        out = self._hb_out
        if not out:
            return
        self._hb_out = []
        self._hb_set = set()
        self.stats["heartbeats"] += len(out)
        if len(out) == 1:
            i = out[0]
            free = (self.cap[i] - self.used[i])[None, :]
            used = (self.bg[i] + self.used[i])[None, :]
            users = [dict(self.users[i])] if self.track_users else []
            self.port.send(self.tracker, Heartbeat(self.group, [self.lo + i], free, used, [self.arb_seq[i]], users))
            return
        free = self.cap[out] - self.used[out]
        used = self.bg[out] + self.used[out]
        users = [dict(self.users[i]) for i in out] if self.track_users else []
        self.port.send(
            self.tracker,
            Heartbeat(self.group, [self.lo + i for i in out], free, used, [self.arb_seq[i] for i in out], users),
        )

    # --- inspection --------------------------------------------------------------------------------------------
    def running_tasks(self) -> int:
        return len(self.containers)

    def free_of(self, node: int) -> np.ndarray:
        i = node - self.lo
        return self.cap[i] - self.used[i]
