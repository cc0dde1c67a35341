"""The worker ledger's checks as compiled functions (numba) over its arrays, for compiled scheduler loops.

The same rules as :class:`~megha.schedulers.common.ledger.WorkerLedger`, on the same arrays: ``task`` (``int64``,
``-1`` free; a ledger made with ``slot_array=True``), ``used`` and ``capacity`` (``float64 [n, R]``). ``first`` is
the global id of row 0. A claim returns the position of the first offending entry (``-1``: none) instead of
raising — compiled code cannot build the error text; the caller raises it with
:meth:`~megha.schedulers.common.ledger.WorkerLedger.over_slot` or
:meth:`~megha.schedulers.common.ledger.WorkerLedger.over_row` (or counts it, as the live runtime's worker does).
Plain ``@njit`` functions: numba compiles them into the compiled loops that call them, where LLVM inlines the
single-worker ones (a start's claim is a load, a compare and a store there, as a hand-written check is). numba's cache
of a calling module does not notice a change here: after changing one, touch the callers.
Imported lazily so the command line starts fast.
"""

from __future__ import annotations

import numpy as np
from numba import njit

OVER_EPS = 1e-9  # the same tolerance as megha.schedulers.common.ledger.OVER_EPS


@njit(cache=True, nogil=True)
def claim_slot(task: np.ndarray, worker: int, t: int, first: int) -> bool:
    """Start task ``t`` on global worker ``worker``; False (nothing changed) if it runs a task already."""
    k = worker - first
    if task[k] >= 0:
        return False
    task[k] = t
    return True


@njit(cache=True, nogil=True)
def claim_slots(task: np.ndarray, workers: np.ndarray, tasks: np.ndarray, first: int) -> int:
    """Start ``tasks[i]`` on ``workers[i]`` in order; stops at the first worker that runs a task already and
    returns its position ``i`` (entries before it are claimed), or -1 when all are claimed."""
    for i in range(workers.size):
        k = workers[i] - first
        if task[k] >= 0:
            return i
        task[k] = tasks[i]
    return -1


@njit(cache=True, nogil=True)
def release_slot(task: np.ndarray, worker: int, first: int) -> None:
    """Free global worker ``worker``."""
    task[worker - first] = -1


@njit(cache=True, nogil=True)
def release_slot_of(task: np.ndarray, worker: int, t: int, first: int) -> bool:
    """Free global worker ``worker`` if it still runs task ``t`` (as ``WorkerLedger.release`` with ``tasks``);
    False (nothing changed) if it runs another task or none."""
    k = worker - first
    if task[k] != t:
        return False
    task[k] = -1
    return True


@njit(cache=True, nogil=True)
def release_slots(task: np.ndarray, workers: np.ndarray, first: int) -> None:
    """Free ``workers``."""
    for i in range(workers.size):
        task[workers[i] - first] = -1


@njit(cache=True, nogil=True)
def exceeds(used: np.ndarray, capacity: np.ndarray, row: int) -> bool:
    """Whether the worker at ``row`` uses more than its capacity in some resource (beyond the tolerance)."""
    for r in range(used.shape[1]):  # noqa: SIM110 - a compiled loop, no generator
        if used[row, r] > capacity[row, r] + OVER_EPS:
            return True
    return False


@njit(cache=True, nogil=True)
def fits(used: np.ndarray, capacity: np.ndarray, row: int, demand: np.ndarray) -> bool:
    """Whether ``demand`` fits in the free resources of the worker at ``row`` (with the check's tolerance)."""
    for r in range(used.shape[1]):  # noqa: SIM110 - a compiled loop, no generator
        if used[row, r] + demand[r] > capacity[row, r] + OVER_EPS:
            return False
    return True


@njit(cache=True, nogil=True)
def claim_resources(
    used: np.ndarray, capacity: np.ndarray, workers: np.ndarray, demands: np.ndarray, first: int
) -> int:
    """Add ``demands[i]`` to ``workers[i]``'s used vector, all of them in order (as ``np.add.at``), then return the
    position of the first entry whose worker exceeds its capacity, or -1."""
    n = workers.size
    for i in range(n):
        k = workers[i] - first
        for r in range(used.shape[1]):
            used[k, r] += demands[i, r]
    for i in range(n):
        if exceeds(used, capacity, workers[i] - first):
            return i
    return -1


@njit(cache=True, nogil=True)
def release_resources(used: np.ndarray, workers: np.ndarray, demands: np.ndarray, first: int) -> None:
    """Subtract ``demands[i]`` from ``workers[i]``'s used vector, in order (as ``np.subtract.at``)."""
    for i in range(workers.size):
        k = workers[i] - first
        for r in range(used.shape[1]):
            used[k, r] -= demands[i, r]
