"""The counters a live run reports (``megha live submit``, ``megha live bench``, chaos runs), declared like a family's.

A live run's flat :attr:`RunResult.counters <megha.metrics.result.RunResult.counters>` sums what its client, its
GMs, its active LMs and its worker hosts count, plus each service's runtime and transport counters (``service_``
in front of their names). Its :attr:`~megha.metrics.result.RunResult.counter_sets` are :func:`counter_sets`:

* ``run`` — the runner's (:data:`megha.metrics.counters.RUN_COUNTERS`);
* ``megha`` — what the GMs and LMs count exactly as they do in a simulation (:mod:`megha.schedulers.megha.counters`);
* ``megha_live`` — :data:`LIVE_COUNTERS`: the live-only ones, names as they are counted (no prefix).

``tests/test_counters.py`` fails on a counter a live run reports, or the live code writes, without a declaration
here.
"""

from __future__ import annotations

from megha.metrics.counters import RUN_COUNTERS, CounterSet
from megha.schedulers.megha.counters import COUNTERS as MEGHA_COUNTERS

#: counters a live run reports beyond Megha's own (``summary.json``: ``counters.megha_live``)
LIVE_COUNTERS = CounterSet(
    "megha_live",
    {
        # the client (megha.live.client)
        "job_batches": "batches of jobs the client submitted to GMs",
        "tasks_resubmitted_gm_restart": "tasks the client submitted again because their GM restarted before they "
        "started",
        "tasks_resubmitted_lost": "tasks the client submitted again because their run was lost and no LM held them",
        "gm_restarts_seen": "GM restarts the client noticed (a new epoch in a GM's status)",
        "gms_presumed_dead": "times the client took a silent GM for dead (it then learns completions itself)",
        "completions_learned_by_client": "completions the client recorded itself while their GM was down",
        "completions_learned_at_resync": "completions the client learned when a restarted GM resynchronised",
        "runs_lost": "runs cut short (a worker host died or a launch never arrived); their tasks run again",
        "duplicate_completions_reported": "completion events the client received for a task already complete",
        "events_for_unknown_tasks": "task events the client received for ids outside its workload (dropped)",
        "rejected_messages": "malformed messages the client rejected",
        # the run's outcome (megha.live.client.to_run_result)
        "tasks_finished_twice": "tasks that finished more than once (0 in a correct run: exactly-once)",
        "tasks_never_finished": "feasible tasks that never finished",
        "tasks_failed": "tasks whose command exited with a non-zero code",
        # the GMs (megha.live.masters.LiveGlobalMaster)
        "messages_held_until_synced": "messages a (re)started GM held until every LM had answered its sync request",
        "tasks_held_by_lms": "tasks of an earlier incarnation of the GM that LMs said they hold (at the last answer)",
        "duplicate_tasks_dropped": "resubmitted or handed-back tasks a GM dropped because it or an LM holds them",
        "tasks_handed_back": "tasks LMs handed back to their GM (no suitable worker free), counted by LM and GM",
        "held_tasks_adopted": "running tasks of its users a restarted GM learned from its LMs (usage rebuilt)",
        "preempted_tasks_unknown": "preempted tasks a restarted GM did not know (reported lost; resubmitted)",
        # the LMs (megha.live.masters.LiveLocalMaster)
        "host_registrations": "worker host registrations (a host's first beat, or its first after a restart)",
        "hosts_lost": "worker hosts an LM declared dead (silent, or restarted)",
        "launches_lost": "launches that never reached their host (missing from its beats), relaunched",
        "tasks_relaunched": "tasks an LM relaunched itself on a free worker after a host died or a launch was lost",
        "duplicate_launches_refused": "launches an LM refused because it already holds the task (exactly-once)",
        "stale_runs_stopped": "runs a host reported that its LM no longer holds there (stopped)",
        "stale_finished_dropped": "completions from a worker that no longer holds the task (dropped)",
        "stale_killed_dropped": "kill reports from a worker that no longer holds the task (dropped)",
        "preempted_runs_lost": "preemption victims lost with their host before the kill was reported (GM requeues)",
        # the worker hosts (megha.live.worker)
        "tasks_started": "tasks worker hosts started",
        "tasks_finished": "tasks worker hosts saw end (any exit code)",
        "tasks_killed": "tasks worker hosts killed on their LM's request",
        "duplicate_launches": "launches of a task a host already runs (ignored)",
        "overcommits": "launches onto a worker without room (0 in a correct run)",
        "commands_refused": "task commands a host refused (not in its allowed list)",
        "runs_known": "run specifications a host knows (at its last status)",
        "stale_launches_dropped": "launches meant for an earlier incarnation of a host (dropped)",
        "stale_kills_dropped": "kills meant for an earlier incarnation of a host (dropped)",
        "self_fenced": "times a host missed its heartbeat lease and fenced itself (stopped its tasks, re-registered)",
        "tasks_dropped_by_fence": "tasks a fencing host killed",
        # every service's runtime and transport (megha.live.runtime, megha.live.transport): service_NAME
        "service_rejected_messages": "malformed messages services rejected",
        "service_handler_errors": "exceptions in a component's handler (the message or timer is dropped)",
        "service_duplicates_dropped": "messages received twice (re-sent after a failover, or redelivered)",
        "service_held_for_gap": "messages held because an earlier one of the same stream had not arrived",
        "service_gaps_skipped": "messages given up as lost after a gap lasted too long",
        "service_resent_dropped": "messages re-sent by a standby that took over, meant for an earlier receiver",
        "service_held_dropped_new_epoch": "held messages dropped because their sender restarted",
        "service_replication_batches": "batches of replication records an active LM stored",
        "service_replication_held": "replication records a standby held until an earlier one arrived",
        "service_replication_gaps": "replication records skipped after a gap when a standby took over",
        "service_log_compactions": "replication logs compacted after a snapshot was stored",
        "service_snapshots_written": "LM state snapshots written to the replication log",
        "service_snapshots_deferred": "snapshots put off because they would exceed the broker's message size",
        "service_snapshots_restored": "snapshots a standby started from",
        "service_takeovers": "standby LMs that took over from their active",
        "service_takeovers_replayed": "takeover records a standby replayed from the log",
        "service_takeover_deferred": "takeovers put off until the standby had applied the whole log",
        "service_takeover_aborted": "takeovers called off because the active turned out alive",
        "service_takeover_log_moved": "takeover records a new active wrote again because the log had moved on",
        "service_consumer_gaps": "deliveries missing from a durable consumer (read again)",
        "service_bundled": "messages sent bundled with others in one broker message",
        "service_publish_errors": "durable publishes the broker did not store (published again)",
        "service_republished": "durable messages published again after no acknowledgement",
        "service_purges": "broker stream purges (acknowledged replication records dropped)",
    },
    prefix="",
)


def counter_sets() -> tuple[CounterSet, ...]:
    """What a live run's counters mean: ``run``, ``megha``, ``megha_live`` (see the module's docs)."""
    return (RUN_COUNTERS, MEGHA_COUNTERS, LIVE_COUNTERS)
