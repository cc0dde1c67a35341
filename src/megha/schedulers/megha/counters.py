"""The counters Megha's GMs and LMs report (summed over every GM and LM of a run), declared for the registry.

Their flat keys in ``RunResult.counters`` carry no prefix (they predate the namespaces); ``summary.json`` lists
them under ``counters.megha``.
"""

from __future__ import annotations

from megha.metrics.counters import CounterSet

COUNTERS = CounterSet(
    "megha",
    {
        "inconsistencies": "tasks an LM refused because the GM's view was stale (the papers' inconsistencies), "
        "counted once, by the LM that refuses (as the 2020 authors' simulator logs each once)",
        "rejections_received": "refused tasks the GMs learned of from LM replies (equals inconsistencies unless a GM "
        "restarted and lost the pending request)",
        "repartitions": "tasks an LM started on a worker of another GM's partition (borrowed workers)",
        "repartition_requests": "placements a GM made outside its own partition (an LM is asked to lend a worker)",
        "updates_sent": "state updates (heartbeats, or replies to a launch) the LMs sent to GMs",
        "updates_received": "state updates the GMs applied to their views",
        "snapshots_sent": "full partition snapshots LMs sent on a GM's sync request (after a GM restart)",
        "state_pulls": "state pulls GMs sent to every LM (the megha20 profile's full_pull)",
        "handoffs": "queued tasks GMs handed to an LM to start when a worker frees (-o handoff_after)",
        "handoff_launches": "handed-off tasks LMs started",
        "preemption_attempts": "preemption requests GMs sent for a user below its fair share (fairness on)",
        "preemption_requests": "preemption requests LMs received",
        "preemptions_granted": "preemption requests an LM granted",
        "preemptions_refused": "preemption requests an LM refused (no victim left on the chosen workers)",
        "preemptions": "tasks killed by preemption (they run again later)",
        "tasks_requeued_after_preemption": "preempted tasks GMs queued again",
        "tasks_requeued_after_worker_failure": "tasks lost with failed workers that GMs queued again",
        "workers_failed": "workers the LMs saw fail (worker faults)",
        "tasks_lost_with_workers": "running tasks lost with failed workers",
        "restarts": "GM restarts (component crashes of a fault schedule)",
    },
    prefix="",
)
