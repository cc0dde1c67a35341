"""What one simulation produced: :class:`RunResult` (turned into files and tables by :mod:`megha.metrics.report`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from megha.config import RunConfig
from megha.metrics.counters import CounterSet
from megha.metrics.recorder import TaskRecorder
from megha.model.topology import Datacenter
from megha.model.workload import Workload


@dataclass
class RunResult:
    """Everything a run produced; :mod:`megha.metrics.report` turns it into files and tables."""

    config: RunConfig
    workload: Workload
    datacenter: Datacenter
    recorder: TaskRecorder
    feasible: np.ndarray
    counters: dict[str, int]
    message_counts: dict[str, int]
    end_time: float
    events: int
    wall_seconds: float
    options: dict
    describe: dict = field(default_factory=dict)
    unfinished_reason: str | None = None
    extras: dict = field(default_factory=dict)
    faults: list[dict] | None = None  # the faults injected (runs with a fault schedule), in injection order
    # feasible tasks left without a live eligible worker by workers that failed for good (not waited for)
    stranded: np.ndarray | None = None
    # CPU seconds (user + system, this process) of building and running the simulation, inputs loaded before
    cpu_seconds: float = 0.0
    # what the keys of ``counters`` mean: the run-level set, then the scheduler family's (megha.metrics.counters);
    # empty for a result built without a registry (a live run): summary.json then groups by the scheduler's name
    counter_sets: tuple[CounterSet, ...] = ()
    # per task, how many workers could run it (megha.model.workload.eligible_worker_counts; ``feasible`` is
    # ``eligible > 0``) when the runner computed it; None: the summary computes it
    eligible: np.ndarray | None = None

    @property
    def scheduler(self) -> str:
        """Name of the scheduler that made this run (the config's)."""
        return self.config.scheduler
