"""A Sparrow scheduler (Ousterhout et al., SOSP 2013) as a sans-I/O component.

For a job of ``m`` tasks the scheduler places ``d·m`` probes (``d`` = probe ratio, 2) on distinct workers chosen
at random — batch sampling — and keeps the tasks itself. Probes queue FIFO at the workers' node monitors; when a
worker reaches a probe it asks the scheduler for a task (late binding, one round trip) and gets the job's next
unlaunched task, or a no-op when none is left. With placement constraints the tasks are grouped by constraint
mask and each group probes only workers that satisfy it; a probe prefers a task of its own group and otherwise
takes any remaining task of the job that fits the worker.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from megha.errors import SimulationError
from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.messages import Finished, JobArrival
from megha.schedulers.common.sampling import ProbeSampler
from megha.schedulers.sparrow.messages import Done, GetTask, Grant, Lost, Probes, Request, TaskReply, WorkersBack
from megha.sim.component import Component, Port

_first_open_fit = None  # the compiled kernel, imported on first use so the CLI starts fast
_CLOSED = 1 << 32  # megha.schedulers.sparrow._kernels.CLOSED (not imported: it would load numba)
_MANY_GROUPS = 16  # a job with more task groups looks for another group in compiled code


def _load_kernel() -> Callable[[np.ndarray, int], int]:
    global _first_open_fit
    from megha.schedulers.sparrow._kernels import first_open_fit

    _first_open_fit = first_open_fit
    return first_open_fit


def _group_stacks(inv: np.ndarray, n_groups: int) -> list[list[int]]:
    """Per group (``inv``: each task's group), its tasks' local indices in decreasing order (popped from the end:
    increasing order). Sliced from one list: a job of many groups made two NumPy calls per group."""
    order = np.argsort(inv, kind="stable")
    cuts = np.searchsorted(inv[order], np.arange(n_groups + 1)).tolist()
    rev = order[::-1].tolist()  # group g's indices, reversed: rev[n - cuts[g + 1] : n - cuts[g]]
    n = len(rev)
    return [rev[n - cuts[g + 1] : n - cuts[g]] for g in range(n_groups)]


class _Job:
    """Unlaunched tasks of one job, by task group (constraint mask)."""

    __slots__ = (
        "demands",
        "dur_list",
        "durations",
        "gdem",
        "gmask_list",
        "gmasks",
        "nonempty",
        "open_masks",
        "probes_out",
        "remaining",
        "stacks",
        "task_list",
        "tasks",
    )

    def __init__(
        self,
        tasks: np.ndarray,
        durations: np.ndarray,
        demands: np.ndarray | None,
        gmasks: np.ndarray,
        stacks: list[list[int]],
        gdem: np.ndarray | None,
        probes_out: int,
    ) -> None:
        self.tasks = tasks
        self.durations = durations
        self.task_list: list[int] = tasks.tolist()
        self.dur_list: list[float] = durations.tolist()
        self.demands = demands
        self.gmasks = gmasks  # uint32 array per group
        self.gmask_list = gmasks.tolist()
        self.stacks = stacks  # per group: list of local task indices (pop from the end)
        self.nonempty = np.array([bool(s) for s in stacks]) if len(stacks) > 1 else None
        self.gdem = gdem  # [G, R] max demand per group (resource mode) or None
        # many groups, slot mode: each group's mask with _CLOSED set once it is empty (the compiled search's input)
        self.open_masks = None
        if gdem is None and len(stacks) > _MANY_GROUPS:
            self.open_masks = gmasks.astype(np.uint64) | np.where(self.nonempty, 0, _CLOSED).astype(np.uint64)
        self.remaining = int(tasks.size)
        self.probes_out = probes_out

    def close(self, g: int) -> None:
        """Group ``g`` has no task left."""
        self.nonempty[g] = False
        if self.open_masks is not None:
            self.open_masks[g] |= _CLOSED


class SparrowScheduler(Component):
    """One of Sparrow's distributed schedulers."""

    kind = "scheduler"

    def __init__(
        self,
        address: str,
        number: int,
        monitors: str,
        worker_masks: np.ndarray,
        recorder: TaskRecorder,
        probe_ratio: float = 2.0,
        sampler: ProbeSampler | None = None,
        direct: bool = False,
    ) -> None:
        """``direct``: in the simulator's engine, slot mode, answer a single request straight to the node monitors'
        :meth:`~megha.schedulers.sparrow.monitors.SparrowMonitors.on_message_grant` (the builder sets it with the
        monitors' modelled ``Done``: no processing costs, no fault schedule)."""
        super().__init__(address)
        self.direct = bool(direct)
        if probe_ratio < 1:
            raise ValueError(f"{address}: probe ratio must be >= 1, got {probe_ratio}")
        self.number = number
        self.monitors = monitors
        self.worker_masks = worker_masks
        self._wm: list[int] = worker_masks.tolist()
        self._nwm: list[int] = [~m & 0xFFFFFFFF | _CLOSED for m in self._wm]  # first_open_fit's worker argument
        self.rec = recorder
        # the recorder's one-task logs (TaskRecorder.inline_logs), appended to directly on the hot path
        inline = getattr(recorder, "inline_logs", None)
        logs = inline() if inline is not None else None
        self._inl = (
            None
            if logs is None
            else (logs.decided_ids.append, logs.decided_times.append, logs.comm_ids.append, logs.comm_delays.append)
        )
        self.d = float(probe_ratio)
        self.sampler = sampler if sampler is not None else ProbeSampler(worker_masks)
        self.jobs: dict[int, _Job] = {}
        self.probes = 0
        self.noops = 0
        self.requests = 0
        # --- worker failures (fault schedules); see megha.schedulers.sparrow.faults ---------------------------
        # task ids -> (durations, masks, demands or None): the descriptions the framework keeps of its tasks
        self.describe_tasks = None
        self.down: set[int] = set()  # workers this scheduler knows are dead (it does not probe them)
        self.parked: list[tuple[int, int]] = []  # (job, group) probes that no live worker can take now
        self._relaunches = 0  # relaunched tasks go out as jobs -1, -2, ...
        self.tasks_relaunched = 0
        self.probes_reissued = 0
        # the simulator's route cache (SimPort.route: look a route up there on every use), for the direct grants
        self._routes = None
        # set by the node monitors on the simulator's common path (SparrowMonitors.start_answered): a direct answer
        # with a task starts it at once, at the instant the answer would arrive, instead of being an event
        self.start_answered: Callable[[int, int, int, float, float, float], None] | None = None
        self._grant_key = (monitors, "on_message_grant")

    def attach(self, port: Port) -> None:
        super().attach(port)
        self._routes = getattr(port, "_routes", None)

    def on_message(self, msg: Any, now: float) -> None:
        tp = type(msg)
        if tp is Request:
            self.on_message_request((msg.job, msg.worker, msg.group, msg.waited, msg.reserved), now)
        elif tp is Done:
            self.rec.completion_known_one(msg.task, now)
        elif isinstance(msg, GetTask):
            self._get_task(msg, now)
        elif isinstance(msg, Finished):
            self.rec.completion_known(msg.tasks, now)
        elif isinstance(msg, JobArrival):
            self._submit(msg)
        elif isinstance(msg, Lost):
            self._lost(msg)
        elif isinstance(msg, WorkersBack):
            self.down.difference_update(msg.workers)
            self._retry_parked()
        else:
            super().on_message(msg, now)

    # --- job submission: batch sampling ------------------------------------------------------------
    def _submit(self, msg: JobArrival) -> None:
        n = int(msg.tasks.size)
        if n == 0:
            return
        masks = msg.masks
        demands = msg.demands
        if demands is not None and n > 1 and self.sampler.capacity is not None:
            # machines differ in size: group by (mask, demand) so each group's probes go to workers that fit it
            key = np.column_stack([masks.astype(np.float64), demands])
            ukey, inv = np.unique(key, axis=0, return_inverse=True)
            gmasks = ukey[:, 0].astype(masks.dtype)
            inv = inv.ravel()
            stacks = _group_stacks(inv, gmasks.size)
            counts = [len(s) for s in stacks]
        elif n == 1 or not masks.any():
            gmasks = np.array([int(masks[0]) if n == 1 else 0], dtype=masks.dtype)
            stacks = [list(range(n - 1, -1, -1))]
            counts = [n]
        else:
            gmasks, inv = np.unique(masks, return_inverse=True)
            inv = inv.ravel()
            stacks = _group_stacks(inv, gmasks.size)
            counts = [len(s) for s in stacks]
        gdem = None
        if demands is not None:
            gdem = np.stack([demands[s].max(axis=0) for s in stacks])
        want = [math.ceil(self.d * k) for k in counts]
        workers, groups = self.sampler.sample(self.port.rng, gmasks.tolist(), want, counts, gdem)
        parked = 0
        if self.down:
            workers, groups, parked = self._avoid_down(msg.job, workers, groups, gmasks.tolist(), gdem)
        self.jobs[msg.job] = _Job(msg.tasks, msg.durations, demands, gmasks, stacks, gdem, int(workers.size) + parked)
        self.probes += int(workers.size)
        if workers.size:
            self.port.send(self.monitors, Probes(msg.job, self.number, workers, groups, gdem))

    # --- late binding ------------------------------------------------------------------------------
    def _get_task(self, msg: GetTask, now: float) -> None:
        job = self.jobs[msg.job]
        k = int(msg.workers.size)
        self.requests += k
        chosen: list[int] = []
        if job.remaining == 0:
            chosen = [-1] * k
        else:
            for w, g in zip(msg.workers.tolist(), msg.groups.tolist(), strict=True):
                chosen.append(self._next_index(job, w, g) if job.remaining else -1)
        self._done_probes(msg.job, job, k)
        ch = np.array(chosen, dtype=np.int64)
        sent = ch >= 0
        n_noop = int(k - sent.sum())
        self.noops += n_noop
        if n_noop == 0:
            tasks = job.tasks[ch]
            durs = job.durations[ch]
            alloc = tasks
            dem = None if job.demands is None else job.demands[ch]
        else:
            safe = np.where(sent, ch, 0)
            tasks = np.where(sent, job.tasks[safe], -1)
            durs = np.where(sent, job.durations[safe], 0.0)
            alloc = tasks[sent]
            dem = None if job.demands is None else np.where(sent[:, None], job.demands[safe], 0.0)
        if alloc.size:
            self.rec.decided(alloc, now)
        self.port.send(
            self.monitors,
            TaskReply(msg.job, self.number, msg.workers, tasks, durs, msg.waited, alloc, dem, msg.reserved),
        )

    def on_message_request(self, req: tuple[int, int, int, float, np.ndarray | None], now: float) -> None:
        """One request (the common case under load): ``(job, worker, group, waited, reserved)`` — a
        :class:`Request`'s fields, or the payload the node monitors route here directly (``reserved`` None)."""
        self.requests += 1
        job_id, worker, group, waited, reserved = req
        job = self.jobs[job_id]
        if job.remaining:
            st = job.stacks[group]
            if st:  # the probe's own group still has a task (inlined _next_index)
                i = st.pop()
                job.remaining -= 1
                if not st and job.nonempty is not None:
                    job.close(group)
            elif (om := job.open_masks) is not None:  # many groups (inlined _other_group): compiled search
                j = (_first_open_fit or _load_kernel())(om, self._nwm[worker])
                if j >= 0:
                    st = job.stacks[j]
                    i = st.pop()
                    if not st:
                        job.close(j)
                    job.remaining -= 1
                else:
                    i = -1
            else:
                i = self._other_group(job, worker, group)
                if i >= 0:
                    job.remaining -= 1
        else:
            i = -1
        job.probes_out -= 1
        if job.probes_out <= 0:
            self._done_probes(job_id, job, 0)
        if i < 0:
            self.noops += 1
            t = -1
            dur = 0.0
        else:
            t = job.task_list[i]
            dur = job.dur_list[i]
            if (inl := self._inl) is not None:  # rec.decided_one(t, now)
                inl[0](t)
                inl[1](now)
            else:
                self.rec.decided_one(t, now)
        if self.direct and reserved is None:
            routes = self._routes
            r = None if routes is None else routes.get(self._grant_key)
            if r is None:
                r = self.port.route(self.monitors, "on_message_grant", Grant)
            if r:  # the Grant's event, without the message (SimPort.route)
                append, handler, d, nxt, cell, comm = r
                cell[0] += 1
                if t >= 0:
                    if comm is not None:
                        if inl is not None:  # comm(t, d): the recorder's add_comm_one
                            inl[2](t)
                            inl[3](d)
                        else:
                            comm(t, d)
                    if (start := self.start_answered) is not None:  # no event: the task starts on arrival
                        start(self.number, worker, t, dur, waited, now + d)
                        return
                append((now + d, nxt(), handler, (self.number, worker, t, dur, waited)))
                return
        reply = Grant(
            job_id,
            self.number,
            worker,
            t,
            dur,
            waited,
            t if t >= 0 else None,
            None if t < 0 or job.demands is None else job.demands[i],
            reserved,
        )
        self.port.send(self.monitors, reply)

    def grant_delay(self) -> float | None:
        """Simulator-only: the delay of this scheduler's direct answers to the node monitors (:attr:`direct`, routed
        by SimPort.route), or None when its answers are sent as messages."""
        if not self.direct:
            return None
        r = self.port.route(self.monitors, "on_message_grant", Grant)
        return r[2] if r else None

    def skip_noop(self, job_id: int, worker: int, group: int) -> bool:
        """Simulator-only (the node monitors' common path): whether a request for a probe of ``group`` on ``worker``
        can only be answered with a no-op — the job has no task left that fits the worker. A job's tasks are only
        ever taken, so the answer is the same whenever the request arrives. If so, the request is accounted here as
        answered (one request, one no-op, one probe fewer out), as :meth:`on_message_request` would, and True is
        returned; otherwise nothing changes."""
        job = self.jobs[job_id]
        if job.remaining:
            if job.stacks[group]:
                return False
            om = job.open_masks
            if om is not None:
                if (_first_open_fit or _load_kernel())(om, self._nwm[worker]) >= 0:
                    return False
            elif job.nonempty is not None:
                if job.gdem is not None:
                    return False  # resource mode: never asked (the common path is slot mode)
                wm = self._wm[worker]
                gml = job.gmask_list
                for j, st in enumerate(job.stacks):
                    if st and not (gml[j] & ~wm):
                        return False
        self.requests += 1
        self.noops += 1
        job.probes_out -= 1
        if job.probes_out <= 0:
            self._done_probes(job_id, job, 0)
        return True

    def _next_index(self, job: _Job, w: int, g: int) -> int:
        """Local index of the task a probe of group ``g`` on worker ``w`` gets, or -1 (job has remaining tasks)."""
        st = job.stacks[g]
        if st:
            i = st.pop()
            if not st and job.nonempty is not None:
                job.close(g)
        else:
            i = self._other_group(job, w, g)
        if i >= 0:
            job.remaining -= 1
        return i

    def _done_probes(self, job_id: int, job: _Job, k: int) -> None:
        job.probes_out -= k
        if job.probes_out <= 0:
            if job.remaining:
                raise SimulationError(
                    f"{self.address}: job {job_id} ran out of probes with {job.remaining} task(s) unlaunched"
                )
            del self.jobs[job_id]

    def _other_group(self, job: _Job, worker: int, g: int) -> int:
        """A remaining task of another group that fits ``worker`` (and the probe's reservation), or -1."""
        if job.nonempty is None:
            return -1
        om = job.open_masks
        if om is not None:  # many groups: the first that fits, compiled
            j = (_first_open_fit or _load_kernel())(om, self._nwm[worker])
            if j < 0:
                return -1
            st = job.stacks[j]
            i = st.pop()
            if not st:
                job.close(j)
            return i
        if job.gdem is None:
            wm = self._wm[worker]
            gml = job.gmask_list
            for j, st in enumerate(job.stacks):
                if st and not (gml[j] & ~wm):
                    i = st.pop()
                    if not st:
                        job.close(j)
                    return i
            return -1
        fit = job.nonempty & ((job.gmasks & ~self.worker_masks[worker]) == 0)
        if job.gdem is not None:
            fit &= (job.gdem <= job.gdem[g] + 1e-12).all(axis=1)
        j = int(fit.argmax())
        if not fit[j]:
            return -1
        st = job.stacks[j]
        i = st.pop()
        if not st:
            job.close(j)
        return i

    # --- worker failures (fault schedules) --------------------------------------------------------------------
    def _live_eligible(self, mask: int, demand: np.ndarray | None) -> np.ndarray:
        """Workers not known dead that satisfy ``mask`` (and are big enough for ``demand`` on machines of
        different sizes)."""
        sp = self.sampler
        sel = sp.eligible(mask)
        if sp.capacity is not None and demand is not None:
            sel = sel[(sp.capacity[sel] >= np.asarray(demand) - 1e-9).all(axis=1)]
        if self.down and sel.size:
            sel = sel[~np.isin(sel, np.fromiter(self.down, dtype=np.int64, count=len(self.down)))]
        return sel

    def _avoid_down(
        self, job: int, workers: np.ndarray, groups: np.ndarray, gmasks: list[int], gdem: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """Replace the probes drawn on workers known dead by probes on live eligible workers (distinct from the
        group's others when there are enough); a probe with no live eligible worker waits here (:attr:`parked`)
        until workers come back. Returns the probes to send and how many were parked."""
        bad = np.fromiter((w in self.down for w in workers.tolist()), dtype=bool, count=workers.size)
        if not bad.any():
            return workers, groups, 0
        workers = workers.copy()
        keep = np.ones(workers.size, dtype=bool)
        rng = self.port.rng
        parked = 0
        for g in np.unique(groups[bad]).tolist():
            mine = groups == g
            redo = np.flatnonzero(mine & bad)
            sel = self._live_eligible(gmasks[g], None if gdem is None else gdem[g])
            if sel.size == 0:
                keep[redo] = False
                self.parked.extend([(job, g)] * redo.size)
                parked += redo.size
                continue
            fresh = np.setdiff1d(sel, workers[mine & ~bad])
            if fresh.size >= redo.size:
                workers[redo] = rng.choice(fresh, redo.size, replace=False)
            else:
                workers[redo] = sel[rng.integers(0, sel.size, redo.size)]
        return workers[keep], groups[keep], parked

    def _lost(self, msg: Lost) -> None:
        """Workers died: stop probing them, re-issue the reservations lost there and launch the lost tasks again
        (a new batch-sampled set of probes for them, as for a job)."""
        self.down.update(msg.dead)
        by_job: dict[int, list[int]] = {}
        for job, g in msg.probes:
            by_job.setdefault(job, []).append(g)
        for job_id, gs in by_job.items():
            self._reprobe(job_id, gs)
        if msg.tasks:
            tasks = np.array(msg.tasks, dtype=np.int64)
            durs, masks, dem = self.describe_tasks(tasks)
            self._relaunches += 1
            self.tasks_relaunched += tasks.size
            self._submit(JobArrival(-self._relaunches, tasks, durs, masks, dem))

    def _reprobe(self, job_id: int, gs: list[int]) -> None:
        """Replace lost probes of a job (one each, same group) on live workers; none when the job has no task
        left to launch."""
        job = self.jobs.get(job_id)
        if job is None:
            return
        if not job.remaining:
            self._done_probes(job_id, job, len(gs))
            return
        rng = self.port.rng
        ws: list[int] = []
        kept: list[int] = []
        for g in gs:
            sel = self._live_eligible(job.gmask_list[g], None if job.gdem is None else job.gdem[g])
            if sel.size == 0:
                self.parked.append((job_id, g))
                continue
            ws.append(int(sel[rng.integers(sel.size)]))
            kept.append(g)
        if ws:
            self.probes += len(ws)
            self.probes_reissued += len(ws)
            self.port.send(
                self.monitors,
                Probes(job_id, self.number, np.array(ws, dtype=np.int64), np.array(kept, dtype=np.int32), job.gdem),
            )

    def _retry_parked(self) -> None:
        """Workers came back: send the probes that had no live worker to go to."""
        if not self.parked:
            return
        parked, self.parked = self.parked, []
        by_job: dict[int, list[int]] = {}
        for job, g in parked:
            by_job.setdefault(job, []).append(g)
        for job_id, gs in by_job.items():
            self._reprobe(job_id, gs)

    def waiting_jobs(self) -> int:
        """Jobs with probes still outstanding."""
        return len(self.jobs)
