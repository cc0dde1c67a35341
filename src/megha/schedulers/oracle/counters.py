"""The counters the oracle scheduler reports, declared for the registry (``summary.json``: ``counters.oracle``;
flat keys ``oracle_*``)."""

from __future__ import annotations

from megha.metrics.counters import CounterSet

COUNTERS = CounterSet(
    "oracle",
    {
        "placed_at_arrival": "tasks placed when they arrived",
        "queued": "tasks that waited in the queue",
        "placed_from_queue": "tasks placed from the queue when workers freed",
        "max_queue": "longest the queue was (tasks)",
        "left_queued": "tasks still queued at the end (0 in a finished run)",
    },
)
