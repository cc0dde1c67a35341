"""The ``megha`` command.

megha compare                      # the bundled sample through the default comparison: table + CDF plot
megha simulate -s megha -t TRACE --cluster FILE | --workers N [--gms G --lms L] [--config run.toml]
megha trace info TRACE             # jobs, tasks, span, offered load
megha trace convert IN OUT         # .tr <-> .parquet
megha schedulers [NAME]            # what can be simulated: options with descriptions, fidelity profiles
megha reproduce --list             # the papers' experiments by name
megha --version
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import click
import typer

from megha.cli_common import console, out_console, parse_opts, parse_pairs
from megha.cli_common import fail as _fail
from megha.errors import MeghaError

if TYPE_CHECKING:  # pydantic is loaded by the commands that build a run, not by `megha --help`
    from megha.config import RunConfig

_app = typer.Typer(
    name="megha",
    help="Federated datacenter task scheduling: Megha and its peers on one deterministic simulator.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
trace_app = typer.Typer(help="Inspect and convert workload traces.", no_args_is_help=True)
_app.add_typer(trace_app, name="trace")


def _version(value: bool) -> None:
    if value:
        from megha import __version__

        out_console.print(f"megha {__version__}", highlight=False)
        raise typer.Exit()


@_app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Federated datacenter task scheduling: Megha and its peers on one deterministic simulator."""


class _DefaultsHelp(typer.core.TyperCommand):
    """A command whose help is reflowed to the terminal and may name the schedulers of the default comparison
    (``{DEFAULTS}``: registered ones, plug-ins included), computed when the help is shown so that other commands do
    not pay for loading every scheduler."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        wanted = "{DEFAULTS}" in (self.help or "") or any(
            "{DEFAULTS}" in (getattr(p, "help", "") or "") for p in self.params
        )
        names = ", ".join(_default_compare()) if wanted else ""
        # paragraphs reflowed: the docstring's line breaks are only there to keep source lines short
        paragraphs = (self.help or "").replace("{DEFAULTS}", names).split("\n\n")
        self.help = "\n\n".join(" ".join(p.split()) for p in paragraphs)
        for p in self.params:
            if getattr(p, "help", None):
                p.help = p.help.replace("{DEFAULTS}", names)
        return super().format_help(ctx, formatter)


def _default_compare() -> list[str]:
    from megha.schedulers import registry

    return [n for n in registry.names() if registry.get(n).in_compare]


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


def run_and_write(
    cfg: RunConfig, out: Path | None, csv: bool, quiet: bool, plots: bool = True, keep: list | None = None
) -> dict:
    """Simulate one configuration, write its outputs (into ``out``, emptied first), return its summary.
    ``keep`` receives the RunResult."""
    from megha.cli_common import clear_out_dir
    from megha.metrics.report import summarize, write_run
    from megha.runner import simulate

    prog = _Progress(cfg.scheduler, quiet)
    try:
        res = simulate(cfg, progress=prog)
    finally:
        prog.close()
    if keep is not None:
        keep.append(res)
    if out is None:
        return summarize(res)
    clear_out_dir(out)
    return write_run(res, out, csv=csv, plots=plots)


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
ProcessingOpt = Annotated[
    str | None,
    typer.Option(
        "--processing", help="processing costs: none (default) or measured (the real components' CPU cost per message)"
    ),
]
OutOpt = Annotated[
    Path | None, typer.Option("--out", help="output directory (default megha-out/SCHEDULER); must be empty or new")
]
ForceOpt = Annotated[bool, typer.Option("--force", help="replace the contents of a non-empty --out directory")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="also write CSV tables")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the summary as JSON on stdout")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar or table")]
PlotsOpt = Annotated[
    bool,
    typer.Option(
        "--plots/--no-plots", help="write the PNG figures (--no-plots: tables and summary only, ~0.5 CPU-s less)"
    ),
]
FaultsOpt = Annotated[
    Path | None,
    typer.Option(
        "--faults",
        help="fault schedule (TOML with fault entries: at, kind, target, down_for; random entries: kind, mtbf): "
        "crash the scheduler's components (gm, lm, master, scheduler, rm, ...) or fail workers; summary.json "
        "reports the cost under 'faults'",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="TOML or JSON run configuration: any field of megha.config.RunConfig (scheduler, trace, workers, "
        "gms, max_jobs, ...; scheduler options in an \\[options] table); options given on the command line win",
    ),
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
    """A validated RunConfig (settings from a --config file, then the command line); bad input exits 2 before any
    run starts or any file is written."""
    from megha.api import build_config, validate_config

    data = dict(base)
    for k, v in kw.items():
        if v is not None:
            data[k] = v
    try:
        cfg = build_config(data, "invalid configuration: ", style="cli")
        validate_config(cfg, style="cli")
    except MeghaError as e:
        _fail(str(e))
        raise
    return cfg


def _check_out(out: Path, force: bool) -> None:
    from megha.cli_common import check_out_dir

    try:
        check_out_dir(out, force)
    except MeghaError as e:
        _fail(str(e))


def _on_command_line(ctx: typer.Context, param: str) -> bool:
    source = ctx.get_parameter_source(param)  # an enum of the click that typer uses (compared by name)
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")


@_app.command(cls=_DefaultsHelp)
def simulate(
    ctx: typer.Context,
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
    processing: ProcessingOpt = None,
    faults: FaultsOpt = None,
    out: OutOpt = None,
    force: ForceOpt = False,
    csv: CsvOpt = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    plots: PlotsOpt = True,
    config: ConfigOpt = None,
) -> None:
    """Simulate one scheduler on one trace and datacenter; write summary.json, tables and a CDF plot.

    Without --cluster or --workers the bundled 10,000-worker datacenter of the papers is used. The output
    directory must be new or empty (--force replaces its contents).

    --config FILE.toml (or .json) holds any run setting, e.g.:
    scheduler = "megha"; trace = "sample:GOOG_subtrace"; workers = 20000; gms = 5; lms = 10; max_jobs = 500;
    and an \\[options] table of scheduler options (heartbeat = 10). Options given on the command line win.
    """
    base = _load_config_file(config)
    if cluster is not None or workers is not None:  # the command line's datacenter replaces the file's
        base.pop("cluster", None)
        base.pop("workers", None)
    if cluster is None and workers is None and "cluster" not in base and "workers" not in base:
        from megha.samples import DEFAULT_CLUSTER

        cluster = DEFAULT_CLUSTER
    given = {
        "scheduler": scheduler,
        "trace": trace,
        "cluster": cluster,
        "workers": workers,
        "gms": gms,
        "lms": lms,
        "seed": seed,
        "resources": resources,
        "capacity": parse_pairs(capacity, "--capacity"),
        "demand": parse_pairs(demand, "--demand"),
        "constraints": constraints,
        "truncate_durations": truncate,
        "dephase": dephase,
        "network_delay": network_delay,
        "max_jobs": max_jobs,
        "load_scale": load_scale,
        "processing_model": processing,
        "faults": None if faults is None else str(faults),
    }
    params = {"truncate_durations": "truncate", "processing_model": "processing"}
    # a --config file's setting stands unless the option was given on the command line
    kw = {k: v for k, v in given.items() if k not in base or _on_command_line(ctx, params.get(k, k))}
    kw["options"] = {**base.get("options", {}), **parse_opts(opt)}
    cfg = _build_config(base, **kw)
    if out is None:
        out = Path("megha-out") / cfg.scheduler
    _check_out(out, force)
    doc = run_and_write(cfg, out, csv, quiet or json_out, plots=plots)
    _outputs_written()
    if json_out:
        out_console.print_json(json.dumps(doc))
    elif not quiet:
        from megha.metrics.format import duration
        from megha.metrics.report import render_compare_table

        console.print(render_compare_table([doc], title=f"{doc['trace']} on {doc['workers']:,} workers"))
        console.print(
            f"{doc['tasks']:,} tasks ({doc['tasks_infeasible']:,} infeasible) in {duration(doc['wall_seconds'])} "
            f"({doc['tasks_per_second'] or 0:,.0f} tasks/s); outputs in {out}/",
            highlight=False,
        )
    if not doc["completed"]:
        console.print(f"[bold red]run did not finish:[/] {doc['unfinished_reason']}")
        raise typer.Exit(3)


@_app.command(cls=_DefaultsHelp)
def compare(
    schedulers: Annotated[
        str | None,
        typer.Option("--schedulers", help="comma-separated names (default: {DEFAULTS})"),
    ] = None,
    trace: TraceOpt = "sample:GOOG_subtrace",
    cluster: ClusterOpt = None,
    workers: WorkersOpt = None,
    gms: GmsOpt = None,
    lms: LmsOpt = None,
    seed: SeedOpt = 0,
    opt: Annotated[
        list[str] | None,
        typer.Option("--opt", "-o", help="scheduler option key=value for every scheduler that has it (repeatable)"),
    ] = None,
    resources: ResourcesOpt = False,
    constraints: ConstraintsOpt = True,
    max_jobs: Annotated[int | None, typer.Option("--max-jobs", help="use only the first N jobs")] = 1000,
    load_scale: LoadOpt = 1.0,
    processing: ProcessingOpt = None,
    faults: FaultsOpt = None,
    out: Annotated[Path, typer.Option("--out", help="output directory; must be new or empty (see --force)")] = Path(
        "megha-compare"
    ),
    force: ForceOpt = False,
    csv: CsvOpt = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Run several schedulers on the same workload and datacenter; print a table and overlay their CDFs.

    By default it runs {DEFAULTS} (--schedulers picks others, e.g. flow or the packing schedulers).
    With no arguments: the first 1,000 jobs of the bundled Google sub-trace, with synthesized placement
    constraints, on 20,000 constrained workers (the IoT 2023 paper's setting for this trace). Other bundled
    traces default to the papers' 10,000-worker datacenter. Every name and option is checked before the first
    run; the output directory then holds exactly this comparison (compare.csv, delay_cdf.png, one directory per
    scheduler).
    """
    from megha.api import compare_configs, default_compare
    from megha.cli_common import clear_out_dir
    from megha.metrics.report import compare_rows, render_compare_table, render_fault_table, write_compare_figures

    if cluster is None and workers is None:
        from megha.samples import DEFAULT_CLUSTER, PAPER_WORKERS

        workers = PAPER_WORKERS.get(trace)
        if workers is None:
            cluster = DEFAULT_CLUSTER
    run = {
        "gms": gms,
        "lms": lms,
        "seed": seed,
        "resources": resources,
        "constraints": constraints,
        "max_jobs": max_jobs,
        "load_scale": load_scale,
        **({"processing_model": processing} if processing is not None else {}),
        **({"faults": str(faults)} if faults is not None else {}),
    }
    try:
        names = default_compare(schedulers)
        cfgs = compare_configs(
            names, trace, workers, cluster, run, parse_opts(opt), "", explicit=schedulers is not None, style="cli"
        )
        from megha.cli_common import check_out_dir

        check_out_dir(out, force)
    except MeghaError as e:
        _fail(str(e))
        raise
    out.mkdir(parents=True, exist_ok=True)
    clear_out_dir(out)
    summaries, delays = [], {}
    for cfg in cfgs:
        if not quiet and not json_out:
            console.print(f"[dim]running {cfg.scheduler} …[/]")
        keep: list = []
        doc = run_and_write(cfg, out / cfg.scheduler, csv, quiet or json_out, plots=False, keep=keep)
        summaries.append(doc)
        from megha.metrics.summary import job_table

        res = keep[0]
        delays[cfg.scheduler] = job_table(res.workload, res.recorder, res.feasible)["delay"]
    title = f"{summaries[0]['trace']} on {summaries[0]['workers']:,} workers"
    from megha.metrics.plots import save_cdfs
    from megha.metrics.tables import write_csv

    save_cdfs(delays, out / "delay_cdf.png", title=f"{title}: delay in job response time")
    write_compare_figures(summaries, out, title)
    rows = compare_rows(summaries)
    (out / "compare.json").write_text(json.dumps({"runs": rows}, indent=2) + "\n")
    write_csv(rows, out / "compare.csv")
    _outputs_written()
    if json_out:
        out_console.print_json(json.dumps({"runs": rows}))
    else:
        out_console.print(render_compare_table(summaries, title=title))
        faults_table = render_fault_table(summaries, title="what the faults cost")
        if faults_table is not None:
            out_console.print(faults_table)
        if not quiet:
            from megha.metrics.format import duration

            walls = ", ".join(f"{s['scheduler']} {duration(s['wall_seconds'])}" for s in summaries)
            console.print(f"wall time: {walls}", highlight=False)
            console.print(f"plot: {out / 'delay_cdf.png'}   table: {out / 'compare.csv'}   runs: {out}/<scheduler>/")
    if not all(s["completed"] for s in summaries):
        raise typer.Exit(3)


@_app.command("schedulers")
def list_schedulers(
    name: Annotated[str | None, typer.Argument(help="show only this scheduler")] = None,
) -> None:
    """List the registered schedulers (plug-ins included): modes, options with their defaults and descriptions,
    the fidelity profiles (-o profile=NAME) with how each deviates from the papers' text, the fault kinds a
    --faults schedule can name, and the counters a run reports (each with its meaning when NAME is given)."""
    from rich import box
    from rich.padding import Padding
    from rich.table import Table

    from megha.errors import did_you_mean
    from megha.metrics.format import MISSING
    from megha.schedulers import registry

    names = registry.names()
    if name is not None:
        if name not in names:
            _fail(f"unknown scheduler {name!r}{did_you_mean(name, names)}; known: {', '.join(names)}")
        names = [name]
    for n in names:
        spec = registry.get(n)
        origin = f"  [dim](plug-in: {spec.plugin})[/]" if getattr(spec, "plugin", None) else ""
        out_console.print(f"[bold cyan]{n}[/]  [dim]{', '.join(spec.modes)} mode[/]{origin}", highlight=False)
        out_console.print(Padding(spec.help, (0, 0, 0, 2)), highlight=False)
        defaults = registry.parse_options(spec, {}).model_dump()
        fields = spec.options.model_fields
        if fields:
            t = Table(box=box.SIMPLE, show_edge=False, pad_edge=False, padding=(0, 1))
            t.add_column("option", style="bold", overflow="fold")
            t.add_column("default", overflow="fold", max_width=24)
            t.add_column("description", overflow="fold", ratio=1)
            for k, f in fields.items():
                t.add_row(k, _show_default(defaults.get(k)), f.description or MISSING)
            out_console.print(Padding(t, (0, 0, 0, 2)))
        if spec.profiles:
            out_console.print("  [bold]profiles[/] (-o profile=NAME):", highlight=False)
            for pname, deviations in spec.profiles.items():
                items = deviations if isinstance(deviations, list | tuple) else [deviations]
                text = f"[bold]{pname}[/]: " + "; ".join(str(d) for d in items)
                out_console.print(Padding(text, (0, 0, 0, 4)), highlight=False)
        kinds = _fault_kinds(n)
        if kinds:
            out_console.print(f"  [bold]fault kinds[/] (--faults): {', '.join(kinds)}", highlight=False)
        _show_counters(spec, detail=name is not None)
        out_console.print()


def _show_counters(spec: Any, detail: bool) -> None:
    """The counters ``spec`` declares: a count and where they go (every scheduler), or each with its meaning."""
    from rich import box
    from rich.padding import Padding
    from rich.table import Table

    cs = spec.counter_sets()[-1]
    if not cs.counters:
        return
    if not detail:
        out_console.print(
            f"  [bold]counters[/]: {len(cs.counters)} under counters.{cs.namespace} in summary.json "
            f"(megha schedulers {spec.name} lists them)",
            highlight=False,
        )
        return
    key = f"{cs.prefix}NAME" if cs.prefix else "NAME, unprefixed"
    out_console.print(
        f"  [bold]counters[/] (summary.json: counters.{cs.namespace}.NAME; Python RunResult.counters: {key}):",
        highlight=False,
    )
    t = Table(box=box.SIMPLE, show_edge=False, pad_edge=False, padding=(0, 1), show_header=False)
    t.add_column("counter", style="bold", overflow="fold")
    t.add_column("meaning", overflow="fold", ratio=1)
    for k, text in cs.counters.items():
        t.add_row(k, text)
    out_console.print(Padding(t, (0, 0, 0, 4)))


def _fault_kinds(name: str) -> list[str]:
    """The kinds a fault schedule can name for ``name`` (none listed when it cannot be wired on a tiny datacenter,
    as a plug-in may not be)."""
    from megha.runner.simulate import fault_kinds_of

    try:
        return list(fault_kinds_of(name))
    except Exception:  # a listing must not fail because one plug-in cannot be built small
        return []


def _show_default(v: Any) -> str:
    from megha.metrics.format import MISSING

    if v is None:
        return MISSING
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list | tuple | dict):
        return json.dumps(v)
    return str(v)


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

    from megha.metrics.format import cell

    kinds = {
        "span_seconds": "duration",
        "first_arrival": "duration",
        "last_arrival": "duration",
        "duration_mean": "duration",
        "duration_p50": "duration",
        "duration_max": "duration",
        "task_seconds": "duration",
        "offered_load": "percent",
    }
    t = Table(title=f"trace {w.name}", show_header=False)
    for k, v in info.items():
        t.add_row(k, cell(v, kinds.get(k)))
    out_console.print(t)
    console.print(
        "offered load = task-seconds / (workers x span of arrivals); above 100% the datacenter cannot keep up",
        highlight=False,
    )


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


#: commands defined in this module: running one of them needs none of the optional commands (nor their imports:
#: the sweep runner, asyncio for the live commands)
_CORE_COMMANDS = frozenset({"simulate", "compare", "schedulers"})
_optional_registered = False


def _register_optional_commands() -> None:
    """Commands that live with their feature (reproduce, sweep, live) attach themselves here (once)."""
    global _optional_registered
    if _optional_registered:
        return
    _optional_registered = True
    import importlib

    for mod in ("megha.experiments.cli", "megha.sweep.cli", "megha.live.cli"):
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name and e.name.startswith(mod.rsplit(".", 1)[0]):
                continue
            raise
        m.attach(_app)


def __getattr__(name: str) -> Any:
    """``megha.cli.app``: the whole command, optional commands included (attached on first access)."""
    if name == "app":
        _register_optional_commands()
        return _app
    raise AttributeError(f"module 'megha.cli' has no attribute {name!r}")


#: set by commands whose process has nothing left to clean up once their outputs are written (simulate, compare)
_skip_teardown = False


def _outputs_written() -> None:
    """Mark that this command's outputs are on disk: :func:`main` may then end the process without the
    interpreter's teardown (about 0.6 CPU-s after a simulation: freeing millions of small objects and unloading
    the compiled kernels' LLVM state). ``MEGHA_FULL_EXIT=1`` keeps the normal exit."""
    global _skip_teardown
    _skip_teardown = True


#: the ``megha`` process's cyclic-garbage collector: a young collection every 20,000 net allocations of tracked
#: objects instead of Python's 700 (see :func:`_lighter_gc`)
GC_YOUNG_THRESHOLD = 20_000


def _lighter_gc() -> None:
    """Collect cyclic garbage less often in this process (the ``megha`` command, not a program that imports megha):
    what the command imports (numba, pydantic, Matplotlib) and builds allocates hundreds of thousands of container
    objects that live until the end, which Python's default thresholds traverse again and again (~375 young, 34
    middle and 3 full collections, 0.25-0.4 CPU-s of a megha run on GOOG_subtrace; 27, 1 and 0 at this threshold).
    Objects already loaded (the interpreter's and the command's own modules) are frozen out of every later
    collection. Garbage is still collected; it is only collected in larger batches."""
    import gc

    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


def main() -> None:
    """Entry point of the ``megha`` console script."""
    import contextlib
    import os

    code: int | str | None = 0
    _lighter_gc()
    if len(sys.argv) < 2 or sys.argv[1] not in _CORE_COMMANDS:
        _register_optional_commands()
    import megha.metrics

    # this process writes its figures to files (see megha.metrics.lean_plot_import)
    megha.metrics.lean_plot_import = True
    try:
        _app()
    except MeghaError as e:
        console.print(f"[bold red]error:[/] {e}", highlight=False)
        code = 2
    except SystemExit as e:
        code = e.code
    if _skip_teardown and os.environ.get("MEGHA_FULL_EXIT") != "1" and isinstance(code, int | None):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed pipe (`| head`): nothing more to write
                stream.flush()
        os._exit(code or 0)
    sys.exit(code)


if __name__ == "__main__":
    main()
