"""``megha sweep`` and ``megha import-trace`` (also ``megha trace import``); attached by :mod:`megha.cli`.

megha sweep FILE.toml [--workers N] [--address ray://host:10001|auto|local] [--out DIR] [--resume] [--force]
megha sweep report DIR                     # rebuild results.parquet/csv and report.html of a sweep directory
megha import-trace SOURCE --format google2011|google2019|alibaba2018 --out OUT.parquet [--machines OUT.json]
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.console import Console


def _console() -> Console:
    from megha.cli_common import console

    return console


def sweep_command(
    target: Annotated[str, typer.Argument(help="sweep file (.toml/.json), or 'report' and a sweep directory")],
    directory: Annotated[Path | None, typer.Argument(help="with 'report': the sweep directory")] = None,
    workers: Annotated[
        int | None,
        typer.Option("--workers", "-j", help="runs at a time (default: the cores; with --address: the cluster's CPUs)"),
    ] = None,
    address: Annotated[
        str | None,
        typer.Option(
            "--address",
            help="run on Ray: 'auto' (the cluster of this machine), 'ray://host:10001', or 'local' (a new local Ray)",
        ),
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="sweep directory (default megha-sweep/NAME)")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="keep finished runs, run only the missing ones")] = False,
    force: Annotated[bool, typer.Option("--force", help="run every run again, replacing finished ones")] = False,
    no_report: Annotated[bool, typer.Option("--no-report", help="do not write report.html")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress output")] = False,
) -> None:
    """Run a grid or list of simulations (any `megha simulate` setting can be a list); aggregate and report.

    Local processes by default, an existing Ray cluster with --address. Each run writes runs/<id>/; a finished
    run is not repeated with --resume; a failed run is reported and does not stop the others. Writes
    results.parquet/.csv (one row per run, keyed by its parameters) and a static report.html.
    """
    from megha.errors import MeghaError

    console = _console()
    log = (lambda s: None) if quiet else (lambda s: console.print(s, highlight=False, markup=False))
    try:
        if target == "report":
            if directory is None:
                console.print("[bold red]error:[/] usage: megha sweep report DIR")
                raise typer.Exit(2)
            from megha.sweep.aggregate import write_results
            from megha.sweep.report import build_report
            from megha.sweep.spec import load_plans

            _, plans = load_plans(directory)
            table = write_results(directory, plans)
            path = build_report(directory)
            console.print(f"wrote {table}, {table.with_suffix('.csv')} and {path}", highlight=False)
            return
        if directory is not None:
            console.print(
                f"[bold red]error:[/] unexpected argument {str(directory)!r} (only `megha sweep report "
                f"DIR` takes a directory)"
            )
            raise typer.Exit(2)
        from megha.sweep.runner import run_sweep

        res = run_sweep(
            target,
            out=out,
            workers=workers,
            address=address,
            resume=resume,
            force=force,
            progress=False if quiet else None,
            log=log,
            report=not no_report,
        )
    except MeghaError as e:
        console.print(f"[bold red]error:[/] {e}", highlight=False)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    import pyarrow.parquet as pq

    status = pq.read_table(res.table_path, columns=["status"]).column(0).to_pylist()
    count = {k: status.count(k) for k in ("ok", "unfinished", "failed", "missing")}
    if not quiet:
        console.print(
            f"[bold]{res.out.name}[/]: {len(res.plans)} runs ({len(res.ran)} run now, {len(res.skipped)} kept): "
            f"{count['ok']} ok, {count['unfinished']} unfinished, {count['failed']} failed; {res.wall_seconds:.1f} s "
            f"on {res.capacity} {res.engine} worker(s)",
            highlight=False,
        )
        console.print(f"table: {res.table_path}  report: {res.report_path or '-'}", highlight=False)
    if res.failed:
        raise typer.Exit(3)


def import_trace_command(
    source: Annotated[Path, typer.Argument(help="trace directory or file (see --format)")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="google2011 | google2019 | alibaba2018")],
    out: Annotated[Path, typer.Option("--out", "-o", help="output job table (.parquet)")],
    machines: Annotated[
        Path | None,
        typer.Option(
            "--machines", help="also write the machine list as a Megha cluster file (.json, readable by --cluster)"
        ),
    ] = None,
    max_jobs: Annotated[int | None, typer.Option("--max-jobs", help="keep only the first N jobs")] = None,
    lms: Annotated[int, typer.Option("--lms", help="LMs in the written cluster file")] = 1,
    gms: Annotated[int, typer.Option("--gms", help="partitions per LM in the written cluster file")] = 1,
    constraints_seed: Annotated[
        int, typer.Option("--constraints-seed", help="seed of the synthesized machine constraints in the cluster file")
    ] = 0,
    all_constraints: Annotated[
        bool, typer.Option("--all-constraints", help="give every machine every constraint instead of synthesizing them")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
) -> None:
    """Convert a public cluster trace to Megha's columnar job table, keeping CPU and memory requests.

    google2011: SOURCE is the trace directory (task_events/*.csv.gz, machine_events/*.csv.gz) or task_events
    files; google2019: a directory or file of the exported instance_events table (CSV with a header; optional
    machine_events export); alibaba2018: a directory with batch_task.csv (and machine_meta.csv) or the file.
    """
    from megha.errors import MeghaError
    from megha.workload.converters import convert

    console = _console()
    try:
        rep = convert(
            source,
            fmt,
            out,
            machines=machines,
            max_jobs=max_jobs,
            lms=lms,
            gms=gms,
            constraints_seed=None if all_constraints else constraints_seed,
            progress=not quiet,
        )
    except MeghaError as e:
        console.print(f"[bold red]error:[/] {e}", highlight=False)
        raise typer.Exit(2) from None
    console.print(rep.describe(), highlight=False)


def attach(app: typer.Typer) -> None:
    """Register ``sweep`` and ``import-trace`` on the main app, and ``import`` on its ``trace`` sub-app."""
    app.command("sweep")(sweep_command)
    app.command("import-trace")(import_trace_command)
    for group in getattr(app, "registered_groups", []):
        if group.name == "trace" and group.typer_instance is not None:
            group.typer_instance.command("import")(import_trace_command)
