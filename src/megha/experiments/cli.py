"""``megha reproduce``: run the papers' experiments by name, and check the papers' claims."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


def list_table() -> Table:
    """The ``--list`` table: id, paper (title, figures, citation) and what the experiment runs."""
    from rich.table import Table

    from megha.experiments.registry import all_experiments

    t = Table(title="reproducible experiments", show_lines=True)
    t.add_column("id", style="bold", no_wrap=True)
    t.add_column("paper and figures")
    t.add_column("what")
    for e in all_experiments():
        p = e.source
        if p is None:
            paper = e.paper
        else:
            paper = f"[bold]{p.short}[/], {e.figures}\n{p.title}\n[dim]{p.citation}[/]"
        t.add_row(e.id, paper, e.title)
    return t


def run_check(
    ids: list[str],
    out: Path,
    quick: bool,
    seed: int,
    reuse: bool,
    log: Callable[[str], None],
    extra: dict | None = None,
) -> tuple[dict[str, dict], int]:
    """Run (or, with ``reuse``, re-read) every experiment of ``ids`` into ``out/<id>``; returns
    ``({id: summary document or {"error": ...}}, errors)``. Claims are re-evaluated on re-read documents, so a
    changed claim needs no re-run. An experiment that fails is reported and the others still run."""
    from megha.experiments.registry import ReproContext, evaluate_claims, get, run_experiment
    from megha.metrics.report import _clean

    results: dict[str, dict] = {}
    errors = 0
    for exp_id in ids:
        target = out / exp_id
        ctx = ReproContext(out=target, quick=quick, seed=seed, log=log, extra=dict(extra or {}))
        prev = target / "summary.json"
        try:
            if reuse and prev.exists():
                doc = json.loads(prev.read_text())
                # a full run stands in for a quick one (the table marks each run's size); never the reverse
                if (bool(doc.get("quick")) and not quick) or doc.get("seed", seed) != seed:
                    raise ValueError(
                        f"{prev} is from a {'quick' if doc.get('quick') else 'full'} run with seed "
                        f"{doc.get('seed')}; run without --reuse or pick another --out"
                    )
                log(f"[bold]{exp_id}[/]: re-checking the claims of {prev}")
                ctx.quick = bool(doc.get("quick"))
                doc["claims"] = evaluate_claims(get(exp_id), doc, ctx)
                from megha.experiments.claims import tally

                doc["claims_tally"] = tally(doc["claims"])
                prev.write_text(json.dumps(_clean(doc), indent=2) + "\n")
            else:
                log(f"[bold]{exp_id}[/]" + (" (quick)" if quick else ""))
                doc = run_experiment(exp_id, ctx)
            results[exp_id] = doc
        except Exception as e:
            errors += 1
            results[exp_id] = {"error": f"{type(e).__name__}: {e}", "quick": quick}
            log(f"[bold red]{exp_id} failed:[/] {type(e).__name__}: {e}")
    return results, errors


def attach(app: typer.Typer) -> None:
    """Add the ``reproduce`` command to the CLI application ``app``."""

    @app.command()
    def reproduce(
        experiment: Annotated[str | None, typer.Argument(help="experiment id (see --list)")] = None,
        list_: Annotated[bool, typer.Option("--list", help="list the experiments with their papers")] = False,
        check: Annotated[
            bool,
            typer.Option("--check", help="run every experiment (or --only ones) and print one table of claims"),
        ] = False,
        only: Annotated[str | None, typer.Option("--only", help="with --check: comma-separated experiment ids")] = None,
        reuse: Annotated[
            bool,
            typer.Option(
                "--reuse",
                help="with --check: re-check the claims of runs already in --out, not re-run (with --quick, a full run "
                "found there counts; the table marks which runs were quick)",
            ),
        ] = False,
        markdown: Annotated[
            Path | None,
            typer.Option(
                "--markdown",
                help="with --check: write the claims as Markdown to this file ('-' = stdout); a file with "
                "claims:begin/end markers (the README) gets only that section replaced",
            ),
        ] = None,
        quick: Annotated[bool, typer.Option("--quick", help="smaller version (under 2 minutes)")] = False,
        out: Annotated[Path | None, typer.Option("--out", help="output directory")] = None,
        seed: Annotated[int, typer.Option("--seed", help="seed")] = 0,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress output")] = False,
        set_: Annotated[
            list[str] | None, typer.Option("--set", help="experiment parameter key=value (repeatable)")
        ] = None,
    ) -> None:
        """Reproduce a figure of the papers: writes summary.json (with the paper's claims checked), tables and the
        figure. ``--check`` runs them all and prints one table of claims (exit status 0 even when claims do not
        hold; non-zero only when an experiment fails)."""
        from rich.markup import escape

        from megha.cli_common import console, out_console, parse_opts
        from megha.experiments.claims import render_table
        from megha.experiments.registry import ReproContext, all_experiments, get, run_experiment

        log = (lambda s: None) if quiet else (lambda s: console.print(s, highlight=False))
        if check:
            ids = [e.id for e in all_experiments()]
            if only:
                ids = [get(s.strip()).id for s in only.split(",") if s.strip()]
            elif experiment is not None:
                ids = [get(experiment).id]
            target = out or Path("megha-reproduce")
            target.mkdir(parents=True, exist_ok=True)
            results, errors = run_check(ids, target, quick, seed, reuse, log, parse_opts(set_))
            _print_claims(results, quick, out_console, markdown)
            (target / "claims.json").write_text(json.dumps(results_claims(results), indent=2) + "\n")
            if errors:
                console.print(f"[bold red]{errors} experiment(s) failed[/] (see the table)")
                raise typer.Exit(1)
            return
        if list_ or experiment is None:
            out_console.print(list_table())
            if experiment is None and not list_:
                console.print(
                    "run one with: megha reproduce ID [--quick] [--out DIR]; all, with their claims: "
                    "megha reproduce --check [--quick]"
                )
            return
        target = out or Path("megha-reproduce") / experiment
        ctx = ReproContext(out=target, quick=quick, seed=seed, log=log, extra=parse_opts(set_))
        doc = run_experiment(experiment, ctx)
        if doc.get("claims"):
            table, notes = render_table({doc["experiment"]: doc}, title=f"{doc['experiment']}: the paper's claims")
            out_console.print(table)
            for i, n in enumerate(notes, 1):
                out_console.print(escape(f"[{i}] {n}"), highlight=False)
        if not quiet:
            console.print(f"[bold]{doc['experiment']}[/] done in {doc['wall_seconds']:.1f} s; outputs in {target}/")


def results_claims(results: dict[str, dict]) -> dict[str, Any]:
    """``claims.json`` of a check: per experiment its paper, whether it was quick, its claims or its error."""
    keep = ("paper", "paper_title", "citation", "figures", "quick", "seed", "claims", "claims_tally", "error")
    return {k: {f: d.get(f) for f in keep if f in d} for k, d in results.items()}


def _print_claims(results: dict[str, dict], quick: bool, out_console: Console, markdown: Path | None) -> None:
    from rich.markup import escape

    from megha.experiments.claims import markdown_table, render_table, splice, tally

    t = tally(c for d in results.values() for c in d.get("claims", []))
    title = (
        f"the papers' claims ({'quick runs' if quick else 'full runs'}): {t['hold']} hold, "
        f"{t['do_not_hold']} do not hold, {t['not_measured']} not measured"
    )
    table, notes = render_table(results, title=title)
    out_console.print(table)
    for i, n in enumerate(notes, 1):
        out_console.print(escape(f"[{i}] {n}"), highlight=False)
    if markdown is None:
        return
    md = markdown_table(results)
    if str(markdown) == "-":
        out_console.print(md, markup=False, highlight=False)
    elif markdown.exists() and "<!-- claims:begin" in markdown.read_text():
        markdown.write_text(splice(markdown.read_text(), md))
    else:
        markdown.write_text(md)
