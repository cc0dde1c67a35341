"""``megha reproduce``: run the papers' experiments by name."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def attach(app: typer.Typer) -> None:
    @app.command()
    def reproduce(
        experiment: Annotated[str | None, typer.Argument(help="experiment id (see --list)")] = None,
        list_: Annotated[bool, typer.Option("--list", help="list the experiments")] = False,
        quick: Annotated[bool, typer.Option("--quick", help="smaller version (under 2 minutes)")] = False,
        out: Annotated[Path | None, typer.Option("--out", help="output directory")] = None,
        seed: Annotated[int, typer.Option("--seed", help="seed")] = 0,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress output")] = False,
        set_: Annotated[
            list[str] | None, typer.Option("--set", help="experiment parameter key=value (repeatable)")
        ] = None,
    ) -> None:
        """Reproduce a figure of the papers: writes summary.json, tables and the figure."""
        from rich.table import Table

        from megha.cli_common import console, out_console
        from megha.experiments.registry import ReproContext, all_experiments, run_experiment

        if list_ or experiment is None:
            t = Table(title="reproducible experiments")
            t.add_column("id", style="bold")
            t.add_column("paper")
            t.add_column("what")
            for e in all_experiments():
                t.add_row(e.id, e.paper, e.title)
            out_console.print(t)
            if experiment is None and not list_:
                console.print("run one with: megha reproduce ID [--quick] [--out DIR]")
            return
        target = out or Path("megha-reproduce") / experiment
        log = (lambda s: None) if quiet else (lambda s: console.print(s, highlight=False))
        from megha.cli_common import parse_opts

        ctx = ReproContext(out=target, quick=quick, seed=seed, log=log, extra=parse_opts(set_))
        doc = run_experiment(experiment, ctx)
        if not quiet:
            console.print(f"[bold]{doc['experiment']}[/] done in {doc['wall_seconds']:.1f} s; outputs in {target}/")
