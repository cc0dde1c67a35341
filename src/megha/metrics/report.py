"""Turn run results into files: ``summary.json``, Parquet/CSV tables, CDF plots and comparison tables.

Output directory of one run::

    summary.json        scheduler, trace, workers, seed, jobs, tasks, delay summary, counters, config …
    jobs.parquet        one row per job (arrival, ideal, completion, delay …)
    tasks.parquet       one row per task (times, worker, allocation-time components …)
    utilization.parquet utilization over time (downsampled step function)
    delay_cdf.png       CDF of job delays, log-scaled like the papers' figures
    (*.csv with --csv)
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from megha import __version__
from megha.metrics import summary as S
from megha.metrics.result import RunResult


def _total_resources(res: RunResult) -> tuple[float, np.ndarray | None]:
    dc = res.datacenter
    if dc.capacity is not None and res.workload.task_demand is not None:
        # utilization of the first resource (CPU by default), as the papers plot
        return float(dc.capacity[:, 0].sum()), res.workload.task_demand[:, 0]
    return float(dc.n_workers), None


def summarize(res: RunResult) -> dict[str, Any]:
    """The ``summary.json`` document of a run."""
    w = res.workload
    rec = res.recorder
    jobs = S.job_table(w, rec, res.feasible)
    tasks = S.task_table(w, rec, res.feasible)
    total, weights = _total_resources(res)
    times, util = S.utilization_series(rec, total, weights)
    t0 = float(w.job_arrival.min()) if w.n_jobs else 0.0
    t1 = float(np.nanmax(rec.end)) if np.isfinite(rec.end).any() else t0
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
        "utilization_mean": S.time_weighted_mean(times, util, t0, t1) if t1 > t0 else 0.0,
        "makespan": t1 - t0,
        "simulated_seconds": res.end_time,
        "events": res.events,
        "wall_seconds": res.wall_seconds,
        "tasks_per_second": (w.n_tasks / res.wall_seconds) if res.wall_seconds > 0 else None,
        "counters": {k: int(v) for k, v in sorted(res.counters.items())},
        "messages": res.message_counts,
        "deployment": res.describe,
        "config": cfg,
    }
    return _clean(doc)


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

    table = pa.table({k: pa.array(np.asarray(v)) for k, v in cols.items()})
    pq.write_table(table, str(path.with_suffix(".parquet")))
    if csv:
        import pyarrow.csv as pcsv

        pcsv.write_csv(table, str(path.with_suffix(".csv")))


def write_run(res: RunResult, out: str | Path, csv: bool = False, plots: bool = True) -> dict[str, Any]:
    """Write every output of one run into ``out``; returns the summary."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    doc = summarize(res)
    (out / "summary.json").write_text(json.dumps(doc, indent=2) + "\n")
    jobs = S.job_table(res.workload, res.recorder, res.feasible)
    _write_table(jobs, out / "jobs", csv)
    _write_table(S.task_table(res.workload, res.recorder, res.feasible), out / "tasks", csv)
    total, weights = _total_resources(res)
    times, util = S.downsample_step(*S.utilization_series(res.recorder, total, weights))
    _write_table({"time": times, "utilization": util}, out / "utilization", csv)
    if plots:
        plot_cdfs({res.scheduler: jobs["delay"]}, out / "delay_cdf.png", title=f"{res.workload.name}: job delay")
    return doc


def _ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = np.sort(np.asarray(values, dtype=np.float64)[np.isfinite(values)])
    return v, np.arange(1, v.size + 1) / max(v.size, 1)


def plot_cdfs(
    series: dict[str, np.ndarray],
    path: str | Path,
    title: str = "",
    xlabel: str = "delay in job response time (s)",
    log: bool = True,
) -> None:
    """CDF plot of one or more value sets (log x axis by default, like the papers' figures)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    for label, vals in series.items():
        x, y = _ecdf(vals)
        if x.size == 0:
            continue
        if log:
            x = np.maximum(x, 1e-6)
        ax.step(x, y, where="post", label=label)
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("CDF")
    ax.set_ylim(0, 1.01)
    ax.grid(True, which="both", alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(str(path))
    plt.close(fig)


def fmt_seconds(x: float | None) -> str:
    """Human-friendly seconds: 1.5 ms, 12.3 s, 4.1e+04 s."""
    if x is None:
        return "-"
    if x == 0:
        return "0"
    a = abs(x)
    if a < 1e-3:
        return f"{x * 1e6:.0f} µs"
    if a < 1:
        return f"{x * 1e3:.3g} ms"
    if a < 1e4:
        return f"{x:.4g} s"
    return f"{x:.3g} s"


COMPARE_COLUMNS = ("mean", "p50", "p90", "p99", "p999", "max")


def compare_rows(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per run for the side-by-side table (and compare.csv)."""
    rows = []
    for s in summaries:
        row = {"scheduler": s["scheduler"]}
        row.update({f"delay_{k}": s["delay"].get(k) for k in COMPARE_COLUMNS})
        row["utilization_mean"] = s["utilization_mean"]
        row["inconsistencies"] = s["counters"].get("inconsistencies", 0)
        row["tasks_infeasible"] = s["tasks_infeasible"]
        row["wall_seconds"] = s["wall_seconds"]
        row["completed"] = s["completed"]
        rows.append(row)
    return rows


def fmt_compact(x: float | None) -> str:
    """Three significant digits, compact (table cells)."""
    if x is None:
        return "-"
    return f"{x:.3g}".replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")


def render_compare_table(summaries: list[dict[str, Any]], title: str = "") -> Any:
    """A rich Table of delay percentiles (seconds), utilization and wall time, one row per scheduler."""
    from rich import box
    from rich.table import Table

    t = Table(
        title=title or None, caption="delay in job response time, seconds", caption_justify="left", box=box.SIMPLE_HEAD
    )
    t.add_column("scheduler", style="bold", no_wrap=True)
    for k in COMPARE_COLUMNS:
        t.add_column("p99.9" if k == "p999" else k, justify="right", no_wrap=True)
    t.add_column("util", justify="right", no_wrap=True)
    for s in summaries:
        d = s["delay"]
        flag = "" if s["completed"] else " (unfinished)"
        t.add_row(
            s["scheduler"] + flag,
            *(fmt_compact(d.get(k)) for k in COMPARE_COLUMNS),
            f"{100 * s['utilization_mean']:.1f}%",
        )
    return t
