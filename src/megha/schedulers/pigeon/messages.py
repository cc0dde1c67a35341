"""Messages between PigeonC/Pigeon distributors and masters."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(slots=True)
class TaskBatch:
    """Tasks of one job that a distributor hands to one master (all short or all long)."""

    job: int
    tasks: np.ndarray  # int64 global task ids
    durations: np.ndarray  # float64
    masks: np.ndarray  # uint32 placement-constraint masks
    short: bool  # the job is short (high priority) by the trace's cutoff
    distributor: int  # index of the distributor that will learn of the completions

    @property
    def alloc_tasks(self) -> np.ndarray:
        """The tasks of the batch (on their allocation path: the engine adds this message's delay to their communication
        time)."""
        return self.tasks

    def __len__(self) -> int:
        return int(self.tasks.size)


@dataclass(slots=True)
class TasksDone:
    """A master tells a distributor that tasks it distributed have finished."""

    tasks: np.ndarray

    def __len__(self) -> int:
        return int(self.tasks.size)


@dataclass(slots=True)
class Start:
    """A master starts one task on one of its workers (the single-task form of ``Launch``)."""

    task: int
    worker: int
    duration: float

    @property
    def alloc_tasks(self) -> int:
        """The started task (on its allocation path)."""
        return self.task

    def __len__(self) -> int:
        return 1


@dataclass(slots=True)
class Ended:
    """One task finished on its worker (the single-task form of ``Finished``)."""

    task: int
    worker: int

    def __len__(self) -> int:
        return 1


@dataclass(slots=True)
class TaskDone:
    """A master tells a distributor that one task finished (the single-task form of ``TasksDone``)."""

    task: int

    def __len__(self) -> int:
        return 1


@dataclass(slots=True)
class Reroute:
    """A master hands tasks back to their distributor: none of its live workers can run them (worker faults);
    the distributor sends them to a master that has a live suitable worker."""

    job: int
    tasks: np.ndarray  # int64
    durations: np.ndarray  # float64
    masks: np.ndarray  # uint32
    short: bool

    def __len__(self) -> int:
        return int(self.tasks.size)


@dataclass(slots=True)
class GroupBack:
    """A master tells the distributors that failed workers of its group are back (they retry the tasks they held
    because no live worker could run them)."""

    master: int
    workers: np.ndarray  # int64 global ids

    def __len__(self) -> int:
        return int(self.workers.size)
