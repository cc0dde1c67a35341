"""A MACRM job manager (thesis §3.1.3–3.1.4): one per job, in a container the arbitrator allocated.

Distributed mode — batch sampling: for its ``n`` unplaced tasks the job manager samples ``⌈d·n⌉`` distinct nodes
(eligible for the tasks' placement constraints), waits for answers — until every sampled node answered or
``sampling_timeout`` passed (``round_end="all"``, the default), until the answers can hold every task
(``"enough"``), or always for the timeout (``"timeout"``; see :data:`~megha.schedulers.macrm.policy.ROUND_ENDS`) —
and places the tasks on the least loaded responders — a responder takes several tasks while they fit
(``per_responder="fill"``) or one task (``"one"``: the thesis's "n tasks on the least loaded of d·n nodes", where
a round fails when fewer than n nodes answer); the other responders are released. Tasks left over are a *sampling
failure*: the next round doubles the rate (``doubling``); after ``max_retries`` retries they go to the
arbitrator's central queue. The initial rate is the adaptive ``d(x)`` of the cluster load (thesis Eq. 3.1) or a
fixed one.

Centralized mode (and gang jobs): the job manager sends its tasks to the central queue and learns from the
arbitrator where they were placed.

Failures: a failed task or a task on a lost node is placed again (exactly one successful completion per task);
a restarted job manager (next attempt) first *adopts* the job from every node-manager group — the tasks still
running report to it from then on, the finished ones are known — and schedules only the rest.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sortedcontainers import SortedList

from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.messages import Finished, JobArrival
from megha.schedulers.common.sampling import ProbeSampler
from megha.schedulers.macrm._kernels import k_assign_masked
from megha.schedulers.macrm.messages import (
    Adopt,
    ArbitratorUp,
    Containers,
    Forget,
    JMExit,
    JMHeartbeat,
    JMHeartbeatReply,
    JobDone,
    JobDoneAck,
    JobState,
    LaunchRejected,
    ModeChange,
    NodesLost,
    Placed,
    SampleDecision,
    SampleInquiry,
    SampleReply,
    Stranded,
    TaskFailed,
    TaskRequest,
    empty_containers,
)
from megha.schedulers.macrm.multicast import Multicast, send_all
from megha.schedulers.macrm.policy import ROUND_ENDS, adaptive_rate, round_action, round_rate, samples_for
from megha.schedulers.macrm.smallassign import assign_alike, assign_scan
from megha.sim.component import Component

_EPS = 1e-9
_SMALL = 16  # rounds of at most this many tasks take the Python forms of the small array steps
UNPLACED, SAMPLING, RUNNING, REQUESTED, DONE, STRANDED = range(6)


class KnownLedger:
    """Reports each task's completion to the recorder once, even if a restarted job manager learns it again.

    Pure instrumentation (the recorder counts completion reports): no scheduling decision reads it.
    """

    def __init__(self, recorder: TaskRecorder, n_tasks: int) -> None:
        self.rec = recorder
        self.seen = bytearray(n_tasks)

    def known(self, tasks: list[int], now: float) -> None:
        """Report to the recorder the completions of ``tasks`` not reported before."""
        seen = self.seen
        new = [t for t in tasks if not seen[t]]
        if new:
            for t in new:
                seen[t] = 1
            self.rec.completion_known(new, now)


@dataclass
class JMContext:
    """What every job manager is configured with (the arbitrator's configuration file and MACRM's options)."""

    arbitrator: str
    groups: list[str]
    group_of: np.ndarray
    trackers: list[str]
    worker_masks: np.ndarray
    sampler: ProbeSampler
    recorder: TaskRecorder
    ledger: KnownLedger
    n_res: int
    rate: str = "adaptive"
    initial_rate: float = 2.0
    doubling: bool = True
    max_retries: int = 3
    sampling_timeout: float = 0.005
    jm_heartbeat: float = 1.0
    gang: bool = False
    done_retry: float = 0.5
    per_responder: str = "fill"  # "fill": a responder takes tasks while they fit; "one": one task per responder
    round_end: str = "all"  # when a sampling round stops waiting for answers (policy.ROUND_ENDS)
    cadence: Any = None  # fast-forward of periodic messages (cadence.py), simulator only
    multicast: Multicast | None = None  # one event for a message to every group (multicast.py), simulator only
    runs_of_groups: bool = field(init=False, default=False)  # group_of never decreases (set from it)
    group_of_l: list[int] = field(init=False, default_factory=list)  # group_of as a list (set from it)
    worker_masks_l: list[int] = field(init=False, default_factory=list)  # worker_masks as a list (set from it)

    def __post_init__(self) -> None:
        # node ids in order give groups in order (the deployment's contiguous shares): a sorted node list splits into
        # one run per group
        g = np.asarray(self.group_of)
        self.group_of_l = g.tolist()
        self.worker_masks_l = np.asarray(self.worker_masks).tolist()
        self.runs_of_groups = bool(g.size < 2 or (np.diff(g) >= 0).all())
        if self.per_responder not in ("fill", "one"):
            raise ValueError(f"per_responder must be 'fill' or 'one', got {self.per_responder!r}")
        if self.round_end not in ROUND_ENDS:
            raise ValueError(f"round_end must be one of {ROUND_ENDS}, got {self.round_end!r}")


class _Round:
    __slots__ = ("cap", "deferred", "free", "n_sent", "no", "nodes", "resp", "timer", "todo", "token")

    def __init__(self, no: int, token: tuple, todo: list[int], nodes: np.ndarray, timer: int) -> None:
        self.no = no
        self.token = token
        self.todo = todo
        self.nodes = nodes
        self.n_sent = int(nodes.size)
        self.timer = timer
        self.resp: list[int] = []
        self.free: list[np.ndarray] = []
        self.cap: list[np.ndarray] = []
        self.deferred = False


class JobManager(Component):
    """The job manager of ``spec`` (attempt ``attempt``) running in a container on ``node``."""

    kind = "macrm-jm"

    def __init__(
        self, address: str, ctx: JMContext, spec: JobArrival, attempt: int, node: int, load: float, central: bool
    ) -> None:
        super().__init__(address)
        self.ctx = ctx
        self.spec = spec
        self.job = spec.job
        self.attempt = attempt
        self.node = node
        self.group = int(ctx.group_of[node])
        self.tracker = ctx.trackers[self.group]
        self.load = load
        self.central = central
        self.tasks: list[int] = spec.tasks.tolist()
        self.durs: list[float] = spec.durations.tolist()
        self.n = len(self.tasks)
        self.local = {t: i for i, t in enumerate(self.tasks)}
        if spec.demands is None:
            self.demands = np.zeros((self.n, ctx.n_res))
        else:
            self.demands = np.asarray(spec.demands, dtype=np.float64).reshape(self.n, -1)
        self.masks = np.asarray(spec.masks, dtype=np.uint32)
        self._lists: tuple = ()  # (demands, masks, their rows as lists): see _as_lists
        self.state = [UNPLACED] * self.n
        self.node_of = [-1] * self.n
        self.runs = [0] * self.n  # how many times each task had to be placed again
        self.unplaced: set[int] = set(range(self.n))
        self.n_done = 0
        self.retry = 0
        self.round: _Round | None = None
        self.round_no = 0
        self.adopting = 0
        self.finished = False
        self.exited = False
        self.started_at = float("nan")  # when this process started (instrumentation: the job-manager wait)
        self.vchain = None  # fast-forward: the chain of virtual heartbeats (cadence.py)
        self.stats = {
            "rounds": 0,
            "samples": 0,
            "responses": 0,
            "sampling_failures": 0,
            "retries": 0,
            "placed_by_sampling": 0,
            "sent_to_central": 0,
            "leftover_to_central": 0,
            "task_reruns": 0,
            "tasks_lost_on_nodes": 0,
            "task_failures_seen": 0,
            "launch_rejections": 0,
            "adopted": 0,
            "late_replies": 0,
            "tasks_stranded": 0,
        }

    # --- lifecycle ---------------------------------------------------------------------------------------------
    def on_start(self, now: float) -> None:
        self.started_at = now
        cad = self.ctx.cadence
        if cad is not None:
            cad.jm_started(self)
        if cad is not None and cad.calm:
            cad.jm_sleep(self, now + self.ctx.jm_heartbeat)  # virtual heartbeats (cadence.py)
        else:
            self.port.set_timer(self.ctx.jm_heartbeat, ("hb",))
        if self.attempt > 0:
            self.adopting = len(self.ctx.groups)
            for g in self.ctx.groups:
                self.port.send(g, Adopt(self.address, self.job, self.attempt))
        else:
            self._schedule(now)

    def on_finished(self, tasks: list[int], now: float) -> None:
        """A :class:`Finished` message's tasks, delivered directly: :meth:`on_message`, step for step."""
        if not self.exited:
            self._finished(tasks, now)

    def on_message(self, msg: Any, now: float) -> None:
        if self.exited:
            return
        tp = type(msg)
        if tp is SampleReply:
            self._reply(msg, now)
        elif tp is Finished:
            self._finished(msg.tasks, now)
        elif tp is Placed:
            if msg.attempt == self.attempt:
                self._placed(msg)
        elif tp is LaunchRejected:
            self.stats["launch_rejections"] += len(msg.tasks)
            self._back(msg.tasks, msg.nodes, now)
        elif tp is TaskFailed:
            self.stats["task_failures_seen"] += len(msg.tasks)
            self.stats["task_reruns"] += len(msg.tasks)
            self._back(msg.tasks, msg.nodes, now)
        elif tp is NodesLost:
            self._nodes_lost(msg.nodes, now)
        elif tp is Stranded:
            if msg.attempt == self.attempt:
                self._stranded(msg.tasks, now)
        elif tp is JobState:
            if msg.attempt == self.attempt:
                self._job_state(msg, now)
        elif tp is ModeChange or tp is JMHeartbeatReply:
            self.load = msg.load
            was = self.central
            self.central = msg.central
            if self.central and not was:
                self._schedule(now)
        elif tp is ArbitratorUp:
            self._arbitrator_up(now)
        elif tp is JobDoneAck:
            if msg.attempt == self.attempt:
                self._exit(now)
        else:
            super().on_message(msg, now)

    def on_timer(self, key: Hashable, now: float) -> None:
        if self.exited:
            return
        kind = key[0]
        if kind == "round":
            r = self.round
            if r is not None and r.no == key[1]:
                self._place(now)
        elif kind == "hb":
            cad = self.ctx.cadence
            if cad is not None and cad.calm:
                cad.jm_sleep(self, now)  # this heartbeat and the next ones are virtual (cadence.py)
                return
            self.port.send(self.tracker, JMHeartbeat(self.address, self.job, self.attempt))
            self.port.set_timer(self.ctx.jm_heartbeat, ("hb",))
        elif kind == "done":
            self.port.send(self.ctx.arbitrator, JobDone(self.job, self.attempt))
            self.port.set_timer(self.ctx.done_retry, ("done",))

    # --- scheduling --------------------------------------------------------------------------------------------
    def _schedule(self, now: float) -> None:
        if self.adopting or self.finished or self.round is not None or not self.unplaced:
            return
        todo = sorted(self.unplaced)
        if self.central or self.ctx.gang:
            self._request(todo)
        elif self.retry > self.ctx.max_retries:
            self.stats["leftover_to_central"] += len(todo)
            self.retry = 0
            self._request(todo)
        else:
            self._start_round(todo, now)

    def _request(self, todo: list[int]) -> None:
        for i in todo:
            self.state[i] = REQUESTED
            self.unplaced.discard(i)
        self.stats["sent_to_central"] += len(todo)
        self.port.send(self.ctx.arbitrator, self._request_msg(todo))

    def _request_msg(self, todo: list[int]) -> TaskRequest:
        return TaskRequest(
            self.address,
            self.job,
            self.attempt,
            self.spec.user,
            [self.tasks[i] for i in todo],
            [self.durs[i] for i in todo],
            self.demands[todo],
            self.masks[todo].tolist(),
            gang=self.ctx.gang,
            runs=[self.runs[i] for i in todo],
        )

    def current_rate(self) -> float:
        """Sampling rate of the next round."""
        ctx = self.ctx
        d0 = adaptive_rate(self.load) if ctx.rate == "adaptive" else ctx.initial_rate
        return round_rate(d0, self.retry, ctx.doubling)

    def _start_round(self, todo: list[int], now: float) -> None:
        ctx = self.ctx
        d = self.current_rate()
        # the tasks' distinct masks in increasing order and their counts (np.unique; in Python for a round of a few
        # tasks, the usual one)
        if len(todo) <= _SMALL:
            ml = self._as_lists()[1]
            ml = [ml[i] for i in todo]
            m0 = ml[0]
            if all(m == m0 for m in ml):
                gmasks = [m0]
                counts = [len(ml)]
            else:
                gmasks = sorted(set(ml))
                counts = [ml.count(m) for m in gmasks]
        else:
            masks = self.masks[todo]
            if not masks.any():
                gmasks = [0]
                counts = [len(todo)]
            else:
                u, cnt = np.unique(masks, return_counts=True)
                gmasks = u.tolist()
                counts = cnt.tolist()
        want = [samples_for(d, c, ctx.sampler.eligible_count(m)) for m, c in zip(gmasks, counts, strict=True)]
        workers, _ = ctx.sampler.sample(self.port.rng, gmasks, want, [0] * len(gmasks))
        if workers.size <= 4 * _SMALL:  # np.unique(workers), in Python
            nl = sorted(set(workers.tolist()))
            nodes = np.array(nl, dtype=workers.dtype)
        else:
            nodes = np.unique(workers)
            nl = nodes.tolist()
        if not nl:  # nothing eligible to sample: central queue
            self.stats["leftover_to_central"] += len(todo)
            self._request(todo)
            return
        self.round_no += 1
        token = (self.job, self.attempt, self.round_no)
        need = self.demands[todo[0]].copy() if len(todo) == 1 else self.demands[todo].min(axis=0)
        if ctx.runs_of_groups:  # nodes sorted, groups contiguous: each group's nodes are one run
            gl = ctx.group_of_l
            gl = [gl[x] for x in nl] if len(nl) <= 4 * _SMALL else ctx.group_of[nodes].tolist()
            a = 0
            n_nodes = len(nl)
            for b in range(1, n_nodes + 1):
                if b == n_nodes or gl[b] != gl[a]:
                    self.port.send(
                        ctx.groups[gl[a]], SampleInquiry(self.address, self.job, self.attempt, token, nl[a:b], need)
                    )
                    a = b
        else:
            grp = ctx.group_of[nodes]
            for g in np.unique(grp).tolist():
                sel = nodes[grp == g].tolist()
                self.port.send(ctx.groups[g], SampleInquiry(self.address, self.job, self.attempt, token, sel, need))
        timer = self.port.set_timer(ctx.sampling_timeout, ("round", self.round_no))
        self.round = _Round(self.round_no, token, todo, nodes, timer)
        for i in todo:
            self.state[i] = SAMPLING
            self.unplaced.discard(i)
        self.stats["rounds"] += 1
        self.stats["samples"] += int(nodes.size)

    def _reply(self, msg: SampleReply, now: float) -> None:
        r = self.round
        if r is None or msg.token != r.token:  # too late: release the nodes holding for us
            self.stats["late_replies"] += len(msg.nodes)
            self._cancel(msg.token, msg.nodes)
            return
        self.stats["responses"] += len(msg.nodes)
        r.resp.extend(msg.nodes)
        r.free.append(msg.free)
        r.cap.append(msg.capacity)
        act = round_action(self.ctx.round_end, len(r.resp), r.n_sent, lambda: len(self._assign(r)[1]) == len(r.todo))
        if act == "place":
            self._place(now)
        elif act == "defer" and not r.deferred:
            r.deferred = True  # answers arriving at this same instant are still compared
            self.port.set_timer(0.0, ("round", r.no))

    def _cancel(self, token: tuple, nodes: list[int]) -> None:
        grp = self.ctx.group_of[nodes]
        empty = empty_containers(self.ctx.n_res)
        for g in np.unique(grp).tolist():
            sel = [n for n, x in zip(nodes, grp.tolist(), strict=True) if x == g]
            self.port.send(self.ctx.groups[g], SampleDecision(token, empty, sel))

    def _assign(self, r: _Round) -> tuple[np.ndarray, dict[int, int]]:
        """Least-loaded placement of the round's tasks on the responders so far (largest task first; a responder's
        load is its largest used fraction): (responder nodes, task index -> responder position)."""
        nodes = np.array(r.resp, dtype=np.int64)
        assigned: dict[int, int] = {}
        if not r.resp:
            return nodes, assigned
        todo = r.todo
        if len(todo) <= _SMALL and len(r.resp) <= 4 * _SMALL and self._assign_small(r, assigned):
            return nodes, assigned
        free = np.concatenate(r.free).astype(np.float64)
        cap = np.concatenate(r.cap).astype(np.float64)
        wm = self.ctx.worker_masks[nodes]
        safe = np.where(cap > 0, cap, 1.0)
        dem = self.demands[todo]
        one = self.ctx.per_responder == "one"
        masks = self.masks[todo]
        if (dem == dem[0]).all():
            if (masks == masks[0]).all():  # the usual round: one request for every task
                self._assign_alike(todo, nodes, free, cap, safe, wm, dem[0], int(masks[0]), one, assigned)
            else:  # one request, several placement constraints
                self._assign_masked(todo, free, cap, safe, wm, dem[0], masks, one, assigned)
            return nodes, assigned
        self._assign_mixed(todo, free, cap, safe, wm, dem, one, assigned)
        return nodes, assigned

    def _as_lists(self) -> tuple[list[list[float]], list[int]]:
        """The tasks' demand rows and masks as lists (made once, again if the arrays were replaced)."""
        got = self._lists
        if not got or got[0] is not self.demands or got[1] is not self.masks:
            got = self._lists = (self.demands, self.masks, self.demands.tolist(), self.masks.tolist())
        return got[2], got[3]

    def _assign_small(self, r: _Round, assigned: dict[int, int]) -> bool:
        """:meth:`_assign` of a small round of one demand in plain Python (smallassign.py: the same placements, step
        for step); False (nothing done) for several demands."""
        todo = r.todo
        dl, ml = self._as_lists()
        d = dl[todo[0]]
        if any(dl[i] != d for i in todo):
            return False
        free = [row for part in r.free for row in part.tolist()]
        cap = [row for part in r.cap for row in part.tolist()]
        safe = [[c if c > 0 else 1.0 for c in row] for row in cap]
        wml = self.ctx.worker_masks_l
        wm = [wml[x] for x in r.resp]
        one = self.ctx.per_responder == "one"
        m0 = ml[todo[0]]
        if all(ml[i] == m0 for i in todo):
            assign_alike(todo, free, cap, safe, wm, d, m0, one, assigned)
        else:
            for i, j in zip(todo, assign_scan(free, cap, safe, wm, d, [ml[i] for i in todo], one), strict=True):
                if j >= 0:
                    assigned[i] = j
        return True

    @staticmethod
    def _assign_masked(
        todo: list[int],
        free: np.ndarray,
        cap: np.ndarray,
        safe: np.ndarray,
        wm: np.ndarray,
        d: np.ndarray,
        masks: np.ndarray,
        one: bool,
        assigned: dict[int, int],
    ) -> None:
        """:meth:`_assign` for tasks of one demand and several masks, in order: each to the least loaded responder
        (lowest position on ties) that it may run on and that has room, with the loads kept up to date as tasks are
        placed (one compiled loop: :func:`~megha.schedulers.macrm._kernels.k_assign_masked`)."""
        out = k_assign_masked(
            np.array(free, dtype=np.float64),
            np.ascontiguousarray(cap, dtype=np.float64),
            np.ascontiguousarray(safe, dtype=np.float64),
            np.ascontiguousarray(wm, dtype=np.uint32),
            np.ascontiguousarray(d, dtype=np.float64),
            np.ascontiguousarray(masks, dtype=np.uint32),
            bool(one),
        )
        for i, j in zip(todo, out.tolist(), strict=True):
            if j >= 0:
                assigned[i] = j

    def _assign_mixed(
        self,
        todo: list[int],
        free: np.ndarray,
        cap: np.ndarray,
        safe: np.ndarray,
        wm: np.ndarray,
        dem: np.ndarray,
        one: bool,
        assigned: dict[int, int],
    ) -> None:
        """:meth:`_assign` for tasks of several demands or masks, largest first: each task to the least loaded
        responder (lowest position on ties) it fits and may run on. Responders are kept sorted by (load, position),
        so a task scans only the least loaded ones until one qualifies, instead of every responder."""
        order = sorted(range(len(todo)), key=lambda k: tuple(-dem[k]))
        free_l = free.tolist()
        cap_l, safe_l = cap.tolist(), safe.tolist()
        wm_l = wm.tolist()
        dem_l = dem.tolist()
        masks = self.masks
        load = ((cap - free) / safe).max(axis=1).tolist()
        keys = SortedList(zip(load, range(len(free_l)), strict=True))
        for k in order:
            i = todo[k]
            d = dem_l[k]
            m = int(masks[i])
            j = -1
            for _, p in keys:
                if m and m & ~wm_l[p] & 0xFFFFFFFF:
                    continue
                if all(f + _EPS >= x for f, x in zip(free_l[p], d, strict=True)):
                    j = p
                    break
            if j < 0:
                continue
            keys.remove((load[j], j))
            fj = free_l[j] = [f - x for f, x in zip(free_l[j], d, strict=True)]
            assigned[i] = j
            if not one:
                load[j] = max((c - f) / s for c, f, s in zip(cap_l[j], fj, safe_l[j], strict=True))
                keys.add((load[j], j))

    @staticmethod
    def _assign_alike(
        todo: list[int],
        nodes: np.ndarray,
        free: np.ndarray,
        cap: np.ndarray,
        safe: np.ndarray,
        wm: np.ndarray,
        d: np.ndarray,
        mask: int,
        one: bool,
        assigned: dict[int, int],
    ) -> None:
        """:meth:`_assign` for tasks with one demand and mask: the same choices (least load, then lowest position),
        from a sorted list or a heap instead of a scan of every responder per task."""
        ok = (free + _EPS >= d).all(axis=1)
        if mask:
            ok &= (np.uint32(mask) & ~wm) == 0
        cand = np.flatnonzero(ok)
        if not cand.size:
            return
        load = ((cap - free) / safe).max(axis=1)
        if one:  # each responder takes one task: the least loaded responders, in order
            for i, j in zip(todo, cand[np.argsort(load[cand], kind="stable")].tolist(), strict=False):
                assigned[i] = j
            return
        heap = list(zip(load[cand].tolist(), cand.tolist(), strict=True))
        heapq.heapify(heap)
        dl = d.tolist()
        free_l, cap_l, safe_l = free.tolist(), cap.tolist(), safe.tolist()
        for i in todo:
            if not heap:
                break
            _, j = heapq.heappop(heap)
            fj = free_l[j] = [a - b for a, b in zip(free_l[j], dl, strict=True)]
            assigned[i] = j
            if all(a + _EPS >= b for a, b in zip(fj, dl, strict=True)):  # still fits another: back with its new load
                heapq.heappush(heap, (max((c - f) / s for c, f, s in zip(cap_l[j], fj, safe_l[j], strict=True)), j))

    def _place(self, now: float) -> None:
        """Least-loaded placement of the round's tasks on the responders."""
        r = self.round
        self.round = None
        self.port.cancel_timer(r.timer)
        todo = r.todo
        assigned: dict[int, int] = {}
        if r.resp:
            nodes, assigned = self._assign(r)
            self._decide(r, nodes, assigned, now)
        leftover = [i for i in todo if i not in assigned]
        for i in leftover:
            self.state[i] = UNPLACED
            self.unplaced.add(i)
        self.stats["placed_by_sampling"] += len(assigned)
        if leftover:
            self.stats["sampling_failures"] += 1
            self.retry += 1
            if self.retry <= self.ctx.max_retries and not self.central:
                self.stats["retries"] += 1
        else:
            self.retry = 0
        self._schedule(now)

    def _decide(self, r: _Round, nodes: np.ndarray, assigned: dict[int, int], now: float) -> None:
        ctx = self.ctx
        nodes_l = nodes.tolist()
        grp = ctx.group_of[nodes].tolist()
        used = [False] * len(nodes_l)
        per_group: dict[int, list[int]] = {}  # group -> the tasks placed there, in task order
        ids: list[int] = []
        tasks, state, node_of = self.tasks, self.state, self.node_of
        for i, j in sorted(assigned.items()):
            used[j] = True
            node = nodes_l[j]
            lst = per_group.get(grp[j])
            if lst is None:
                per_group[grp[j]] = [i]
            else:
                lst.append(i)
            state[i] = RUNNING
            node_of[i] = node
            ids.append(tasks[i])
        if ids:
            ctx.recorder.decided(ids, now)
        cancel: dict[int, list[int]] = {}
        for j, u in enumerate(used):
            if not u:
                cancel.setdefault(grp[j], []).append(nodes_l[j])
        for g in sorted(set(per_group) | set(cancel)):
            ii = per_group.get(g)
            if ii is None:
                c = empty_containers(ctx.n_res)
            else:
                k = len(ii)
                c = Containers(
                    [node_of[i] for i in ii],
                    [tasks[i] for i in ii],
                    [self.job] * k,
                    [self.attempt] * k,
                    [self.spec.user] * k,
                    [self.durs[i] for i in ii],
                    self.demands[ii],
                    [self.address] * k,
                    [0] * k,
                    [None] * k,
                )
            self.port.send(ctx.groups[g], SampleDecision(r.token, c, cancel.get(g, [])))

    # --- outcomes ----------------------------------------------------------------------------------------------
    def _placed(self, msg: Placed) -> None:
        for t, node in zip(msg.tasks, msg.nodes, strict=True):
            i = self.local.get(t)
            if i is None or self.state[i] == DONE:
                continue
            if self.state[i] == UNPLACED:
                self.unplaced.discard(i)
            self.state[i] = RUNNING
            self.node_of[i] = node

    def _back(self, tasks: list[int], nodes: list[int], now: float) -> None:
        """Tasks that did not start or whose run failed: place them again."""
        for t, node in zip(tasks, nodes, strict=True):
            i = self.local.get(t)
            if i is None or self.state[i] != RUNNING or self.node_of[i] != node:
                continue
            self.state[i] = UNPLACED
            self.node_of[i] = -1
            self.runs[i] += 1
            self.unplaced.add(i)
        self._schedule(now)

    def _nodes_lost(self, nodes: list[int], now: float) -> None:
        lost = set(nodes)
        n = 0
        for i in range(self.n):
            if self.state[i] == RUNNING and self.node_of[i] in lost:
                self.state[i] = UNPLACED
                self.node_of[i] = -1
                self.runs[i] += 1
                self.unplaced.add(i)
                n += 1
        if n:
            self.stats["tasks_lost_on_nodes"] += n
            self.stats["task_reruns"] += n
            self._schedule(now)

    def _stranded(self, tasks: list[int], now: float) -> None:
        """Requested tasks that no live node can host: the job completes without them (they never run)."""
        for t in tasks:
            i = self.local.get(t)
            if i is None or self.state[i] != REQUESTED:
                continue
            self.state[i] = STRANDED
            self.n_done += 1
            self.stats["tasks_stranded"] += 1
        if self.n_done == self.n and not self.finished:
            self._finish(now)

    def _finished(self, tasks: list[int] | np.ndarray, now: float) -> None:
        new: list[int] = []
        for t in tasks if isinstance(tasks, list) else tasks.tolist():
            i = self.local.get(t)
            if i is None or self.state[i] >= DONE:
                continue
            self.unplaced.discard(i)
            self.state[i] = DONE
            self.n_done += 1
            new.append(t)
        if new:
            ledger = self.ctx.ledger  # ledger.known(new, now)
            seen = ledger.seen
            new = [t for t in new if not seen[t]]
            if new:
                for t in new:
                    seen[t] = 1
                ledger.rec.completion_known(new, now)
        if self.n_done == self.n and not self.finished:
            self._finish(now)

    def _finished_one(self, t: int, now: float) -> None:
        """:meth:`_finished` of one task (the node managers' common case), step for step."""
        i = self.local.get(t)
        if i is not None and self.state[i] < DONE:
            self.unplaced.discard(i)
            self.state[i] = DONE
            self.n_done += 1
            ledger = self.ctx.ledger  # ledger.known([t], now)
            seen = ledger.seen
            if not seen[t]:
                seen[t] = 1
                ledger.rec.completion_known_one(t, now)
        if self.n_done == self.n and not self.finished:
            self._finish(now)

    def _job_state(self, msg: JobState, now: float) -> None:
        self.adopting -= 1
        for t, node in zip(msg.running, msg.nodes, strict=True):
            i = self.local.get(t)
            if i is not None and self.state[i] != DONE:
                self.state[i] = RUNNING
                self.node_of[i] = node
                self.unplaced.discard(i)
                self.stats["adopted"] += 1
        self._finished(list(msg.finished), now)
        if self.adopting == 0 and not self.finished:
            self._schedule(now)

    def _arbitrator_up(self, now: float) -> None:
        if self.finished:
            self.port.send(self.ctx.arbitrator, JobDone(self.job, self.attempt))
            return
        todo = [i for i in range(self.n) if self.state[i] == REQUESTED]
        if todo:
            self.port.send(self.ctx.arbitrator, self._request_msg(todo))

    def _finish(self, now: float) -> None:
        self.finished = True
        self.port.send(self.ctx.arbitrator, JobDone(self.job, self.attempt))
        self.port.set_timer(self.ctx.done_retry, ("done",))

    def _exit(self, now: float) -> None:
        if self.exited:
            return
        self.exited = True
        ctx = self.ctx
        if ctx.cadence is not None:
            if self.vchain is not None:
                ctx.cadence.jm_exit(self, now)
            ctx.cadence.jm_exited(self)
        self.port.send(ctx.groups[self.group], JMExit(self.job, self.attempt))
        self.port.send(self.tracker, JMHeartbeat(self.address, self.job, self.attempt, final=True))
        send_all(self.port, ctx.multicast, ctx.groups, Forget(self.job), now)
