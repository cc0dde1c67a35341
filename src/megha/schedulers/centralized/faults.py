"""The YARN-like RM under faults, for fault schedules (``megha simulate -s yarn --faults FILE``).

* ``worker`` — nodes die. Their containers are lost (runs recorded lost, the work done thrown away), including a
  container that ended but whose heartbeat had not been sent (the RM never learned it finished). The RM's liveness
  monitor reports the death at once (Hadoop waits ``nm.liveness-monitor.expiry-interval-ms``, 10 min by default;
  here the RM learns at the instant the node dies): the RM writes its view of the node off, and every lost
  container, and every container booked on the node for its next heartbeat, is asked for again, as a YARN
  application master re-requests the containers of failed attempts: booked at once on a suitable node with room
  (as on arrival) or put at the head of the queue (``fewest-tasks``: behind its job's queued tasks), with the same
  constraints. A launch that reaches a dead node does not start and is reported back and asked for again. A node
  that comes back is empty and registers with the RM; it takes launches only once the RM accepted the registration,
  so launches allocated against its previous incarnation (still on their way) are refused as well. Workers that
  fail for good may strand tasks no live node can run (reported by the runner, not waited for).
* ``rm`` — the RM crashes for ``down_for`` seconds (what reaches it meanwhile waits: node heartbeats, arrivals, the
  liveness monitor's reports) and restarts. Option ``recovery`` (see
  :meth:`~megha.schedulers.centralized.rm.ResourceManager.on_recover`): ``work-preserving`` (default; Hadoop's
  work-preserving RM restart, YARN-556): applications and their outstanding requests survive in the state store
  (the AMs re-send their asks), containers keep running, the scheduler's view of the nodes is rebuilt from the
  node managers' re-registration (they are told to resync and report their running containers), and containers
  allocated but not yet launched are asked for again; nothing is allocated until the registration arrives.
  ``kept``: the RM comes back with the state it had (a standby with fully replicated scheduler state).

Node versions order what the RM hears about a node: 2·incarnation + 1 while up, 2·incarnation once it died (the
incarnation counts its deaths); a report older than what the RM knows is ignored, so a restarted RM that re-learned
the nodes' state from their registration is not misled by reports that waited for it.
"""

from __future__ import annotations

from collections.abc import Callable

from megha.model.workload import Workload
from megha.schedulers.centralized.nodemanager import NodeManagers
from megha.schedulers.centralized.rm import ResourceManager
from megha.schedulers.centralized.simrm import SimResourceManager
from megha.sim.component import Host

KINDS = {
    "worker": "the node dies: its containers are lost and their tasks asked for again (head of the queue, same "
    "constraints); launches on their way to it are refused and asked for again; it takes no container until it "
    "comes back and registers with the RM",
}


class YarnFaults:
    """The :class:`~megha.model.faults.FaultHandler` of a ``yarn`` deployment (node failures)."""

    kinds = KINDS

    def __init__(self, engine: Host, rm: ResourceManager, nm: NodeManagers | None, n_nodes: int) -> None:
        self.engine = engine
        self.rm = rm
        self.nm = nm
        self.n_nodes = n_nodes

    def population(self, kind: str) -> int:
        """How many nodes a fault can take down."""
        return self.n_nodes

    def workers(self, kind: str, targets: tuple[int, ...]) -> list[int]:
        """The workers a node fault takes down: the targeted nodes themselves."""
        return list(targets)

    def fail(self, kind: str, targets: tuple[int, ...], now: float) -> None:
        """The nodes ``targets`` fail at ``now``; the RM learns of their lost containers through its inbox."""
        if self.nm is None:
            assert isinstance(self.rm, SimResourceManager)
            lost = self.rm.fail_nodes(list(targets), now)
        else:
            lost = self.nm.fail_nodes(list(targets), now)
        if lost.nodes:  # through the RM's inbox: a crashed RM learns of it when it is back
            self.engine.inject(now, self.rm.address, lost)

    def restore(self, kind: str, targets: tuple[int, ...], now: float) -> None:
        """The nodes ``targets`` come back at ``now`` and register with the RM again."""
        if self.nm is None:
            back = self.rm.restore_nodes(list(targets), now)
            if back.nodes:
                self.engine.inject(now, self.rm.address, back)
        else:
            self.nm.restore_nodes(list(targets), now)  # registers by message (after its earlier heartbeats)


def task_info(workload: Workload) -> Callable[[int], tuple[float, int, int]]:
    """The applications' record of their tasks: task -> (duration, constraint mask, job)."""
    dur, masks, job = workload.task_duration, workload.masks, workload.task_job

    def info(t: int) -> tuple[float, int, int]:
        return float(dur[t]), int(masks[t]), int(job[t])

    return info
