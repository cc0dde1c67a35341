"""The counters the packing schedulers (Best-Fit family, FIFO first fit, VQS) report, declared for the registry
(``summary.json``: ``counters.packing``; flat keys ``packing_*``)."""

from __future__ import annotations

from megha.metrics.counters import CounterSet

COUNTERS = CounterSet(
    "packing",
    {
        "slots": "time slots the scheduler stepped through",
        "placements": "tasks placed",
        "max_queue": "longest the queue was (tasks)",
    },
)
