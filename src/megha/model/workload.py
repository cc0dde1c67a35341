"""Columnar jobs and tasks.

A :class:`Workload` holds a job table and a task table as numpy arrays — no per-task Python objects.
Task ``t`` belongs to job ``task_job[t]``; the tasks of job ``j`` are the contiguous range
``job_first_task[j] : job_first_task[j] + job_num_tasks[j]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from megha.model.constraints import MASK_DTYPE, synthesize_task_constraints
from megha.model.topology import Datacenter


@dataclass(frozen=True)
class Workload:
    """Jobs and their tasks, as columns."""

    job_arrival: np.ndarray  # float64 [J], seconds
    job_num_tasks: np.ndarray  # int64 [J]
    job_mean_duration: np.ndarray  # float64 [J], the trace's field 3 (short/long classification)
    task_duration: np.ndarray  # float64 [T], seconds
    task_mask: np.ndarray | None = None  # uint32 [T] placement-constraint masks, None = unconstrained
    task_demand: np.ndarray | None = None  # float64 [T, R] resource requests (resource mode)
    resource_names: tuple[str, ...] = ()
    job_user: np.ndarray | None = None  # int32 [J] user (fairness queue) of each job
    job_priority: np.ndarray | None = None  # int32 [J]
    name: str = "workload"
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        first = np.zeros(self.job_num_tasks.size, dtype=np.int64)
        if self.job_num_tasks.size:
            np.cumsum(self.job_num_tasks[:-1], out=first[1:])
        object.__setattr__(self, "job_first_task", first)
        object.__setattr__(
            self, "task_job", np.repeat(np.arange(self.job_num_tasks.size, dtype=np.int64), self.job_num_tasks)
        )

    job_first_task: np.ndarray = field(init=False, repr=False)
    task_job: np.ndarray = field(init=False, repr=False)

    @property
    def n_jobs(self) -> int:
        """The number of jobs."""
        return int(self.job_arrival.size)

    @property
    def n_tasks(self) -> int:
        """The number of tasks."""
        return int(self.task_duration.size)

    @property
    def task_arrival(self) -> np.ndarray:
        """Each task's arrival time (its job's)."""
        return self.job_arrival[self.task_job]

    @property
    def masks(self) -> np.ndarray:
        """Task masks, zeros when the workload is unconstrained."""
        return self.task_mask if self.task_mask is not None else np.zeros(self.n_tasks, dtype=MASK_DTYPE)

    def tasks_of(self, job: int) -> range:
        """The task ids of job ``job`` (consecutive)."""
        lo = int(self.job_first_task[job])
        return range(lo, lo + int(self.job_num_tasks[job]))

    def with_constraints(self, rng: np.random.Generator) -> Workload:
        """A copy whose tasks carry synthesized placement constraints (DESIGN §3.2)."""
        return replace(self, task_mask=synthesize_task_constraints(self.n_tasks, rng))

    def with_demands(self, demand: np.ndarray, names: tuple[str, ...]) -> Workload:
        """A copy whose tasks request ``demand`` (one row per task, one column per resource of ``names``)."""
        return replace(self, task_demand=np.asarray(demand, dtype=np.float64), resource_names=names)

    def ideal_job_duration(self) -> np.ndarray:
        """The longest task of each job (the ideal job response time), over all its tasks."""
        out = np.zeros(self.n_jobs)
        if self.n_tasks:
            np.maximum.at(out, self.task_job, self.task_duration)
        return out

    def offered_load(self, n_slots: float) -> float:
        """Total task-seconds divided by (span of arrivals + mean task duration) × slots."""
        if self.n_tasks == 0 or n_slots <= 0:
            return 0.0
        span = float(self.job_arrival.max() - self.job_arrival.min()) + float(self.task_duration.mean())
        return float(self.task_duration.sum()) / (max(span, 1e-9) * n_slots)


def feasible_tasks(workload: Workload, dc: Datacenter) -> np.ndarray:
    """Boolean mask of tasks that at least one worker can run.

    A task is feasible iff some worker has every placement constraint of the task and, in resource
    mode, the capacity for its request. Tasks that are not feasible are reported by the runner and never
    handed to a scheduler (the reference simulators drop them silently).
    """
    return fits_some_worker(workload.masks, workload.task_demand, dc.worker_masks, dc.capacity)


def fits_some_worker(
    tmask: np.ndarray, demand: np.ndarray | None, wmask: np.ndarray, capacity: np.ndarray | None
) -> np.ndarray:
    """For each task (constraint mask ``tmask``, request ``demand`` or None), whether one of the workers (masks
    ``wmask``, capacities ``capacity`` or None) has every constraint and, with requests, the capacity for it."""
    return eligible_worker_counts(tmask, demand, wmask, capacity) > 0


#: superset sums over at most this many distinct constraint bits (a table of 2**bits counts); more bits fall back to
#: comparing every distinct task mask with every distinct worker mask
_MAX_TABLE_BITS = 22


def eligible_worker_counts(
    tmask: np.ndarray, demand: np.ndarray | None, wmask: np.ndarray, capacity: np.ndarray | None
) -> np.ndarray:
    """For each task, how many workers have every constraint of the task (``tmask``) and, with requests
    (``demand``, ``capacity``), the capacity for it (int64; 0 for a task no worker can run).

    Counted with superset sums: only the constraint bits some task requires matter, so worker masks are reduced to
    those ``b`` bits, counted into a table of ``2**b`` entries, and each entry summed with those of its supersets
    (one vectorized pass per bit); a task's count is then one table lookup. The cost is ``O(b * 2**b)`` plus one
    pass over tasks and workers, instead of comparing every distinct task mask with every distinct worker mask."""
    tmask = np.asarray(tmask, dtype=MASK_DTYPE)
    wmask = np.asarray(wmask, dtype=MASK_DTYPE)
    n = tmask.size
    out = np.zeros(n, dtype=np.int64)
    if n == 0 or wmask.size == 0:
        return out
    if capacity is None or demand is None:
        classes: list[tuple[np.ndarray | None, np.ndarray]] = [(None, wmask)]
    else:
        caps, inv = np.unique(capacity, axis=0, return_inverse=True)
        inv = inv.ravel()
        classes = [(caps[c], wmask[inv == c]) for c in range(caps.shape[0])]
    used = int(np.bitwise_or.reduce(tmask))
    positions = [i for i in range(used.bit_length()) if used >> i & 1]
    for cap, wm in classes:
        if len(positions) <= _MAX_TABLE_BITS:
            counts = _superset_counts(tmask, wm, positions)
        else:
            counts = _pairwise_counts(tmask, wm)
        if cap is not None:
            counts = np.where((demand <= cap[None, : demand.shape[1]] + 1e-12).all(axis=1), counts, 0)
        out += counts
    return out


def _compress(masks: np.ndarray, positions: list[int]) -> np.ndarray:
    """``masks`` reduced to the bits at ``positions`` (bit ``positions[k]`` becomes bit ``k``)."""
    if positions == list(range(len(positions))):  # the low bits already: keep them, drop the others
        return (masks & MASK_DTYPE((1 << len(positions)) - 1)).astype(np.int64)
    out = np.zeros(masks.size, dtype=np.int64)
    for k, pos in enumerate(positions):
        out |= ((masks >> MASK_DTYPE(pos)) & MASK_DTYPE(1)).astype(np.int64) << k
    return out


def _superset_counts(tmask: np.ndarray, wmask: np.ndarray, positions: list[int]) -> np.ndarray:
    b = len(positions)
    # counts of at most len(wmask) workers: 32 bits halve the memory the b passes over the table move
    dtype = np.int32 if wmask.size < 2**31 else np.int64
    table = np.bincount(_compress(wmask, positions), minlength=1 << b).astype(dtype)
    for i in range(b):  # table[x] += table[x | bit i] for every x without bit i
        view = table.reshape(-1, 2, 1 << i)
        view[:, 0, :] += view[:, 1, :]
    return table[_compress(tmask, positions)].astype(np.int64)


def _pairwise_counts(tmask: np.ndarray, wmask: np.ndarray) -> np.ndarray:
    uniq, tinv = np.unique(tmask, return_inverse=True)
    wm, wcount = np.unique(wmask, return_counts=True)
    per_mask = np.zeros(uniq.size, dtype=np.int64)
    for lo in range(0, uniq.size, 256):  # chunked to bound memory
        blk = uniq[lo : lo + 256]
        per_mask[lo : lo + 256] = ((blk[:, None] & ~wm[None, :]) == 0).astype(np.int64) @ wcount
    return per_mask[tinv.ravel()]
