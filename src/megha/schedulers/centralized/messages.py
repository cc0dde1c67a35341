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
