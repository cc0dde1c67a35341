"""Turn run results into files: ``summary.json``, Parquet/CSV tables, CDF plots and comparison tables.

Output directory of one run::

    summary.json        scheduler, trace, workers, seed, jobs, tasks, delay summary, utilization (over the
                        arrival window, with a series), starvation table, counters, processing-cost model, config …
    jobs.parquet        one row per job (arrival, ideal, completion, delay, workers eligible for its rarest task …)
    tasks.parquet       one row per task (times, worker, allocation-time components …)
    utilization.parquet utilization over time (downsampled step function)
    delay_cdf.png       CDF of job delays, log-scaled like the papers' figures
    utilization.png     utilization over time, the arrival window shaded
    starvation.png      delay (p50, p99) by the number of workers eligible for a job's rarest task
    (*.csv with --csv)
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from megha import __version__
from megha.metrics import counters as C
from megha.metrics import summary as S
from megha.metrics.fingerprint import fingerprint
from megha.metrics.result import RunResult


def _total_resources(res: RunResult) -> tuple[float, np.ndarray | None]:
    dc = res.datacenter
    if dc.capacity is not None and res.workload.task_demand is not None:
        # utilization of the first resource (CPU by default), as the papers plot
        return float(dc.capacity[:, 0].sum()), res.workload.task_demand[:, 0]
    return float(dc.n_workers), None


def summarize(res: RunResult) -> dict[str, Any]:
    """The ``summary.json`` document of a run."""
    return _summarize(res)[0]


def _summarize(res: RunResult) -> tuple[dict[str, Any], dict[str, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The summary, the per-job table (with ``eligible_workers``) and the utilization series (times, values),
    computed once for :func:`write_run`."""
    w = res.workload
    rec = res.recorder
    jobs = S.job_table(w, rec, res.feasible)
    tasks = S.task_table(w, rec, res.feasible)
    total, weights = _total_resources(res)
    times, util = S.utilization_series(rec, total, weights)
    t0 = float(w.job_arrival.min()) if w.n_jobs else 0.0
    t1 = float(np.nanmax(rec.end)) if np.isfinite(rec.end).any() else t0
    utilization = S.utilization_summary(times, util, S.arrival_window(w), t1)
    eligible = res.eligible if res.eligible is not None else S.eligible_workers(w, res.datacenter)
    jobs["eligible_workers"] = S.job_rarest_eligible(w, eligible, res.feasible)
    starvation = S.delay_by_eligible(jobs["delay"], jobs["eligible_workers"], res.datacenter.n_workers)
    started = np.isfinite(rec.start)
    alloc = {
        name: S.describe(tasks[col][started])
        for name, col in [
            ("total", "allocation"),
            ("framework_queuing", "framework_queuing"),
            ("processing", "processing"),
            ("worker_queuing", "worker_queuing"),
            ("communication", "communication"),
        ]
    }
    cfg = res.config.model_dump()
    cfg["options"] = res.options
    doc = {
        "megha_version": __version__,
        "scheduler": res.scheduler,
        "trace": w.name,
        "workers": res.datacenter.n_workers,
        "seed": res.config.seed,
        "jobs": w.n_jobs,
        "tasks": w.n_tasks,
        "tasks_infeasible": int((~res.feasible).sum()),
        "infeasible_task_ids": np.flatnonzero(~res.feasible)[:1000].tolist(),
        "tasks_completed": int(np.isfinite(rec.known[res.feasible]).sum()),
        "completed": res.unfinished_reason is None,
        "unfinished_reason": res.unfinished_reason,
        "delay": S.describe(jobs["delay"]),
        "allocation_time": alloc,
        "utilization_mean": utilization["mean"],
        "utilization": utilization,
        "starvation": starvation,
        "processing_model": processing_model(res),
        **({} if res.faults is None else {"faults": S.fault_summary(res.faults, jobs, w, rec, t0, res.stranded)}),
        "makespan": t1 - t0,
        "simulated_seconds": res.end_time,
        "events": res.events,
        "fingerprint": fingerprint(res),
        "wall_seconds": res.wall_seconds,
        "tasks_per_second": (w.n_tasks / res.wall_seconds) if res.wall_seconds > 0 else None,
        "cpu_seconds": res.cpu_seconds,
        "tasks_per_cpu_second": (w.n_tasks / res.cpu_seconds) if res.cpu_seconds > 0 else None,
        "counters": C.group(
            {k: v if isinstance(v, float) else int(v) for k, v in res.counters.items()},
            res.counter_sets or (C.RUN_COUNTERS,),
            res.scheduler,
        ),
        "messages": res.message_counts,
        "deployment": res.describe,
        "config": cfg,
    }
    return _clean(doc), jobs, (times, util)


def processing_model(res: RunResult) -> dict[str, Any]:
    """Which per-message processing-cost model a run used, in words and numbers (``summary.json``, compare)."""
    from megha.metrics.processing import effective_costs

    try:
        base, per, info = effective_costs(res.config, res.datacenter.n_workers)
    except KeyError:  # not measured: the runner refuses such runs, so only a hand-made result gets here
        base, per, info = {}, {}, {"name": "measured", "description": "measured (no table entry)"}
    return {**info, "base": base, "per_item": per}


def _clean(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return _clean(float(x))
    return x


def _write_table(cols: dict[str, np.ndarray], path: Path, csv: bool) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from megha.workload.arrow import arrow_array

    table = pa.table({k: arrow_array(v) for k, v in cols.items()})
    # no dictionary encoding: these columns are mostly distinct numbers, so building dictionaries costs 3-4x the
    # write time and gives a larger file
    pq.write_table(table, str(path.with_suffix(".parquet")), use_dictionary=False)
    if csv:
        import pyarrow.csv as pcsv

        pcsv.write_csv(table, str(path.with_suffix(".csv")))


def write_run(res: RunResult, out: str | Path, csv: bool = False, plots: bool = True) -> dict[str, Any]:
    """Write every output of one run into ``out``; returns the summary."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    doc, jobs, series = _summarize(res)
    (out / "summary.json").write_text(json.dumps(doc, indent=2) + "\n")
    _write_table(jobs, out / "jobs", csv)
    _write_table(S.task_table(res.workload, res.recorder, res.feasible), out / "tasks", csv)
    times, util = S.downsample_step(*series)
    _write_table({"time": times, "utilization": util}, out / "utilization", csv)
    if plots:
        plot_cdfs({res.scheduler: jobs["delay"]}, out / "delay_cdf.png", title=f"{res.workload.name}: job delay")
        plot_utilization({res.scheduler: doc["utilization"]}, out / "utilization.png", title=res.workload.name)
        plot_starvation({res.scheduler: doc["starvation"]}, out / "starvation.png", title=res.workload.name)
    return doc


def plot_utilization(series: dict[str, dict], path: str | Path, title: str = "") -> None:
    """Utilization over time of one or more runs (their ``summary["utilization"]``), arrival window shaded."""
    from megha.metrics import plots

    fig, ax = plots.new_figure(7.0, 4.0, dpi=120)
    first = next(iter(series.values()), None)
    origin = first["window_start"] if first is not None else 0.0
    for label, u in series.items():
        ser = u.get("series") or {}
        if not ser.get("time"):
            continue
        t = np.asarray(ser["time"]) - origin
        pct = [100 * v for v in ser["utilization"]]
        ax.step(t, pct, where="post", lw=1, label=f"{label} ({100 * u['mean']:.2f} %)")
    ax.set_xlabel("time since the first arrival (s)")
    ax.set_ylabel("utilization (%)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    plots.set_title(ax, (title + ": " if title else "") + "utilization over the arrival window (legend: mean)")
    plots.legend(ax, loc="best")
    plots.save(fig, path, margins=plots.RUN_MARGINS)


def plot_starvation(tables: dict[str, dict], path: str | Path, title: str = "") -> None:
    """Delay p50 (circles) and p99 (triangles) per bucket of workers eligible for a job's rarest task."""
    from megha.metrics import plots

    fig, ax = plots.new_figure(7.0, 4.2, dpi=120)
    labels: list[str] = []
    for tab in tables.values():
        for b in tab["buckets"]:
            if b["jobs"] and b["workers"] not in labels:
                labels.append(b["workers"])
    order = {lab: i for i, lab in enumerate(labels)}
    k = max(len(tables), 1)
    for i, (name, tab) in enumerate(tables.items()):
        xs, p50, p99 = [], [], []
        for b in tab["buckets"]:
            if b["workers"] in order and b["p50"] is not None:
                xs.append(order[b["workers"]] + (i - (k - 1) / 2) * 0.6 / k)
                p50.append(max(b["p50"], 1e-4))
                p99.append(max(b["p99"], 1e-4))
        (line,) = ax.plot(xs, p50, "o", label=f"{name} p50")
        ax.plot(xs, p99, "^", color=line.get_color(), label=f"{name} p99")
    ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right")
    plots.log_axis(ax, "y")
    ax.set_xlabel("workers eligible for the job's rarest task")
    ax.set_ylabel("delay in job response time (s)")
    ax.grid(True, which="both", alpha=0.3)
    plots.set_title(ax, (title + ": " if title else "") + "delay by the rarity of a job's constraints")
    plots.legend(ax, loc="best", ncol=2)
    plots.save(fig, path, margins=(0.1, 0.2, 0.97, 0.92))


def plot_cdfs(
    series: dict[str, np.ndarray],
    path: str | Path,
    title: str = "",
    xlabel: str = "delay in job response time (s)",
    log: bool = True,
) -> None:
    """CDF plot of one or more value sets (log x axis by default, like the papers' figures)."""
    from megha.metrics.plots import save_cdfs

    save_cdfs(series, path, title=title, xlabel=xlabel, log=log)


def fmt_seconds(x: float | None) -> str:
    """Human-friendly seconds: 1.5 ms, 12.3 s, 2.5 h (:func:`megha.metrics.format.duration`)."""
    from megha.metrics.format import duration

    return duration(x)


COMPARE_COLUMNS = ("mean", "p50", "p90", "p99", "p999", "max")


def compare_rows(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per run for the side-by-side table (and compare.csv)."""
    rows = []
    for s in summaries:
        row = {"scheduler": s["scheduler"]}
        row.update({f"delay_{k}": s["delay"].get(k) for k in COMPARE_COLUMNS})
        row["utilization_mean"] = s["utilization_mean"]
        row["utilization_mean_whole_run"] = (s.get("utilization") or {}).get("mean_whole_run")
        row["processing_model"] = (s.get("processing_model") or {}).get("name", "none")
        row["inconsistencies"] = C.merged(s["counters"]).get("inconsistencies", 0)
        row["tasks_infeasible"] = s["tasks_infeasible"]
        row["wall_seconds"] = s["wall_seconds"]
        row["completed"] = s["completed"]
        if s.get("faults") is not None:
            row.update(fault_cells(s["faults"]))
        rows.append(row)
    return rows


def fault_cells(f: dict[str, Any]) -> dict[str, Any]:
    """What a run's fault schedule cost, flat (``compare.csv``, the compare table, the faults reproduction):
    faults injected, task runs cut short, work thrown away (task-seconds), tasks stranded, jobs touched, and the
    p99 delay of touched vs untouched jobs."""
    return {
        "faults_injected": f["injected"],
        "task_runs_lost": f["task_runs_lost"],
        "tasks_reexecuted": f["tasks_reexecuted"],
        "work_lost_s": f["work_lost_s"],
        "tasks_stranded": f["tasks_stranded"],
        "jobs_touched": f["jobs_touched"],
        "delay_touched_p99": f["delay_touched"].get("p99"),
        "delay_untouched_p99": f["delay_untouched"].get("p99"),
    }


def render_fault_table(summaries: list[dict[str, Any]], title: str = "") -> Any:
    """A rich Table of what the fault schedule cost each run (None when no run had one)."""
    from rich import box
    from rich.table import Table

    from megha.metrics.format import count

    runs = [s for s in summaries if s.get("faults") is not None]
    if not runs:
        return None
    t = Table(
        title=title or None,
        caption="faults injected; lost: task runs cut short by a dead worker; work: task-hours thrown away; "
        "strand: tasks no live worker fits; hit: jobs a fault touched (p99 delay beside the other jobs')",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    t.add_column("scheduler", style="bold", no_wrap=True)
    for c in ("faults", "lost", "work", "strand", "hit", "p99 hit", "p99 rest"):
        t.add_column(c, justify="right", no_wrap=True)
    for s in runs:
        c = fault_cells(s["faults"])
        t.add_row(
            s["scheduler"],
            count(c["faults_injected"]),
            count(c["task_runs_lost"]),
            f"{c['work_lost_s'] / 3600:,.0f} h",
            count(c["tasks_stranded"]),
            count(c["jobs_touched"]),
            fmt_compact(c["delay_touched_p99"]),
            fmt_compact(c["delay_untouched_p99"]),
        )
    return t


def fmt_compact(x: float | None) -> str:
    """A table cell in seconds (:func:`megha.metrics.format.duration`: unit chosen, never scientific notation)."""
    from megha.metrics.format import duration

    return duration(x)


def compare_caption(summaries: list[dict[str, Any]]) -> str:
    """What the compare table's numbers are: delays in seconds, utilization's window, the processing-cost model."""
    models = sorted({(s.get("processing_model") or {}).get("description", "none") for s in summaries})
    windows = sorted({(s.get("utilization") or {}).get("window", "whole run") for s in summaries})
    win = "the arrival window" if windows == ["arrivals"] else ", ".join(windows)
    return (
        f"delay in job response time; util: mean over {win}; "
        f"processing costs: {'; '.join(models) if models else 'none'}"
    )


def write_compare_figures(summaries: list[dict[str, Any]], out: str | Path, title: str = "") -> list[Path]:
    """Utilization over time and the starvation plot of several runs side by side; returns the files written."""
    out = Path(out)
    util = {s["scheduler"]: s["utilization"] for s in summaries if s.get("utilization")}
    starv = {s["scheduler"]: s["starvation"] for s in summaries if s.get("starvation")}
    paths = []
    if util:
        plot_utilization(util, out / "utilization.png", title=title)
        paths.append(out / "utilization.png")
    if starv:
        plot_starvation(starv, out / "starvation.png", title=title)
        paths.append(out / "starvation.png")
    return paths


def render_compare_table(summaries: list[dict[str, Any]], title: str = "") -> Any:
    """A rich Table of delay percentiles (seconds), utilization and wall time, one row per scheduler."""
    from rich import box
    from rich.table import Table

    from megha.metrics.format import percent

    t = Table(
        title=title or None,
        caption=compare_caption(summaries),
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    t.add_column("scheduler", style="bold", no_wrap=True)
    for k in COMPARE_COLUMNS:
        t.add_column("p99.9" if k == "p999" else k, justify="right", overflow="fold")
    t.add_column("util", justify="right", overflow="fold")
    for s in summaries:
        d = s["delay"]
        flag = "" if s["completed"] else " (unfinished)"
        t.add_row(
            s["scheduler"] + flag,
            *(fmt_compact(d.get(k)) for k in COMPARE_COLUMNS),
            percent(s["utilization_mean"], digits=2),
        )
    return t
