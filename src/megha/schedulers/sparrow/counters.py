"""The counters Sparrow's schedulers and node monitors report, declared for the registry (``summary.json``:
``counters.sparrow``; flat keys ``sparrow_*``)."""

from __future__ import annotations

from megha.metrics.counters import CounterSet

COUNTERS = CounterSet(
    "sparrow",
    {
        "probes": "probes (reservations) the schedulers sent to node monitors",
        "requests": "task requests node monitors sent back when a probe reached the head of a worker's queue",
        "noops": "task requests answered with no task (the job's tasks were all placed: late binding's cost)",
        "probes_queued": "probes that waited in a worker's queue",
        "max_worker_queue": "longest queue of probes on one worker",
        "tasks_lost": "running tasks lost with failed workers (worker faults)",
        "probes_lost": "queued probes lost with failed workers",
        "tasks_relaunched": "lost tasks the schedulers probed for again",
        "probes_reissued": "probes sent again for lost probes",
    },
)
