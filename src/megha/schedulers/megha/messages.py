"""Messages between Megha's Global Masters (GMs) and Local Masters (LMs).

Per-task fields are plain lists (ints, floats, bools) — cheaper than numpy arrays for the small batches of a
busy datacenter and directly serializable; resource requests are ``[n, R]`` numpy arrays. Receivers also
accept numpy arrays.

Every LM → GM message carries ``acked``, the highest launch-request id of that GM the LM has processed
(channels are FIFO, so acknowledgements are cumulative); a batch gets its own reply only when a mapping was
rejected, unless the deployment asks for a reply to every batch.

Worker state travels as *absolute truth* for the workers that changed: in slot mode a boolean "free", in
resource mode the free resource vector. A GM turns truth into its view by subtracting its own launch
requests the LM has not processed yet (channels are FIFO, so those are exactly its unacknowledged
requests); the view is therefore self-correcting, and a freed worker is never booked twice by its own GM.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_EMPTY_I = np.zeros(0, dtype=np.int64)


def as_list(x: list | np.ndarray) -> list:
    """A message field as a list: fields are lists (cheap for small batches) or numpy arrays (tests, other senders)."""
    return x if isinstance(x, list) else np.asarray(x).tolist()


@dataclass(slots=True)
class LaunchRequest:
    """GM → LM: a batch of task-to-worker mappings to validate and launch."""

    gm: int
    req: int  # per-GM sequence number, echoed in the reply
    tasks: list[int]
    workers: list[int]
    durations: list[float]
    users: list[int]
    demands: np.ndarray | None = None  # [n, R] in resource mode

    @property
    def alloc_tasks(self) -> list[int]:
        """The tasks of the batch (on their allocation path: the engine adds this message's delay to their communication
        time)."""
        return self.tasks

    def __len__(self) -> int:
        return len(self.tasks)


@dataclass(slots=True)
class LaunchReply:
    """LM → GM: which mappings were rejected (inconsistencies), plus the LM's pending delta for that GM."""

    lm: int
    req: int
    rejected: list[int]  # task ids
    delta_workers: list[int]
    delta_state: list[bool] | np.ndarray  # free (slot) or [k, R] free resources (resource)
    usage: np.ndarray | None = None  # per-user resources in use in this LM's cluster (fairness)
    acked: int = 0  # highest request id of this GM the LM has processed (cumulative acknowledgement)

    @property
    def alloc_tasks(self) -> list[int]:
        """The rejected tasks (their way back to the GM is on their allocation path)."""
        return self.rejected

    def __len__(self) -> int:
        return len(self.rejected) + len(self.delta_workers)


@dataclass(slots=True)
class TaskDone:
    """LM → GM: tasks of that GM finished; their workers' resources are the GM's to reuse.

    ``reused`` lists workers of ``workers`` that the LM has already given to a handed-over task (the
    starvation remedy, :mod:`.handoff`): the GM must not offer them.
    """

    lm: int
    tasks: list[int]
    workers: list[int]
    demands: np.ndarray | None = None
    acked: int = 0
    reused: list[int] | None = None

    def __len__(self) -> int:
        return len(self.tasks)


@dataclass(slots=True)
class StateDelta:
    """LM → GM heartbeat: truth of the workers that changed since the last update (or all, if ``full``)."""

    lm: int
    workers: list[int]
    state: list[bool] | np.ndarray
    full: bool = False
    usage: np.ndarray | None = None
    acked: int = 0
    pull: int = 0  # the answer to StatePull ``pull`` of this GM (0: a heartbeat)

    def __len__(self) -> int:
        return len(self.workers)


@dataclass(slots=True)
class Handoff:
    """GM → LM: tasks that waited too long at the GM; the LM runs them on its next suitable free workers, oldest
    job first (the starvation remedy, :mod:`.handoff`). ``arrivals`` are the jobs' arrival times."""

    gm: int
    tasks: list[int]
    durations: list[float]
    masks: list[int]
    users: list[int]
    arrivals: list[float]

    @property
    def alloc_tasks(self) -> list[int]:
        """The handed-over tasks (on their allocation path)."""
        return self.tasks

    def __len__(self) -> int:
        return len(self.tasks)


@dataclass(slots=True)
class StatePull:
    """GM → LM: send me your state now (the 2020 simulator's pull after every completion and rejection).

    The LM answers with a :class:`StateDelta` carrying ``pull``: the truth of every worker changed by other GMs
    since that GM's last update, which with the GM's own bookkeeping is the LM's full state.
    """

    gm: int
    pull: int


@dataclass(slots=True)
class SyncRequest:
    """GM → LM: a (re)started GM asks for a full snapshot of the LM's cluster."""

    gm: int


@dataclass(slots=True)
class PreemptRequest:
    """GM → LM: preempt tasks of ``victim`` so that one of ``tasks`` (of an under-share user) can run.

    The candidates are tried in order; the LM launches the first one it can free a suitable worker for.
    ``victim_elsewhere`` is the GM's latest view of the victim's usage on the *other* LMs (which this LM cannot
    see); None asks the LM to judge the victim's share on its own cluster alone.
    """

    gm: int
    tasks: np.ndarray
    durations: np.ndarray
    masks: np.ndarray
    user: int
    victim: int
    demands: np.ndarray | None = None
    victim_elsewhere: float | None = None

    @property
    def alloc_tasks(self) -> np.ndarray:
        """The candidate tasks (on their allocation path)."""
        return self.tasks

    def __len__(self) -> int:
        return int(self.tasks.size)


@dataclass(slots=True)
class PreemptReply:
    """LM → GM: whether the preemption was verified (then ``task`` was launched on ``worker``).

    ``request`` is the first candidate of the request (it identifies the request at the GM). A refusal lists
    in ``victim_masks`` the constraint masks of the workers on which the victim runs tasks here, so that the GM
    can pick candidates those workers suit next time.
    """

    lm: int
    request: int
    ok: bool
    task: int = -1
    delta_workers: np.ndarray = field(default_factory=lambda: _EMPTY_I)
    delta_state: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    usage: np.ndarray | None = None
    acked: int = 0
    worker: int = -1
    victim_masks: np.ndarray | None = None

    @property
    def alloc_tasks(self) -> np.ndarray | None:
        """The launched task, if the preemption was verified (on its allocation path); else None."""
        return np.array([self.task], dtype=np.int64) if self.task >= 0 else None


@dataclass(slots=True)
class Preempted:
    """LM → GM: these tasks of the GM were preempted (or lost with a failed worker) and must be queued again."""

    lm: int
    tasks: np.ndarray
    acked: int = 0
    # lost with a failed worker: each task's queue entry (task, duration, mask, demand, user), which the LM rebuilds
    # from its active task list so that the GM can place it again (a GM keeps entries only under fairness)
    entries: list | None = None

    def __len__(self) -> int:
        return int(self.tasks.size)
