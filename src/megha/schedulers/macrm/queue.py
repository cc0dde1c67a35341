"""The arbitrator's queue-actor (thesis §3.2.2, Fig. 3.9): the central queue and its service on heartbeats.

One central queue, ``fifo`` or ``fair`` (users ordered by dominant share of the cluster, from the trackers' per-user
statistics plus the arbitrator's own allocations since). It holds job-manager container requests
(:class:`Item` with ``tasks == [-1]``) and the task requests of job managers (leftovers after sampling retries,
everything in centralized mode, gang requests). In *distributed* mode it is served when a tracker forwards the
heartbeat of a node with free resources (:meth:`QueueActor._serve_node`): the allocations travel in the heartbeat's
reply (the node ignores samplings until then, Fig. 3.3). Allocations a node rejects (stale view) go back to the
front of the queue.

:class:`QueueActor` is a part of :class:`~megha.schedulers.macrm.arbitrator.ResourceArbitrator`: it owns
``queues``, ``n_queued`` and the sequence numbers ``_seq``/``_front``, and reads the arbitrator's job records,
view and statistics.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from sortedcontainers import SortedDict

from megha.schedulers.common.messages import JobArrival
from megha.schedulers.macrm.messages import (
    AllocRejected,
    Containers,
    Stranded,
    TaskRequest,
    concat_containers,
)

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
        """Recompute the request's smallest demand and the constraints common to its tasks (after its tasks changed)."""
        self.min_dem = self.demands.min(axis=0)
        m = int(np.bitwise_and.reduce(self.masks)) if self.masks.size else 0
        self.and_mask = m

    @property
    def is_jm(self) -> bool:
        """Whether the request is a job-manager container."""
        return self.tasks[0] < 0


class QueueActor:
    """The central queue: ordering, requests of job managers, service on forwarded heartbeats, rejections."""

    def _next_seq(self, front: bool) -> int:
        if front:
            self._front -= 1
            return self._front
        self._seq += 1
        return self._seq

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

    def _items(self) -> Iterator[Item]:
        for u in self._user_order():
            q = self.queues.get(u)
            if q:
                yield from list(q.values())

    def _purge_job(self, job: int) -> None:
        for q in self.queues.values():
            for it in [it for it in q.values() if it.job == job]:
                self._dequeue(it)

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
        if self.view.n_dead:
            self._strand([it])
        if self.central or it.gang:
            self._dispatch(now)

    def _strand(self, items: list[Item]) -> None:
        """Drop the queued tasks that no live node can host (the only nodes whose constraints and capacity fit them
        failed; failed nodes do not come back) and tell their job managers (:class:`Stranded`). Left queued, they
        would wait forever and so would their job managers, whose containers count against the job-manager share:
        other jobs would wait for a job manager behind them."""
        live = ~self.view.dead
        wm = self.worker_masks[live]
        cap = None if self.capacity is None else self.capacity[live]
        for it in items:
            if it.removed or it.is_jm:
                continue
            gone: list[int] = []
            for k in range(len(it.tasks)):
                m = np.uint32(it.masks[k])
                ok = (wm & m) == m
                if cap is not None:
                    ok &= (cap + _EPS >= it.demands[k]).all(axis=1)
                if not ok.any():
                    gone.append(k)
            if not gone:
                continue
            self.stats["tasks_stranded"] += len(gone)
            self.port.send(it.owner, Stranded(it.attempt, [it.tasks[k] for k in gone]))
            self._take_from(it, gone)
            if it.gang and not it.removed:
                it.gang = False  # the rest can never all run together
                it.blocked = False

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


def _local(spec: JobArrival, task: int) -> int:
    """Index of global task ``task`` in the job's arrays (tasks of a job are contiguous ids, possibly filtered)."""
    k = int(np.searchsorted(spec.tasks, task))
    return k
