"""Messages shared by several scheduler families: job submission and worker launch/finish/kill.

Messages are small slotted dataclasses whose fields are numbers, strings and numpy arrays, so the live
runtime can serialize them (msgpack/JSON) and the simulator can pass them by reference. A message whose
transit is part of tasks' allocation time exposes those task ids as ``alloc_tasks``; the engine then adds
its latency to their communication delay.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(slots=True)
class JobArrival:
    """A job enters the scheduler: its (feasible) tasks with durations, constraint masks and demands."""

    job: int
    tasks: np.ndarray  # int64 global task ids
    durations: np.ndarray  # float64
    masks: np.ndarray  # uint32 placement-constraint masks
    demands: np.ndarray | None = None  # float64 [n, R] resource requests (resource mode)
    user: int = 0
    mean_duration: float = 0.0  # the trace's field 3 (short/long job classification)
    priority: int = 0

    def __len__(self) -> int:
        return len(self.tasks)  # numpy array or list


@dataclass(slots=True)
class Launch:
    """Start ``tasks`` on ``workers`` (global worker ids); the pool reports to ``reply_to``."""

    tasks: np.ndarray
    workers: np.ndarray
    durations: np.ndarray
    reply_to: str
    demands: np.ndarray | None = None

    @property
    def alloc_tasks(self) -> np.ndarray:
        """The tasks whose allocation path this message is on (the engine adds its delay to their communication
        time)."""
        return self.tasks

    def __len__(self) -> int:
        return len(self.tasks)  # numpy array or list


@dataclass(slots=True)
class Finished:
    """Tasks finished on their workers (sent by a worker pool to whoever launched them)."""

    tasks: np.ndarray
    workers: np.ndarray
    demands: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.tasks)  # numpy array or list


@dataclass(slots=True)
class Kill:
    """Preempt running tasks; the pool answers :class:`Killed` to ``reply_to``."""

    tasks: np.ndarray
    reply_to: str

    def __len__(self) -> int:
        return len(self.tasks)  # numpy array or list


@dataclass(slots=True)
class LaunchFailed:
    """Tasks launched on workers that were down when the launch reached them (a fault): never started; the
    launcher places them again (sent by a worker pool to whoever launched them)."""

    tasks: np.ndarray
    workers: np.ndarray
    demands: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.tasks)  # numpy array or list


@dataclass(slots=True)
class Killed:
    """Tasks that were running and are now stopped (tasks not running are left out)."""

    tasks: np.ndarray
    workers: np.ndarray
    demands: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.tasks)  # numpy array or list
