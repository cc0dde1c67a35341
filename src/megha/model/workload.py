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
        return int(self.job_arrival.size)

    @property
    def n_tasks(self) -> int:
        return int(self.task_duration.size)

    @property
    def task_arrival(self) -> np.ndarray:
        return self.job_arrival[self.task_job]

    @property
    def masks(self) -> np.ndarray:
        """Task masks, zeros when the workload is unconstrained."""
        return self.task_mask if self.task_mask is not None else np.zeros(self.n_tasks, dtype=MASK_DTYPE)

    def tasks_of(self, job: int) -> range:
        lo = int(self.job_first_task[job])
        return range(lo, lo + int(self.job_num_tasks[job]))

    def with_constraints(self, rng: np.random.Generator) -> Workload:
        """A copy whose tasks carry synthesized placement constraints (DESIGN §3.2)."""
        return replace(self, task_mask=synthesize_task_constraints(self.n_tasks, rng))

    def with_demands(self, demand: np.ndarray, names: tuple[str, ...]) -> Workload:
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
    n = tmask.size
    if n == 0:
        return np.ones(0, dtype=bool)
    if capacity is None or demand is None:
        classes = [(None, np.unique(wmask))]
    else:
        caps, inv = np.unique(capacity, axis=0, return_inverse=True)
        classes = [(caps[c], np.unique(wmask[inv.ravel() == c])) for c in range(caps.shape[0])]
    uniq, tinv = np.unique(tmask, return_inverse=True)
    ok = np.zeros(n, dtype=bool)
    for cap, wm in classes:
        # which distinct task masks some worker of this class satisfies (chunked to bound memory)
        mask_ok = np.zeros(uniq.size, dtype=bool)
        for lo in range(0, uniq.size, 512):
            blk = uniq[lo : lo + 512]
            mask_ok[lo : lo + 512] = ((blk[:, None] & ~wm[None, :]) == 0).any(axis=1)
        sel = mask_ok[tinv.ravel()]
        if cap is not None:
            sel &= (demand <= cap[None, : demand.shape[1]] + 1e-12).all(axis=1)
        ok |= sel
    return ok
