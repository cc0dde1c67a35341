"""The client: submit a trace (time-compressed) or one job, follow it, and measure it like the simulator.

The client sends :class:`~megha.schedulers.common.messages.JobArrival` messages to the GMs (round robin by job, as
the simulator routes them; with fairness shares each job to the GM of its user queue) at the trace's arrival times
divided by the compression factor (task durations are divided by the same factor), collects the task events the
services publish (``decided`` by a GM, ``started`` by a worker host, ``finished`` by the LM when it accepts a
worker's completion report, ``known`` when the GM learns of the completion, ``lost`` when a worker died under a
task), and at the end builds the simulator's :class:`~megha.metrics.recorder.TaskRecorder` and
:class:`~megha.runner.RunResult` from them, so :func:`megha.metrics.report.write_run` writes the same
``summary.json``, tables and plots.

Faults handled here: when a GM restarts (new incarnation in its status), the tasks that GM held and that
never started are submitted to it again once it has rebuilt its view (it is stateless; the client is the
owner of the work, paper §IV-D), and completions the GM could not learn while it was down are taken as known
when it has rebuilt its view (or, at the latest, ``orphan_grace`` seconds after the worker reported them). A GM
silent for ``gm_dead_after`` seconds (while the client itself is connected) gets no new jobs; the tasks it holds
stay with it (sending them elsewhere could run them twice) until its next incarnation takes them. A task whose
run was lost with its worker and that has not started again after ``orphan_grace`` seconds (its LM handed it
back to a GM that died meanwhile) is submitted again. A resubmission never runs a task twice: a GM drops tasks
it already holds, and an LM is the one authority on the tasks it holds — it lists them to a GM that rebuilds its
view, which then drops their resubmission (a task the client never saw start may be held by an LM whose worker
host died before starting it; that LM relaunches it itself).

Every task completes exactly once or is reported: the result names tasks that finished more than once,
never finished, or failed (non-zero exit, with the reason).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from megha.config import RunConfig
from megha.live import wire
from megha.live.config import LiveConfig
from megha.live.counters import counter_sets as live_counter_sets
from megha.live.messages import Events, JobBatch, RunSpec, Status
from megha.live.runtime import HOSTS, STATUS, Runtime, events_address
from megha.live.transport import Transport
from megha.live.worker import NONCE_BITS, RUN_SHIFT
from megha.metrics.recorder import TaskRecorder
from megha.metrics.result import RunResult
from megha.model.topology import Datacenter
from megha.model.workload import Workload, feasible_tasks
from megha.runner.inputs import STREAM_TASK_CONSTRAINTS, stream
from megha.schedulers.common.messages import JobArrival
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.wiring import fair_share, job_users

log = logging.getLogger("megha.live.client")

_MASK = (1 << RUN_SHIFT) - 1
MAX_BATCH_JOBS = 256  # jobs per JobBatch message (a burst due at once is split)
# Above SUBMIT_WINDOW_RATE jobs per second (the workload's own arrival rate over the last 0.1 s), the client submits
# at most once per window, which grows linearly to SUBMIT_WINDOW_MAX at 2.5 times that rate: at high rates the jobs
# of a window travel as one JobBatch per GM, and each JobBatch becomes one launch request per LM and one host launch
# per LM and host (fewer messages and wake-ups on every hop; each job waits up to one window); below it every job
# leaves when it is due, so latency at moderate rates is unchanged
SUBMIT_WINDOW_RATE = 2000.0
SUBMIT_WINDOW_MAX = 0.005  # s
USERS_STREAM = 0x75736572  # with the datacenter seed: the generator of random user queues (``users = "random"``)
STALE_START_GRACE = 15.0  # s: a task lost once, started again and silent this long past its duration is resubmitted


def prepare_workload(
    cfg: LiveConfig, trace: str, dc: Datacenter, compress: float = 1.0, max_jobs: int | None = None
) -> Workload:
    """Load a trace as the simulator would (constraints from the same seed), then compress time by ``compress``."""
    from megha.samples import resolve
    from megha.workload.tracefile import load_workload

    if compress <= 0:
        raise ValueError("the compression factor must be > 0")
    w = load_workload(resolve(trace, "trace"))
    if max_jobs is not None and max_jobs < w.n_jobs:
        n_t = int(w.job_num_tasks[:max_jobs].sum())
        w = replace(
            w,
            job_arrival=w.job_arrival[:max_jobs],
            job_num_tasks=w.job_num_tasks[:max_jobs],
            job_mean_duration=w.job_mean_duration[:max_jobs],
            task_duration=w.task_duration[:n_t],
            task_mask=None if w.task_mask is None else w.task_mask[:n_t],
            task_demand=None if w.task_demand is None else w.task_demand[:n_t],
            job_user=None if w.job_user is None else w.job_user[:max_jobs],
            job_priority=None if w.job_priority is None else w.job_priority[:max_jobs],
        )
    d = cfg.datacenter
    if d.constraints:
        if w.task_mask is None:
            w = w.with_constraints(stream(d.seed, STREAM_TASK_CONSTRAINTS))
    else:
        w = replace(w, task_mask=None)
    if d.resources:
        names = dc.resource_names
        if w.task_demand is None:
            w = w.with_demands(np.tile(np.array([d.demand[k] for k in names]), (w.n_tasks, 1)), names)
    else:
        w = replace(w, task_demand=None, resource_names=())
    t0 = float(w.job_arrival.min()) if w.n_jobs else 0.0
    name = w.name if compress == 1 else f"{w.name} (time/{compress:g})"
    return replace(
        w,
        job_arrival=(w.job_arrival - t0) / compress,
        task_duration=w.task_duration / compress,
        job_mean_duration=w.job_mean_duration / compress,
        name=name,
    )


def one_job(
    tasks: int, duration: float, mask: int = 0, demand: np.ndarray | None = None, names: tuple[str, ...] = ()
) -> Workload:
    """A workload of one job with ``tasks`` tasks of ``duration`` seconds."""
    if tasks < 1:
        raise ValueError("a job needs at least one task")
    return Workload(
        job_arrival=np.zeros(1),
        job_num_tasks=np.array([tasks], dtype=np.int64),
        job_mean_duration=np.array([duration]),
        task_duration=np.full(tasks, float(duration)),
        task_mask=np.full(tasks, mask, dtype=np.uint32) if mask else None,
        task_demand=None if demand is None else np.tile(demand, (tasks, 1)),
        resource_names=names,
        name="one-job",
    )


def synthetic_workload(
    n_jobs: int, tasks_per_job: int, duration: float, span: float, seed: int = 0, jitter: float = 0.5
) -> Workload:
    """``n_jobs`` jobs of ``tasks_per_job`` tasks arriving evenly over ``span`` seconds; task durations are
    ``duration`` × a uniform factor in [1 − jitter, 1 + jitter] (unconstrained; constraints are added by the
    deployment's settings when prepared)."""
    rng = np.random.default_rng(seed)
    n = n_jobs * tasks_per_job
    dur = duration * rng.uniform(1 - jitter, 1 + jitter, size=n)
    arr = np.linspace(0.0, span, n_jobs, endpoint=False)
    return Workload(
        job_arrival=arr,
        job_num_tasks=np.full(n_jobs, tasks_per_job, dtype=np.int64),
        job_mean_duration=dur.reshape(n_jobs, tasks_per_job).mean(axis=1),
        task_duration=dur,
        name=f"synthetic {n_jobs}x{tasks_per_job}",
    )


def with_constraints(cfg: LiveConfig, w: Workload) -> Workload:
    """Give a generated workload task constraints (and, in resource mode, the configured per-task demand) the way
    the deployment's settings say."""
    d = cfg.datacenter
    if d.constraints and w.task_mask is None:
        w = w.with_constraints(stream(d.seed, STREAM_TASK_CONSTRAINTS))
    if d.resources and w.task_demand is None:
        names = tuple(d.capacity)
        w = w.with_demands(np.tile(np.array([d.demand.get(k, 0.0) for k in names]), (w.n_tasks, 1)), names)
    return w


@dataclass
class LiveRun:
    """What a live run produced, before it is turned into a :class:`RunResult`."""

    workload: Workload
    feasible: np.ndarray
    t0: float
    submitted_at: np.ndarray
    log: list[tuple]
    counters: Counter
    statuses: dict[str, Status]
    wall_seconds: float
    unfinished_reason: str | None
    failures: dict[int, str] = field(default_factory=dict)
    outputs: dict[int, str] = field(default_factory=dict)


class LiveClient:
    """Submits work to a deployment and follows it through the events and status subjects."""

    def __init__(self, cfg: LiveConfig, transport: Transport, layout: MeghaLayout) -> None:
        self.cfg = cfg
        self.transport = transport
        self.layout = layout
        self.rt: Runtime | None = None
        self.address = "client"
        self.statuses: dict[str, Status] = {}
        self.gm_epoch: dict[int, int] = {}
        self.gm_seen: dict[int, float] = {}
        self.counters: Counter = Counter()
        self._seq: dict[str, int] = {}
        self.run_id = 0
        self.client_id = 0
        # fairness shares (``[megha] shares``): each job goes to the GM of its user queue (Algorithm 2), as the
        # simulator routes it, and never to another GM (the user's queue is there)
        self.fair = fair_share(cfg.megha, layout)
        self._reset_run()

    def _reset_run(self) -> None:
        self.run_t0: float | None = None
        self.log: list[tuple] = []
        self._order = 0
        self.n = 0
        self.started = np.zeros(0, dtype=np.int32)

    async def start(self, timeout: float | None = None) -> None:
        """Connect and start reading this client identity's events and the status reports; ``timeout`` bounds
        setting up the reading once connected (default: the transport's own give-up time)."""
        await self.transport.start()
        self.rt = Runtime(self.transport, self.cfg.name, "client", "client")
        self.epoch = self.rt.epoch
        self.rt.on_released = self._on_event_env
        # this client identity's own event stream: services publish each task's events to its client's stream
        self.client_id = int(getattr(self.transport, "client_id", 0) or 0)
        subject = self.rt.inbox_subject(events_address(self.client_id))
        await self.transport.consume(subject, self._on_events, None, timeout=timeout)
        await self.transport.subscribe(self.rt.subject(STATUS), self._on_status)

    async def close(self) -> None:
        """Close the client's runtime."""
        if self.rt is not None:
            await self.rt.close()

    def send(self, dst: str, msg: Any) -> None:
        """Send ``msg`` to ``dst`` with this client's next sequence number."""
        s = self._seq.get(dst, 0) + 1
        self._seq[dst] = s
        self.rt.send_raw(dst, wire.encode(msg, f"{self.address}/{self.epoch}", dst, self.epoch, s, 0))

    # --- status and readiness ------------------------------------------------------------------------------
    def _on_status(self, data: bytes) -> None:
        try:
            env = wire.decode(data)
        except wire.WireError as e:
            self.counters["rejected_messages"] += 1
            log.warning("client: rejected status: %s", e)
            return
        st = env.msg
        if not isinstance(st, Status):
            return
        key = st.src if st.kind != "lm" else f"{st.src}#{st.role}#{st.epoch}"
        self.statuses[key] = st
        if st.kind == "gm":
            g = int(st.src.rsplit("gm", 1)[1])
            self.gm_seen[g] = time.monotonic()
            prev = self.gm_epoch.get(g)
            if prev is not None and prev != st.epoch:
                self.counters["gm_restarts_seen"] += 1
                self._restarted.add(g)
            self.gm_epoch[g] = st.epoch

    def ready_problems(self, run: int | None = None) -> list[str]:
        """What is not ready yet (empty when the deployment can take work)."""
        probs = []
        L, G = self.layout.n_lms, self.layout.n_gms
        now = time.time()
        fresh = {k: s for k, s in self.statuses.items() if now - s.t < 3.0}
        for g in range(G):
            s = fresh.get(self.layout.gm_address(g))
            if s is None:
                probs.append(f"GM {g} not seen")
            elif s.info.get("synced", 0) < L:
                probs.append(f"GM {g} synced with {s.info.get('synced')}/{L} LMs")
        for lm in range(L):
            act = [s for s in fresh.values() if s.src == self.layout.lm_address(lm) and s.role == "active"]
            if not act:
                probs.append(f"LM {lm} has no active master")
            elif act[-1].info.get("hostless_workers", 1) > 0:
                probs.append(f"LM {lm}: {act[-1].info.get('hostless_workers')} workers without a host")
        hosts = [s for s in fresh.values() if s.kind == "worker"]
        if len(hosts) < self.cfg.workers.hosts:
            probs.append(f"{len(hosts)}/{self.cfg.workers.hosts} worker hosts seen")
        if run is not None:
            missing = [s.src for s in hosts if run not in s.info.get("runs", [])]
            if missing:
                probs.append(f"run spec not acknowledged by {missing[:3]}")
        return probs

    async def wait_ready(self, timeout: float = 30.0, run: int | None = None) -> None:
        """Wait until the deployment can take work (:meth:`ready_problems` is empty); a ``TimeoutError`` after
        ``timeout`` seconds names what is not ready."""
        end = time.monotonic() + timeout
        while True:
            probs = self.ready_problems(run)
            if not probs:
                return
            if time.monotonic() > end:
                raise TimeoutError("deployment not ready: " + "; ".join(probs[:6]))
            await asyncio.sleep(0.05)

    # --- events ------------------------------------------------------------------------------------------
    def _on_events(self, data: bytes, pos: int = 0) -> None:
        try:
            env = wire.decode(data)
        except wire.WireError as e:
            self.counters["rejected_messages"] += 1
            log.warning("client: rejected event batch: %s", e)
            return
        if not isinstance(env.msg, Events):
            return
        for e, _, _ in self.rt.admit(env, data, pos):
            self._on_event_env(e)

    def _on_event_env(self, env: wire.Envelope) -> None:
        if not self.run_id:
            return
        run = self.run_id
        for kind, t, ids, aux, note in env.msg.items:
            if not ids:
                continue
            arr = np.asarray(ids, dtype=np.int64)
            sel = (arr >> RUN_SHIFT) == run
            if not sel.any():
                continue
            local = arr[sel] & _MASK
            if local.max() >= self.n:
                self.counters["events_for_unknown_tasks"] += 1
                continue
            a = np.asarray(aux, dtype=np.int64)[sel] if len(aux) == len(ids) else None
            self._order += 1
            self.log.append((float(t), self._order, kind, local, a, note))
            self._apply(kind, local, a, note, float(t))

    def _apply(self, kind: str, local: np.ndarray, aux: np.ndarray | None, note: str, t: float) -> None:
        self.last_progress = time.monotonic()
        if kind == "started":
            np.add.at(self.started, local, 1)
            np.maximum.at(self.started_t, local, t)
            self.started_at[local] = time.monotonic()
        elif kind == "finished":
            np.add.at(self.finished, local, 1)
            self.finished_at[local] = time.monotonic()
        elif kind == "known":
            new = local[~self.known[local]]
            dup = local.size - new.size
            if dup:
                self.counters["duplicate_completions_reported"] += dup
            self.known[new] = True
            self.n_known += int(new.size)
        elif kind == "failed":
            for i, x in enumerate(local.tolist()):
                code = int(aux[i]) if aux is not None else -1
                self.failures[x] = note or f"exit code {code}"
        elif kind == "lost":
            self.counters["runs_lost"] += int(local.size)
            np.add.at(self.lost, local, 1)
            self.lost_at[local] = time.monotonic()
            np.maximum.at(self.lost_t, local, t)
        elif kind == "output":
            self.outputs[int(local[0])] = note

    # --- running a workload --------------------------------------------------------------------------------
    async def run(
        self,
        workload: Workload,
        dc: Datacenter,
        kind: str = "sleep",
        command: str = "",
        cwd: str = "",
        stall_timeout: float = 30.0,
        ready_timeout: float = 30.0,
        gm_dead_after: float = 3.0,
        orphan_grace: float = 3.0,
        progress: Callable[[int, int], object] | None = None,
    ) -> LiveRun:
        """Submit ``workload`` (arrival times relative to now) and wait for every feasible task.

        With fairness shares each job gets a user queue as the simulator gives it (``[megha] users``; ``random``
        draws from the datacenter seed) and goes to that queue's GM; the run's workload carries these users."""
        self._reset_run()
        w = self.with_users(workload)
        feasible = feasible_tasks(w, dc)
        self.n = w.n_tasks
        self.started = np.zeros(self.n, dtype=np.int32)
        self.finished = np.zeros(self.n, dtype=np.int32)
        self.known = np.zeros(self.n, dtype=bool)
        self.lost = np.zeros(self.n, dtype=np.int32)
        self.lost_at = np.zeros(self.n)
        # event times (the services' clocks) of each task's latest start and latest loss: a task is not running when
        # it was lost after its latest start. Counting events instead (started <= lost) took a loss reported for a
        # launch that never started (its host died first) followed by the relaunch's start for "not running", and
        # the task was submitted again after it had finished: it ran twice (chaos, seed 3, 300 s: 7 tasks)
        self.started_t = np.full(self.n, -np.inf)
        self.started_at = np.zeros(self.n)  # time.monotonic() the latest "started" event arrived
        self.lost_t = np.full(self.n, -np.inf)
        self.finished_at = np.zeros(self.n)
        self.n_known = 0
        self.failures: dict[int, str] = {}
        self.outputs: dict[int, str] = {}
        self._restarted: set[int] = set()
        nonce = int(np.random.default_rng().integers(1, 1 << NONCE_BITS))
        self.run_id = (self.client_id << NONCE_BITS) | nonce
        base = self.run_id << RUN_SHIFT
        spec = RunSpec(self.run_id, kind, command, cwd)
        self.send(HOSTS, spec)
        await self.wait_ready(ready_timeout, run=self.run_id)
        next_check = time.monotonic() + 1.0
        G = self.layout.n_gms
        fair = self.fair
        job_gm = np.arange(w.n_jobs) % G if fair is None else fair.user_gm[w.job_user].astype(np.int64)
        submitted = np.zeros(w.n_tasks, dtype=bool)
        submitted_at = np.full(w.n_jobs, np.nan)
        order = np.argsort(w.job_arrival, kind="stable")
        arrival = w.job_arrival[order]  # sorted
        n_feasible = int(feasible.sum())
        wall0 = time.perf_counter()
        t0 = time.time() + 0.02
        self.run_t0 = t0  # arrivals are relative to this wall time (fault replays schedule by it)
        self.last_progress = time.monotonic()
        reason = None
        pos = 0
        dead: set[int] = set()
        pending_resync: set[int] = set()
        synced_at: dict[int, float] = {}
        resync_grace = 1.5
        finish_grace = 10.0
        all_known_at: float | None = None
        while True:
            now = time.time()
            # submit every job that is due (those for one GM in one message)
            hi = int(np.searchsorted(arrival, now - t0, side="right")) if pos < order.size else pos
            if hi - pos > 1:
                self._submit_due(order[pos:hi], job_gm, dead, feasible, submitted, submitted_at, w, base, t0)
                pos = hi
            due: dict[int, list[tuple[int, np.ndarray]]] = {}
            while pos < order.size and t0 + w.job_arrival[order[pos]] <= now:
                j = int(order[pos])
                pos += 1
                g = int(job_gm[j])
                if g in dead and fair is None:
                    alive = [x for x in range(G) if x not in dead]
                    g = alive[j % len(alive)] if alive else g
                    job_gm[j] = g
                lo = int(w.job_first_task[j])
                hi = lo + int(w.job_num_tasks[j])
                ok = feasible[lo:hi]
                submitted_at[j] = time.time() - t0
                if not ok.any():
                    continue
                idx = np.arange(lo, hi, dtype=np.int64)[ok]
                submitted[idx] = True
                due.setdefault(g, []).append((j, idx))
                if len(due[g]) >= MAX_BATCH_JOBS:
                    self._submit_many(due.pop(g), g, w, base)
            for g, jobs in due.items():
                self._submit_many(jobs, g, w, base)
            if pos < order.size:
                nxt = t0 + w.job_arrival[order[pos]]
                wait = max(0.0, nxt - time.time())
                if wait < SUBMIT_WINDOW_MAX:
                    recent = pos - int(np.searchsorted(arrival, now - t0 - 0.1, side="right"))
                    wait = max(wait, submit_window(recent / 0.1))
                await asyncio.sleep(min(wait, 0.05))
            else:
                await asyncio.sleep(0.02)
            if progress is not None:
                progress(self.n_known, n_feasible)
            if self.n_known >= n_feasible and pos >= order.size:
                # the GM can report completions before the "finished" events of the same tasks arrive (other
                # services send those, in batches; under load they lag): wait a little for them so the run's
                # record is whole (a test saw all four tasks known, none finished)
                if not (feasible & self.known & (self.finished == 0)).any():
                    break
                if all_known_at is None:
                    all_known_at = time.monotonic()
                elif time.monotonic() - all_known_at > finish_grace:
                    break
            # GM faults
            pending_resync |= self._restarted
            self._restarted.clear()
            for g in list(pending_resync):
                st = self.statuses.get(self.layout.gm_address(g))
                if st is not None and st.info.get("synced", 0) >= self.layout.n_lms:
                    # launches the previous incarnation sent before it died reach the LMs before the new one's
                    # sync requests; give their "started" events a moment to arrive before resubmitting
                    first = synced_at.setdefault(g, time.monotonic())
                    if time.monotonic() - first < resync_grace:
                        continue
                    synced_at.pop(g, None)
                    pending_resync.discard(g)
                    dead.discard(g)
                    self._resubmit(g, job_gm, submitted, feasible, w, base, "gm_restart")
            mono = time.monotonic()
            if mono > next_check:
                next_check = mono + 1.0
                # a restarted host must learn how this run's tasks execute
                if any(
                    st.kind == "worker" and self.run_id not in st.info.get("runs", [self.run_id])
                    for st in self.statuses.values()
                    if time.time() - st.t < 2.0
                ):
                    self.send(HOSTS, spec)
                # tasks whose run was cut short and that did not start again: the LM handed them back to a GM
                # that may have died meanwhile; submit them again (a GM drops tasks it already holds)
                # A start after the loss that is followed by nothing for longer than the task takes plus
                # STALE_START_GRACE may be a late launch that started on a host after its LM had given the launch
                # up, on a host that then died before the LM saw the run: submit it again too (if its LM does hold
                # it, the GM drops the resubmission). Without this, 1-4 tasks per 300 s chaos run (seed 7) were lost.
                silent = (self.lost_t > -np.inf) & (mono - self.started_at > w.task_duration + STALE_START_GRACE)
                orphan = (
                    submitted
                    & feasible
                    & ~self.known
                    & (self.finished == 0)
                    & (self.lost > 0)
                    & ((self.lost_t > self.started_t) | silent)
                    & (mono - self.lost_at > orphan_grace)
                )
                if pending_resync:  # a GM rebuilding its view gets them with its resubmission
                    orphan &= ~np.isin(job_gm[w.task_job], list(pending_resync))
                if orphan.any():
                    self.lost_at[orphan] = mono
                    self.started_at[orphan] = mono
                    self._resubmit_tasks(orphan, job_gm, w, base, "lost")
                # completions a GM never reported (its TaskDone went to it while it was down)
                unheard = feasible & ~self.known & (self.finished > 0) & (mono - self.finished_at > orphan_grace)
                if unheard.any():
                    ids = np.flatnonzero(unheard)
                    self._order += 1
                    t = time.time()
                    self.log.append((t, self._order, "known", ids, None, "GM down: learned by the client"))
                    self._apply("known", ids, None, "", t)
                    self.counters["completions_learned_by_client"] += int(ids.size)
            self.rt.release_gaps()
            connected_for = mono - self.transport.connected_since if self.transport.connected else -1.0
            for g in range(G):
                seen = self.gm_seen.get(g)
                # a GM silent while this client hears the others: send it no new jobs (the tasks it holds stay
                # with it; its next incarnation gets them again)
                if (
                    g not in dead
                    and seen is not None
                    and mono - seen > gm_dead_after
                    and connected_for > gm_dead_after
                    and G > 1
                ):
                    dead.add(g)
                    self.counters["gms_presumed_dead"] += 1
                    log.warning("GM %d silent for %.1f s: new jobs go to the other GMs", g, mono - seen)
                elif g in dead and seen is not None and mono - seen < 1.0:
                    dead.discard(g)
            if mono - self.last_progress > stall_timeout:
                left = int(n_feasible - self.n_known)
                reason = (
                    f"{left} task(s) never completed: no event for {stall_timeout:.0f} s "
                    f"({int((self.started[feasible] == 0).sum())} never started)"
                )
                break
        return LiveRun(
            w,
            feasible,
            t0,
            submitted_at,
            self.log,
            Counter(self.counters),
            dict(self.statuses),
            time.perf_counter() - wall0,
            reason,
            dict(self.failures),
            dict(self.outputs),
        )

    def with_users(self, w: Workload) -> Workload:
        """``w`` with each job's user queue when the deployment has fairness shares (as the simulator's builder
        draws them: :func:`~megha.schedulers.megha.wiring.job_users`), else ``w`` itself."""
        if self.fair is None:
            return w
        rng = np.random.default_rng([self.cfg.datacenter.seed, USERS_STREAM])
        return replace(w, job_user=job_users(self.cfg.megha, self.fair.n_users, w.n_jobs, w.job_user, rng))

    def _submit_due(
        self,
        js: np.ndarray,
        job_gm: np.ndarray,
        dead: set[int],
        feasible: np.ndarray,
        submitted: np.ndarray,
        submitted_at: np.ndarray,
        w: Workload,
        base: int,
        t0: float,
    ) -> None:
        """Submit the jobs ``js`` (due now, in arrival order) at once: per GM one :class:`JobBatch` of at most
        ``MAX_BATCH_JOBS`` jobs (the tasks of each job that fit the datacenter; a job with none is not sent), as the
        per-job loop does, with array operations."""
        gs = job_gm[js]
        if dead and self.fair is None:  # with fairness shares a job's GM holds its user's queue: it waits for it
            alive = [x for x in range(self.layout.n_gms) if x not in dead]
            gone = np.isin(gs, list(dead))
            if gone.any() and alive:
                gs[gone] = np.asarray(alive, dtype=gs.dtype)[js[gone] % len(alive)]
                job_gm[js] = gs
        submitted_at[js] = time.time() - t0
        num = w.job_num_tasks[js]
        first = w.job_first_task[js]
        if (num == 1).all():
            idx = first.astype(np.int64)
            ok = feasible[idx]
            size = ok.astype(np.int64)
        else:
            ends = np.cumsum(num)
            idx = (np.repeat(first - (ends - num), num) + np.arange(int(ends[-1]) if ends.size else 0)).astype(np.int64)
            ok = feasible[idx]
            size = np.zeros(js.size, dtype=np.int64)
            np.add.at(size, np.repeat(np.arange(js.size), num), ok)
        idx = idx[ok]
        submitted[idx] = True
        task_gm = np.repeat(gs, size)
        keep = size > 0
        for g in np.unique(gs[keep]).tolist():
            jm = keep & (gs == g)
            jg, sg, ig = js[jm], size[jm], idx[task_gm == g]
            k = 0
            for lo in range(0, jg.size, MAX_BATCH_JOBS):
                n = int(sg[lo : lo + MAX_BATCH_JOBS].sum())
                self._submit_arrays(
                    jg[lo : lo + MAX_BATCH_JOBS], sg[lo : lo + MAX_BATCH_JOBS], ig[k : k + n], g, w, base
                )
                k += n

    def _submit_arrays(
        self, js: np.ndarray, sizes: np.ndarray, idx: np.ndarray, g: int, w: Workload, base: int
    ) -> None:
        """Jobs ``js`` with ``sizes[i]`` of their tasks ``idx`` (in job order) to GM ``g``: one :class:`JobArrival` for
        a single job, else one :class:`JobBatch`."""
        if js.size == 1:
            self._submit(int(js[0]), idx, g, w, base)
            return
        self._send_batch(js.astype(np.int64), sizes.astype(np.int64), idx, g, w, base)

    def _submit_many(self, jobs: list[tuple[int, np.ndarray]], g: int, w: Workload, base: int) -> None:
        """Submit jobs to GM ``g``: one :class:`JobArrival` for a single job, else one :class:`JobBatch`."""
        if len(jobs) == 1:
            self._submit(*jobs[0], g, w, base)
            return
        js = np.array([j for j, _ in jobs], dtype=np.int64)
        idx = np.concatenate([i for _, i in jobs])
        self._send_batch(js, np.array([i.size for _, i in jobs], dtype=np.int64), idx, g, w, base)

    def _send_batch(self, js: np.ndarray, sizes: np.ndarray, idx: np.ndarray, g: int, w: Workload, base: int) -> None:
        """Send jobs ``js`` (int64 job indices, ``sizes`` tasks each, task indices ``idx`` in job order) to GM ``g``
        as one :class:`JobBatch`."""
        msg = JobBatch(
            jobs=(self.run_id << 24) + js,
            sizes=sizes,
            tasks=idx + base,
            durations=w.task_duration[idx],
            masks=w.masks[idx],
            demands=None if w.task_demand is None else w.task_demand[idx],
            users=np.zeros(js.size, dtype=np.int64) if w.job_user is None else w.job_user[js].astype(np.int64),
            mean_durations=w.job_mean_duration[js].astype(np.float64),
            priorities=np.zeros(js.size, dtype=np.int64)
            if w.job_priority is None
            else w.job_priority[js].astype(np.int64),
        )
        self.counters["job_batches"] += 1
        self.send(self.layout.gm_address(g), msg)

    def _submit(self, j: int, idx: np.ndarray, g: int, w: Workload, base: int) -> None:
        msg = JobArrival(
            job=(self.run_id << 24) + j,
            tasks=idx + base,
            durations=w.task_duration[idx],
            masks=w.masks[idx],
            demands=None if w.task_demand is None else w.task_demand[idx],
            user=0 if w.job_user is None else int(w.job_user[j]),
            mean_duration=float(w.job_mean_duration[j]),
            priority=0 if w.job_priority is None else int(w.job_priority[j]),
        )
        self.send(self.layout.gm_address(g), msg)

    def _unstarted_of(
        self, g: int, job_gm: np.ndarray, submitted: np.ndarray, feasible: np.ndarray, w: Workload
    ) -> np.ndarray:
        """Tasks of GM ``g`` that are not running (never started, or their run was lost) nor done."""
        return (
            (job_gm[w.task_job] == g)
            & submitted
            & feasible
            & (self.lost_t >= self.started_t)
            & ~self.known
            & (self.finished == 0)
        )

    def _resubmit(
        self, g: int, job_gm: np.ndarray, submitted: np.ndarray, feasible: np.ndarray, w: Workload, base: int, why: str
    ) -> None:
        # completions the GM could not learn while it was down: it knows of them now (its view is rebuilt)
        lost_done = (job_gm[w.task_job] == g) & feasible & (self.finished > 0) & ~self.known
        if lost_done.any():
            ids = np.flatnonzero(lost_done)
            self._order += 1
            t = time.time()
            self.log.append((t, self._order, "known", ids, None, "learned at GM resync"))
            self._apply("known", ids, None, "", t)
            self.counters["completions_learned_at_resync"] += int(ids.size)
        self._resubmit_tasks(self._unstarted_of(g, job_gm, submitted, feasible, w), job_gm, w, base, why)

    def _resubmit_tasks(self, sel: np.ndarray, job_gm: np.ndarray, w: Workload, base: int, why: str) -> None:
        ids = np.flatnonzero(sel)
        if ids.size == 0:
            return
        self.counters[f"tasks_resubmitted_{why}"] += int(ids.size)
        jobs = w.task_job[ids]
        for j in np.unique(jobs).tolist():
            self._submit(j, ids[jobs == j], int(job_gm[j]), w, base)


def to_run_result(run: LiveRun, cfg: LiveConfig, dc: Datacenter, trace: str) -> RunResult:
    """Turn a live run into the simulator's :class:`RunResult` (same metrics, same reports)."""
    w = run.workload
    arrival = np.where(np.isfinite(run.submitted_at), run.submitted_at, w.job_arrival)
    wl = replace(w, job_arrival=arrival)
    rec = TaskRecorder(wl.task_arrival, wl.task_demand)
    n_feasible = int(run.feasible.sum())
    rec.expect(n_feasible)
    known_once = np.zeros(w.n_tasks, dtype=bool)
    t0 = run.t0
    end = 0.0
    for t, _, kind, ids, aux, _note in sorted(run.log, key=lambda x: (x[0], x[1])):
        tr = t - t0
        end = max(end, tr)
        if kind == "decided":
            rec.decided(ids, tr)
        elif kind == "started":
            rec.started(ids, tr, aux if aux is not None else np.full(ids.size, -1))
        elif kind == "finished":
            rec.finished(ids, tr)
        elif kind == "known":
            new = ids[~known_once[ids]]
            known_once[new] = True
            if new.size:
                rec.completion_known(new, tr)
        elif kind == "lost":
            running = ids[np.isfinite(rec.start[ids])]
            if running.size:
                rec.preempted(running, tr)
    counters: Counter = Counter(run.counters)
    for key, st in run.statuses.items():
        for k, v in st.info.get("counters", {}).items():
            if st.role == "standby":
                continue
            counters[k] += int(v)
        for k, v in st.info.get("service_counters", {}).items():
            counters[f"service_{k}"] += int(v)
        del key
    fin = rec.finishes[run.feasible]
    counters["tasks_finished_twice"] = int((fin > 1).sum())
    counters["tasks_never_finished"] = int((fin == 0).sum())
    counters["tasks_failed"] = len(run.failures)
    counters["tasks_infeasible"] = int((~run.feasible).sum())
    reason = run.unfinished_reason
    if reason is None and counters["tasks_finished_twice"]:
        reason = f"{counters['tasks_finished_twice']} task(s) finished more than once"
    d = cfg.datacenter
    m = cfg.megha
    rc = RunConfig(
        scheduler="megha-live",
        trace=trace,
        cluster=d.cluster,
        workers=None if d.cluster else d.workers,
        gms=m.gms,
        lms=m.lms,
        seed=d.seed,
        constraints=d.constraints,
        resources=d.resources,
        capacity=d.capacity,
        demand=d.demand,
        dephase=False,
        options={
            "policy": m.policy,
            "heartbeat": m.heartbeat,
            "batch_size": m.batch_size,
            "repartition": m.repartition,
            "reply_always": m.reply_always,
        },
    )
    describe = {
        "gms": m.gms,
        "lms": m.lms,
        "hosts": cfg.workers.hosts,
        "broker": cfg.broker.kind,
        "lm_standby": cfg.ha.lm_standby,
        "mode": "resource" if d.resources else "slot",
        "failures": {str(k): v for k, v in list(run.failures.items())[:100]},
    }
    return RunResult(
        config=rc,
        workload=wl,
        datacenter=dc,
        recorder=rec,
        feasible=run.feasible,
        counters=dict(counters),
        message_counts={},
        end_time=end,
        events=len(run.log),
        wall_seconds=run.wall_seconds,
        options=dict(rc.options),
        counter_sets=live_counter_sets(),
        describe=describe,
        unfinished_reason=reason,
        extras={"outputs": run.outputs},
    )


def submit_window(rate: float) -> float:
    """Seconds the client waits at least between two submissions when jobs arrive at ``rate`` per second (see
    ``SUBMIT_WINDOW_RATE``)."""
    if rate <= SUBMIT_WINDOW_RATE:
        return 0.0
    return SUBMIT_WINDOW_MAX * min(1.0, (rate - SUBMIT_WINDOW_RATE) / (1.5 * SUBMIT_WINDOW_RATE))
