"""The counters YARN's resource manager and node managers report, declared for the registry (``summary.json``:
``counters.yarn``; flat keys ``yarn_*``)."""

from __future__ import annotations

from megha.metrics.counters import CounterSet

COUNTERS = CounterSet(
    "yarn",
    {
        "allocated_at_arrival": "tasks allocated when their job arrived (a node was free)",
        "queued": "tasks that waited in the resource manager's queues",
        "allocated_from_queue": "tasks allocated from the queues on a node's heartbeat",
        "heartbeats": "node-manager heartbeats the resource manager handled",
        "claim_heartbeats": "heartbeats that carried containers claimed for the node (allocated at arrival)",
        "max_queue": "longest the queues were (tasks)",
        "nm_heartbeats": "heartbeats the node managers sent",
        "left_queued": "tasks still queued at the end (0 in a finished run)",
        "launches_failed": "container launches that did not start: the node had died or restarted, unknown to the "
        "resource manager (worker faults); their tasks are asked for again",
        "nodes_lost": "nodes the resource manager learned were lost (worker faults)",
        "restarts": "resource-manager restarts (component crashes of a fault schedule)",
        "requeued": "tasks queued again after their node or the resource manager failed",
    },
)
