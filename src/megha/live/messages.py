"""Messages that exist only in the live runtime (the simulator needs none of them).

* :class:`HostBeat` — a worker host tells an LM it is alive, which of the LM's workers it serves and which
  tasks it runs (worker liveness, paper §IV-D).
* :class:`HostLaunch` / :class:`HostKill` — an LM starts or stops tasks on one incarnation (``epoch``) of a worker
  host; another incarnation drops them (a launch re-sent after a standby LM took over never runs on a restarted
  host that knows nothing of it).
* :class:`JobBatch` — a client submits several jobs to a GM in one message (the jobs that came due together).
* :class:`Holding` — an LM tells a GM which of its tasks the LM holds (exactly-once across a GM's death).
* :class:`Relaunch` — an LM hands a dead worker's tasks back to their GM when no suitable worker is free.
* :class:`RunSpec` — a client tells the worker hosts how to run the tasks of one run (sleep, CPU or a command).
* :class:`Events` — task events reported by services to clients (decided, started, finished, known, lost,
  failed); the client builds the simulator's :class:`~megha.metrics.recorder.TaskRecorder` from them.
* :class:`Status` — a periodic health and load report of a service (``megha live status``, readiness).
* :class:`Repl` — one input of an active LM, forwarded to its standby (state-machine replication).
* :class:`Control` — operator commands (shutdown).

Event items are lists ``[kind, time, task_ids, aux, note]``; ``aux`` is the workers (``started``), the exit
codes (``finished``) or empty; ``note`` is a reason (``failed``/``lost``) or an empty string.
"""

from __future__ import annotations

from dataclasses import dataclass, field

EVENT_KINDS = ("decided", "started", "finished", "known", "lost", "failed", "output")


@dataclass(slots=True)
class HostBeat:
    """Worker host → LM: alive; serves ``workers`` of this LM; runs ``running`` tasks."""

    host: str
    epoch: int
    lm: int
    workers: list[int]
    running: list[int]
    period: float = 0.2


@dataclass(slots=True)
class HostLaunch:
    """LM → worker host ``host`` in incarnation ``epoch``: run these tasks (the live form of ``Launch``)."""

    host: str
    epoch: int
    tasks: list[int]
    workers: list[int]
    durations: list[float]
    reply_to: str
    demands: object = None  # [n, R] numpy array in resource mode


@dataclass(slots=True)
class HostKill:
    """LM → worker host ``host`` in incarnation ``epoch``: stop these tasks (the live form of ``Kill``)."""

    host: str
    epoch: int
    tasks: list[int]
    reply_to: str


@dataclass(slots=True)
class Relaunch:
    """LM → GM: tasks whose worker died and that the LM could not relaunch in its own cluster.

    The GM puts them back at the head of its queue (with their own constraints when it still knows them, else
    ``masks``: the constraints of the dead worker, which the task is known to satisfy).
    """

    lm: int
    tasks: list[int]
    durations: list[float]
    masks: list[int]
    demands: object = None  # [n, R] numpy array in resource mode
    users: list[int] | None = None  # each task's user queue (fairness shares), else None


@dataclass(slots=True)
class JobBatch:
    """Client → GM: the jobs that came due together, as columns (job ``k`` owns the next ``sizes[k]`` entries
    of ``tasks``/``durations``/``masks``/``demands``). The GM handles them as that many
    :class:`~megha.schedulers.common.messages.JobArrival` messages, in order, and sends its launch requests once
    for the whole batch: a client that falls behind (or a burst) costs one message per batch on every hop
    instead of one per job."""

    jobs: object  # int64 [J]
    sizes: object  # int64 [J], each >= 1, summing to the number of tasks
    tasks: object  # int64 [n]
    durations: object  # float64 [n]
    masks: object  # uint32 [n]
    demands: object  # None or [n, R] float64 (resource mode)
    users: object  # int64 [J]
    mean_durations: object  # float64 [J]
    priorities: object  # int64 [J]


def check_batch(b: JobBatch) -> list[int]:
    """Raise ValueError when the columns of a batch do not fit together; returns the job sizes."""
    sizes = b.sizes.tolist()
    n = len(b.tasks)
    cols = {"jobs": b.jobs, "sizes": b.sizes, "users": b.users, "mean_durations": b.mean_durations}
    cols["priorities"] = b.priorities
    if len({len(c) for c in cols.values()}) > 1:
        raise ValueError(f"per-job columns differ in length { {k: len(c) for k, c in cols.items()} }")
    if (sizes and min(sizes) < 1) or sum(sizes) != n:
        raise ValueError(f"job sizes {sizes[:8]} do not add up to the batch's {n} tasks (each job has >= 1)")
    return sizes


def split_batch(b: JobBatch) -> list:
    """The :class:`~megha.schedulers.common.messages.JobArrival` messages of a batch (raises ValueError when its
    columns do not fit together)."""
    from megha.schedulers.common.messages import JobArrival

    sizes = check_batch(b)
    jobs, users, means, prios = b.jobs.tolist(), b.users.tolist(), b.mean_durations.tolist(), b.priorities.tolist()
    out = []
    lo = 0
    dem = b.demands
    for k, size in enumerate(sizes):
        hi = lo + size
        out.append(
            JobArrival(
                jobs[k],
                b.tasks[lo:hi],
                b.durations[lo:hi],
                b.masks[lo:hi],
                None if dem is None else dem[lo:hi],
                users[k],
                means[k],
                prios[k],
            )
        )
        lo = hi
    return out


@dataclass(slots=True)
class Holding:
    """LM → GM, answering a :class:`SyncRequest` (and a launch of a task the LM already holds): the tasks of
    this GM the LM holds — accepted and neither finished nor handed back. The LM is the one authority on whether
    a task runs: a (restarted) GM never places a held task again, whoever resubmits it.

    With fairness shares each held task also comes with its user queue, duration, constraint mask (its worker's:
    the task is known to satisfy it) and, in resource mode, its demand row: a restarted GM counts its users' usage
    from them as it did before the restart, and queues a held task again if an LM preempts it. Without fairness
    shares these columns are None."""

    lm: int
    tasks: list[int]
    users: list[int] | None = None
    durations: list[float] | None = None
    masks: list[int] | None = None
    demands: object = None  # [n, R] numpy array in resource mode (with fairness shares)


@dataclass(slots=True)
class RunSpec:
    """Client → every worker host: how the tasks of run ``run`` execute.

    ``kind`` is ``sleep`` (hold the slot for the duration), ``cpu`` (burn CPU for the duration in a
    subprocess) or ``command`` (run ``command``, a shell-free argument string formatted with ``{task}``,
    ``{job}``, ``{duration}`` and ``{worker}``; its output is captured).
    """

    run: int
    kind: str = "sleep"
    command: str = ""
    cwd: str = ""


@dataclass(slots=True)
class Events:
    """Service → clients: a batch of task events."""

    src: str
    items: list = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.items)


@dataclass(slots=True)
class Status:
    """Service → anyone: periodic health/load report (role, queues, running tasks, counters)."""

    src: str
    kind: str
    role: str
    epoch: int
    t: float
    info: dict = field(default_factory=dict)


@dataclass(slots=True)
class Repl:
    """Active LM → standby LM: an input the active handled, in the order it handled it (its replication log).

    ``what`` is ``msg`` (``data`` holds the encoded envelope as received), ``timer`` (``key`` fired),
    ``start`` (the component started), ``resume`` (the connection to the broker came back), ``takeover`` (a
    standby became the active); on the liveness subject, ``beat`` (the active of term ``key`` is alive and has
    written ``n`` records). ``pos`` is the position in the LM's inbox stream from which a successor must read
    (every earlier message was handled or is a duplicate).
    """

    lm: int
    n: int
    what: str
    now: float
    key: str = ""
    data: bytes = b""
    pos: int = 0


@dataclass(slots=True)
class ReplBatch:
    """Records of an active LM's replication log written as one message (group commit). The active writes a batch
    only where the log ends (the broker checks the expected last position), so once a standby has taken over by
    writing its first record, a deposed active's next batch is refused; the outputs of a batch's records are
    sent only after the broker stored the batch."""

    lm: int
    records: list


@dataclass(slots=True)
class Control:
    """Operator → services: ``shutdown`` (exit cleanly) or ``ping``."""

    cmd: str
    arg: str = ""
