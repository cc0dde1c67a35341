"""MACRM under fault schedules (``megha simulate -s macrm --resources --faults FILE``): the failures of thesis
§4.2.4 (Table 4.5), recovered as the thesis says — the same model as :class:`~megha.schedulers.macrm.infra.MacrmFaults`
(which tests and experiments still drive from Python), offered through the
:class:`~megha.model.faults.FaultHandler` protocol.

Fault kinds (targets numbered as in the deployment):

* ``node`` (alias ``worker``: a MACRM node *is* one worker of the datacenter, one row of its capacities) — the
  machine crashes: its node manager, task containers and job-manager containers die; the runs on it are cut short
  (recorded as lost: the work is thrown away and the tasks run again); its tracker notices the
  missing heartbeats after ``node_timeout`` and reports it, the job managers re-place the lost tasks, the
  arbitrator restarts lost job managers. MACRM does not model repairs: **a failed node never comes back** —
  ``down_for`` is ignored and the runner treats the node as gone for good (tasks no live node can hold are reported
  stranded, ``faults.tasks_stranded``).
* ``jm`` — the job manager of job ``target`` (a job id) dies; if that job has none running, the job manager of
  the next job (by id, wrapping around) that has one. Its tracker detects the missing heartbeats
  (``jm_timeout``) and the arbitrator starts a new attempt, which adopts the job's running tasks.
* ``tracker`` — resource tracker ``target`` dies; the supervisor notices its silence (``alive_timeout``) and
  restarts it, and the new tracker rebuilds its view from node heartbeats.
* ``arbitrator`` — the arbitrator dies; the supervisor restarts it and it recovers its hard state from the store
  (ZooKeeper); clients resubmit what it had not accepted.

For ``jm``, ``tracker`` and ``arbitrator`` ``down_for`` is ignored too: the process is dead from ``at`` until MACRM's
own detection and restart bring a new one, as in the thesis. These kinds replace the runner's generic crash for
those agents (their components declare no crash kind), so no kind is offered twice. Of the other components only
the users' client keeps the runner's generic crash (``macrm-client``: submissions wait, then go on); the supervisor
(ZooKeeper, itself replicated) and the container runtime (the machines' operating system) are outside the thesis's
failure model and offer no fault.
"""

from __future__ import annotations

from megha.schedulers.macrm.infra import MacrmFaults

_PERMANENT = "; MACRM does not model repairs: down_for is ignored"
KINDS = {
    "node": "the machine crashes: its containers and job managers die, its tracker detects it by missing heartbeats, "
    "its tasks run again elsewhere" + _PERMANENT,
    "worker": "a node (one worker of the datacenter): as 'node'",
    "jm": "the job manager of job `target` (or of the next job with one running) dies; its tracker detects it, the "
    "arbitrator starts a new attempt that adopts the running tasks; down_for is ignored",
    "tracker": "the resource tracker dies; the supervisor restarts it, it rebuilds its view from heartbeats; "
    "down_for is ignored",
    "arbitrator": "the arbitrator dies; the supervisor restarts it from the store, clients resubmit; down_for is "
    "ignored",
}


class MacrmFaultHandler:
    """The :class:`~megha.model.faults.FaultHandler` of a MACRM deployment (wraps :class:`MacrmFaults`)."""

    kinds = KINDS
    #: kinds whose targets never come back, whatever ``down_for`` says (the runner then strands what needs them)
    permanent = frozenset({"node", "worker"})

    def __init__(self, faults: MacrmFaults, n_nodes: int, n_jobs: int) -> None:
        self.f = faults
        self.n_nodes = int(n_nodes)
        self.n_jobs = int(n_jobs)

    def population(self, kind: str) -> int:
        """How many targets of ``kind`` the deployment has: nodes, jobs (``jm``), trackers, or the one arbitrator."""
        if kind in ("node", "worker"):
            return self.n_nodes
        if kind == "jm":
            return self.n_jobs
        if kind == "tracker":
            return len(self.f.trackers)
        return 1  # arbitrator

    def workers(self, kind: str, targets: tuple[int, ...]) -> list[int]:
        """The workers a fault of ``kind`` takes down: the nodes themselves for ``node``/``worker``, none otherwise."""
        return list(targets) if kind in ("node", "worker") else []

    def fail(self, kind: str, targets: tuple[int, ...], now: float) -> None:
        """Targets fail at ``now`` (thesis §4.2.4): nodes crash for good; a dead job manager is replaced by a new
        attempt from the arbitrator; a dead tracker or arbitrator is restarted by the supervisor."""
        f = self.f
        if kind in ("node", "worker"):
            f.kill_node([int(t) for t in targets])
        elif kind == "jm":
            for j in targets:
                self._kill_jm(int(j))
        elif kind == "tracker":
            for t in targets:
                f.kill_tracker(int(t))
        else:
            f.kill_arbitrator()

    def _kill_jm(self, job: int) -> None:
        n = max(self.n_jobs, 1)
        for k in range(n):
            if self.f.kill_jm((job + k) % n):
                return

    def restore(self, kind: str, targets: tuple[int, ...], now: float) -> None:
        """Nothing to do: MACRM brings back what it can itself (see the module docstring)."""
