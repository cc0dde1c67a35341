"""Messages of the YARN-like resource manager."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(slots=True)
class NodeHeartbeat:
    """Node managers report, at their heartbeat tick, the containers that finished since their last report."""

    nodes: np.ndarray | list[int]  # nodes reporting (lists are cheaper for the common one-node heartbeat)
    tasks: np.ndarray | list[int]  # finished tasks (containers)
    task_nodes: np.ndarray | list[int]  # node of each finished task
    demands: np.ndarray | None = None  # [k, R] resources the finished tasks held (resource mode)

    def __len__(self) -> int:
        return len(self.nodes)


# --- faults (fault schedules; see megha.schedulers.centralized.faults) ---------------------------------------------
@dataclass(slots=True)
class NodesLost:
    """The RM's liveness monitor: ``nodes`` died. ``incs[i]``: the node's state version (2·incarnation while down,
    2·incarnation + 1 while up; a node's incarnation counts its deaths). ``lost``: containers
    ``(task, node, demand)`` that died with them (or were on their way to them)."""

    nodes: list[int]
    incs: list[int]
    lost: list[tuple]

    def __len__(self) -> int:
        return len(self.nodes)


@dataclass(slots=True)
class NodesRegistered:
    """Node managers (re-)register: ``nodes`` are in state version ``incs[i]`` (see :class:`NodesLost`). A node
    that came back is empty (``resync`` 0); in answer to :class:`Resync` (an RM restart) every node is listed, in
    order, with the containers running: ``tasks`` on ``task_nodes`` holding ``demands`` (resource mode)."""

    nodes: list[int]
    incs: list[int]
    tasks: list[int]
    task_nodes: list[int]
    demands: np.ndarray | None = None
    resync: int = 0  # the epoch of the Resync this answers (0: not an answer to one)

    def __len__(self) -> int:
        return len(self.nodes)


@dataclass(slots=True)
class NodesAccepted:
    """RM → node managers: the registration of ``nodes`` in state version ``incs[i]`` is known; they take launches
    again (sent after every launch allocated against an older incarnation, so those are refused)."""

    nodes: list[int]
    incs: list[int]

    def __len__(self) -> int:
        return len(self.nodes)


@dataclass(slots=True)
class Resync:
    """RM → node managers after an RM restart: re-register with your running containers (``epoch`` tells the
    answers to successive restarts apart)."""

    epoch: int

    def __len__(self) -> int:
        return 1


@dataclass(slots=True)
class LaunchFailed:
    """Node managers → RM: launches that reached a dead node, or a node whose new incarnation the RM had not yet
    accepted: ``tasks`` on ``nodes`` (with ``demands`` in resource mode) did not start."""

    tasks: list[int]
    nodes: list[int]
    demands: list | None = None

    def __len__(self) -> int:
        return len(self.tasks)
