"""The arbitrator's user-interface actor (thesis §3.2.2, Fig. 3.9): admission, job managers, failures, recovery.

* **Admission**: a submitted job is recorded in the replicated store (ZooKeeper) and queued for a container for its
  job manager; at most ``jm_limit`` of the cluster may hold job managers (YARN's maximum AM share).
* **Failures**: node and job-manager losses reported by trackers; a lost job manager gets a new container (next
  attempt).
* **Recovery**: the arbitrator's hard state (jobs, their job-manager attempts and containers) is persisted; a
  restarted arbitrator recovers it from the store, rebuilds its soft state from heartbeats and statistics, and
  announces itself so job managers resubmit their queued requests.

:class:`AdmissionActor` is a part of :class:`~megha.schedulers.macrm.arbitrator.ResourceArbitrator`: it owns the
job records ``jobs`` (:class:`JobRec`), ``jm_used`` and the store epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from megha.schedulers.common.messages import JobArrival
from megha.schedulers.macrm.messages import (
    Accepted,
    ArbitratorUp,
    ExpectJM,
    JobDone,
    JobDoneAck,
    NodesLost,
    Persist,
    Report,
    ReportAck,
)
from megha.schedulers.macrm.queue import Item

_EPS = 1e-9


@dataclass
class JobRec:
    spec: JobArrival
    attempt: int = 0
    status: str = "queued"  # queued | running | done
    jm: str = ""
    node: int = -1
    tracker: int = -1
    runs: dict = field(default_factory=dict)  # task -> latest run requested by the current attempt (soft state)


class AdmissionActor:
    """Jobs in, job managers started and restarted, the store kept, failures handled."""

    def _persist(self, op: str, *args) -> None:
        self.port.send(self.supervisor, Persist(op, args))

    def _submit(self, spec: JobArrival, now: float) -> None:
        if spec.job not in self.jobs:
            rec = JobRec(spec)
            self.jobs[spec.job] = rec
            self._persist("submit", spec.job, spec)
            self.stats["jobs_admitted"] += 1
            self._queue_jm(spec.job, rec)
            if self.central:
                self._dispatch(now)
        self.port.send(self.client, Accepted(spec.job))

    def _jm_address(self, job: int, attempt: int) -> str:
        return f"{self.jm_prefix}{job}"  # one address per job: attempts are told apart by number

    def _queue_jm(self, job: int, rec: JobRec, front: bool = False) -> None:
        spec = rec.spec
        it = Item(
            self._next_seq(front),
            job,
            rec.attempt,
            spec.user,
            self._jm_address(job, rec.attempt),
            [-1],
            [0.0],
            self.jm_demand[None, :].copy(),
            np.zeros(1, dtype=np.uint32),
            spec=spec,
        )
        self._enqueue(it)

    def _jm_room(self) -> bool:
        """Job-manager containers may hold at most ``jm_limit`` (YARN's maximum AM share): a cluster full of job
        managers waiting for their tasks would deadlock. One job manager may always run."""
        if self.jm_limit is None or not (self.jm_used > _EPS).any():
            return True
        return bool((self.jm_used + self.jm_demand <= self.jm_limit + _EPS).all())

    def _jm_released(self) -> None:
        self.jm_used = np.maximum(self.jm_used - self.jm_demand, 0.0)
        self._dirty = True
        self._jm_scan = True

    def _job_done(self, msg: JobDone, now: float) -> None:
        rec = self.jobs.get(msg.job)
        if rec is not None and rec.attempt == msg.attempt and rec.status != "done":
            rec.status = "done"
            self._jm_released()
            self._persist("done", msg.job)
            self._purge_job(msg.job)
            del self.jobs[msg.job]
            if self.n_queued and self.idle:
                self._dispatch(now)
        self.port.send(self._jm_address(msg.job, msg.attempt), JobDoneAck(msg.job, msg.attempt))

    def _report(self, msg: Report, now: float) -> None:
        self.port.send(self.trackers[msg.tracker], ReportAck(msg.rid))
        if msg.kind == "nodes":
            lost = [n for n in msg.nodes if not self.view.dead[n]]
            if not lost:
                return
            self.stats["nodes_lost"] += len(lost)
            for n in lost:
                self.view.kill(n)
            self._strand([it for q in self.queues.values() for it in q.values()])
            nl = NodesLost(lost)
            lost_set = set(lost)
            for job, rec in list(self.jobs.items()):
                if rec.status != "running":
                    continue
                if rec.node in lost_set:  # its job manager died with the node
                    self._jm_lost(job, rec.attempt)
                else:
                    self.port.send(rec.jm, nl)
        elif msg.kind == "jm":
            self._jm_lost(msg.job, msg.attempt)

    def _jm_lost(self, job: int, attempt: int) -> None:
        rec = self.jobs.get(job)
        if rec is None or rec.status != "running" or rec.attempt != attempt:
            return
        self.stats["jm_restarts"] += 1
        self._jm_released()
        self._purge_job(job)
        rec.attempt += 1
        rec.status = "queued"
        rec.runs = {}
        self._persist("requeue", job, rec.attempt)
        self._queue_jm(job, rec, front=True)

    def _recover(self, state: dict, now: float) -> None:
        self.recovering = False
        self.stats["recoveries"] += 1
        self._forwarding = None  # tell every tracker what this incarnation wants
        self.epoch = int(state.get("epoch", 0)) + 1
        self._persist("epoch", self.epoch)
        self.view.next_seq = [self.epoch << 32] * self.n  # above anything the previous incarnation allocated
        for job in sorted(state.get("jobs", {})):
            spec, attempt, status, jm, node, tracker = state["jobs"][job]
            if status == "done":
                continue
            rec = JobRec(spec, attempt, status, jm, node, tracker)
            self.jobs[job] = rec
            if status == "queued":
                self._queue_jm(job, rec)
            else:
                self.jm_used += self.jm_demand
        if self.central:
            self._dispatch(now)
        up = ArbitratorUp(self.epoch)
        watch: dict[int, list] = {}
        for job, rec in self.jobs.items():
            if rec.status == "running" and rec.tracker >= 0:
                watch.setdefault(rec.tracker, []).append((rec.jm, job, rec.attempt))
        for g, t in enumerate(self.trackers):
            self.port.send(t, up)
            # a tracker restarted while this arbitrator was down lost its TrackerUp: it must still watch the job
            # managers of its nodes (a dead one sends no heartbeat to be learned from)
            if watch.get(g):
                self.port.send(t, ExpectJM(watch[g]))
        for rec in self.jobs.values():
            if rec.status == "running":
                self.port.send(rec.jm, up)
