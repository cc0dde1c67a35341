"""Run a sweep: expand it, skip finished runs on resume, execute the rest, aggregate, write the report.

Output directory::

    sweep.json          the sweep as given and its expanded runs (id, parameters, full configuration)
    runs/<id>/          one run: summary.json, jobs/tasks/utilization.parquet (megha.metrics.report.write_run)
    runs/<id>/error.json  a failed run (error and traceback; no summary.json, so --resume runs it again)
    results.parquet/.csv  one row per run, keyed by its parameters (deterministic: no wall times)
    timing.csv          wall time of each run executed by the last invocation, and where it ran
    report.html         static report (tables, delay CDFs, percentile-vs-parameter lines, utilization)
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megha.errors import InputError
from megha.sweep import worker
from megha.sweep.spec import PLAN_FILE, RunPlan, SweepSpec, hash_of, load, parse

if TYPE_CHECKING:
    from megha.sweep import engines

RUNS = "runs"


@dataclass
class SweepResult:
    """What a sweep invocation did."""

    out: Path
    plans: list[RunPlan]
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unfinished: list[str] = field(default_factory=list)
    interrupted: bool = False
    engine: str = "local"
    capacity: int = 1
    wall_seconds: float = 0.0
    run_seconds: float = 0.0
    table_path: Path | None = None
    report_path: Path | None = None


class _Display:
    """Progress: runs done, running, failed, and an ETA (rich); plain lines when not on a terminal."""

    def __init__(self, total: int, label: str, enabled: bool | None, log: Callable[[str], None]) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        if enabled is None:
            import os

            enabled = self.console.is_terminal or os.environ.get("MEGHA_PROGRESS") == "1"
        self.enabled = enabled
        self.log = log
        self.total = total
        self.done = self.failed = 0
        self.bar = None
        if enabled and total:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total} runs"),
                TextColumn("[cyan]{task.fields[running]} running"),
                TextColumn("[red]{task.fields[failed]} failed"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
                transient=False,
            )
            self.task = self.bar.add_task(label, total=total, running=0, failed=0)
            self.bar.start()

    def update(self, running: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, running=running, failed=self.failed)

    def finished(self, plan: RunPlan, outcome: dict[str, Any], running: int) -> None:
        self.done += 1
        status = outcome["status"]
        if status == "failed":
            self.failed += 1
        params = " ".join(f"{k}={v}" for k, v in plan.params.items() if not isinstance(v, dict | list)) or plan.id
        msg = f"[{self.done}/{self.total}] {params}: {status} in {outcome.get('seconds', 0.0):.1f} s"
        if status == "failed":
            msg += f" — {outcome.get('error')}"
        if self.bar is not None:
            if status != "ok":
                self.bar.console.print(msg, highlight=False, markup=False)
            self.update(running)
        else:
            self.log(msg)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _spec_of(source: str | Path | dict | SweepSpec) -> SweepSpec:
    if isinstance(source, SweepSpec):
        return source
    if isinstance(source, dict):
        return parse(source)
    return load(source)


def _write_plan(out: Path, spec: SweepSpec, plans: list[RunPlan]) -> None:
    doc = {
        "name": spec.name,
        "source": spec.source,
        "spec": spec.raw,
        "plots": spec.plots,
        "csv": spec.csv,
        "runs": [p.to_json() for p in plans],
    }
    (out / PLAN_FILE).write_text(json.dumps(doc, indent=1, default=str) + "\n")
    src = Path(spec.source)
    if spec.source != "<dict>" and src.is_file() and src.resolve() != (out / src.name).resolve():
        shutil.copyfile(src, out / ("sweep" + src.suffix))


def _clean_stale(runs_dir: Path) -> None:
    """Remove half-written run directories left by an interrupted sweep."""
    if runs_dir.is_dir():
        for d in runs_dir.iterdir():
            if ".tmp-" in d.name and d.is_dir():
                shutil.rmtree(d, ignore_errors=True)


def _adopt_renamed(runs_dir: Path, plans: list[RunPlan]) -> None:
    """A finished run whose id changed (other varying parameters) but whose configuration did not keeps its result."""
    by_hash: dict[str, Path] = {}
    for d in runs_dir.iterdir():
        if d.is_dir() and "__" in d.name and worker.is_complete(d):
            by_hash[hash_of(d.name)] = d
    for p in plans:
        target = runs_dir / p.id
        src = by_hash.get(hash_of(p.id))
        if src is not None and src != target and not target.exists():
            src.rename(target)


def run_sweep(
    source: str | Path | dict | SweepSpec,
    out: str | Path | None = None,
    workers: int | None = None,
    address: str | None = None,
    resume: bool = False,
    force: bool = False,
    progress: bool | None = None,
    log: Callable[[str], None] = print,
    report: bool = True,
    on_result: Callable[[RunPlan, dict[str, Any]], None] | None = None,
) -> SweepResult:
    """Run every run of a sweep that is not finished yet, then aggregate and report.

    ``address``: None = local process pool of ``workers`` processes (default: the cores); ``"auto"`` or
    ``"ray://host:port"`` = an existing Ray cluster; ``"local"`` = a new local Ray instance; ``"ray"`` = the Ray
    session this process already started. ``on_result(plan, outcome)`` is called after each run (tests use
    it to interrupt a sweep). KeyboardInterrupt stops the sweep cleanly: finished runs stay finished.
    """
    t_start = time.perf_counter()
    spec = _spec_of(source)
    plans = spec.expand()
    out = Path(out) if out is not None else Path("megha-sweep") / spec.name
    out.mkdir(parents=True, exist_ok=True)
    runs_dir = out / RUNS
    runs_dir.mkdir(exist_ok=True)
    _clean_stale(runs_dir)
    _adopt_renamed(runs_dir, plans)
    finished = [p for p in plans if worker.is_complete(runs_dir / p.id)]
    if finished and not (resume or force):
        raise InputError(
            f"{out}: {len(finished)} of the {len(plans)} runs are already finished; use --resume to "
            f"run only the missing ones, or --force to run everything again"
        )
    if force:
        for p in plans:
            if (runs_dir / p.id).exists():
                shutil.rmtree(runs_dir / p.id)
        finished = []
    _write_plan(out, spec, plans)
    done_ids = {p.id for p in finished}
    todo = [p for p in plans if p.id not in done_ids]
    result = SweepResult(out=out, plans=plans, skipped=[p.id for p in finished])
    if finished:
        log(f"resume: {len(finished)} finished run(s) kept, {len(todo)} to run")
    timings: list[dict[str, Any]] = []
    if todo:
        _execute(todo, spec, runs_dir, workers, address, progress, log, on_result, result, timings)
    _write_timings(out, timings, result)
    from megha.sweep.aggregate import write_results

    result.table_path = write_results(out, plans)
    if report:
        from megha.sweep.report import build_report

        result.report_path = build_report(out)
    result.wall_seconds = time.perf_counter() - t_start
    return result


def _make_engine(
    address: str | None, workers: int | None, runs_dir: Path, spec: SweepSpec, todo: list[RunPlan]
) -> engines.LocalPool | engines.RayPool:
    from megha.sweep import engines

    if address is None:
        schedulers = {p.config["scheduler"] for p in todo}
        return engines.LocalPool(workers, str(runs_dir), spec.plots, spec.csv, schedulers)
    addr = None if address == "ray" else address
    return engines.RayPool(addr, workers, str(runs_dir), spec.plots, spec.csv)


def _execute(
    todo: list[RunPlan],
    spec: SweepSpec,
    runs_dir: Path,
    workers: int | None,
    address: str | None,
    progress: bool | None,
    log: Callable[[str], None],
    on_result: Callable[[RunPlan, dict[str, Any]], None] | None,
    result: SweepResult,
    timings: list[dict[str, Any]],
) -> None:
    engine = _make_engine(address, workers, runs_dir, spec, todo)
    result.engine = engine.name
    result.capacity = engine.capacity
    where = "local processes" if engine.name == "local" else "Ray workers"
    log(f"{spec.name}: {len(todo)} run(s) on {engine.capacity} {where}")
    display = _Display(len(todo), spec.name, progress, log)
    queue = list(todo)
    queue.reverse()
    inflight: dict[Any, RunPlan] = {}
    t0 = time.perf_counter()
    cancel = False
    try:
        while queue or inflight:
            while queue and len(inflight) < engine.capacity:
                plan = queue.pop()
                inflight[engine.submit(plan.to_json())] = plan
            display.update(len(inflight))
            for handle, outcome in engine.wait(list(inflight), timeout=0.5):
                plan = inflight.pop(handle)
                if outcome["status"] == "retry":  # run it again (next)
                    queue.append(plan)
                    continue
                _record(plan, outcome, result, timings, engine.name, time.perf_counter() - t0)
                display.finished(plan, outcome, len(inflight))
                if on_result is not None:
                    on_result(plan, outcome)
    except KeyboardInterrupt:
        cancel = True
        result.interrupted = True
        raise
    finally:
        display.close()
        engine.close(cancel=cancel)
        if cancel:
            _clean_stale(runs_dir)
            _write_timings(runs_dir.parent, timings, result)
            log(f"interrupted: {len(result.ran)} run(s) finished in this invocation; continue with --resume")


def _record(
    plan: RunPlan, outcome: dict[str, Any], result: SweepResult, timings: list[dict[str, Any]], engine: str, at: float
) -> None:
    status = outcome["status"]
    result.ran.append(plan.id)
    if status == "failed":
        result.failed[plan.id] = str(outcome.get("error"))
    elif status == "unfinished":
        result.unfinished.append(plan.id)
    result.run_seconds += float(outcome.get("run_seconds") or 0.0)
    timings.append(
        {
            "index": plan.index,
            "id": plan.id,
            "status": status,
            "engine": engine,
            "host": outcome.get("host"),
            "seconds": round(float(outcome.get("seconds") or 0.0), 4),
            "simulate_seconds": outcome.get("run_seconds"),
            "simulate_cpu_seconds": outcome.get("run_cpu_seconds"),
            "finished_at": round(at, 3),
        }
    )


def _write_timings(out: Path, timings: list[dict[str, Any]], result: SweepResult) -> None:
    from megha.metrics.tables import write_csv

    cols = ["index", "id", "status", "engine", "host", "seconds", "simulate_seconds", "finished_at"]
    write_csv(sorted(timings, key=lambda r: r["index"]), out / "timing.csv", columns=cols)
