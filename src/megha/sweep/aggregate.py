"""One table of every run of a sweep, keyed by its parameters (``results.parquet`` and ``results.csv``).

Columns, in order:

* ``index``, ``run_id``, then one column per varying parameter (``workers``, ``options.heartbeat`` …; lists and
  tables are written as JSON text), then ``scheduler``, ``trace``, ``seed``, ``gms``, ``lms`` when they do not vary;
* ``status``: ``ok``, ``unfinished`` (the run stopped with tasks left, see its summary), ``failed`` (``error``
  holds the message) or ``missing`` (not run yet);
* the run's summary: ``n_workers``, ``jobs``, ``tasks``, ``tasks_infeasible``, ``tasks_completed``,
  ``delay_{mean,p50,p90,p99,p999,max}`` (delay in job response time, s), ``alloc_{…}`` (allocation time,
  task start − arrival, s), the means of the allocation-time components, ``utilization_mean``, ``makespan``,
  ``simulated_seconds``, ``events``, then ``counter.<namespace>.<name>`` for every counter any run reported
  (``counter.run.tasks_infeasible``, ``counter.megha.inconsistencies`` …; ``counter.<name>`` for a summary written
  before counters had namespaces).

Only deterministic values are in this table (no wall times: those are in ``timing.csv``), so the same sweep
gives the same table on a process pool and on Ray.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megha.metrics.counters import items as counter_items
from megha.sweep import worker
from megha.sweep.spec import RunPlan, param_names

if TYPE_CHECKING:
    import pyarrow as pa

STATS = ("mean", "p50", "p90", "p99", "p999", "max")
COMPONENTS = ("framework_queuing", "processing", "worker_queuing", "communication")
FIXED = ("scheduler", "trace", "seed", "gms", "lms", "workers", "cluster")


def _cell(v: Any) -> Any:
    if isinstance(v, list | dict):
        return json.dumps(v, sort_keys=True, separators=(",", ":"))
    return v


def _get(config: dict[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def run_row(plan: RunPlan, run_dir: Path, params: list[str], fixed: list[str]) -> dict[str, Any]:
    """The table row of one run (status ``missing`` when it has not run)."""
    row: dict[str, Any] = {"index": plan.index, "run_id": plan.id}
    for k in params:
        row[k] = _cell(plan.params.get(k, _get(plan.config, k)))
    for k in fixed:
        row[k] = _cell(_get(plan.config, k))
    summary_path = run_dir / worker.SUMMARY
    error_path = run_dir / worker.ERROR
    row["status"] = "missing"
    row["error"] = None
    if summary_path.is_file():
        s = json.loads(summary_path.read_text())
        row["status"] = "ok" if s.get("completed") else "unfinished"
        row["error"] = s.get("unfinished_reason")
        row["n_workers"] = s.get("workers")
        for k in ("jobs", "tasks", "tasks_infeasible", "tasks_completed"):
            row[k] = s.get(k)
        for k in STATS:
            row[f"delay_{k}"] = (s.get("delay") or {}).get(k)
        alloc = s.get("allocation_time") or {}
        for k in STATS:
            row[f"alloc_{k}"] = (alloc.get("total") or {}).get(k)
        for c in COMPONENTS:
            row[f"alloc_{c}_mean"] = (alloc.get(c) or {}).get("mean")
        for k in ("utilization_mean", "makespan", "simulated_seconds", "events"):
            row[k] = s.get(k)
        for k, v in sorted(counter_items(s.get("counters") or {})):
            row[f"counter.{k}"] = v
    elif error_path.is_file():
        e = json.loads(error_path.read_text())
        row["status"] = "failed"
        row["error"] = e.get("error")
    return row


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows (dicts, possibly with different keys) → an Arrow table with one type per column."""
    from megha.metrics.tables import rows_to_table as to_table

    return to_table(rows)


def collect(out: Path, plans: list[RunPlan]) -> list[dict[str, Any]]:
    """Rows of every planned run of a sweep directory, in plan order."""
    params = param_names(plans)
    fixed = [k for k in FIXED if k not in params]
    return [run_row(p, out / "runs" / p.id, params, fixed) for p in plans]


def write_results(out: Path, plans: list[RunPlan]) -> Path:
    """Write ``results.parquet`` and ``results.csv``; returns the Parquet path."""
    from megha.metrics.tables import write_csv, write_parquet

    table = rows_to_table(collect(out, plans))
    path = write_parquet(table, out / "results.parquet")
    write_csv(table, out / "results.csv")
    return path
