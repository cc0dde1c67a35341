"""One worker ledger: what each worker holds, the one over-commit check and the one over-commit error.

Every simulated scheduler family hosts workers somewhere (a worker pool, an LM's in-process workers, node
managers, the oracle's datacenter) and every one of them must never run more on a worker than it has: one task
at a time in **slot mode**, requests within its capacity vector in **resource mode**. :class:`WorkerLedger` is
that bookkeeping, written once:

* slot mode: :attr:`WorkerLedger.task` holds, per worker, the task it runs (``-1``: free). It is a Python
  list by default — the per-task Python paths of the simulator index it about five times faster than a numpy
  array — or an ``int64`` array (``slot_array=True``) for families whose hot path is vectorized or compiled;
* resource mode: :attr:`WorkerLedger.used` holds, per worker, the sum of the requests of its running tasks
  (``float64``, the same shape as :attr:`WorkerLedger.capacity`) — or, with ``track_free=True``,
  :attr:`WorkerLedger.free` holds ``capacity`` minus those requests, subtracted one by one, for families whose
  scheduler decides on the very same free vector (the oracle): ``capacity - used`` is not bit-identical to it;
  or, with ``row_lists=True``, :attr:`WorkerLedger.used` is a Python list of per-worker rows (lists of floats) and
  :attr:`WorkerLedger.cap_rows` the capacities as such rows, for families whose per-event Python paths do row
  arithmetic on one worker at a time (MACRM's node managers: a list row is several times cheaper to read and
  replace there than a numpy row; the same IEEE additions in the same order, so sums are bit-identical to the array
  form). Rows are replaced, never changed in place, so a row handed out (in a heartbeat) stays as it was;
* :meth:`WorkerLedger.claim` and :meth:`WorkerLedger.release` take many workers at once (resource mode and array
  slots: vectorized; sums are added in the order given, as ``np.add.at`` does, so results are bit-identical
  to a loop); :meth:`WorkerLedger.claim_one` is the single-task form for per-task hot paths;
* workers that failed (:attr:`WorkerLedger.dead`) for the families that refuse launches to them.

A worker is over-committed when a slot that holds a task is claimed again, or when ``used > capacity + over_eps``
(``free < -over_eps``) in any resource; ``over_eps`` is :data:`OVER_EPS` unless the ledger is made with another
(MACRM's node managers allow 1e-7, their rows' rounding over long runs). The error is always :func:`over_committed`'s
:class:`~megha.errors.SimulationError` ``"<owner>: worker <w> over-committed at t=<now>: <what>"`` (``what``:
:func:`slot_taken` or :func:`over_capacity`), so tests and users match one text whichever family raised it.
A live service that must not crash on a scheduler's bug claims with :meth:`WorkerLedger.claim_or_report`, which
records the claim all the same and returns that error's text instead of raising it.

The check is the ledger's whatever the caller: per-task hot paths of the simulator may apply the slot test inline on
the ledger's own list (``if ledger.task[k] >= 0: ledger.over_slot(w, t, now)``, then ``ledger.task[k] = t``) to
save a Python call per batch or task — the same rule, state and error; so may the resource test on list rows
(``ledger.used[k] = row``, then ``if`` some ``row[r] > ledger.cap_rows[k][r] + ledger.over_eps:
ledger.over_row(k, now)``).

Workers are numbered globally; a ledger may hold a contiguous range of them (an LM's cluster): ``first`` is the
global id of its row 0 and every method takes global ids. Compiled kernels use the same check on the same arrays
through :mod:`megha.schedulers.common._ledger_kernels` (plain ``@njit`` functions, imported lazily so the command
line starts fast; :meth:`WorkerLedger.kernels`): a compiled loop gets its arrays from a ledger (made with
``slot_array=True`` in slot mode), has the kernels report an offending entry, and raises the ledger's error
(:meth:`WorkerLedger.over_slot`) once it is back in Python. :meth:`WorkerLedger.part` gives one component's share of
such a ledger (its workers' rows, its name in the error) on the same memory.

Sans-I/O: the ledger sends nothing and keeps no time; the caller passes ``now`` for the error text.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from types import ModuleType
from typing import NoReturn

import numpy as np

from megha.errors import SimulationError

#: tolerance of the resource check: a worker is over-committed when ``used > capacity + OVER_EPS`` in any resource
OVER_EPS = 1e-9
#: a free slot in :attr:`WorkerLedger.task`
FREE = -1


def over_commit_text(owner: str, worker: int, now: float, what: str) -> str:
    """The one over-commit error's text: ``"<owner>: worker <worker> over-committed at t=<now>: <what>"``."""
    return f"{owner}: worker {worker} over-committed at t={now:.6f}: {what}"


def over_committed(owner: str, worker: int, now: float, what: str) -> SimulationError:
    """The one over-commit error (its text: :func:`over_commit_text`)."""
    return SimulationError(over_commit_text(owner, worker, now, what))


def slot_taken(task: int, running: int) -> str:
    """The reason of a slot-mode over-commit: ``task`` launched on a worker that runs ``running``."""
    return f"task {task} launched while it runs task {running}"


def over_capacity(used: np.ndarray, capacity: np.ndarray) -> str:
    """The reason of a resource-mode over-commit: a worker's used vector exceeds its capacity."""
    return f"used {np.asarray(used).tolist()} > capacity {np.asarray(capacity).tolist()}"


class WorkerLedger:
    """What each of ``n_workers`` workers holds (global ids ``first .. first + n_workers - 1``).

    ``capacity`` (``[n_workers, R]``) selects resource mode; ``None`` is slot mode. ``unlimited`` turns every
    check and record off (the ideal scheduler's workers). ``owner`` names the component in the error text.
    """

    def __init__(
        self,
        owner: str,
        n_workers: int,
        capacity: np.ndarray | None = None,
        *,
        first: int = 0,
        slot_array: bool = False,
        track_free: bool = False,
        unlimited: bool = False,
        row_lists: bool = False,
        over_eps: float = OVER_EPS,
        clip_release: bool = False,
    ) -> None:
        self.owner = owner
        self.n_workers = int(n_workers)
        self.first = int(first)
        self.unlimited = bool(unlimited)
        self.resource_mode = capacity is not None
        #: resource mode: the tolerance of the over-commit check (``used > capacity + over_eps``)
        self.over_eps = float(over_eps)
        #: resource mode with ``row_lists``: :attr:`used` and :attr:`cap_rows` are lists of per-worker rows
        self.row_lists = bool(row_lists) and capacity is not None
        #: resource mode: a release never takes a resource below zero (``max(used - demand, 0.0)``)
        self.clip_release = bool(clip_release)
        #: resource mode with ``row_lists``: each worker's capacity as a list of floats
        self.cap_rows: list[list[float]] | None = None
        #: resource mode: each worker's capacity (``float64 [n, R]``; the caller's array when it is one already)
        self.capacity: np.ndarray | None = None
        #: resource mode: the summed requests of each worker's running tasks (None with ``track_free``; a list of
        #: rows with ``row_lists``)
        self.used: np.ndarray | list[list[float]] | None = None
        #: resource mode with ``track_free``: each worker's capacity minus the requests of its running tasks
        self.free: np.ndarray | None = None
        #: slot mode: the task each worker runs, ``FREE`` if none (list, or ``int64`` array with ``slot_array``)
        self.task: list[int] | np.ndarray | None = None
        if capacity is not None:
            self.capacity = np.asarray(capacity, dtype=np.float64)
            if self.capacity.ndim != 2 or self.capacity.shape[0] != self.n_workers:
                raise ValueError(f"{owner}: capacity must be [{self.n_workers}, R], got {self.capacity.shape}")
            if self.row_lists:
                if track_free:
                    raise ValueError(f"{owner}: row_lists keeps used rows; it does not go with track_free")
                self.cap_rows = self.capacity.tolist()
                r = self.capacity.shape[1]
                self.used = [[0.0] * r for _ in range(self.n_workers)]
            elif track_free:
                self.free = self.capacity.copy()
            else:
                self.used = np.zeros_like(self.capacity)
        elif slot_array:
            self.task = np.full(self.n_workers, FREE, dtype=np.int64)
        else:
            self.task = [FREE] * self.n_workers
        #: workers down (a fault), global ids; families that refuse launches to them keep it up to date
        self.dead: set[int] = set()

    # --- the one error ------------------------------------------------------------------------------------------
    def over(self, worker: int, now: float, what: str) -> NoReturn:
        """Raise the over-commit error of global worker ``worker``."""
        raise over_committed(self.owner, worker, now, what)

    def over_slot(self, worker: int, task: int, now: float) -> NoReturn:
        """Raise the slot-mode error: ``task`` launched on ``worker`` (global id), which runs a task already."""
        raise over_committed(self.owner, worker, now, slot_taken(task, int(self.task[worker - self.first])))

    def over_row(self, row: int, now: float) -> NoReturn:
        """Raise the resource-mode error of the worker at ``row`` (its index in this ledger)."""
        used = self.used[row] if self.free is None else self.capacity[row] - self.free[row]
        raise over_committed(self.owner, row + self.first, now, over_capacity(used, self.capacity[row]))

    # --- rows ---------------------------------------------------------------------------------------------------
    def rows(self, workers: Sequence[int] | np.ndarray) -> np.ndarray:
        """The ledger's rows of global worker ids, as an ``int64`` array."""
        idx = np.asarray(workers, dtype=np.int64)
        return idx - self.first if self.first else idx

    # --- claim and release --------------------------------------------------------------------------------------
    def claim(
        self,
        tasks: Sequence[int] | np.ndarray,
        workers: Sequence[int] | np.ndarray,
        now: float,
        demands: np.ndarray | None = None,
        ended: Callable[[int], bool] | None = None,
    ) -> None:
        """Start ``tasks[i]`` on ``workers[i]`` (resource mode: holding ``demands[i]``); raise on an over-commit.

        Slot mode: a worker that runs a task already is over-committed, unless ``ended(running_task)`` says that
        task has ended by now (its end is only not processed yet). On an error the claims before the offending
        one are kept (the run stops anyway)."""
        if self.unlimited:
            return
        slot = self.task
        if type(slot) is list and type(workers) is list and type(tasks) is list and not self.first:
            for t, w in zip(tasks, workers, strict=True):  # the common case, without a call per batch
                cur = slot[w]
                if cur >= 0 and (ended is None or not ended(cur)):
                    self.over_slot(w, t, now)
                slot[w] = t
            return
        if self.row_lists:
            self._claim_lists(workers, demands, now)
            return
        if self.resource_mode:
            idx = self.rows(workers)
            if self.free is None:
                np.add.at(self.used, idx, demands)
            else:
                np.subtract.at(self.free, idx, demands)
            self.check_rows(idx, now)
            return
        lo = self.first
        if isinstance(slot, np.ndarray) and ended is None:
            idx = self.rows(workers)
            ts = np.asarray(tasks, dtype=np.int64)
            busy = slot[idx] >= 0
            if busy.any() or np.unique(idx).size != idx.size:
                self._claim_loop(ts.tolist(), idx.tolist(), now, None)  # raises at the first offender, in order
            slot[idx] = ts
            return
        if not isinstance(tasks, list):
            tasks = np.asarray(tasks).tolist()
        rows = [w - lo for w in workers] if lo else workers
        if not isinstance(rows, list):
            rows = np.asarray(rows).tolist()
        self._claim_loop(tasks, rows, now, ended)

    def _claim_lists(self, workers: Sequence[int] | np.ndarray, demands: np.ndarray, now: float) -> None:
        """:meth:`claim` of a ledger with list rows: every demand added in order, then the first offender raised."""
        used = self.used
        lo = self.first
        ks = [int(w) - lo for w in workers]
        drows = demands.tolist() if isinstance(demands, np.ndarray) else [list(d) for d in demands]
        for k, d in zip(ks, drows, strict=True):
            used[k] = [u + x for u, x in zip(used[k], d, strict=True)]
        for k in ks:
            if self.row_over(k):
                self.over_row(k, now)

    def row_over(self, row: int) -> bool:
        """Resource mode: whether the worker at ``row`` (its index in this ledger) exceeds its capacity in some
        resource (``used > capacity + over_eps``)."""
        eps = self.over_eps
        if self.row_lists:
            return any(u > c + eps for u, c in zip(self.used[row], self.cap_rows[row], strict=True))
        if self.free is not None:
            return bool((self.free[row] < -eps).any())
        return bool((self.used[row] > self.capacity[row] + eps).any())

    def _claim_loop(self, tasks: list[int], rows: list[int], now: float, ended: Callable[[int], bool] | None) -> None:
        slot = self.task
        for t, k in zip(tasks, rows, strict=True):
            cur = slot[k]
            if cur >= 0 and (ended is None or not ended(int(cur))):
                self.over_slot(k + self.first, t, now)
            slot[k] = t

    def claim_one(self, task: int, worker: int, now: float) -> None:
        """Slot mode: start ``task`` on ``worker`` (global id); raise if it runs a task already."""
        k = worker - self.first
        if self.task[k] >= 0:
            self.over_slot(worker, task, now)
        self.task[k] = task

    def claim_or_report(self, task: int, worker: int, now: float, demand: np.ndarray | None = None) -> str | None:
        """Start ``task`` on ``worker`` (global id; resource mode: holding ``demand``) and check it as :meth:`claim_one`
        and :meth:`claim` do, but report instead of raising: returns the over-commit error's text
        (:func:`over_commit_text`), or None if the worker is not over-committed. The claim is recorded either way
        (slot mode: the worker now runs ``task``), for a live service that runs what it is told and counts the
        violation."""
        if self.unlimited:
            return None
        k = worker - self.first
        if not self.resource_mode:
            slot = self.task
            cur = int(slot[k])
            slot[k] = task
            return None if cur < 0 else over_commit_text(self.owner, worker, now, slot_taken(task, cur))
        if self.row_lists:
            self.used[k] = [u + float(x) for u, x in zip(self.used[k], demand, strict=True)]
            if self.row_over(k):
                return over_commit_text(self.owner, worker, now, over_capacity(self.used[k], self.capacity[k]))
            return None
        if self.free is None:
            used = self.used[k]
            used += demand
            if (used > self.capacity[k] + self.over_eps).any():
                return over_commit_text(self.owner, worker, now, over_capacity(used, self.capacity[k]))
            return None
        free = self.free[k]
        free -= demand
        if (free < -self.over_eps).any():
            return over_commit_text(self.owner, worker, now, over_capacity(self.capacity[k] - free, self.capacity[k]))
        return None

    def release(
        self,
        workers: Sequence[int] | np.ndarray,
        demands: np.ndarray | None = None,
        tasks: Sequence[int] | None = None,
    ) -> None:
        """Free ``workers`` (resource mode: subtract ``demands``, in order). Slot mode with ``tasks``: free a worker
        only if it still runs ``tasks[i]`` (a later launch may have taken it already)."""
        if self.unlimited:
            return
        if self.row_lists:
            used = self.used
            lo = self.first
            drows = demands.tolist() if isinstance(demands, np.ndarray) else [list(d) for d in demands]
            clip = self.clip_release
            for w, d in zip(workers, drows, strict=True):
                k = int(w) - lo
                row = [u - x for u, x in zip(used[k], d, strict=True)]
                used[k] = [0.0 if v < 0.0 else v for v in row] if clip else row
            return
        if self.resource_mode:
            idx = np.asarray(workers, dtype=np.int64)  # self.rows(workers), inline (a call per batch less)
            if self.first:
                idx = idx - self.first
            if self.free is None:
                np.subtract.at(self.used, idx, demands)
                if self.clip_release:
                    self.used[idx] = np.maximum(self.used[idx], 0.0)
            else:
                np.add.at(self.free, idx, demands)
                if self.clip_release:
                    self.free[idx] = np.minimum(self.free[idx], self.capacity[idx])
            return
        slot = self.task
        if isinstance(slot, np.ndarray):
            idx = self.rows(workers)
            if tasks is not None:
                idx = idx[slot[idx] == np.asarray(tasks, dtype=np.int64)]
            slot[idx] = FREE
            return
        lo = self.first
        if tasks is None:
            for w in workers:
                slot[w - lo] = FREE
        else:
            for w, t in zip(workers, tasks, strict=True):
                if slot[w - lo] == t:
                    slot[w - lo] = FREE

    # --- resource checks ----------------------------------------------------------------------------------------
    def over_rows(self, rows: np.ndarray) -> np.ndarray:
        """Resource mode: for each of ``rows``, whether its worker exceeds its capacity in some resource."""
        eps = self.over_eps
        if self.row_lists:
            rows = np.asarray(rows, dtype=np.int64)
            used = np.array([self.used[k] for k in rows.tolist()], dtype=np.float64).reshape(rows.size, -1)
            return (used > self.capacity[rows] + eps).any(axis=1)
        if self.free is not None:
            return (self.free[rows] < -eps).any(axis=1)
        return (self.used[rows] > self.capacity[rows] + eps).any(axis=1)

    def check_rows(self, rows: np.ndarray, now: float) -> None:
        """Resource mode: raise the error of the first of ``rows`` whose worker exceeds its capacity."""
        over = self.over_rows(rows)
        if over.any():
            self.over_row(int(rows[np.flatnonzero(over)[0]]), now)

    def fits(self, worker: int, demand: np.ndarray) -> bool:
        """Resource mode: whether ``demand`` fits in ``worker``'s free resources (with the check's tolerance)."""
        k = worker - self.first
        eps = self.over_eps
        if self.row_lists:
            return all(u + float(x) <= c + eps for u, x, c in zip(self.used[k], demand, self.cap_rows[k], strict=True))
        if self.free is not None:
            return bool((self.free[k] + eps >= demand).all())
        return bool((self.used[k] + demand <= self.capacity[k] + eps).all())

    def room(self) -> np.ndarray:
        """Resource mode: each worker's free resources (a new array; ``capacity - used`` without ``track_free``)."""
        if self.row_lists:
            return self.capacity - np.array(self.used, dtype=np.float64).reshape(self.capacity.shape)
        return self.capacity - self.used if self.free is None else self.free.copy()

    # --- state --------------------------------------------------------------------------------------------------
    def running_on(self, worker: int) -> int:
        """Slot mode: the task ``worker`` (global id) runs, ``FREE`` if none."""
        return int(self.task[worker - self.first])

    def busy(self) -> int:
        """Slot mode: how many workers run a task (pseudo tasks that hold failed workers included)."""
        slot = self.task
        if isinstance(slot, np.ndarray):
            return int((slot >= 0).sum())
        return sum(1 for t in slot if t >= 0)

    def clear(self, workers: Iterable[int] | None = None) -> None:
        """Empty ``workers`` (global ids; all if ``None``): a restart or a worker back from a failure."""
        if self.unlimited:
            return
        rows = slice(None) if workers is None else self.rows(list(workers))
        if self.row_lists:
            r = self.capacity.shape[1]
            for k in range(self.n_workers) if workers is None else rows.tolist():
                self.used[k] = [0.0] * r
        elif self.free is not None:
            self.free[rows] = self.capacity[rows]
        elif self.used is not None:
            self.used[rows] = 0.0
        elif isinstance(self.task, np.ndarray):
            self.task[rows] = FREE
        else:
            for k in range(self.n_workers) if workers is None else rows.tolist():
                self.task[k] = FREE

    # --- failed workers -----------------------------------------------------------------------------------------
    def fail(self, workers: Iterable[int]) -> list[int]:
        """Mark ``workers`` dead; returns those newly dead, in the order given (each once)."""
        new = [w for w in dict.fromkeys(int(w) for w in workers) if w not in self.dead]
        self.dead.update(new)
        return new

    def restore(self, workers: Iterable[int]) -> list[int]:
        """Mark ``workers`` alive again; returns those that were dead, in the order given (each once)."""
        back = [w for w in dict.fromkeys(int(w) for w in workers) if w in self.dead]
        self.dead.difference_update(back)
        return back

    def split_dead(self, workers: Sequence[int]) -> tuple[list[int], list[int]]:
        """Positions in ``workers`` of live workers and of dead ones."""
        dead = self.dead
        ok = [i for i, w in enumerate(workers) if w not in dead]
        bad = [i for i, w in enumerate(workers) if w in dead]
        return ok, bad

    # --- parts --------------------------------------------------------------------------------------------------
    def part(self, owner: str, first: int, n_workers: int) -> WorkerLedger:
        """The ledger of global workers ``first .. first + n_workers - 1`` of this one, named ``owner``, on the same
        memory (views of this ledger's arrays, the same set of dead workers: what either records, both hold). Array
        slots or resource mode; e.g. one LM's share of a compiled loop's ledger, whose errors then name that LM."""
        lo = first - self.first
        if lo < 0 or n_workers < 0 or lo + n_workers > self.n_workers:
            raise ValueError(f"{self.owner}: workers {first}..{first + n_workers - 1} are not all in this ledger")
        if isinstance(self.task, list) or self.row_lists:
            raise ValueError(f"{self.owner}: a ledger with list slots or rows has no parts (use arrays)")
        sub = copy.copy(self)
        sub.owner = owner
        sub.first = int(first)
        sub.n_workers = int(n_workers)
        for name in ("task", "capacity", "used", "free"):
            arr = getattr(self, name)
            if arr is not None:
                setattr(sub, name, arr[lo : lo + n_workers])
        return sub

    # --- compiled use -------------------------------------------------------------------------------------------
    @staticmethod
    def kernels() -> ModuleType:
        """The compiled form of the checks over the ledger's arrays (:mod:`._ledger_kernels`; imports numba)."""
        from megha.schedulers.common import _ledger_kernels

        return _ledger_kernels
