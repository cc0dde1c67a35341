"""The simulator's GM and LM, with the few additions a real deployment needs (still sans-I/O).

Both are built on the masters' documented hooks (docs/extending.md: ``handle``, ``admit``, ``hold_launches``,
``requeue`` on the GM; ``to_workers``, ``place_task``, ``remove_task``, ``worker_changed`` on the LM), never on their
private members (tests/test_megha_hooks.py).

:class:`LiveGlobalMaster` is :class:`~megha.schedulers.megha.gm.GlobalMaster` that

* always starts with an empty view and rebuilds it from full LM snapshots (``fresh_view=False``), asking
  again every ``sync_period`` until every LM answered — the same code path for a first start and for a
  restart (the GM is stateless, paper §IV-D);
* numbers its launch requests from ``req_base`` (the service passes a value above any earlier incarnation's)
  so a stale cumulative acknowledgement never acknowledges a new request;
* remembers the queue entry of each task it placed until the task is done, so tasks handed back by an LM
  (:class:`~megha.live.messages.Relaunch`) are queued again with their own constraints;
* checks incoming messages (``validate``) so a bad message is rejected before it can corrupt state;
* never places a task an LM holds (exactly-once across a GM's death): until every LM has answered its sync
  request it places nothing (what arrives meanwhile waits, in order); each LM's answer starts with
  :class:`~megha.live.messages.Holding`, the tasks of this GM it holds (accepted by an earlier incarnation,
  neither finished nor handed back), and a resubmission of a held task is dropped. The client resubmits the
  tasks it never saw start, and some of those may be held by an LM whose worker host died before it could
  start them: the LM relaunches them itself, so placing them again would run them twice.
* with fairness shares, rebuilds its users' usage after a restart: each held task comes with its user, duration,
  constraint mask and demand, and counts as this GM's running task (the ``adopt_running`` hook), so the GM asks
  for the preemptions it would have asked for without the restart and no other; a held task an LM preempts is
  queued again (one preempted before any LM reported it is reported lost: its client submits it again).

:class:`LiveLocalMaster` is :class:`~megha.schedulers.megha.lm.LocalMaster` plus worker liveness:

* worker hosts announce themselves with :class:`~megha.live.messages.HostBeat`; launches go to the host
  serving each worker (the simulator's single pool address is split by host);
* the LM keeps its *active task list* (task → worker, duration, demand, host); a host silent for
  ``host_timeout`` is dead: its tasks are relaunched by the LM on free workers of its cluster whose
  constraints include the dead worker's (so the task's constraints hold), or handed back to their GM when no
  such worker is free; the dead host's workers are marked busy in the LM's truth (so GMs stop using them)
  until the host comes back;
* completion reports from a worker that no longer holds the task (a host declared dead that was only slow)
  are dropped, and the host is told to kill it: a task completes exactly once;
* it is the one authority on whether a task runs: it answers a GM's sync request with the tasks of that GM it
  holds (:class:`~megha.live.messages.Holding`) and refuses a launch of a task it already holds (the worker the
  GM booked for it is reported free again);
* it reports a preempted run's end (a ``lost`` event noted ``preempted``): the task runs again later, and its
  clients can tell the second run from a duplicate.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from megha.live.messages import Holding, HostBeat, HostKill, HostLaunch, JobBatch, Relaunch, check_batch, split_batch
from megha.schedulers.common.messages import Finished, JobArrival, Kill, Killed, Launch
from megha.schedulers.megha.fairness import E_TASK
from megha.schedulers.megha.gm import GlobalMaster
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.lm import LocalMaster
from megha.schedulers.megha.messages import (
    Handoff,
    LaunchReply,
    LaunchRequest,
    Preempted,
    PreemptReply,
    PreemptRequest,
    StateDelta,
    SyncRequest,
    TaskDone,
)

if TYPE_CHECKING:
    from megha.metrics.recorder import Recorder
    from megha.schedulers.megha.fairness import FairShare

log = logging.getLogger("megha.live.masters")

MISSED_BEATS = 5  # consecutive host beats without a task the LM launched there before it counts as lost ...
LAUNCH_TIMEOUT = 12.0  # ... and as many seconds since the first of them: links are durable and ordered, so a
# launch is late, not lost, until the runtime gives up on a gap in its stream (``gap_timeout``, 10 s); counting
# a late launch as lost ran the task twice (the LM relaunched it while the first launch arrived and ran)
_DOWN = 1 << 62  # task id marking a dead worker as occupied in the LM's slot truth
_Done = Finished | Killed  # a worker's report that a task ended


def host_address(layout: MeghaLayout, name: str) -> str:
    """Address of a worker host process."""
    return f"{layout.prefix}/host/{name}"


def _rng_check(values: np.ndarray | Iterable[int], lo: int, hi: int, what: str) -> None:
    if isinstance(values, np.ndarray):
        if values.size <= 16:  # a few values: Python's min/max over a list beat numpy's reductions
            values = values.tolist()
            if values and (min(values) < lo or max(values) >= hi):
                raise ValueError(f"{what} outside [{lo}, {hi})")
            return
        if values.size and (int(values.min()) < lo or int(values.max()) >= hi):
            raise ValueError(f"{what} outside [{lo}, {hi})")
        return
    for v in values:
        if v < lo or v >= hi:
            raise ValueError(f"{what} {v} outside [{lo}, {hi})")


def _listed(x: list | np.ndarray) -> list:
    return x if isinstance(x, list) else x.tolist()


def _what(msg: JobArrival | JobBatch) -> str:
    return f"job {msg.job}" if isinstance(msg, JobArrival) else f"batch of jobs {msg.jobs[:4].tolist()}"


class LiveGlobalMaster(GlobalMaster):
    """A GM for the live runtime (see the module docs)."""

    def __init__(
        self, g: int, layout: MeghaLayout, recorder: Recorder, *, req_base: int = 0, sync_period: float = 0.5, **kw: Any
    ) -> None:
        kw["fresh_view"] = False
        super().__init__(g, layout, recorder, **kw)
        self.req_seq = req_base
        self.sync_period = sync_period
        self.synced: set[int] = set()
        self._entries: dict[int, tuple] = {}
        # the GM's hooks (docs/extending.md): handlers of the live messages, each wrapping the GM's own
        self.handle(Relaunch, self._on_relaunch)
        self._gm_on_delta = self.handle(StateDelta, self._on_delta_live)
        self._gm_on_done = self.handle(TaskDone, self._on_done_live)
        self._gm_on_job = self.handle(JobArrival, self._on_job_live)
        self.handle(JobBatch, self._on_batch)
        self._gm_on_preempted = self.handle(Preempted, self._on_preempted_live)
        self._have: dict[int, float] = {}  # task -> time received, until known done (a resubmission is dropped)
        self._held: dict[int, int] = {}  # task an LM told us it holds -> that LM (never placed by us)
        self._stash: list | None = []  # messages waiting until every LM answered the sync request
        self.stuck_after = 60.0

    def on_start(self, now: float) -> None:
        super().on_start(now)  # SyncRequest to every LM
        self.port.set_timer(self.sync_period, "sync")

    def on_timer(self, key: Hashable, now: float) -> None:
        if key == "sync":
            missing = [lm for lm in range(self.layout.n_lms) if lm not in self.synced]
            for lm in missing:
                self.port.send(self.layout.lm_address(lm), SyncRequest(self.g))
            if missing:
                self.port.set_timer(self.sync_period, "sync")
            return
        super().on_timer(key, now)

    def on_message(self, msg: Any, now: float) -> None:
        if type(msg) is Holding:  # also a late one (an LM answered a repeated sync request twice)
            self._on_holding(msg, now)
            return
        stash = self._stash
        if stash is None:
            super().on_message(msg, now)
            return
        # not synchronised with every LM yet: place nothing (an LM that has not answered may hold a task that
        # is resubmitted meanwhile); keep what arrives, in order, for when the last LM answered
        stash.append(msg)
        if type(msg) is StateDelta and msg.full:
            self.synced.add(msg.lm)
            if len(self.synced) >= self.layout.n_lms:
                self._stash = None
                self.counters["messages_held_until_synced"] += len(stash)
                for m in stash:
                    super().on_message(m, now)

    def _on_holding(self, msg: Holding, now: float) -> None:
        """Tasks an LM holds: never placed again; with fairness shares, those an earlier incarnation placed count
        as this GM's running tasks (``adopt_running``), so its users' usage is what it was before the restart."""
        have = self._have
        held = self._held
        adopt = self.fair is not None and msg.users is not None
        entries = []
        dem = msg.demands
        for i, t in enumerate(_listed(msg.tasks)):
            if t not in self._entries:  # placed by an earlier incarnation (or by us: then we know already)
                held[t] = msg.lm
                have.setdefault(t, now)
                if adopt:
                    d = None if dem is None else dem[i]
                    entries.append((t, float(msg.durations[i]), int(msg.masks[i]), d, int(msg.users[i]), -1))
        if entries:
            before = len(self.running)
            self.adopt_running(entries)
            self.counters["held_tasks_adopted"] += len(self.running) - before
        self.counters["tasks_held_by_lms"] = len(held)

    def _on_preempted_live(self, msg: Preempted, now: float) -> None:
        """Preempted tasks are no longer held by their LM: queued again (placed again, not dropped as held). One
        this incarnation does not know (preempted before its LMs reported it) is reported lost, and its client
        submits it again."""
        tasks = _listed(msg.tasks)
        held = self._held
        for t in tasks:
            held.pop(t, None)
        if msg.entries is None:
            running = self.running
            placed = self._entries  # booked by this incarnation (running once the LM's acknowledgement is applied)
            unknown = [t for t in tasks if t not in running and t not in placed]
            if unknown:
                self.counters["preempted_tasks_unknown"] += len(unknown)
                for t in unknown:
                    self._have.pop(t, None)
                if hasattr(self.rec, "lost"):
                    self.rec.lost(unknown, now, "preempted before a restarted GM learned of it")
                if len(unknown) == len(tasks):
                    return
                keep = [t for t in tasks if t in running or t in placed]
                msg = Preempted(msg.lm, np.array(keep, dtype=np.int64), msg.acked)
        self._gm_on_preempted(msg, now)

    def admit(self, e: tuple, w: int) -> bool:
        """Remember the queue entry of each task placed (for a hand-back); drop a task an LM holds."""
        t = e[E_TASK]
        if t in self._held:  # an LM holds it: it runs (or will) there; never a second time
            self.counters["duplicate_tasks_dropped"] += 1
            return False
        self._entries[t] = e
        return True

    def handing_over(self, e: tuple, lm: int) -> bool:
        """Remember the queue entry of a task handed to an LM (``handoff_after``: for a hand-back, as for a placed
        task); drop a task an LM holds."""
        return self.admit(e, -1)

    def _on_job_live(self, msg: JobArrival, now: float) -> None:
        have = self._have
        tasks = msg.tasks.tolist()
        keep = [i for i, t in enumerate(tasks) if t not in have]
        if len(keep) < len(tasks):
            self.counters["duplicate_tasks_dropped"] += len(tasks) - len(keep)
            if not keep:
                return
            k = np.array(keep, dtype=np.int64)
            msg = JobArrival(
                msg.job,
                msg.tasks[k],
                msg.durations[k],
                msg.masks[k],
                None if msg.demands is None else msg.demands[k],
                msg.user,
                msg.mean_duration,
                msg.priority,
            )
            tasks = msg.tasks.tolist()
        have.update(dict.fromkeys(tasks, now))
        self._gm_on_job(msg, now)

    def _on_batch(self, msg: JobBatch, now: float) -> None:
        """Every job of the batch, in order, as if each arrived alone; the launch requests of the whole batch
        leave together (one per LM) unless preemption is on (its requests must keep their order with them)."""
        jobs = split_batch(msg)
        if self.preemption:
            for j in jobs:
                self._on_job_live(j, now)
            return
        with self.hold_launches(now):
            for j in jobs:
                self._on_job_live(j, now)

    def _on_delta_live(self, msg: StateDelta, now: float) -> None:
        if msg.full:
            self.synced.add(msg.lm)
        self._gm_on_delta(msg, now)

    def _on_done_live(self, msg: TaskDone, now: float) -> None:
        self._gm_on_done(msg, now)
        ent = self._entries
        have = self._have
        held = self._held
        for t in msg.tasks if isinstance(msg.tasks, list) else msg.tasks.tolist():
            ent.pop(t, None)
            have.pop(t, None)
            held.pop(t, None)

    def _on_relaunch(self, msg: Relaunch, now: float) -> None:
        entries = []
        dem = msg.demands
        users = msg.users
        running = self.running
        held = self._held
        for i, t in enumerate(msg.tasks):
            e = self._entries.pop(t, None)
            was_held = held.pop(t, None) is not None  # the LM handing it back holds it no more: place it again
            if e is None and running:  # started by an LM's preemption, or held and adopted after a restart: its entry
                e = running.get(t)
            user = 0 if users is None else int(users[i])  # the task's user queue (fairness shares)
            if e is None and was_held:  # an LM held it for an earlier incarnation
                e = (t, float(msg.durations[i]), int(msg.masks[i]), None if dem is None else dem[i], user, -1)
            if e is None:
                if t in self._have:  # already queued again (its client resubmitted it): never twice
                    self.counters["duplicate_tasks_dropped"] += 1
                    continue
                self._have[t] = now
                e = (t, float(msg.durations[i]), int(msg.masks[i]), None if dem is None else dem[i], user, -1)
            entries.append(e)
        self.counters["tasks_handed_back"] += len(entries)
        self.requeue(entries, True, now)

    def validate(self, msg: Any) -> None:
        """Reject messages that would corrupt the GM's state (raises ValueError)."""
        L, N = self.layout.n_lms, self.layout.n_workers
        if isinstance(msg, JobBatch):
            check_batch(msg)  # the columns fit together (raises ValueError)
            if self.fair is not None:
                _rng_check(msg.users, 0, self.fair.n_users, "user (fairness queue)")
                if (self.fair.user_gm[np.asarray(msg.users, dtype=np.int64)] != self.g).any():
                    raise ValueError(f"{_what(msg)}: a job of a user whose queue is at another GM")
        if isinstance(msg, JobArrival | JobBatch):
            _rng_check(msg.tasks, 0, 1 << 62, "task id")
            _rng_check(msg.durations, 0, 1 << 40, "duration")
            if isinstance(msg, JobArrival) and self.fair is not None:
                if not 0 <= msg.user < self.fair.n_users:
                    raise ValueError(f"user {msg.user} has no fairness queue")
                if int(self.fair.user_gm[msg.user]) != self.g:
                    raise ValueError(f"job {msg.job}: user {msg.user}'s queue is at another GM")
            if self.resource_mode:
                R = self.view.free.shape[1]
                if msg.demands is None or msg.demands.shape != (len(msg.tasks), R):
                    got = None if msg.demands is None else msg.demands.shape
                    raise ValueError(
                        f"{_what(msg)}: the deployment runs in resource mode and needs a demand row of "
                        f"{R} resources per task (got {got})"
                    )
                if not np.isfinite(msg.demands).all() or (msg.demands < 0).any():
                    raise ValueError(f"{_what(msg)}: demands must be finite and >= 0")
            elif msg.demands is not None:
                raise ValueError(f"{_what(msg)}: the deployment runs in slot mode; tasks must not carry demands")
            return
        lm = getattr(msg, "lm", None)
        if lm is not None and not 0 <= lm < L:
            raise ValueError(f"LM {lm} does not exist (the deployment has {L})")
        lo, hi = (int(self.layout.lm_lo[lm]), int(self.layout.lm_hi[lm])) if lm is not None else (0, N)
        if isinstance(msg, StateDelta):
            _rng_check(msg.workers, lo, hi, "worker")
        elif isinstance(msg, LaunchReply):
            _rng_check(msg.delta_workers, lo, hi, "worker")
        elif isinstance(msg, TaskDone):
            _rng_check(msg.workers, lo, hi, "worker")
        elif isinstance(msg, PreemptReply):
            _rng_check(msg.delta_workers, lo, hi, "worker")
            if msg.request not in self.preempting:
                raise ValueError(f"no preemption request {msg.request} is pending")
        elif isinstance(msg, Relaunch) and self.fair is not None:
            if msg.users is None or len(msg.users) != len(msg.tasks):
                raise ValueError("a hand-back needs each task's user queue when fairness shares are on")
            _rng_check(msg.users, 0, self.fair.n_users, "user (fairness queue)")
            if (self.fair.user_gm[np.asarray(msg.users, dtype=np.int64)] != self.g).any():
                raise ValueError("a hand-back of a task of a user whose queue is at another GM")
        elif isinstance(msg, Preempted | Relaunch):
            pass
        elif isinstance(msg, Holding):
            self._check_holding(msg)
        else:
            raise ValueError(f"a GM does not handle {type(msg).__name__}")

    def _check_holding(self, msg: Holding) -> None:
        _rng_check(msg.tasks, 0, 1 << 62, "task id")
        n = len(msg.tasks)
        cols = {"users": msg.users, "durations": msg.durations, "masks": msg.masks, "demands": msg.demands}
        if any(c is not None and len(c) != n for c in cols.values()):
            raise ValueError("a Holding's columns differ in length")
        if self.fair is None:
            return
        if msg.users is None or msg.durations is None or msg.masks is None:
            raise ValueError("a Holding needs each held task's user, duration and constraint mask with fairness shares")
        _rng_check(msg.users, 0, self.fair.n_users, "user (fairness queue)")
        if n and (self.fair.user_gm[np.asarray(msg.users, dtype=np.int64)] != self.g).any():
            raise ValueError("a Holding of a task of a user whose queue is at another GM")
        _rng_check(msg.durations, 0, 1 << 40, "duration")
        _rng_check(msg.masks, 0, 1 << 32, "constraint mask")
        if self.resource_mode:
            R = self.view.free.shape[1]
            if msg.demands is None or msg.demands.shape != (n, R):
                raise ValueError(f"a Holding in resource mode needs a demand row of {R} resources per task")
            if not np.isfinite(msg.demands).all() or (msg.demands < 0).any():
                raise ValueError("a Holding's demands must be finite and >= 0")
        elif msg.demands is not None:
            raise ValueError("the deployment runs in slot mode; a Holding must not carry demands")

    def _ages(self) -> dict:
        """Tasks this GM holds (queued or running) by age, and the stuck ones: queued longer than
        ``stuck_after`` seconds, or placed longer than their duration plus ``stuck_after``."""
        import time

        now = time.time()
        have = self._have
        if not have:
            return {"in_flight": 0, "age_1s": 0, "age_10s": 0, "age_60s": 0, "age_older": 0, "stuck": 0}
        ts = np.fromiter(have.keys(), dtype=np.int64, count=len(have))
        age = now - np.fromiter(have.values(), dtype=np.float64, count=len(have))
        placed = np.array([t in self._entries for t in ts.tolist()], dtype=bool)
        dur = np.array([self._entries[t][1] if p else 0.0 for t, p in zip(ts.tolist(), placed, strict=True)])
        stuck = int(((~placed) & (age > self.stuck_after)).sum() + (placed & (age > dur + self.stuck_after)).sum())
        return {
            "in_flight": len(have),
            "age_1s": int((age < 1).sum()),
            "age_10s": int(((age >= 1) & (age < 10)).sum()),
            "age_60s": int(((age >= 10) & (age < 60)).sum()),
            "age_older": int((age >= 60).sum()),
            "stuck": stuck,
        }

    def status_info(self) -> dict:
        """The GM's figures for status reports: queue, unacknowledged launches, running tasks, free workers in its
        view, synced LMs, ages, counters."""
        view = self.view
        free = int(view.n_free) if hasattr(view, "n_free") else int((view.free[:, 0] > 1e-9).sum())
        return {
            "queue": len(self.queue),
            "unacked": len(self.unacked),
            "placed_running": len(self._entries),
            "view_free": free,
            "synced": len(self.synced),
            "lms": self.layout.n_lms,
            **self._ages(),
            "counters": {k: int(v) for k, v in self.counters.items()},
        }


class LiveLocalMaster(LocalMaster):
    """An LM for the live runtime (see the module docs)."""

    def __init__(
        self,
        l: int,  # noqa: E741
        layout: MeghaLayout,
        recorder: Recorder,
        heartbeat: float = 5.0,
        fair: FairShare | None = None,
        reply_always: bool = False,
        host_timeout: float = 1.0,
        check_period: float = 0.2,
    ) -> None:
        super().__init__(l, layout, recorder, heartbeat, fair, reply_always)
        self.host_timeout = host_timeout
        self.check_period = check_period
        n = self.hi - self.lo
        self.hosts: dict[str, list] = {}  # name -> [epoch, last seen, workers, alive]
        self.host_of: list[str | None] = [None] * n
        self.down = np.zeros(n, dtype=bool)
        self.active: dict[int, list] = {}  # task -> [worker, duration, demand row | None, host | None]
        self.parked: dict[int, list[int]] = {}  # worker without a host yet -> tasks waiting for it
        self.relaunch: deque = deque()
        self._missed: dict[str, dict[int, tuple]] = {}  # host -> task -> (consecutive beats without it, since)
        self._last_check = 0.0
        self.handed: dict[int, int] = {}  # task handed over by a GM (handoff_after), waiting for a worker -> GM
        # the LM's own Handoff handler, behind a check (a closure, not an attribute: snapshots hold data only)
        own = self.handle(Handoff, lambda msg, now: self._on_handoff_live(msg, now, own))

    def on_start(self, now: float) -> None:
        super().on_start(now)
        self._last_check = now
        self.port.set_timer(self.check_period, "hosts")

    def on_takeover(self, now: float) -> None:
        """Called when this (standby) LM becomes active: give every host a grace period."""
        for h in self.hosts.values():
            h[1] = now
        self._last_check = now

    def on_resume(self, now: float) -> None:
        """The connection to the broker came back: hosts could not be heard meanwhile; give them a grace period."""
        self.on_takeover(now)

    # --- dispatch ------------------------------------------------------------------------------------------
    def on_message(self, msg: Any, now: float) -> None:
        t = type(msg)
        if t is HostBeat:
            self._on_beat(msg, now)
            return
        if t is Finished:
            msg = self._filter_done(msg, "finished")
            if msg is None:
                return
            self.rec.finished(msg.tasks, now)  # the authoritative completion: exactly once per task
            super().on_message(msg, now)
            if self.relaunch:
                self._try_relaunch(now)
            return
        if t is Killed:
            msg = self._filter_done(msg, "killed")
            if msg is None:
                return
            pending = self.kill_pending
            if pending and hasattr(self.rec, "preempted"):  # a preempted run ended: its task runs again later
                pre = [x for x in _listed(msg.tasks) if x in pending]
                if pre:
                    self.rec.preempted(pre, now)
        elif t is LaunchRequest:
            msg = self._filter_held(msg, now)
            if msg is None:
                return
        elif t is SyncRequest:
            self.port.send(self.gm_addr[msg.gm], self.holding(msg.gm, self.held_for(msg.gm)))
        super().on_message(msg, now)

    def _owner(self, t: int, w: int) -> int:
        i = w - self.lo
        c = self.cluster
        if self.resource_mode:
            ent = c.tasks_on[i].get(t)
            return -1 if ent is None else int(ent[0])
        return int(c.owner[i]) if c.task[i] == t else -1

    def held_for(self, gm: int) -> list[int]:
        """Tasks of GM ``gm`` this LM holds (accepted, neither finished nor handed back; handed over by the GM and
        waiting here for a worker)."""
        out = [t for t, a in self.active.items() if self._owner(t, a[0]) == gm]
        out.extend(x[0] for x in self.relaunch if x[1] == gm)
        out.extend(t for t, g in self.handed.items() if g == gm)
        return out

    def holding(self, gm: int, tasks: list[int]) -> Holding:
        """The :class:`~megha.live.messages.Holding` telling GM ``gm`` that this LM holds ``tasks`` (from
        :meth:`held_for`). With fairness shares each task's user queue, duration, constraint mask (its worker's) and
        demand row go with it: a restarted GM rebuilds its users' usage from them."""
        if self.fair is None:
            return Holding(self.l, tasks)
        relaunch = {x[0]: x for x in self.relaunch} if self.relaunch else {}
        wmask = self.layout.worker_masks
        users, durs, masks, dems = [], [], [], []
        for t in tasks:
            a = self.active.get(t)
            if a is not None:  # (worker, duration, demand, host)
                users.append(self._user(t, a[0]))
                durs.append(float(a[1]))
                masks.append(int(wmask[a[0]]))
                dems.append(a[2])
            else:  # waiting to be relaunched: (task, GM, user, duration, demand, mask)
                x = relaunch[t]
                users.append(int(x[2]))
                durs.append(float(x[3]))
                masks.append(int(x[5]))
                dems.append(x[4])
        dem = None
        if self.resource_mode:
            dem = np.array(dems, dtype=np.float64).reshape(len(tasks), self.cluster.free.shape[1])
        return Holding(self.l, tasks, users, durs, masks, dem)

    def _user(self, t: int, w: int) -> int:
        """The user queue of task ``t`` running on worker ``w``."""
        i = w - self.lo
        c = self.cluster
        if self.resource_mode:
            return int(c.tasks_on[i][t][1])
        return int(c.user[i])

    def _on_handoff_live(self, msg: Handoff, now: float, own: Callable[[Handoff, float], None]) -> None:
        """Tasks a GM handed over (``handoff_after``), but those this LM already holds (exactly once)."""
        active = self.active
        handed = self.handed
        tasks = _listed(msg.tasks)
        keep = [i for i, t in enumerate(tasks) if t not in active and t not in handed]
        if len(keep) < len(tasks):
            self.counters["duplicate_launches_refused"] += len(tasks) - len(keep)
            if not keep:
                return
            cols = (msg.durations, msg.masks, msg.users, msg.arrivals)
            msg = Handoff(msg.gm, [tasks[i] for i in keep], *([_listed(c)[i] for i in keep] for c in cols))
        handed.update(dict.fromkeys(_listed(msg.tasks), msg.gm))  # those that start at once leave in to_workers
        own(msg, now)

    def _filter_held(self, msg: LaunchRequest, now: float) -> LaunchRequest | None:
        """Refuse launches of tasks this LM already holds (exactly once, whoever asks): the GM hears that the LM
        holds them, and the workers it booked for them are reported as they are."""
        active = self.active
        tasks = msg.tasks if isinstance(msg.tasks, list) else msg.tasks.tolist()
        dup = [i for i, t in enumerate(tasks) if t in active]
        if self.handed:  # handed over to this LM and waiting for a worker: held too
            handed = self.handed
            dup = [i for i, t in enumerate(tasks) if t in active or t in handed]
        if not dup:
            return msg
        self.counters["duplicate_launches_refused"] += len(dup)
        workers = msg.workers if isinstance(msg.workers, list) else msg.workers.tolist()
        self.port.send(self.gm_addr[msg.gm], self.holding(msg.gm, [tasks[i] for i in dup]))
        for i in dup:
            self.worker_changed(workers[i], now)
        if len(dup) == len(tasks):
            self.processed[msg.gm] = msg.req
            return None
        keep = [i for i in range(len(tasks)) if i not in set(dup)]
        k = np.array(keep, dtype=np.int64)
        durs = msg.durations if isinstance(msg.durations, list) else msg.durations.tolist()
        users = msg.users if isinstance(msg.users, list) else msg.users.tolist()
        return LaunchRequest(
            msg.gm,
            msg.req,
            [tasks[i] for i in keep],
            [workers[i] for i in keep],
            [durs[i] for i in keep],
            [users[i] for i in keep],
            None if msg.demands is None else msg.demands[k],
        )

    def on_timer(self, key: Hashable, now: float) -> None:
        if key == "hosts":
            if now - self._last_check > self.check_period + self.host_timeout / 2:
                for h in self.hosts.values():  # this LM stalled: the hosts' beats may still be queued
                    h[1] = max(h[1], now)
            self._last_check = now
            for name, h in list(self.hosts.items()):
                if h[3] and now - h[1] > self.host_timeout:
                    self._host_down(name, now, f"no heartbeat for {now - h[1]:.2f} s")
            self.port.set_timer(self.check_period, "hosts")
            return
        super().on_timer(key, now)

    def _filter_done(self, msg: _Done, what: str) -> _Done | None:
        """Keep only reports from the worker that currently holds each task (exactly-once completion)."""
        tasks = msg.tasks if isinstance(msg.tasks, list) else msg.tasks.tolist()
        workers = msg.workers if isinstance(msg.workers, list) else msg.workers.tolist()
        keep = []
        active = self.active
        for i, (t, w) in enumerate(zip(tasks, workers, strict=True)):
            a = active.get(t)
            if a is not None and a[0] == w:
                del active[t]
                keep.append(i)
            else:
                self.counters[f"stale_{what}_dropped"] += 1
        if len(keep) == len(tasks):
            return msg
        if not keep:
            return None
        dem = None if msg.demands is None else msg.demands[np.array(keep, dtype=np.int64)]
        return type(msg)([tasks[i] for i in keep], [workers[i] for i in keep], dem)

    # --- the pool side: launches to hosts ------------------------------------------------------------------
    def to_workers(self, msg: Launch | Kill, now: float) -> None:
        """The LM's hook (docs/extending.md): launches and kills go to the hosts serving the workers."""
        if isinstance(msg, Launch):
            tasks = msg.tasks if isinstance(msg.tasks, list) else msg.tasks.tolist()
            workers = msg.workers if isinstance(msg.workers, list) else msg.workers.tolist()
            durs = msg.durations if isinstance(msg.durations, list) else msg.durations.tolist()
            dem = msg.demands
            by_host: dict[str, list[int]] = {}
            lo = self.lo
            if self.handed:  # handed-over tasks start: held as running from now on
                for t in tasks:
                    self.handed.pop(t, None)
            for i, t in enumerate(tasks):
                w = workers[i]
                h = self.host_of[w - lo]
                self.active[t] = [w, durs[i], None if dem is None else dem[i], h]
                if h is None:
                    self.parked.setdefault(w, []).append(t)
                else:
                    by_host.setdefault(h, []).append(i)
            for h, idx in by_host.items():
                self._launch_on(
                    h,
                    [tasks[i] for i in idx],
                    [workers[i] for i in idx],
                    [durs[i] for i in idx],
                    None if dem is None else dem[np.array(idx, dtype=np.int64)],
                )
        elif isinstance(msg, Kill):
            by_host: dict[str, list[int]] = {}
            parked = []
            for t in msg.tasks if isinstance(msg.tasks, list) else msg.tasks.tolist():
                a = self.active.get(t)
                if a is None:
                    continue
                if a[3] is None:
                    parked.append(t)
                else:
                    by_host.setdefault(a[3], []).append(t)
            for h, ts in by_host.items():
                self._kill_on(h, ts)
            if parked:  # never started: killed at once
                ws = []
                for t in parked:
                    w = self.active[t][0]
                    self.parked.get(w, []).remove(t)
                    ws.append(w)
                self.on_message(Killed(parked, ws, None), now)
        else:
            raise TypeError(f"{self.address}: unexpected pool message {type(msg).__name__}")

    def _host_addr(self, name: str) -> str:
        return host_address(self.layout, name)

    def _launch_on(self, host: str, tasks: list, workers: list, durs: list, dem: np.ndarray | None) -> None:
        self.port.send(
            self._host_addr(host), HostLaunch(host, self.hosts[host][0], tasks, workers, durs, self.address, dem)
        )

    def _kill_on(self, host: str, tasks: list) -> None:
        self.port.send(self._host_addr(host), HostKill(host, self.hosts[host][0], tasks, self.address))

    # --- worker liveness -----------------------------------------------------------------------------------
    def _on_beat(self, msg: HostBeat, now: float) -> None:
        h = self.hosts.get(msg.host)
        if h is not None and h[3] and h[0] == msg.epoch:
            h[1] = now
            self._reconcile(msg, now)
            return
        if h is not None and h[3]:  # restarted before we noticed: its old tasks are gone (relaunched below)
            self._host_down(msg.host, now, "host restarted", relaunch=False)
        lo = self.lo
        self.hosts[msg.host] = [msg.epoch, now, list(msg.workers), True]
        self.counters["host_registrations"] += 1
        ready: dict[str, list[int]] = {}
        for w in msg.workers:
            i = w - lo
            prev = self.host_of[i]
            if prev is not None and prev != msg.host and self.hosts.get(prev, [0, 0, [], False])[3]:
                log.warning("%s: worker %d moves from host %s to %s", self.address, w, prev, msg.host)
            self.host_of[i] = msg.host
            if self.down[i]:
                self._unblock(w, now)
            for t in self.parked.pop(w, []):
                a = self.active.get(t)
                if a is not None:
                    a[3] = msg.host
                    ready.setdefault(msg.host, []).append(t)
        for host, ts in ready.items():
            a = [self.active[t] for t in ts]
            dem = None if a[0][2] is None else np.array([x[2] for x in a])
            self._launch_on(host, ts, [x[0] for x in a], [x[1] for x in a], dem)
        if self.relaunch:
            self._try_relaunch(now)

    def _reconcile(self, msg: HostBeat, now: float) -> None:
        """Compare what the host says it runs for this LM with the LM's active list.

        A task the host runs that the LM does not hold there (a stale launch) is stopped. A task the LM holds
        there that the host has not reported in ``MISSED_BEATS`` consecutive beats spanning ``LAUNCH_TIMEOUT``
        seconds (its launch was lost) is
        treated as lost: relaunched or handed back. Completions travel on the same stream as beats and arrive
        first, so a finished task is never mistaken for a lost one.
        """
        name = msg.host
        running = set(msg.running)
        stale = [t for t in running if (a := self.active.get(t)) is None or a[3] != name]
        if stale:
            self.counters["stale_runs_stopped"] += len(stale)
            self._kill_on(name, stale)
            # a run that started after this LM had given its launch up (the host was slow, not dead): its "started"
            # event reached the client after the loss, so the client took the task for running. Report the run's end
            # unless this LM runs the task elsewhere: else a task handed back to a GM that died meanwhile was never
            # submitted again (lost; chaos --seconds 300 --seed 7)
            gone = [t for t in stale if t not in self.active]
            if gone and hasattr(self.rec, "lost"):
                self.rec.lost(gone, now, f"stale run on host {name} stopped")
        miss = self._missed.setdefault(name, {})
        mine = [t for t, a in self.active.items() if a[3] == name and t not in running]
        now_missing = {}
        lost = []
        for t in mine:
            k, first = miss.get(t, (0, now))
            k += 1
            if k >= MISSED_BEATS and now - first >= LAUNCH_TIMEOUT:
                lost.append(t)
            else:
                now_missing[t] = (k, first)
        self._missed[name] = now_missing
        if lost:
            self.counters["launches_lost"] += len(lost)
            self._lose(lost, now, f"launch never reached host {name}")
            self._try_relaunch(now, hand_back=True)

    def _lose(self, lost: list[int], now: float, note: str) -> None:
        """Take runs that will not complete off the LM's books and queue the tasks for relaunch.

        A run being preempted (its kill not yet reported) is already off its worker, which the preempting task
        holds: it is not taken off again (that would free the worker under the preempting task and relaunch the
        victim as that task's GM and user); its GM hears it was preempted and queues it again."""
        masks = self.layout.worker_masks
        pending = self.kill_pending
        preempted: dict[int, list[int]] = {}
        for t in lost:
            w, dur, d, _ = self.active.pop(t)
            kp = pending.pop(t, None) if pending else None
            if kp is not None:
                preempted.setdefault(kp[0], []).append(t)
                continue
            gm, user = self.remove_task(w, t, d, now)
            self.relaunch.append((t, gm, user, dur, d, int(masks[w])))
        for gm, ts in preempted.items():
            self.counters["preempted_runs_lost"] += len(ts)
            self.port.send(self.gm_addr[gm], Preempted(self.l, np.array(ts, dtype=np.int64), self.processed[gm]))
        if lost and hasattr(self.rec, "lost"):
            self.rec.lost(lost, now, note)

    def _block(self, w: int) -> None:
        i = w - self.lo
        self.down[i] = True
        c = self.cluster
        if self.resource_mode:
            c.free[i] = 0.0
        else:
            c.task[i] = _DOWN
            c.owner[i] = -1
            c.user[i] = -1

    def _unblock(self, w: int, now: float) -> None:
        i = w - self.lo
        self.down[i] = False
        c = self.cluster
        if self.resource_mode:
            c.free[i] = c.capacity[i] - sum((d for _, _, d in c.tasks_on[i].values()), np.zeros_like(c.free[i]))
        else:
            c.task[i] = -1
        self.worker_changed(w, now)

    def _host_down(self, name: str, now: float, reason: str, relaunch: bool = True) -> None:
        h = self.hosts[name]
        h[3] = False
        self.counters["hosts_lost"] += 1
        lost = [t for t, a in self.active.items() if a[3] == name]
        log.warning("%s: worker host %s is down (%s): %d task(s) to relaunch", self.address, name, reason, len(lost))
        self._missed.pop(name, None)
        self._lose(lost, now, f"worker host {name} down: {reason}")
        for w in h[2]:
            if self.host_of[w - self.lo] == name and not self.down[w - self.lo]:
                self._block(w)
                self.worker_changed(w, now)
        if lost:
            self._kill_on(name, list(lost))  # fence it if it is alive
            if relaunch:
                self._try_relaunch(now, hand_back=True)

    def _try_relaunch(self, now: float, hand_back: bool = True) -> None:
        """Relaunch lost tasks on suitable free workers; hand the rest back to their GMs."""
        c = self.cluster
        lo, hi = self.lo, self.hi
        masks = self.layout.worker_masks[lo:hi]
        up = ~self.down & np.array([h is not None and self.hosts[h][3] for h in self.host_of], dtype=bool)
        if self.resource_mode:
            free_any = up
        else:
            free_any = up & (np.array(c.task) < 0)
        launches: list[tuple] = []
        back: dict[int, list[tuple]] = {}
        for item in self.relaunch:
            t, gm, user, dur, d, need = item
            ok = free_any & ((np.uint32(need) & ~masks) == 0)
            if self.resource_mode:
                ok &= (c.free >= np.asarray(d) - 1e-9).all(axis=1)
            cand = np.flatnonzero(ok)
            if cand.size == 0:
                back.setdefault(gm, []).append(item)
                continue
            pref = cand[self.layout.part_of[cand + lo] == gm]
            i = int((pref if pref.size else cand)[0])
            w = i + lo
            placed = self.place_task(w, t, d, gm, user, now)
            assert placed
            if not self.resource_mode:
                free_any[i] = False
            launches.append((t, w, dur, d))
        self.relaunch = deque()
        if launches:
            self.counters["tasks_relaunched"] += len(launches)
            dem = None if launches[0][3] is None else np.array([x[3] for x in launches])
            self.to_workers(
                Launch([x[0] for x in launches], [x[1] for x in launches], [x[2] for x in launches], self.address, dem),
                now,
            )
        if not hand_back:
            for items in back.values():
                self.relaunch.extend(items)
            return
        for gm, items in back.items():
            self.counters["tasks_handed_back"] += len(items)
            dem = None if items[0][4] is None else np.array([x[4] for x in items])
            self.port.send(
                self.gm_addr[gm],
                Relaunch(
                    self.l,
                    [x[0] for x in items],
                    [x[3] for x in items],
                    [x[5] for x in items],
                    dem,
                    None if self.fair is None else [x[2] for x in items],
                ),
            )

    # --- checks and status ---------------------------------------------------------------------------------
    def validate(self, msg: Any) -> None:
        """Reject messages that would corrupt the LM's state (raises ValueError)."""
        G = self.G
        if isinstance(msg, LaunchRequest):
            if not 0 <= msg.gm < G:
                raise ValueError(f"GM {msg.gm} does not exist (the deployment has {G})")
            _rng_check(msg.workers, self.lo, self.hi, "worker")
            _rng_check(msg.tasks, 0, 1 << 62, "task id")
            _rng_check(msg.durations, 0, 1 << 40, "duration")
            if self.fair is not None:
                _rng_check(msg.users, 0, self.fair.n_users, "user")
            else:
                _rng_check(msg.users, 0, 1 << 31, "user")
        elif isinstance(msg, Finished | Killed):
            _rng_check(msg.workers, self.lo, self.hi, "worker")
        elif isinstance(msg, SyncRequest):
            if not 0 <= msg.gm < G:
                raise ValueError(f"GM {msg.gm} does not exist")
        elif isinstance(msg, PreemptRequest):
            if self.fair is None:
                raise ValueError("preemption needs fairness shares")
            if not 0 <= msg.gm < G or not 0 <= msg.user < self.fair.n_users or not 0 <= msg.victim < self.fair.n_users:
                raise ValueError("preemption request names an unknown GM or user")
        elif isinstance(msg, Handoff):
            if not 0 <= msg.gm < G:
                raise ValueError(f"GM {msg.gm} does not exist (the deployment has {G})")
            n = len(msg.tasks)
            if not len(msg.durations) == len(msg.masks) == len(msg.users) == len(msg.arrivals) == n:
                raise ValueError("a hand-over's columns differ in length")
            _rng_check(msg.tasks, 0, 1 << 62, "task id")
            _rng_check(msg.durations, 0, 1 << 40, "duration")
            _rng_check(msg.users, 0, 1 << 31, "user")
            _rng_check(msg.masks, 0, 1 << 32, "constraint mask")
        elif isinstance(msg, HostBeat):
            if msg.lm != self.l:
                raise ValueError(f"heartbeat for LM {msg.lm} sent to LM {self.l}")
            _rng_check(msg.workers, self.lo, self.hi, "worker")
        else:
            raise ValueError(f"an LM does not handle {type(msg).__name__}")

    def status_info(self) -> dict:
        """The LM's figures for status reports: its workers (busy, down, without a host), hosts, running tasks,
        pending relaunches, counters."""
        c = self.cluster
        n = self.hi - self.lo
        busy = (
            int((np.array(c.task) >= 0).sum())
            if not self.resource_mode
            else int((c.free[:, 0] < c.capacity[:, 0] - 1e-9).sum())
        )
        alive = [k for k, h in self.hosts.items() if h[3]]
        return {
            "workers": n,
            "running": len(self.active),
            "busy_workers": busy - int(self.down.sum()),
            "down_workers": int(self.down.sum()),
            "hosts_alive": len(alive),
            "hosts_known": len(self.hosts),
            "hostless_workers": sum(1 for h in self.host_of if h is None),
            "relaunch_pending": len(self.relaunch),
            "counters": {k: int(v) for k, v in self.counters.items()},
        }
