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

import numpy as np

from megha.errors import SimulationError
from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.messages import Finished, JobArrival
from megha.schedulers.common.sampling import ProbeSampler
from megha.schedulers.sparrow.messages import Done, GetTask, Grant, Probes, Request, TaskReply
from megha.sim.component import Component


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
        "probes_out",
        "remaining",
        "stacks",
        "task_list",
        "tasks",
    )

    def __init__(self, tasks, durations, demands, gmasks, stacks, gdem, probes_out) -> None:
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
        self.remaining = int(tasks.size)
        self.probes_out = probes_out


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
    ) -> None:
        super().__init__(address)
        if probe_ratio < 1:
            raise ValueError(f"{address}: probe ratio must be >= 1, got {probe_ratio}")
        self.number = number
        self.monitors = monitors
        self.worker_masks = worker_masks
        self._wm: list[int] = worker_masks.tolist()
        self.rec = recorder
        self.d = float(probe_ratio)
        self.sampler = sampler if sampler is not None else ProbeSampler(worker_masks)
        self.jobs: dict[int, _Job] = {}
        self.probes = 0
        self.noops = 0
        self.requests = 0

    def on_message(self, msg, now: float) -> None:
        tp = type(msg)
        if tp is Request:
            self._request(msg, now)
        elif tp is Done:
            self.rec.completion_known([msg.task], now)
        elif isinstance(msg, GetTask):
            self._get_task(msg, now)
        elif isinstance(msg, Finished):
            self.rec.completion_known(msg.tasks, now)
        elif isinstance(msg, JobArrival):
            self._submit(msg)
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
            order = np.argsort(inv, kind="stable")
            cuts = np.searchsorted(inv[order], np.arange(gmasks.size + 1))
            stacks = [order[cuts[g] : cuts[g + 1]][::-1].tolist() for g in range(gmasks.size)]
            counts = [len(s) for s in stacks]
        elif n == 1 or not masks.any():
            gmasks = np.array([int(masks[0]) if n == 1 else 0], dtype=masks.dtype)
            stacks = [list(range(n - 1, -1, -1))]
            counts = [n]
        else:
            gmasks, inv = np.unique(masks, return_inverse=True)
            inv = inv.ravel()
            order = np.argsort(inv, kind="stable")
            cuts = np.searchsorted(inv[order], np.arange(gmasks.size + 1))
            stacks = [order[cuts[g] : cuts[g + 1]][::-1].tolist() for g in range(gmasks.size)]
            counts = [len(s) for s in stacks]
        gdem = None
        if demands is not None:
            gdem = np.stack([demands[s].max(axis=0) for s in stacks])
        want = [math.ceil(self.d * k) for k in counts]
        workers, groups = self.sampler.sample(self.port.rng, gmasks.tolist(), want, counts, gdem)
        self.jobs[msg.job] = _Job(msg.tasks, msg.durations, demands, gmasks, stacks, gdem, int(workers.size))
        self.probes += int(workers.size)
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

    def _request(self, msg: Request, now: float) -> None:
        """One request (the common case under load)."""
        self.requests += 1
        job_id = msg.job
        job = self.jobs[job_id]
        if job.remaining:
            st = job.stacks[msg.group]
            if st:  # the probe's own group still has a task (inlined _next_index)
                i = st.pop()
                job.remaining -= 1
                if not st and job.nonempty is not None:
                    job.nonempty[msg.group] = False
            else:
                i = self._other_group(job, msg.worker, msg.group)
                if i >= 0:
                    job.remaining -= 1
        else:
            i = -1
        job.probes_out -= 1
        if job.probes_out <= 0:
            self._done_probes(job_id, job, 0)
        if i < 0:
            self.noops += 1
            reply = Grant(msg.job, self.number, msg.worker, -1, 0.0, msg.waited, None, None, msg.reserved)
        else:
            t = job.task_list[i]
            self.rec.decided(t, now)
            reply = Grant(
                msg.job,
                self.number,
                msg.worker,
                t,
                job.dur_list[i],
                msg.waited,
                t,
                None if job.demands is None else job.demands[i],
                msg.reserved,
            )
        self.port.send(self.monitors, reply)

    def _next_index(self, job: _Job, w: int, g: int) -> int:
        """Local index of the task a probe of group ``g`` on worker ``w`` gets, or -1 (job has remaining tasks)."""
        st = job.stacks[g]
        if st:
            i = st.pop()
            if not st and job.nonempty is not None:
                job.nonempty[g] = False
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
        if job.gdem is None and len(job.stacks) <= 16:
            wm = self._wm[worker]
            gml = job.gmask_list
            for j, st in enumerate(job.stacks):
                if st and not (gml[j] & ~wm):
                    i = st.pop()
                    if not st:
                        job.nonempty[j] = False
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
            job.nonempty[j] = False
        return i

    def waiting_jobs(self) -> int:
        """Jobs with probes still outstanding."""
        return len(self.jobs)
