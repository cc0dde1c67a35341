"""Messages between MACRM's agents (thesis Fig. 3.1): node managers, resource trackers, the resource arbitrator,
job managers, and the infrastructure (users' client, supervisor/ZooKeeper store, container runtime).

Messages are slotted dataclasses of numbers, strings, lists and numpy arrays. Node managers are modelled many to a
component (one node-manager group per resource tracker), so node-level messages carry lists of node ids: a group
message stands for one message per node sent at the same instant (timing is unchanged, only the event count drops).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from megha.schedulers.common.messages import JobArrival

# --- users --------------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Submit:
    """The users' client submits a job to the arbitrator (retried until :class:`Accepted`)."""

    job: JobArrival


@dataclass(slots=True)
class Accepted:
    job: int


# --- containers ---------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Containers:
    """Containers to start, column-wise. ``tasks[i] = -1`` is a job-manager container (``specs[i]`` = its job).

    ``owners[i]`` is the job manager a task reports to (the new job manager's address for a JM container);
    ``seqs[i]`` the arbitrator's per-node allocation number (0 for a job manager's own launches); ``specs[i]`` is
    ``(job description, cluster load, centralized?)`` for a JM container (its configuration), else None.
    """

    nodes: list[int]
    tasks: list[int]
    jobs: list[int]
    attempts: list[int]
    users: list[int]
    durations: list[float]
    demands: np.ndarray  # [k, R]
    owners: list[str]
    seqs: list[int]
    specs: list[tuple | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def alloc_tasks(self) -> list[int]:
        """The task containers (job-manager containers aside): on their tasks' allocation path, the engine adds this
        message's delay to their communication time."""
        return [t for t in self.tasks if t >= 0]


def empty_containers(n_res: int) -> Containers:
    """A :class:`Containers` with no container, for ``n_res`` resources."""
    return Containers([], [], [], [], [], [], np.zeros((0, n_res)), [], [], [])


def concat_containers(parts: list[Containers], n_res: int) -> Containers:
    """One :class:`Containers` holding the rows of ``parts`` in order."""
    if not parts:
        return empty_containers(n_res)
    if len(parts) == 1:
        return parts[0]
    out = empty_containers(n_res)
    for p in parts:
        out.nodes += p.nodes
        out.tasks += p.tasks
        out.jobs += p.jobs
        out.attempts += p.attempts
        out.users += p.users
        out.durations += p.durations
        out.owners += p.owners
        out.seqs += p.seqs
        out.specs += p.specs
    out.demands = np.concatenate([p.demands for p in parts]) if parts else np.zeros((0, n_res))
    return out


def select_containers(c: Containers, idx: list[int]) -> Containers:
    """The rows ``idx`` of ``c``."""
    return Containers(
        [c.nodes[i] for i in idx],
        [c.tasks[i] for i in idx],
        [c.jobs[i] for i in idx],
        [c.attempts[i] for i in idx],
        [c.users[i] for i in idx],
        [c.durations[i] for i in idx],
        c.demands[idx] if idx else c.demands[:0],
        [c.owners[i] for i in idx],
        [c.seqs[i] for i in idx],
        [c.specs[i] for i in idx] if c.specs else [],
    )


# --- node managers <-> resource tracker / arbitrator ---------------------------------------------------------------


@dataclass(slots=True)
class Heartbeat:
    """Node heartbeats: each node's free and used (incl. background) resources, the last arbitrator allocation it
    received, and each node's usage per user (absolute, so a restarted tracker rebuilds its view from one round)."""

    group: int
    nodes: list[int]
    free: np.ndarray  # [k, R]
    used: np.ndarray  # [k, R] physical usage (background + containers)
    acks: list[int]
    users: list[dict[int, np.ndarray]]

    def __len__(self) -> int:
        return len(self.nodes)


@dataclass(slots=True)
class ForwardedHeartbeat:
    """A tracker forwards the heartbeats of nodes with free resources (or that just became full) to the arbitrator."""

    tracker: int
    group: str
    nodes: list[int]
    free: np.ndarray
    acks: list[int]

    def __len__(self) -> int:
        return len(self.nodes)


@dataclass(slots=True)
class HeartbeatReply:
    """Answers the nodes' heartbeats, possibly with containers to start (the arbitrator's queue-actor)."""

    nodes: list[int]
    containers: Containers | None = None

    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def alloc_tasks(self) -> list[int] | None:
        """The tasks of the containers the reply starts, if any (on their allocation path)."""
        return None if self.containers is None else self.containers.alloc_tasks


@dataclass(slots=True)
class Allocate:
    """The arbitrator's scheduler actors start containers on nodes (committed allocations)."""

    containers: Containers

    def __len__(self) -> int:
        return len(self.containers)

    @property
    def alloc_tasks(self) -> list[int]:
        """The tasks of the allocated containers (on their allocation path)."""
        return self.containers.alloc_tasks


@dataclass(slots=True)
class AllocRejected:
    """A node could not start arbitrator-allocated containers (stale view); ``free`` = its real free resources."""

    containers: Containers
    free: np.ndarray  # [k, R], one row per container

    def __len__(self) -> int:
        return len(self.containers)


@dataclass(slots=True)
class ModeChange:
    """The arbitrator switched between distributed (sampling) and centralized allocation."""

    central: bool
    load: float


# --- sampling (job manager <-> node managers, thesis Fig. 3.3) ----------------------------------------------------


@dataclass(slots=True)
class SampleInquiry:
    """``_ResourceSamplingInquiry`` to ``nodes``: answer if free for at least ``need``."""

    jm: str
    job: int
    attempt: int
    token: int
    nodes: list[int]
    need: np.ndarray  # [R]

    def __len__(self) -> int:
        return len(self.nodes)


@dataclass(slots=True)
class SampleReply:
    """``_ResourceSamplingResponse`` of the nodes that answered (free and physical capacity of each)."""

    token: int
    nodes: list[int]
    free: np.ndarray
    capacity: np.ndarray

    def __len__(self) -> int:
        return len(self.nodes)


@dataclass(slots=True)
class SampleDecision:
    """``_ResourceAllocationRequest`` (``containers``) to chosen responders and ``_ResourceSamplingCancel`` to the
    others (``cancel``)."""

    token: int
    containers: Containers
    cancel: list[int]

    def __len__(self) -> int:
        return len(self.containers) + len(self.cancel)

    @property
    def alloc_tasks(self) -> list[int]:
        """The tasks of the containers sent to the chosen responders (on their allocation path)."""
        return self.containers.alloc_tasks


@dataclass(slots=True)
class LaunchRejected:
    """Tasks a node could not start (it no longer had room)."""

    tasks: list[int]
    nodes: list[int]


@dataclass(slots=True)
class TaskFailed:
    """Tasks whose process failed (the node manager saw the container exit with an error)."""

    tasks: list[int]
    nodes: list[int]


# --- job manager <-> arbitrator / tracker / node managers ---------------------------------------------------------


@dataclass(slots=True)
class TaskRequest:
    """A job manager asks the arbitrator's central queue for containers for ``tasks``."""

    jm: str
    job: int
    attempt: int
    user: int
    tasks: list[int]
    durations: list[float]
    demands: np.ndarray
    masks: list[int]
    gang: bool = False
    runs: list[int] = field(default_factory=list)  # per task: which run of it this is (re-requests after failures)

    def __len__(self) -> int:
        return len(self.tasks)


@dataclass(slots=True)
class Placed:
    """The arbitrator tells a job manager (attempt ``attempt``) where its requested tasks were started."""

    attempt: int
    tasks: list[int]
    nodes: list[int]


@dataclass(slots=True)
class JMHeartbeat:
    jm: str
    job: int
    attempt: int
    final: bool = False


@dataclass(slots=True)
class JMHeartbeatReply:
    load: float
    central: bool


@dataclass(slots=True)
class JobDone:
    job: int
    attempt: int


@dataclass(slots=True)
class JobDoneAck:
    job: int
    attempt: int


@dataclass(slots=True)
class JMExit:
    """A job manager's process exits: its node manager releases the container."""

    job: int
    attempt: int


@dataclass(slots=True)
class Adopt:
    """A restarted job manager claims its job's containers and asks what already ran."""

    jm: str
    job: int
    attempt: int


@dataclass(slots=True)
class JobState:
    """A node-manager group's answer to :class:`Adopt`: the job's running tasks (and nodes) and finished tasks."""

    group: int
    attempt: int
    running: list[int]
    nodes: list[int]
    finished: list[int]


@dataclass(slots=True)
class Forget:
    """The job is complete: node managers drop its records."""

    job: int


@dataclass(slots=True)
class NodesLost:
    """The arbitrator tells job managers that nodes failed (their containers are gone)."""

    nodes: list[int]


@dataclass(slots=True)
class Stranded:
    """The arbitrator tells a job manager that requested tasks can run on no live node (every node whose
    constraints and capacity fit them failed): the job goes on without them."""

    attempt: int
    tasks: list[int]


@dataclass(slots=True)
class ArbitratorUp:
    """A (re)started arbitrator announces itself: job managers resubmit queued requests, trackers resend reports."""

    epoch: int


# --- tracker <-> arbitrator ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class TrackerStats:
    """The cluster-state-reader's aggregates of one tracker: used and total physical resources, per-user usage."""

    tracker: int
    used: np.ndarray
    total: np.ndarray
    users: dict[int, np.ndarray]
    complete: bool


@dataclass(slots=True)
class Forwarding:
    """Whether trackers should forward free nodes' heartbeats: the arbitrator needs them while its queue holds
    requests or it is in centralized mode (its view of free resources); otherwise trackers answer heartbeats."""

    on: bool


@dataclass(slots=True)
class LoadInfo:
    load: float
    central: bool


@dataclass(slots=True)
class Report:
    """A reliable tracker → arbitrator report (resent until acknowledged): ``kind`` = 'nodes' or 'jm'."""

    tracker: int
    rid: int
    kind: str
    nodes: list[int] = field(default_factory=list)
    job: int = -1
    attempt: int = -1


@dataclass(slots=True)
class ReportAck:
    rid: int


@dataclass(slots=True)
class TrackerUp:
    tracker: int


@dataclass(slots=True)
class ExpectJM:
    """The tracker should expect heartbeats from these job managers (address, job, attempt)."""

    jms: list[tuple[str, int, int]]


# --- infrastructure -----------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Alive:
    address: str


@dataclass(slots=True)
class Persist:
    """A hard-state change the arbitrator writes to the replicated store (ZooKeeper)."""

    op: str
    args: tuple


@dataclass(slots=True)
class Recover:
    address: str


@dataclass(slots=True)
class Snapshot:
    state: dict


@dataclass(slots=True)
class SpawnJM:
    """A node manager starts a job-manager process in a container (the container runtime creates the agent)."""

    address: str
    job: JobArrival
    attempt: int
    node: int
    group: int
    load: float
    central: bool


@dataclass(slots=True)
class Terminate:
    """Kill a process (a job manager whose node died)."""

    address: str


@dataclass(slots=True)
class Restart:
    """The supervisor restarts a failed agent at the same address."""

    address: str


# --- fault injection (external inputs) ----------------------------------------------------------------------------


@dataclass(slots=True)
class NodeCrash:
    nodes: list[int]


@dataclass(slots=True)
class TaskCrash:
    tasks: list[int]
