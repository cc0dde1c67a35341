"""Global fair sharing with preemption (Megha paper §IV-C, Algorithm 2).

Users have queues with configured shares of the datacenter; each user queue is mapped to one GM, and a
GM serves its queues round robin. Fairness acts only under contention: when a task finds no worker in
the GM's internal partitions nor by repartition, and its user is under its share, the GM asks an LM to
preempt tasks of the user with the largest share violation; the LM verifies the request (the GM's view of
other users' consumption may be stale). A user over its share waits.

Usage is counted in *units*: running tasks in slot mode, CPU cores in resource mode, as a fraction of the
datacenter's total.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from megha.model.matching import WaitQueue

# entry layout of a queued task (tuples are compact and fast)
E_TASK, E_DUR, E_MASK, E_DEMAND, E_USER, E_JOB = range(6)


@dataclass
class FairShare:
    """Shares (fractions summing to ≤ 1), the GM of each user, and the datacenter's total units."""

    shares: np.ndarray
    user_gm: np.ndarray
    total: float

    @property
    def n_users(self) -> int:
        """How many users (user queues) have a configured share."""
        return int(self.shares.size)

    def violation(self, usage: np.ndarray) -> np.ndarray:
        """Usage share minus configured share, per user (positive = over its share)."""
        return usage / self.total - self.shares

    def under_share(self, user: int, usage: np.ndarray) -> bool:
        """Whether ``user`` uses less than its share (``usage[user]`` units over the datacenter's total); only such a
        user's tasks may ask for a preemption (Algorithm 2)."""
        return bool(usage[user] / self.total < self.shares[user] - 1e-12)

    def victims(self, user: int, usage: np.ndarray, units: float = 0.0) -> list[int]:
        """Users over their share by at least ``units``, largest violation first (never ``user`` itself).

        A victim must stay at or above its own share after giving up ``units``. Without this rule two users
        whose shares are not whole tasks preempt each other for ever: each is over its share while it runs its
        one task and under it once preempted (found by the property test; the paper's Algorithm 2 does not
        say how much violation is enough). With it, preemption only ever moves a user towards its share and
        never pushes another below its own, so the total shortfall under the shares shrinks with every
        preemption and preemption always ends.
        """
        v = self.violation(usage)
        need = units / self.total - 1e-12
        order = np.argsort(-v, kind="stable")
        return [int(u) for u in order if u != user and v[u] > 1e-12 and v[u] >= need]


_FF = None


def first_fit_kernel() -> Callable[..., int]:
    """The compiled first-fit kernel, loaded on first use."""
    global _FF
    if _FF is None:
        from megha.schedulers.megha._kernels import first_fit_min

        _FF = first_fit_min
    return _FF


class MaskQueue(WaitQueue):
    """:class:`~megha.model.matching.WaitQueue` with a faster first-fit kernel (same answers).

    Megha's queues hold thousands of distinct constraint masks under load (GOOG_subtrace: ~1,600), so the
    scan for a freed worker is the hottest loop of a loaded run; :func:`._kernels.first_fit_min` does it as a
    vectorized minimum. Relies on WaitQueue's slot arrays (``_masks``, ``_heads``, ``_n_slots``, ``_take``).
    """

    def push_back(self, entry: Any, mask: int) -> None:
        s = self._slot_of.get(mask)
        if s is None:
            s = self._slot(int(mask))
        self._back += 1
        b = self._buckets[s]
        if not b:
            self._heads[s] = self._back
            self._empty_slots -= 1
        b.append((self._back, entry))
        self._len += 1

    def pop_first_fitting(self, worker_mask: int) -> Any:
        return self.pop_first_fitting_inv(~int(worker_mask) & 0xFFFFFFFF)

    def pop_first_fitting_inv(self, inverted_worker_mask: int) -> Any:
        if not self._len:
            return None
        s = (_FF or first_fit_kernel())(self._masks, self._heads, self._n_slots, inverted_worker_mask)
        if s < 0:
            return None
        return self._take(s)


def _lower(bound: np.ndarray | None, demand) -> np.ndarray:
    """Componentwise minimum of a running lower bound and a demand (the bound never rises on removal, so it
    stays a valid lower bound of whatever is still queued)."""
    d = np.asarray(demand, dtype=np.float64)
    return d.copy() if bound is None else np.minimum(bound, d)


class SingleQueue:
    """One FIFO (no fairness): the GM's task queue."""

    def __init__(self) -> None:
        self.q = MaskQueue()
        self.dmin: np.ndarray | None = None  # resource mode: lower bound of every queued demand

    def __len__(self) -> int:
        return len(self.q)

    def push_back(self, e: tuple) -> None:
        """Queue task entry ``e`` at the tail (a new task)."""
        self.q.push_back(e, e[E_MASK])
        if e[E_DEMAND] is not None:
            self.dmin = _lower(self.dmin, e[E_DEMAND])

    def push_front(self, e: tuple) -> None:
        """Queue task entry ``e`` at the head (a task that comes back, e.g. after an inconsistency)."""
        self.q.push_front(e, e[E_MASK])
        if e[E_DEMAND] is not None:
            self.dmin = _lower(self.dmin, e[E_DEMAND])

    def pop_fitting(
        self,
        wmask: int,
        accept: Callable[[tuple], bool] | None = None,
        usage: np.ndarray | None = None,
        inv: int | None = None,
    ) -> tuple | None:
        """Take the first entry (in queue order) whose constraints worker mask ``wmask`` satisfies (``inv``: the mask
        already inverted) and that ``accept`` takes, if given (resource mode: it fits); None if none. ``usage`` is
        unused without fairness."""
        if accept is None:
            return self.q.pop_first_fitting(wmask) if inv is None else self.q.pop_first_fitting_inv(inv)
        return self.q.pop_first_fitting_where(wmask, accept)

    def heads(self, k: int) -> list[tuple]:
        """The first ``k`` entries of the queue, in queue order (not removed)."""
        return self.q.entries()[:k]

    def drain(
        self,
        place: Callable[[tuple], bool],
        key: Callable[[tuple], Hashable] | None = None,
        fits: Callable[[np.ndarray, np.ndarray, int], tuple[set, set]] | None = None,
    ) -> int:
        """Offer queued tasks in FIFO order to ``place(entry) -> bool`` (see :func:`.jobqueue.drain_queue`; ``fits``:
        the masks it calls hopeless start as failed, :data:`.jobqueue.MaskFit`)."""
        from megha.schedulers.megha.jobqueue import drain_queue

        q = self.q
        if key is None and fits is not None:
            failed, hopeful = fits(q._masks, q._heads, q._n_slots)
            return drain_queue(q, place, failed, None, key, hopeful)
        return drain_queue(q, place, set(), None, key)

    def remove(self, pred: Callable[[tuple], bool]) -> list[tuple]:
        """Remove and return the entries for which ``pred`` holds."""
        return self.q.remove_where(pred)


class FairQueues:
    """One FIFO per user of this GM, served round robin; users under their share are served first."""

    def __init__(self, users: list[int], fair: FairShare) -> None:
        self.users = users
        self.fair = fair
        self.qs = {u: MaskQueue() for u in users}
        self.rr = 0
        self._n = 0
        self.dmin: np.ndarray | None = None  # resource mode: lower bound of every queued demand

    def __len__(self) -> int:
        return sum(len(q) for q in self.qs.values())

    def push_back(self, e: tuple) -> None:
        """Queue task entry ``e`` at the tail of its user's queue."""
        self.qs[e[E_USER]].push_back(e, e[E_MASK])
        if e[E_DEMAND] is not None:
            self.dmin = _lower(self.dmin, e[E_DEMAND])

    def push_front(self, e: tuple) -> None:
        """Queue task entry ``e`` at the head of its user's queue (a task that comes back)."""
        self.qs[e[E_USER]].push_front(e, e[E_MASK])
        if e[E_DEMAND] is not None:
            self.dmin = _lower(self.dmin, e[E_DEMAND])

    def _order(self, usage: np.ndarray | None) -> list[int]:
        n = len(self.users)
        rr = [self.users[(self.rr + i) % n] for i in range(n)]
        if usage is None:
            return rr
        under = [u for u in rr if self.fair.under_share(u, usage)]
        return under + [u for u in rr if u not in under]

    def pop_fitting(
        self,
        wmask: int,
        accept: Callable[[tuple], bool] | None = None,
        usage: np.ndarray | None = None,
        inv: int | None = None,
    ) -> tuple | None:
        """Take the first fitting entry (worker mask ``wmask``, ``accept`` if given) of the first user queue in
        round-robin order that has one, users under their share (by ``usage``) first; the round robin then moves past
        that user. None if no queue has one."""
        for u in self._order(usage):
            q = self.qs[u]
            if not len(q):
                continue
            e = q.pop_first_fitting(wmask) if accept is None else q.pop_first_fitting_where(wmask, accept)
            if e is not None:
                self.rr = (self.users.index(u) + 1) % len(self.users)
                return e
        return None

    def heads(self, k: int) -> list[tuple]:
        """The first ``k`` entries of every user's queue (not removed)."""
        out = []
        for u in self.users:
            out.extend(self.qs[u].entries()[:k])
        return out

    def remove(self, pred: Callable[[tuple], bool]) -> list[tuple]:
        """Remove and return the entries of every user's queue for which ``pred`` holds."""
        out = []
        for q in self.qs.values():
            out.extend(q.remove_where(pred))
        return out
