"""Derived metrics (DESIGN §4): delay in job response time, allocation time, utilization, percentiles.

* **Delay** of a job = completion − arrival − ideal, where completion is when the scheduler learned that
  the job's last (feasible) task finished and ideal is the job's longest (feasible) task duration.
* **Allocation time** of a task = start − arrival, split into communication, processing, worker queuing
  and framework queuing (the remainder).
* **Utilization** = resources held by running tasks / total resources, as a step function of time.
"""

from __future__ import annotations

import numpy as np

from megha.metrics.recorder import TaskRecorder
from megha.model.workload import Workload

PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}


def describe(values: np.ndarray) -> dict[str, float | None]:
    """mean, p50, p90, p99, p99.9 and max of the finite values (None when there are none)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"mean": None, **{k: None for k in PERCENTILES}, "max": None, "count": 0}
    q = np.percentile(v, list(PERCENTILES.values()))
    out: dict[str, float | None] = {"mean": float(v.mean())}
    out.update({k: float(x) for k, x in zip(PERCENTILES, q, strict=True)})
    out["max"] = float(v.max())
    out["count"] = int(v.size)
    return out


def job_table(workload: Workload, rec: TaskRecorder, feasible: np.ndarray) -> dict[str, np.ndarray]:
    """Per-job columns: arrival, tasks, feasible tasks, ideal, completion and delay (seconds)."""
    J = workload.n_jobs
    tj = workload.task_job
    feas_dur = np.where(feasible, workload.task_duration, -np.inf)
    ideal = np.full(J, -np.inf)
    np.maximum.at(ideal, tj, feas_dur)
    known = np.where(feasible, rec.known, -np.inf)
    completion = np.full(J, -np.inf)
    np.maximum.at(completion, tj, known)
    n_feasible = np.bincount(tj, weights=feasible, minlength=J).astype(np.int64)
    n_unfinished = np.bincount(tj, weights=feasible & np.isnan(rec.known), minlength=J).astype(np.int64)
    ok = (n_feasible > 0) & (n_unfinished == 0)
    ideal = np.where(n_feasible > 0, ideal, np.nan)
    completion = np.where(ok, completion, np.nan)
    delay = completion - workload.job_arrival - ideal
    return {
        "job": np.arange(J, dtype=np.int64),
        "arrival": workload.job_arrival,
        "tasks": workload.job_num_tasks,
        "tasks_feasible": n_feasible,
        "ideal": ideal,
        "completion": completion,
        "delay": delay,
        "user": workload.job_user if workload.job_user is not None else np.zeros(J, dtype=np.int32),
    }


def task_table(workload: Workload, rec: TaskRecorder, feasible: np.ndarray) -> dict[str, np.ndarray]:
    """Per-task columns, including the allocation-time breakdown."""
    alloc = rec.start - rec.arrival
    fq = np.maximum(alloc - rec.comm - rec.proc - rec.wq, 0.0)
    first = workload.job_first_task[workload.task_job]
    return {
        "job": workload.task_job,
        "task": np.arange(workload.n_tasks, dtype=np.int64) - first,
        "task_id": np.arange(workload.n_tasks, dtype=np.int64),
        "arrival": rec.arrival,
        "duration": workload.task_duration,
        "constraints": workload.masks,
        "feasible": feasible,
        "scheduled": rec.scheduled,
        "start": rec.start,
        "end": rec.end,
        "known": rec.known,
        "worker": rec.worker,
        "allocation": alloc,
        "communication": rec.comm,
        "processing": rec.proc,
        "worker_queuing": rec.wq,
        "framework_queuing": fq,
        "launches": rec.launches,
        "preemptions": rec.preemptions,
    }


def utilization_series(
    rec: TaskRecorder, total: float, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Step function (times, utilization) of resources held by running tasks over ``total``."""
    ok = np.isfinite(rec.start) & np.isfinite(rec.end)
    w = np.ones(rec.n) if weights is None else weights
    starts = [rec.start[ok]]
    ends = [rec.end[ok]]
    ws = [w[ok]]
    for ids, st, _, t in rec.preempted_runs:
        good = np.isfinite(st)
        starts.append(st[good])
        ends.append(np.full(int(good.sum()), t))
        ws.append(w[ids[good]])
    s = np.concatenate(starts)
    e = np.concatenate(ends)
    ww = np.concatenate(ws)
    if s.size == 0:
        return np.zeros(1), np.zeros(1)
    times = np.concatenate([s, e])
    delta = np.concatenate([ww, -ww])
    order = np.argsort(times, kind="stable")
    times = times[order]
    level = np.cumsum(delta[order])
    # keep the last level at each distinct time
    last = np.r_[times[1:] != times[:-1], True]
    return times[last], np.clip(level[last] / total, 0.0, None)


def time_weighted_mean(times: np.ndarray, values: np.ndarray, t0: float, t1: float) -> float:
    """Mean of a right-continuous step function over [t0, t1]."""
    if t1 <= t0 or times.size == 0:
        return 0.0
    t = np.clip(np.r_[times, t1], t0, t1)
    dt = np.diff(t)
    return float((values * dt).sum() / (t1 - t0))


def downsample_step(times: np.ndarray, values: np.ndarray, n: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """At most ``n`` evenly spaced samples of a step function (for tables and plots)."""
    if times.size <= n:
        return times, values
    grid = np.linspace(times[0], times[-1], n)
    idx = np.searchsorted(times, grid, side="right") - 1
    return grid, values[np.clip(idx, 0, None)]
