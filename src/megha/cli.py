"""The ``megha`` command.

megha compare                      # the bundled sample through every scheduler: table + CDF plot
megha simulate -s megha -t TRACE --cluster FILE | --workers N [--gms G --lms L]
megha trace info TRACE             # jobs, tasks, span, offered load
megha trace convert IN OUT         # .tr <-> .parquet
megha schedulers                   # what can be simulated, and each one's options
megha reproduce --list             # the papers' experiments by name
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from megha.cli_common import console, out_console, parse_opts, parse_pairs
from megha.cli_common import fail as _fail
from megha.config import RunConfig
from megha.errors import MeghaError

app = typer.Typer(
    name="megha",
    help="Federated datacenter task scheduling: Megha and its peers on one deterministic simulator.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
trace_app = typer.Typer(help="Inspect and convert workload traces.", no_args_is_help=True)
app.add_typer(trace_app, name="trace")


class _Progress:
    """A progress bar that appears only when a run lasts longer than a second."""

    def __init__(self, label: str, quiet: bool) -> None:
        self.label = label
        self.quiet = quiet
        self.t0 = time.perf_counter()
        self.bar = None
        self.task = None

    def __call__(self, now: float, done: int, total: int) -> None:
        if self.quiet or (not console.is_terminal and not _force_progress()):
            return
        if self.bar is None:
            if time.perf_counter() - self.t0 < 1.0:
                return
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.completed:,}/{task.total:,} tasks"),
                TextColumn("sim t={task.fields[simt]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=console,
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=total, simt="0")
        self.bar.update(self.task, completed=done, simt=f"{now:,.0f}s")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _force_progress() -> bool:
    import os

    return os.environ.get("MEGHA_PROGRESS") == "1"


def run_and_write(cfg: RunConfig, out: Path | None, csv: bool, quiet: bool, plots: bool = True) -> dict:
    """Simulate one configuration, write its outputs, return its summary."""
    from megha.metrics.report import summarize, write_run
    from megha.runner import simulate

    prog = _Progress(cfg.scheduler, quiet)
    try:
        res = simulate(cfg, progress=prog)
    finally:
        prog.close()
    doc = write_run(res, out, csv=csv, plots=plots) if out is not None else summarize(res)
    return doc


Scheduler = Annotated[str, typer.Option("--scheduler", "-s", help="scheduler name (see `megha schedulers`)")]
TraceOpt = Annotated[str, typer.Option("--trace", "-t", help="trace file (.tr, .tr.gz, .parquet) or sample:NAME")]
ClusterOpt = Annotated[
    str | None, typer.Option("--cluster", "-c", help="cluster file (Megha/PigeonC JSON) or sample:NAME")
]
WorkersOpt = Annotated[int | None, typer.Option("--workers", "-w", help="generate a datacenter of N workers")]
GmsOpt = Annotated[
    int | None,
    typer.Option("--gms", help="Global Masters (Megha; default: the cluster file's, else 5) / distributed schedulers"),
]
LmsOpt = Annotated[
    int | None,
    typer.Option(
        "--lms", help="Local Masters (Megha; default: the cluster file's, else one per 2,000 workers) / masters"
    ),
]
SeedOpt = Annotated[int, typer.Option("--seed", help="seed of every random choice")]
OptOpt = Annotated[list[str] | None, typer.Option("--opt", "-o", help="scheduler option key=value (repeatable)")]
ResourcesOpt = Annotated[bool, typer.Option("--resources", help="resource mode (CPU/memory per worker and task)")]
CapacityOpt = Annotated[str | None, typer.Option("--capacity", help="worker capacity, e.g. cpu=64,mem=16")]
DemandOpt = Annotated[str | None, typer.Option("--demand", help="task request when the trace has none")]
ConstraintsOpt = Annotated[
    bool, typer.Option("--constraints/--no-constraints", help="synthesize placement constraints")
]
TruncOpt = Annotated[bool, typer.Option("--truncate", help="truncate durations to whole seconds (reference quirk)")]
DephaseOpt = Annotated[bool, typer.Option("--dephase/--no-dephase", help="+0.01 s per job sharing an arrival")]
DelayOpt = Annotated[float, typer.Option("--network-delay", help="one-way network delay (s)")]
MaxJobsOpt = Annotated[int | None, typer.Option("--max-jobs", help="use only the first N jobs")]
LoadOpt = Annotated[float, typer.Option("--load-scale", help="compress inter-arrival times by this factor")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="output directory")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="also write CSV tables")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the summary as JSON on stdout")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar or table")]
ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="JSON/TOML run configuration; command-line options override it")
]


def _load_config_file(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        text = path.read_text()
    except OSError as e:
        _fail(f"{path}: {e.strerror}")
    if path.suffix == ".toml":
        import tomllib

        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            _fail(f"{path}: {e}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        _fail(f"{path}:{e.lineno}: {e.msg}")
    return {}


def _build_config(base: dict[str, Any], **kw: Any) -> RunConfig:
    from pydantic import ValidationError

    data = dict(base)
    for k, v in kw.items():
        if v is not None:
            data[k] = v
    try:
        return RunConfig(**data)
    except ValidationError as e:
        msgs = "; ".join(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors())
        _fail(f"invalid configuration: {msgs}")
        raise


@app.command()
def simulate(
    scheduler: Scheduler = "megha",
    trace: TraceOpt = "sample:GOOG_subtrace",
    cluster: ClusterOpt = None,
    workers: WorkersOpt = None,
    gms: GmsOpt = None,
    lms: LmsOpt = None,
    seed: SeedOpt = 0,
    opt: OptOpt = None,
    resources: ResourcesOpt = False,
    capacity: CapacityOpt = None,
    demand: DemandOpt = None,
    constraints: ConstraintsOpt = True,
    truncate: TruncOpt = False,
    dephase: DephaseOpt = True,
    network_delay: DelayOpt = 0.0005,
    max_jobs: MaxJobsOpt = None,
    load_scale: LoadOpt = 1.0,
    out: OutOpt = None,
    csv: CsvOpt = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Simulate one scheduler on one trace and datacenter; write summary.json, tables and a CDF plot.

    Without --cluster or --workers the bundled 10,000-worker datacenter of the papers is used.
    """
    base = _load_config_file(config)
    if cluster is None and workers is None and "cluster" not in base and "workers" not in base:
        from megha.samples import DEFAULT_CLUSTER

        cluster = DEFAULT_CLUSTER
    cfg = _build_config(
        base,
        scheduler=scheduler,
        trace=trace,
        cluster=cluster,
        workers=workers,
        gms=gms,
        lms=lms,
        seed=seed,
        options={**base.get("options", {}), **parse_opts(opt)},
        resources=resources or base.get("resources", False),
        capacity=parse_pairs(capacity, "--capacity"),
        demand=parse_pairs(demand, "--demand"),
        constraints=constraints,
        truncate_durations=truncate or base.get("truncate_durations", False),
        dephase=dephase,
        network_delay=network_delay,
        max_jobs=max_jobs,
        load_scale=load_scale,
    )
    if out is None:
        out = Path("megha-out") / cfg.scheduler
    doc = run_and_write(cfg, out, csv, quiet or json_out)
    if json_out:
        out_console.print_json(json.dumps(doc))
    elif not quiet:
        from megha.metrics.report import render_compare_table

        console.print(render_compare_table([doc], title=f"{doc['trace']} on {doc['workers']:,} workers"))
        console.print(
            f"{doc['tasks']:,} tasks ({doc['tasks_infeasible']:,} infeasible) in {doc['wall_seconds']:.2f} s "
            f"({doc['tasks_per_second'] or 0:,.0f} tasks/s); outputs in {out}/"
        )
    if not doc["completed"]:
        console.print(f"[bold red]run did not finish:[/] {doc['unfinished_reason']}")
        raise typer.Exit(3)


@app.command()
def compare(
    schedulers: Annotated[
        str | None, typer.Option("--schedulers", help="comma-separated names (default: every scheduler)")
    ] = None,
    trace: TraceOpt = "sample:GOOG_subtrace",
    cluster: ClusterOpt = None,
    workers: WorkersOpt = None,
    gms: GmsOpt = None,
    lms: LmsOpt = None,
    seed: SeedOpt = 0,
    opt: OptOpt = None,
    resources: ResourcesOpt = False,
    constraints: ConstraintsOpt = True,
    max_jobs: Annotated[int | None, typer.Option("--max-jobs", help="use only the first N jobs")] = 1000,
    load_scale: LoadOpt = 1.0,
    out: Annotated[Path, typer.Option("--out", help="output directory")] = Path("megha-compare"),
    csv: CsvOpt = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Run several schedulers on the same workload and datacenter; print a table and overlay their CDFs.

    With no arguments: the first 1,000 jobs of the bundled Google sub-trace, with synthesized placement
    constraints, on 20,000 constrained workers (the IoT 2023 paper's setting for this trace), through every
    scheduler of the default comparison. Other bundled traces default to the papers' 10,000-worker datacenter.
    """
    from megha.metrics.report import compare_rows, plot_cdfs, render_compare_table, write_compare_figures
    from megha.schedulers import registry

    names = (
        [s.strip() for s in schedulers.split(",")]
        if schedulers
        else [n for n in registry.names() if registry.get(n).in_compare]
    )
    mode = "resource" if resources else "slot"
    if cluster is None and workers is None:
        from megha.samples import DEFAULT_CLUSTER, PAPER_WORKERS

        workers = PAPER_WORKERS.get(trace)
        if workers is None:
            cluster = DEFAULT_CLUSTER
    summaries, delays = [], {}
    out.mkdir(parents=True, exist_ok=True)
    import pyarrow.parquet as pq

    for name in names:
        spec = registry.get(name)
        if mode not in spec.modes:
            if schedulers:
                _fail(f"scheduler {name!r} does not support {mode} mode")
            continue
        cfg = _build_config(
            {},
            scheduler=name,
            trace=trace,
            cluster=cluster,
            workers=workers,
            gms=gms,
            lms=lms,
            seed=seed,
            options=parse_opts(opt) if schedulers and len(names) == 1 else {},
            resources=resources,
            constraints=constraints,
            max_jobs=max_jobs,
            load_scale=load_scale,
        )
        if not quiet and not json_out:
            console.print(f"[dim]running {name} …[/]")
        doc = run_and_write(cfg, out / name, csv, quiet or json_out, plots=False)
        summaries.append(doc)
        delays[name] = pq.read_table(str(out / name / "jobs.parquet"), columns=["delay"]).column(0).to_numpy()
    if not summaries:
        _fail("no scheduler to run")
    title = f"{summaries[0]['trace']} on {summaries[0]['workers']:,} workers"
    plot_cdfs(delays, out / "delay_cdf.png", title=f"{title}: delay in job response time")
    write_compare_figures(summaries, out, title)
    rows = compare_rows(summaries)
    (out / "compare.json").write_text(json.dumps({"runs": rows}, indent=2) + "\n")
    import pyarrow as pa
    import pyarrow.csv as pcsv

    pcsv.write_csv(pa.Table.from_pylist(rows), str(out / "compare.csv"))
    if json_out:
        out_console.print_json(json.dumps({"runs": rows}))
    else:
        out_console.print(render_compare_table(summaries, title=title))
        if not quiet:
            walls = ", ".join(f"{s['scheduler']} {s['wall_seconds']:.1f}s" for s in summaries)
            console.print(f"wall time: {walls}", highlight=False)
            console.print(f"plot: {out / 'delay_cdf.png'}   table: {out / 'compare.csv'}   runs: {out}/<scheduler>/")
    if not all(s["completed"] for s in summaries):
        raise typer.Exit(3)


@app.command("schedulers")
def list_schedulers() -> None:
    """List the registered schedulers with their options and defaults."""
    from rich.table import Table

    from megha.schedulers import registry

    t = Table()
    t.add_column("name", style="bold")
    t.add_column("modes")
    t.add_column("description")
    t.add_column("options (default)")
    for n in registry.names():
        spec = registry.get(n)
        opts = registry.parse_options(spec, {}).model_dump()
        t.add_row(n, ",".join(spec.modes), spec.help, ", ".join(f"{k}={v}" for k, v in opts.items()))
    out_console.print(t)


@trace_app.command("info")
def trace_info(
    path: Annotated[str, typer.Argument(help="trace file or sample:NAME")],
    workers: Annotated[int, typer.Option("--workers", "-w", help="datacenter size for the offered load")] = 10000,
    json_out: JsonOpt = False,
) -> None:
    """Jobs, tasks, arrival span, durations and offered load on a datacenter of --workers slots."""
    import numpy as np

    from megha.samples import resolve
    from megha.workload.tracefile import load_workload

    w = load_workload(resolve(path, "trace"))
    span = float(w.job_arrival.max() - w.job_arrival.min())
    info = {
        "trace": w.name,
        "jobs": w.n_jobs,
        "tasks": w.n_tasks,
        "span_seconds": span,
        "first_arrival": float(w.job_arrival.min()),
        "last_arrival": float(w.job_arrival.max()),
        "tasks_per_job_mean": float(w.job_num_tasks.mean()),
        "tasks_per_job_max": int(w.job_num_tasks.max()),
        "duration_mean": float(w.task_duration.mean()),
        "duration_p50": float(np.median(w.task_duration)),
        "duration_max": float(w.task_duration.max()),
        "task_seconds": float(w.task_duration.sum()),
        "workers": workers,
        "offered_load": w.offered_load(workers),
    }
    if json_out:
        out_console.print_json(json.dumps(info))
        return
    from rich.table import Table

    t = Table(title=f"trace {w.name}", show_header=False)
    for k, v in info.items():
        t.add_row(k, f"{v:,.4g}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else str(v))
    out_console.print(t)


@trace_app.command("convert")
def trace_convert(
    src: Annotated[str, typer.Argument(help="input trace (.tr, .tr.gz, .parquet or sample:NAME)")],
    dst: Annotated[Path, typer.Argument(help="output file: .parquet (columnar) or .tr / .tr.gz")],
    constraints_seed: Annotated[
        int | None, typer.Option("--constraints-seed", help="store synthesized placement constraints")
    ] = None,
) -> None:
    """Convert between the .tr text format and Megha's columnar Parquet format."""
    import numpy as np

    from megha.samples import resolve
    from megha.workload.tracefile import COLUMNAR_SUFFIXES, load_workload, write_columnar, write_tr

    w = load_workload(resolve(src, "trace"), dephase=False)
    if constraints_seed is not None:
        w = w.with_constraints(np.random.default_rng(constraints_seed))
    if dst.name.endswith(COLUMNAR_SUFFIXES):
        write_columnar(w, dst)
    elif dst.name.endswith((".tr", ".tr.gz", ".txt")):
        write_tr(w, dst)
    else:
        _fail(f"{dst}: unknown output format (use .parquet, .tr or .tr.gz)")
    console.print(f"wrote {w.n_jobs:,} jobs / {w.n_tasks:,} tasks to {dst}")


def _register_optional_commands() -> None:
    """Commands that live with their feature (reproduce, sweep, live) attach themselves here."""
    import importlib

    for mod in ("megha.experiments.cli", "megha.sweep.cli", "megha.live.cli"):
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name and e.name.startswith(mod.rsplit(".", 1)[0]):
                continue
            raise
        m.attach(app)


_register_optional_commands()


def main() -> None:
    """Entry point of the ``megha`` console script."""
    try:
        app()
    except MeghaError as e:
        console.print(f"[bold red]error:[/] {e}", highlight=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
