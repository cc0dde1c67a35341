"""PigeonC/Pigeon distributors: hand each task of a job to a master; no probing, no load information.

* PigeonC (constraint-aware): a task goes to a master drawn at random with weight = number of workers in that
  master's group that satisfy the task's constraints (:class:`MasterWeights`, cached per constraint mask).
* Pigeon (original): a job's tasks are spread evenly over the masters, round robin from a random master. With
  placement constraints, a task whose turn falls on a master with no suitable worker moves on to the next
  master that has one (so a constrained run cannot strand a task).

The distributor classifies a job as short when its mean task duration is below the cutoff, and learns of task
completions from the masters (:class:`~megha.schedulers.pigeon.messages.TasksDone`).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

import numpy as np

from megha.metrics.recorder import TaskRecorder
from megha.model.matching import SegmentedIndex
from megha.schedulers.common.messages import JobArrival
from megha.schedulers.pigeon.messages import GroupBack, Reroute, TaskBatch, TaskDone, TasksDone
from megha.sim.component import Component


class MasterWeights:
    """Static per-master counts of workers satisfying a constraint mask (a memo over the cluster description).

    Built on a :class:`~megha.model.matching.SegmentedIndex` whose segments are the masters' groups. Read-only
    cluster data, so the distributors of a deployment may share one instance.
    """

    def __init__(self, index: SegmentedIndex, reference: bool = False) -> None:
        """``reference=True`` reproduces the authors' simulator's constraint-set table (see :meth:`_reference`)."""
        self.index = index
        self.n_masters = index.n_segments
        self._cum: dict[int, np.ndarray] = {}
        self._cum_lists: dict[int, list[int]] = {}
        self._counts: dict[int, list[int]] = {}
        self.reference = reference
        if reference:
            self._ref_keys, self._ref_counts, self._ref_owner = self._reference_tables()

    def _reference_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The reference simulator's per-master constraint-set occurrence table.

        Workers are visited in order; a worker whose constraint set is a subset of sets already in the table
        increments each of those, otherwise its set enters the table with count 1. A task's weight is then the
        sum of the counts of the sets that contain the task's constraints, which counts workers that do not
        satisfy the task (a subset of a superset). This compatibility mode reproduces the paper's PigeonC routing.
        """
        idx = self.index
        keys, counts, owner = [], [], []
        for s in range(idx.n_segments):
            lo = int(idx.seg_word_start[s]) * 64
            table: dict[int, int] = {}
            for m in idx.mask_at_bit[lo : lo + int(idx.seg_size[s])].tolist():
                hit = False
                for k in table:
                    if not (m & ~k):
                        table[k] += 1
                        hit = True
                if not hit:
                    table[m] = 1
            keys.extend(table)
            counts.extend(table.values())
            owner.extend([s] * len(table))
        return (np.array(keys, dtype=np.int64), np.array(counts, dtype=np.int64), np.array(owner, dtype=np.int64))

    def counts(self, mask: int) -> np.ndarray:
        """Workers of each master's group that have every constraint in ``mask``."""
        return np.array(self._count_list(mask), dtype=np.int64)

    def _count_list(self, mask: int) -> list[int]:
        c = self._counts.get(mask)
        if c is None:
            c = np.diff(self.cumulative(mask), prepend=0).tolist()
            if len(self._counts) >= 1 << 17:
                self._counts.clear()
            self._counts[mask] = c
        return c

    def cumulative(self, mask: int) -> np.ndarray:
        """Cumulative counts over masters (``[-1]`` = suitable workers in the datacenter), cached."""
        c = self._cum.get(mask)
        if c is None:
            idx = self.index
            bits = np.bitwise_count(idx.static_vector(mask))
            if idx.uniform_words:
                per = bits.reshape(idx.n_segments, idx.uniform_words).sum(axis=1, dtype=np.int64)
            else:
                per = np.add.reduceat(bits.astype(np.int64), idx.seg_word_start[:-1])
            if self.reference:
                fit = (int(mask) & ~self._ref_keys) == 0
                ref = np.bincount(self._ref_owner[fit], self._ref_counts[fit], minlength=idx.n_segments)
                per = np.where(per > 0, ref.astype(np.int64), 0)  # the reference stops on a master with none
            c = np.cumsum(per)
            if len(self._cum) >= 1 << 17:
                self._cum.clear()
            self._cum[mask] = c
        return c

    def choose(self, masks: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Weighted master choice for each task, ``u`` uniform in [0, 1) per task."""
        uniq, inv = np.unique(masks, return_inverse=True)
        if uniq.size == 1:
            c = self.cumulative(int(uniq[0]))
            return np.searchsorted(c, u * c[-1], side="right")
        cum = np.stack([self.cumulative(m) for m in uniq.tolist()])[inv.ravel()]
        x = u * cum[:, -1]
        return (cum <= x[:, None]).sum(axis=1)

    def choose_list(self, masks: list[int], u: list[float]) -> list[int]:
        """:meth:`choose` on plain lists, one task at a time (a job has a few dozen tasks: cheaper than numpy's
        per-call costs). The same choices: ``bisect_right`` counts the cumulative counts ``<= u·total`` exactly as
        the vectorized comparison does (counts are exact in float64)."""
        cl = self._cum_lists
        missing = set(masks).difference(cl)
        if missing:
            if len(cl) + len(missing) > 1 << 17:
                cl.clear()
            for m in missing:
                cl[m] = self.cumulative(m).tolist()
        return [bisect_right(c, x * c[-1]) for c, x in zip(map(cl.__getitem__, masks), u, strict=True)]

    def spread(self, masks: np.ndarray, start: int) -> np.ndarray:
        """Even spread (round robin from ``start``); a task skips masters with no suitable worker."""
        n = masks.size
        m_idx = (start + np.arange(n, dtype=np.int64)) % self.n_masters
        constrained = np.flatnonzero(masks != 0)
        if constrained.size:
            n_m = self.n_masters
            for i, mask in zip(constrained.tolist(), masks[constrained].tolist(), strict=True):
                counts = self._count_list(mask)
                j = int(m_idx[i])
                k = 0
                while counts[j] == 0 and k < n_m:  # next master (cyclic) with a suitable worker
                    j = (j + 1) % n_m
                    k += 1
                m_idx[i] = j
        return m_idx


class PigeonDistributor(Component):
    """One distributor (sans-I/O): receives jobs, sends each master its share of the tasks."""

    kind = "distributor"

    def __init__(
        self,
        address: str,
        number: int,
        masters: list[str],
        weights: MasterWeights,
        recorder: TaskRecorder,
        cutoff: float,
        weighted: bool = True,
    ) -> None:
        super().__init__(address)
        if len(masters) != weights.n_masters:
            raise ValueError(f"{address}: {len(masters)} masters but weights for {weights.n_masters}")
        self.number = number
        self.masters = list(masters)
        self.weights = weights
        self.rec = recorder
        self.cutoff = float(cutoff)
        self.weighted = weighted
        self.jobs_short = 0
        self.jobs_long = 0
        # what the distributor knows of failures (megha.schedulers.pigeon.faults.Health), set by a fault handler
        self.health = None
        self.parked: list[tuple[int, int, float, int, bool]] = []  # (job, task, duration, mask, short)
        self.rerouted = 0

    def on_message(self, msg: Any, now: float) -> None:
        if type(msg) is TaskDone:
            self.rec.completion_known([msg.task], now)
        elif isinstance(msg, TasksDone):
            self.rec.completion_known(msg.tasks, now)
        elif isinstance(msg, JobArrival):
            self._distribute(msg, now)
        elif isinstance(msg, Reroute):
            self.rerouted += len(msg)
            self._route(msg.job, msg.tasks, msg.durations, msg.masks, msg.short)
        elif isinstance(msg, GroupBack):
            self._retry_parked()
        else:
            super().on_message(msg, now)

    def choose_masters(self, masks: np.ndarray) -> np.ndarray:
        """Master index of each task of a job (-1: no master has a live worker for it, after failures)."""
        rng = self.port.rng
        if self.health is not None and self.health.degraded:
            return self._choose_live(masks)
        if self.weighted:
            return self.weights.choose(masks, rng.random(masks.size))
        return self.weights.spread(masks, int(rng.integers(self.weights.n_masters)))

    def _distribute(self, msg: JobArrival, now: float) -> None:
        n = msg.tasks.size
        if n == 0:
            return
        short = bool(msg.mean_duration < self.cutoff)
        if short:
            self.jobs_short += 1
        else:
            self.jobs_long += 1
        if self.weighted and (self.health is None or not self.health.degraded):
            self._send_weighted(msg, short, now)
            return
        m_idx = self.choose_masters(msg.masks)
        send = self.port.send
        if n == 1 and m_idx[0] >= 0:
            send(
                self.masters[int(m_idx[0])], TaskBatch(msg.job, msg.tasks, msg.durations, msg.masks, short, self.number)
            )
            return
        self._send(msg.job, msg.tasks, msg.durations, msg.masks, short, m_idx)

    def _send_weighted(self, msg: JobArrival, short: bool, now: float) -> None:
        """:meth:`choose_masters` and :meth:`_send` for the weighted choice without failures (the common case), on
        lists: the same draws, choices and batches (each master's tasks in job order, masters in index order). In
        the simulator a batch goes straight to the master's ``on_message_batch`` (SimPort.route: the same event and
        count as the :class:`TaskBatch`, its tasks as lists)."""
        tasks = msg.tasks
        n = tasks.size
        masks = msg.masks.tolist()
        m_list = self.weights.choose_list(masks, self.port.rng.random(n).tolist())
        route = getattr(self.port, "route", None)
        first = m_list[0]
        if n == 1 or m_list.count(first) == n:
            r = route(self.masters[first], "on_message_batch", TaskBatch) if route is not None else False
            if r:
                self._deliver(r, msg.job, tasks.tolist(), msg.durations.tolist(), masks, short, now)
            else:
                self.port.send(
                    self.masters[first], TaskBatch(msg.job, tasks, msg.durations, msg.masks, short, self.number)
                )
            return
        if route is not None:
            by_master: dict[int, tuple[list, list, list]] = {}
            for t, d, m, k in zip(tasks.tolist(), msg.durations.tolist(), masks, m_list, strict=True):
                lists = by_master.get(k)
                if lists is None:
                    by_master[k] = ([t], [d], [m])
                else:
                    lists[0].append(t)
                    lists[1].append(d)
                    lists[2].append(m)
            for k in sorted(by_master):
                r = route(self.masters[k], "on_message_batch", TaskBatch)
                ts, ds, ms = by_master[k]
                if r:
                    self._deliver(r, msg.job, ts, ds, ms, short, now)
                else:
                    self.port.send(
                        self.masters[k],
                        TaskBatch(
                            msg.job,
                            np.array(ts, dtype=np.int64),
                            np.array(ds, dtype=np.float64),
                            np.array(ms, dtype=msg.masks.dtype),
                            short,
                            self.number,
                        ),
                    )
            return
        send = self.port.send
        order = sorted(range(n), key=m_list.__getitem__)  # stable, as np.argsort(kind="stable")
        o = np.array(order, dtype=np.int64)
        tasks, durs, masks_a = tasks[o], msg.durations[o], msg.masks[o]
        a = 0
        cur = m_list[order[0]]
        for b in range(1, n + 1):
            nxt = m_list[order[b]] if b < n else -1
            if nxt != cur:
                send(self.masters[cur], TaskBatch(msg.job, tasks[a:b], durs[a:b], masks_a[a:b], short, self.number))
                a = b
                cur = nxt

    def _deliver(self, r: tuple, job: int, tasks: list, durs: list, masks: list, short: bool, now: float) -> None:
        """A :class:`TaskBatch`'s event through a route (SimPort.route): counted, its tasks' communication delay
        recorded (the message's ``alloc_tasks``), the master's ``on_message_batch`` called on arrival."""
        append, handler, d, nxt, cell, comm = r
        cell[0] += 1
        if comm is not None:
            self.rec.add_comm(tasks, d)
        append((now + d, nxt(), handler, (job, tasks, durs, masks, short, self.number)))

    def _send(
        self, job: int, tasks: np.ndarray, durs: np.ndarray, masks: np.ndarray, short: bool, m_idx: np.ndarray
    ) -> None:
        """Send each master its tasks (one batch each); tasks with master -1 wait here (:meth:`_retry_parked`)."""
        n = tasks.size
        if self.health is not None and self.health.degraded and (m_idx < 0).any():
            for i in np.flatnonzero(m_idx < 0).tolist():
                self.parked.append((job, int(tasks[i]), float(durs[i]), int(masks[i]), short))
            keep = m_idx >= 0
            tasks, durs, masks, m_idx = tasks[keep], durs[keep], masks[keep], m_idx[keep]
            n = tasks.size
            if not n:
                return
        send = self.port.send
        order = np.argsort(m_idx, kind="stable")
        sorted_m = m_idx[order]
        cuts = np.flatnonzero(sorted_m[1:] != sorted_m[:-1]) + 1
        starts = np.r_[0, cuts]
        ends = np.r_[cuts, n]
        tasks, durs, masks = tasks[order], durs[order], masks[order]
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            send(
                self.masters[int(sorted_m[a])],
                TaskBatch(job, tasks[a:b], durs[a:b], masks[a:b], short, self.number),
            )

    # --- failures (fault schedules, see :mod:`megha.schedulers.pigeon.faults`) -------------------------------------
    def _choose_live(self, masks: np.ndarray) -> np.ndarray:
        """Master choice while workers or masters are down: the same rule (weighted by suitable workers, or the
        even spread) over the *live* suitable workers of the masters that are up; a task whose only live suitable
        workers belong to a crashed master goes to that master (it waits there until the master recovers); -1 when
        no live worker anywhere can run it."""
        rng = self.port.rng
        h = self.health
        n = masks.size
        out = np.full(n, -1, dtype=np.int64)
        u = rng.random(n) if self.weighted else None
        start = 0 if self.weighted else int(rng.integers(self.weights.n_masters))
        uniq, inv = np.unique(masks, return_inverse=True)
        inv = inv.ravel()
        for k, m in enumerate(uniq.tolist()):
            counts = h.live_counts(m)
            up = np.where(h.master_up, counts, 0)
            if up.any():
                counts = up
            elif not counts.any():
                continue
            sel = np.flatnonzero(inv == k)
            if self.weighted:
                cum = np.cumsum(counts)
                out[sel] = np.searchsorted(cum, u[sel] * cum[-1], side="right")
            else:
                n_m = counts.size
                for i in sel.tolist():
                    j = (start + i) % n_m
                    while counts[j] == 0:
                        j = (j + 1) % n_m
                    out[i] = j
        return out

    def _route(self, job: int, tasks: np.ndarray, durs: np.ndarray, masks: np.ndarray, short: bool) -> None:
        """Route tasks a master handed back (or that waited here) to masters with live suitable workers."""
        self._send(job, tasks, durs, masks, short, self._choose_live(masks))

    def _retry_parked(self) -> None:
        """Workers came back: route the tasks that no live worker could run."""
        if not self.parked:
            return
        parked, self.parked = self.parked, []
        for short in (True, False):
            sel = [p for p in parked if p[4] is short]
            if sel:
                self._route(
                    -1,
                    np.array([p[1] for p in sel], dtype=np.int64),
                    np.array([p[2] for p in sel], dtype=np.float64),
                    np.array([p[3] for p in sel], dtype=np.uint32),
                    short,
                )
