"""The counters Pigeon's distributors and masters report (Pigeon and PigeonC), declared for the registry
(``summary.json``: ``counters.pigeon``; flat keys ``pigeon_*``)."""

from __future__ import annotations

from megha.metrics.counters import CounterSet

COUNTERS = CounterSet(
    "pigeon",
    {
        "jobs_short": "jobs the distributors classed short (mean task duration below the cutoff)",
        "jobs_long": "jobs the distributors classed long",
        "queued_short": "short tasks a master queued (no free worker when they arrived)",
        "queued_long": "long tasks a master queued",
        "served_short": "short tasks masters served from their queues",
        "served_long": "long tasks masters served from their queues",
        "left_queued": "tasks still queued at a master or parked at a distributor at the end (0 in a finished run)",
        "tasks_rerouted": "tasks a master handed back to its distributor (none of its live workers can run them: "
        "worker faults) and the distributor sent to another master",
    },
)
