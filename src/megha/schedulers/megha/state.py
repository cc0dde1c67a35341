"""State strategies: a GM's (possibly stale) view of the datacenter and an LM's true cluster state.

Two modes share one GM and one LM implementation through these small objects:

* **slot mode** — a worker runs one task; the GM's view is a packed availability bit vector kept up to
  date incrementally, so matching a task is one AND with the cached constraint vector;
* **resource mode** — a worker has a resource vector (CPU, memory); the GM's view holds free resources per
  worker and the LM places several tasks on one node, carving *logical nodes* for other GMs' partitions
  (the repartition operation of the Megha paper, §IV-B4).

In both modes ``view = LM truth − own unprocessed reservations`` (see :mod:`.messages`).
"""

from __future__ import annotations

import numpy as np

from megha.model import bitset
from megha.model.matching import SegmentedIndex

_EPS = 1e-9


class SlotView:
    """GM view in slot mode: one bit per worker (free in the view), plus own in-flight reservations.

    The packed availability vector ``avail`` (numpy, for matching) is also seen through ``_words``, a memoryview of
    the same memory whose items are plain Python ints, so booking or freeing a worker is two plain int operations on
    one word, without numpy scalar arithmetic or a numpy item store.
    """

    resource_mode = False

    def __init__(self, idx: SegmentedIndex, n_workers: int, all_free: bool = True) -> None:
        self.idx = idx
        self.avail = idx.all_available() if all_free else idx.none_available()
        self._words = memoryview(self.avail).cast("B").cast("Q")  # the words of avail (shared memory)
        self.n_free = n_workers if all_free else 0
        self.inflight = [0] * n_workers  # own launch requests per worker the LM has not processed yet
        self._flag = bytearray([1 if all_free else 0]) * n_workers  # free in the view (mirror of avail bits)
        bits = idx.bit_of_worker.tolist()
        self._word_of = [b >> 6 for b in bits]
        self._bit_of = [1 << (b & 63) for b in bits]

    def candidates(self, mask: int, demand: np.ndarray | None) -> np.ndarray | None:
        """Workers free in the view that satisfy ``mask``; None when nothing is free at all."""
        if self.n_free <= 0:
            return None
        return self.idx.candidates(self.avail, mask)

    def is_free(self, w: int) -> bool:
        """Whether worker ``w`` is free in the view."""
        return bool(self._flag[w])

    def _set(self, w: int, free: bool) -> None:
        i = self._word_of[w]
        if free:
            self._words[i] |= self._bit_of[w]
            self.n_free += 1
        else:
            self._words[i] &= ~self._bit_of[w]
            self.n_free -= 1
        self._flag[w] = free

    def take(self, w: int, demand: np.ndarray | None) -> None:
        """The GM books ``w`` for one of its tasks (a launch request is about to be sent)."""
        if self._flag[w]:
            self._set(w, False)
        self.inflight[w] += 1

    def release(self, w: int, demand: np.ndarray | None) -> None:
        """``w`` is free in the view (no queued task wanted it)."""
        if not self._flag[w]:
            self._set(w, True)

    def acked(self, workers: list[int], demands: np.ndarray | None) -> None:
        """The LM processed a request: its reservations are no longer in flight."""
        inflight = self.inflight
        for w in workers:
            inflight[w] -= 1

    def fits(self, w: int, demand: np.ndarray | None) -> bool:
        """Always True: in slot mode a free worker fits any task."""
        return True

    def apply_truth(self, w: int, truth: bool) -> bool:
        """Set the view of ``w`` from the LM's truth; True when ``w`` became free in the view (offer it)."""
        free = bool(truth) and self.inflight[w] == 0
        has = self._flag[w]
        if free and not has:
            return True
        if not free and has:
            self._set(w, False)
        return False

    def apply_truths(self, workers: list[int], truths: list) -> list[int]:
        """:meth:`apply_truth` for many workers; returns those that became free in the view, in order."""
        inflight = self.inflight
        flag = self._flag
        gained = []
        for w, s in zip(workers, truths, strict=True):
            if s and inflight[w] == 0:
                if not flag[w]:
                    gained.append(w)
            elif flag[w]:
                self._set(w, False)
        return gained

    def forget(self, w: int) -> None:
        """Mark ``w`` busy in the view (used when rebuilding)."""
        if self._flag[w]:
            self._set(w, False)


class ResourceView:
    """GM view in resource mode: free resources per worker, plus own in-flight reservations.

    ``free`` is ``[N, R]`` by worker id; a column-major copy in the index's bit layout (``[R, n_bits]``, padding
    bits at -inf) is kept in step so that :meth:`candidates` is R vectorized comparisons and one pack, not a
    gather over every worker per task.
    """

    resource_mode = True

    def __init__(self, idx: SegmentedIndex, capacity: np.ndarray, all_free: bool = True) -> None:
        self.idx = idx
        self.free = capacity.copy() if all_free else np.zeros_like(capacity)
        self.inflight = np.zeros_like(capacity)
        bits = idx.bit_of_worker
        self._bit = bits.tolist()
        self._cols = np.full((capacity.shape[1], idx.n_bits), -np.inf)  # padding and unindexed: never fit
        ok = bits >= 0
        self._cols[:, bits[ok]] = self.free[ok].T

    def _sync(self, w: int) -> None:
        b = self._bit[w]
        if b >= 0:
            self._cols[:, b] = self.free[w]

    def candidates(self, mask: int, demand: np.ndarray) -> np.ndarray | None:
        """Workers (packed, bit layout) with at least ``demand`` free that satisfy ``mask``; None if none has room."""
        cols = self._cols
        fits = cols[0] >= demand[0] - _EPS
        for r in range(1, cols.shape[0]):
            fits &= cols[r] >= demand[r] - _EPS
        if not fits.any():
            return None
        return np.bitwise_and(bitset.pack(fits), self.idx.static_vector(mask))

    def candidates_reference(self, mask: int, demand: np.ndarray) -> np.ndarray | None:
        """:meth:`candidates` computed from ``free`` by worker id (the plain form; for tests)."""
        fits = (self.free >= demand - _EPS).all(axis=1)
        if not fits.any():
            return None
        return np.bitwise_and(self.idx.pack_workers(fits), self.idx.static_vector(mask))

    def is_free(self, w: int) -> bool:
        """Whether worker ``w`` has any free resource in the view."""
        return bool((self.free[w] > _EPS).any())

    def take(self, w: int, demand: np.ndarray) -> None:
        """The GM books ``demand`` on ``w`` for one of its tasks (a launch request is about to be sent)."""
        self.free[w] -= demand
        self.inflight[w] += demand
        self._sync(w)

    def release(self, w: int, demand: np.ndarray | None) -> None:
        """Nothing to do in resource mode: the resources are back already (:meth:`give_back`, :meth:`apply_truth`)."""
        pass  # resources were already added by give_back / apply_truth

    def give_back(self, w: int, demand: np.ndarray) -> None:
        """A task of this GM on ``w`` finished: its ``demand`` is free in the view again."""
        self.free[w] += demand
        self._sync(w)

    def acked(self, workers: list[int], demands: np.ndarray) -> None:
        """The LM processed a request: its reservations (``demands`` on ``workers``) are no longer in flight."""
        np.subtract.at(self.inflight, np.asarray(workers, dtype=np.int64), demands)
        np.maximum(self.inflight, 0.0, out=self.inflight)

    def fits(self, w: int, demand: np.ndarray) -> bool:
        """Whether ``demand`` fits in what ``w`` has free in the view."""
        return bool((demand <= self.free[w] + _EPS).all())

    def apply_truth(self, w: int, truth: np.ndarray) -> bool:
        """Set the view of ``w`` to the LM's free resources minus own reservations in flight; True when ``w`` gained
        room (offer it)."""
        new = truth - self.inflight[w]
        gained = bool((new > self.free[w] + _EPS).any())
        self.free[w] = new
        self._sync(w)
        return gained

    def forget(self, w: int) -> None:
        """Mark ``w`` as having nothing free in the view (used when rebuilding)."""
        self.free[w] = 0.0
        self._sync(w)


class SlotCluster:
    """An LM's true state in slot mode: which task (of which GM and user) runs on each of its workers."""

    resource_mode = False

    def __init__(self, lo: int, n: int) -> None:
        self.lo = lo
        self.task = [-1] * n
        self.owner = [-1] * n
        self.user = [-1] * n

    def try_place(self, w: int, task: int, demand: np.ndarray | None, gm: int, user: int) -> bool:
        """Start ``task`` (of GM ``gm``, user ``user``) on worker ``w`` if it is idle; False if it is busy (an
        inconsistency)."""
        i = w - self.lo
        if self.task[i] >= 0:
            return False
        self.task[i] = task
        self.owner[i] = gm
        self.user[i] = user
        return True

    def remove(self, w: int, task: int, demand: np.ndarray | None) -> tuple[int, int]:
        """Free the worker of a finished/killed task; returns (owner GM, user)."""
        i = w - self.lo
        gm, user = self.owner[i], self.user[i]
        self.task[i] = -1
        self.owner[i] = -1
        self.user[i] = -1
        return gm, user

    def truth(self, workers: list[int]) -> list[bool]:
        """Whether each of ``workers`` is idle (the LM's truth sent in state updates)."""
        lo = self.lo
        task = self.task
        return [task[w - lo] < 0 for w in workers]

    def victims_on(self, w: int, victim: int, demand: np.ndarray | None) -> list[int] | None:
        """Tasks of ``victim`` whose preemption makes room for ``demand`` on ``w``, or None."""
        i = w - self.lo
        if self.user[i] == victim and self.task[i] >= 0:
            return [self.task[i]]
        return None

    def usage_units(self, demand: np.ndarray | None) -> float:
        """Fairness units of a task: one running task."""
        return 1.0


class ResourceCluster:
    """An LM's true state in resource mode: free resources per node and the tasks on each node.

    A task placed for a GM outside that GM's home partition of the node is a *logical node* carved out of
    the real node (``lent``): exactly the task's request moves into the GM's partition until it finishes.
    """

    resource_mode = True

    def __init__(self, lo: int, capacity: np.ndarray) -> None:
        self.lo = lo
        self.capacity = capacity
        self.free = capacity.copy()
        self.lent = np.zeros_like(capacity)  # resources carved out into other GMs' partitions
        self.tasks_on: list[dict[int, tuple[int, int, np.ndarray]]] = [{} for _ in range(capacity.shape[0])]
        self.logical: dict[int, tuple[int, int]] = {}  # task -> (worker, gm) for carved logical nodes

    def try_place(self, w: int, task: int, demand: np.ndarray, gm: int, user: int) -> bool:
        """Start ``task`` (of GM ``gm``, user ``user``) on node ``w`` if ``demand`` fits in its free resources; False if
        not (an inconsistency)."""
        i = w - self.lo
        if (demand > self.free[i] + _EPS).any():
            return False
        self.free[i] -= demand
        self.tasks_on[i][task] = (gm, user, demand)
        return True

    def carve(self, w: int, task: int, gm: int, demand: np.ndarray) -> None:
        """Record a logical node of ``demand`` on ``w`` assigned to GM ``gm``'s partition."""
        self.lent[w - self.lo] += demand
        self.logical[task] = (w, gm)

    def remove(self, w: int, task: int, demand: np.ndarray | None) -> tuple[int, int]:
        """Free the resources of a finished/killed task (and its logical node, if carved); returns (owner GM, user)."""
        i = w - self.lo
        gm, user, d = self.tasks_on[i].pop(task)
        self.free[i] += d
        if self.logical.pop(task, None) is not None:
            self.lent[i] -= d
        return gm, user

    def truth(self, workers: list[int]) -> np.ndarray:
        """Free resources of each of ``workers`` (``[n, R]``, the LM's truth sent in state updates)."""
        if not workers:
            return np.zeros((0, self.free.shape[1]))
        return self.free[np.asarray(workers, dtype=np.int64) - self.lo].copy()

    def victims_on(self, w: int, victim: int, demand: np.ndarray) -> list[int] | None:
        """Tasks of ``victim`` on ``w``, in start order, whose preemption frees room for ``demand``; None if all of them
        are not enough."""
        i = w - self.lo
        have = self.free[i].copy()
        chosen = []
        for t, (_, user, d) in self.tasks_on[i].items():
            if user == victim:
                chosen.append(t)
                have = have + d
                if (demand <= have + _EPS).all():
                    return chosen
        return None

    def usage_units(self, demand: np.ndarray) -> float:
        """Fairness units of a task: its CPU request (the first resource)."""
        return float(demand[0])
