"""Derived metrics (DESIGN §4): delay in job response time, allocation time, utilization, percentiles.

* **Delay** of a job = completion − arrival − ideal, where completion is when the scheduler learned that
  the job's last (feasible) task finished and ideal is the job's longest (feasible) task duration.
* **Allocation time** of a task = start − arrival, split into communication, processing, worker queuing
  and framework queuing (the remainder).
* **Utilization** = resources held by running tasks / total resources, as a step function of time (IoT 2023,
  Eq. 2). Its headline mean is taken over the *arrival window* (first to last job arrival): over the whole run
  every scheduler does the same work, so busy time / (workers x span) only measures the span, which a single
  long task at the end sets; within the arrival window a scheduler that keeps tasks waiting holds fewer resources.
* **Starvation**: jobs grouped by the number of workers eligible for their rarest task (the feasible task that
  the fewest workers can run), with the delay of each group (:func:`delay_by_eligible`).
"""

from __future__ import annotations

import numpy as np

from megha.metrics.recorder import TaskRecorder
from megha.model.topology import Datacenter
from megha.model.workload import Workload, eligible_worker_counts

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
    known = np.where(feasible & ~np.isnan(rec.known), rec.known, -np.inf)  # unfinished: n_unfinished below
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
    if weights is None:  # every run holds one worker: the level after time t is #starts <= t - #ends <= t
        s.sort()
        e.sort()
        times = np.concatenate([s, e])
        order = np.argsort(times, kind="stable")  # merges the two sorted halves
        times = times[order]
        # +1 per start, -1 per end in time order: at the last entry of each instant t the running sum counts every
        # start and end up to t (and none after)
        held = np.cumsum(np.where(order < s.size, 1, -1))
        last = np.r_[times[1:] != times[:-1], True]
        return times[last], np.clip(held[last].astype(np.float64) / total, 0.0, None)
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


# --- utilization over the arrival window -------------------------------------------------------------------------
UTILIZATION_DEFINITION = (
    "resources held by running tasks / total resources (IoT 2023 Eq. 2; CPU in resource mode, workers in slot "
    "mode), time-weighted mean over the arrival window: first to last job arrival"
)


def arrival_window(workload: Workload) -> tuple[float, float]:
    """``(first, last)`` job arrival: the window over which utilization tells schedulers apart."""
    if workload.n_jobs == 0:
        return 0.0, 0.0
    return float(workload.job_arrival.min()), float(workload.job_arrival.max())


def utilization_summary(
    times: np.ndarray,
    util: np.ndarray,
    window: tuple[float, float],
    run_end: float,
    n_series: int = 200,
) -> dict:
    """Mean utilization over the arrival ``window`` (and over the whole run, up to ``run_end``), its quantiles
    over time in the window (the CDF of the IoT paper's Fig. 10) and a downsampled series for plots.

    A window of zero length (one arrival instant) falls back to the whole run.
    """
    t0, t1 = window
    whole = time_weighted_mean(times, util, t0, run_end) if run_end > t0 else 0.0
    if t1 <= t0:
        t1 = max(run_end, t0)
        name = "whole run (all jobs arrive at once)"
    else:
        name = "arrivals"
    mean = time_weighted_mean(times, util, t0, t1) if t1 > t0 else 0.0
    grid = np.linspace(t0, t1, n_series) if t1 > t0 else np.array([t0])
    level = step_at(times, util, grid)
    q = np.percentile(level, [50, 90, 99]) if level.size else np.zeros(3)
    return {
        "definition": UTILIZATION_DEFINITION,
        "window": name,
        "window_start": t0,
        "window_end": t1,
        "mean": mean,
        "mean_whole_run": whole,
        "p50": float(q[0]),
        "p90": float(q[1]),
        "p99": float(q[2]),
        "max": float(util.max()) if util.size else 0.0,
        "series": {"time": grid.tolist(), "utilization": level.tolist()},
    }


def step_at(times: np.ndarray, values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Values of a right-continuous step function at the instants ``at`` (0 before its first step)."""
    at = np.asarray(at, dtype=np.float64)
    if times.size == 0:
        return np.zeros(at.size)
    idx = np.searchsorted(times, at, side="right") - 1
    return np.where(idx >= 0, values[np.clip(idx, 0, None)], 0.0)


# --- starvation: delay by the number of workers eligible for a job's rarest task ----------------------------------
def eligible_workers(workload: Workload, dc: Datacenter) -> np.ndarray:
    """Number of workers able to run each task: they have every placement constraint of the task and, in
    resource mode, the capacity for its request (int64 ``[T]``; 0 for an infeasible task)."""
    return eligible_worker_counts(workload.masks, workload.task_demand, dc.worker_masks, dc.capacity)


def job_rarest_eligible(workload: Workload, eligible: np.ndarray, feasible: np.ndarray) -> np.ndarray:
    """Per job: workers eligible for its rarest feasible task (0 when the job has no feasible task)."""
    big = np.iinfo(np.int64).max
    per = np.full(workload.n_jobs, big, dtype=np.int64)
    if workload.n_tasks:
        np.minimum.at(per, workload.task_job, np.where(feasible, eligible, big))
    per[per == big] = 0
    return per


def eligible_buckets(n_workers: int) -> list[tuple[int, int]]:
    """Inclusive ``(lo, hi)`` bounds: 1, 2-10, 11-100, 101-1,000, ... up to ``n_workers``."""
    out = [(1, 1)]
    lo, hi = 2, 10
    while lo <= max(n_workers, 1):
        out.append((lo, min(hi, max(n_workers, lo))))
        lo, hi = hi + 1, hi * 10
    return out


def bucket_label(lo: int, hi: int) -> str:
    """Label of an eligible-worker bucket ``(lo, hi)``: ``"1"``, ``"2-10"``, ``"1,001-10,000"`` …"""
    return f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"


STARVATION_DEFINITION = (
    "jobs grouped by the number of workers eligible for their rarest task (the feasible task that the fewest "
    "workers can run: every placement constraint, and capacity in resource mode); delay in job response time "
    "per group"
)


def delay_by_eligible(delay: np.ndarray, job_eligible: np.ndarray, n_workers: int) -> dict:
    """The starvation table: for each bucket of eligible workers, the jobs in it and their delay (count of
    jobs, of unfinished ones, mean, p50, p99, max), plus the worst job overall."""
    delay = np.asarray(delay, dtype=np.float64)
    rows = []
    for lo, hi in eligible_buckets(n_workers):
        sel = (job_eligible >= lo) & (job_eligible <= hi)
        d = describe(delay[sel])
        rows.append(
            {
                "workers": bucket_label(lo, hi),
                "lo": lo,
                "hi": hi,
                "jobs": int(sel.sum()),
                "unfinished": int((sel & ~np.isfinite(delay)).sum()),
                "mean": d["mean"],
                "p50": d["p50"],
                "p99": d["p99"],
                "max": d["max"],
            }
        )
    worst = None
    fin = np.isfinite(delay) & (job_eligible > 0)
    if fin.any():
        j = int(np.flatnonzero(fin)[np.argmax(delay[fin])])
        worst = {"job": j, "delay": float(delay[j]), "eligible_workers": int(job_eligible[j])}
    return {"definition": STARVATION_DEFINITION, "buckets": rows, "worst_job": worst}


# --- faults: what a fault schedule cost ------------------------------------------------------------------------------
def fault_summary(
    log: list[dict],
    jobs: dict[str, np.ndarray],
    workload: Workload,
    rec: TaskRecorder,
    t0: float,
    stranded: np.ndarray | None = None,
) -> dict:
    """``summary["faults"]``: the faults injected, the task runs they cut short and the work thrown away, each
    fault's recovery time, and the delay of the jobs a fault touched beside the others.

    A job is *touched* when a fault cut one of its task runs short (its worker failed), or when it was in the
    system (arrived before the component recovered, completed after it crashed) while one of the scheduler's
    components was down. Times in ``events`` are seconds after the first arrival ``t0``, as in the schedule.
    """
    touched = np.zeros(jobs["job"].size, dtype=bool)
    killed = np.flatnonzero(rec.fault_kills)
    if killed.size:
        touched[workload.task_job[killed]] = True
    arrival = jobs["arrival"]
    completion = np.where(np.isnan(jobs["completion"]), np.inf, jobs["completion"])
    events = []
    for e in log:
        back = e["recovered_at"]
        if e.get("crash"):
            touched |= (arrival <= (np.inf if back is None else back)) & (completion >= e["at"])
        targets = e["targets"]
        events.append(
            {
                "at": e["at"] - t0,
                "kind": e["kind"],
                "targets": targets[:20],
                "n_targets": len(targets),
                "down_for": e["down_for"] if np.isfinite(e["down_for"]) else None,
                "recovery_s": None if back is None else back - e["at"],
                "source": e["source"],
            }
        )
    touched &= jobs["tasks_feasible"] > 0
    by_kind: dict[str, int] = {}
    for e in log:
        by_kind[e["kind"]] = by_kind.get(e["kind"], 0) + 1
    delay = jobs["delay"]
    return {
        "injected": len(log),
        "by_kind": by_kind,
        "task_runs_lost": int(rec.fault_kills.sum()),
        "tasks_reexecuted": int(killed.size),
        "work_lost_s": float(rec.work_lost),
        # tasks whose every eligible worker failed for good: reported, not waited for
        "tasks_stranded": int(rec.counters.get("tasks_stranded", 0)),
        "stranded_task_ids": [] if stranded is None else stranded[:1000].tolist(),
        "jobs_touched": int(touched.sum()),
        "delay_touched": describe(delay[touched]),
        "delay_untouched": describe(delay[~touched]),
        "events": events,
    }
