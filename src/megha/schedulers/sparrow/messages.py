"""Messages between Sparrow schedulers and node monitors.

Messages are batched per job: a scheduler sends all probes of a job at once (they leave together and arrive
together), and the node monitors group the task requests that fall at the same instant by (scheduler, job).
Batching changes no timing, only the number of simulator events.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(slots=True)
class Probes:
    """Reservations of one job on ``workers``; probe ``i`` was sampled for task group ``groups[i]``."""

    job: int
    scheduler: int
    workers: np.ndarray  # int64 global worker ids (one entry per probe)
    groups: np.ndarray  # int32 task group of each probe
    demands: np.ndarray | None = None  # [n_groups, R] resources a probe of each group reserves (resource mode)

    def __len__(self) -> int:
        return int(self.workers.size)


@dataclass(slots=True)
class GetTask:
    """Node monitors reached probes of ``job`` and ask for a task (late binding), one entry per probe."""

    job: int
    workers: np.ndarray
    groups: np.ndarray
    waited: np.ndarray  # seconds each probe waited in its worker's queue
    reserved: np.ndarray | None = None  # [k, R] resources held for each request (resource mode)

    def __len__(self) -> int:
        return int(self.workers.size)


@dataclass(slots=True)
class TaskReply:
    """The scheduler's answer: ``tasks[i]`` for ``workers[i]``, or -1 (no-op: the job has no task left)."""

    job: int
    scheduler: int
    workers: np.ndarray
    tasks: np.ndarray
    durations: np.ndarray
    waited: np.ndarray
    alloc_tasks: np.ndarray  # the tasks actually sent (the engine adds this message's latency to them)
    demands: np.ndarray | None = None  # [k, R] demand of each task sent (resource mode; 0 rows for no-ops)
    reserved: np.ndarray | None = None  # echo of the request's reservation

    def __len__(self) -> int:
        return int(self.workers.size)


@dataclass(slots=True)
class Request:
    """A single :class:`GetTask` (the common case under load), with scalar fields."""

    job: int
    worker: int
    group: int
    waited: float
    reserved: np.ndarray | None = None

    def __len__(self) -> int:
        return 1


@dataclass(slots=True)
class Grant:
    """A single :class:`TaskReply`: ``task`` for ``worker``, or -1 (no-op)."""

    job: int
    scheduler: int
    worker: int
    task: int
    duration: float
    waited: float
    alloc_tasks: int | None  # the task sent, None for a no-op (the engine adds this message's latency to it)
    demand: np.ndarray | None = None
    reserved: np.ndarray | None = None

    def __len__(self) -> int:
        return 1


@dataclass(slots=True)
class Done:
    """A node monitor tells the scheduler that one task finished."""

    task: int
    worker: int

    def __len__(self) -> int:
        return 1


@dataclass(slots=True)
class Lost:
    """Node monitors → a scheduler, once the failure of workers is detected (fault schedules): the workers still
    down (the scheduler stops probing them until :class:`WorkersBack`), the reservations it had on them (``probes``:
    (job, group) each) and the tasks lost with them (running there, or sent to a dead worker), to launch again."""

    dead: list[int]
    probes: list[tuple[int, int]]
    tasks: list[int]

    def __len__(self) -> int:
        return len(self.probes) + len(self.tasks) or 1


@dataclass(slots=True)
class WorkersBack:
    """Node monitors → every scheduler: failed workers are back (they may be probed again)."""

    workers: list[int]

    def __len__(self) -> int:
        return len(self.workers)
