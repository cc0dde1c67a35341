"""The ``megha live`` commands (attached to the main ``megha`` app by :func:`attach`).

megha live up -c examples/live/local.toml      # nats-server + LMs (active/standby) + GMs + worker hosts
megha live status -c … [--watch]               # queues, utilization, running tasks, roles
megha live submit -c … -t sample:YH_small --compress 10 --out DIR --compare
megha live submit -c … --tasks 8 --duration 2 [--command "echo {task}"]
megha live down -c …
megha live run -t sample:YH_small --compress 10   # a whole deployment in this process (in-process bus)
megha live gm|lm|worker -c … --index I [--role active|standby]   # one service (what `up` starts)
megha live bench [--mode nats|procs|inproc] [--rates 1000,2000]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console(stderr=True)
out_console = Console()

live_app = typer.Typer(help="The live runtime: Megha as real processes over a message broker.", no_args_is_help=True)

ConfigOpt = Annotated[str | None, typer.Option("--config", "-c", help="deployment file (TOML/JSON)")]
IndexOpt = Annotated[int, typer.Option("--index", "-i", help="which GM / LM / worker host")]


def attach(app: typer.Typer) -> None:
    """Add ``megha live …`` to the main command."""
    app.add_typer(live_app, name="live")


def _cfg(path: str | None):
    from megha.live.config import load_config

    return load_config(path)


def _logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )


@live_app.command("gm")
def gm_cmd(config: ConfigOpt = None, index: IndexOpt = 0) -> None:
    """Run one Global Master."""
    from megha.live.service import main

    main(["gm", "--index", str(index)] + (["--config", config] if config else []))


@live_app.command("lm")
def lm_cmd(
    config: ConfigOpt = None,
    index: IndexOpt = 0,
    role: Annotated[str, typer.Option("--role", help="solo | active | standby")] = "solo",
) -> None:
    """Run one Local Master (active, standby, or alone)."""
    from megha.live.service import main

    main(["lm", "--index", str(index), "--role", role] + (["--config", config] if config else []))


@live_app.command("worker")
def worker_cmd(config: ConfigOpt = None, index: IndexOpt = 0) -> None:
    """Run one worker host (many emulated workers running real tasks)."""
    from megha.live.service import main

    main(["worker", "--index", str(index)] + (["--config", config] if config else []))


async def _ready(cfg, timeout: float) -> list[str]:
    from megha.live.client import LiveClient
    from megha.live.deploy import layout_of, make_transport

    cl = LiveClient(cfg, make_transport(cfg, "cli", give_up_after=timeout), layout_of(cfg))
    await cl.start()
    try:
        await cl.wait_ready(timeout)
        return []
    except TimeoutError as e:
        return [str(e)]
    finally:
        await cl.close()


@live_app.command("up")
def up_cmd(
    config: ConfigOpt = None,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to wait until ready")] = 60.0,
) -> None:
    """Start a whole local deployment (nats-server when installed, LMs, GMs, worker hosts) in the background."""
    from megha.live import supervisor

    cfg = _cfg(config)
    if cfg.broker.kind != "nats":
        console.print("[red]error:[/] `up` runs processes over NATS; use `megha live run` for the in-process bus")
        raise typer.Exit(2)
    if supervisor.nats_server_binary(cfg) is None and cfg.broker.start_server:
        console.print(
            f"[yellow]nats-server is not installed[/] (apt-get install -y nats-server): "
            f"expecting a broker at {cfg.broker.resolved_url()}"
        )
    try:
        pid = supervisor.launch(cfg, config)
    except RuntimeError as e:
        console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    t = time.perf_counter()
    probs = asyncio.run(_ready(cfg, timeout))
    if probs:
        console.print(f"[red]deployment not ready after {timeout:.0f} s:[/] {probs[0]}  (logs: {cfg.state_dir}/logs)")
        raise typer.Exit(3)
    m = cfg.megha
    console.print(
        f"up in {time.perf_counter() - t:.1f} s: {m.gms} GMs, {m.lms} LMs"
        f"{' (+ standbys)' if cfg.ha.lm_standby else ''}, {cfg.workers.hosts} worker hosts, "
        f"{cfg.datacenter.workers} workers; broker {cfg.broker.resolved_url()}; supervisor pid {pid}; "
        f"logs in {cfg.state_dir}/logs"
    )


@live_app.command("down")
def down_cmd(config: ConfigOpt = None) -> None:
    """Stop the deployment started by `up` (services, then nats-server)."""
    from megha.live import supervisor

    cfg = _cfg(config)
    if supervisor.terminate(cfg):
        console.print("deployment stopped")
    else:
        console.print("no deployment is up (nothing to stop)")


async def _collect_status(cfg, seconds: float):
    from megha.live.client import LiveClient
    from megha.live.deploy import layout_of, make_transport

    cl = LiveClient(cfg, make_transport(cfg, "status", give_up_after=5.0), layout_of(cfg))
    await cl.start()
    await asyncio.sleep(seconds)
    await cl.close()
    return cl.statuses


def render_status(statuses: dict, cfg) -> object:
    """A table of the services' latest reports."""
    from rich.table import Table

    now = time.time()
    t = Table(title=f"megha live: {cfg.name}")
    for col in ("service", "role", "age", "queue / running", "utilization", "details"):
        t.add_column(col)
    total_workers = 0
    busy = 0
    for key in sorted(statuses):
        s = statuses[key]
        age = now - s.t
        if age > 5:
            continue
        i = s.info
        c = i.get("counters", {})
        if s.kind == "gm":
            q = f"queue {i.get('queue')} / placed {i.get('placed_running')}"
            util = ""
            det = f"synced {i.get('synced')}/{i.get('lms')}, view free {i.get('view_free')}"
        elif s.kind == "lm":
            q = f"running {i.get('running')}"
            if s.role == "active":
                total_workers += i.get("workers", 0)
                busy += i.get("busy_workers", 0)
            util = f"{100 * i.get('busy_workers', 0) / max(i.get('workers', 1), 1):.0f}%"
            det = (
                f"hosts {i.get('hosts_alive')}/{i.get('hosts_known')}, down {i.get('down_workers')}, "
                f"relaunched {c.get('tasks_relaunched', 0)}, inconsistencies {c.get('inconsistencies', 0)}"
            )
        else:
            q = f"running {i.get('running')}"
            util = f"{100 * i.get('running', 0) / max(i.get('workers', 1), 1):.0f}%"
            det = f"finished {c.get('tasks_finished', 0)}, failed {c.get('tasks_failed', 0)}"
        t.add_row(s.src, s.role, f"{age:.1f}s", q, util, det)
    if total_workers:
        t.caption = f"datacenter utilization {100 * busy / total_workers:.1f}% ({busy}/{total_workers} workers busy)"
    return t


@live_app.command("status")
def status_cmd(
    config: ConfigOpt = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="refresh until Ctrl-C")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print the raw reports")] = False,
) -> None:
    """Show the deployment: GMs (queues, sync), LMs (running tasks, hosts, roles), worker hosts."""
    cfg = _cfg(config)
    if json_out:
        st = asyncio.run(_collect_status(cfg, 1.2))
        out_console.print_json(
            json.dumps(
                {k: {"src": s.src, "kind": s.kind, "role": s.role, "t": s.t, "info": s.info} for k, s in st.items()}
            )
        )
        return
    if not watch:
        st = asyncio.run(_collect_status(cfg, 1.2))
        if not st:
            console.print("no service reported (is the deployment up?)")
            raise typer.Exit(3)
        out_console.print(render_status(st, cfg))
        return
    from rich.live import Live

    async def loop() -> None:
        from megha.live.client import LiveClient
        from megha.live.deploy import layout_of, make_transport

        cl = LiveClient(cfg, make_transport(cfg, "status"), layout_of(cfg))
        await cl.start()
        with Live(render_status({}, cfg), console=out_console, refresh_per_second=2) as live:
            while True:
                await asyncio.sleep(0.5)
                live.update(render_status(cl.statuses, cfg))

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(loop())


def _print_result(doc: dict, out: Path | None) -> None:
    from megha.metrics.report import render_compare_table

    out_console.print(render_compare_table([doc], title=f"{doc['trace']} on {doc['workers']:,} workers (live)"))
    a = doc["allocation_time"]["total"]
    c = doc["counters"]
    console.print(
        f"{doc['tasks_completed']:,}/{doc['tasks'] - doc['tasks_infeasible']:,} tasks completed; "
        f"placement (submit→start) p50 {1e3 * (a['p50'] or 0):.2f} ms, p99 {1e3 * (a['p99'] or 0):.2f} ms; "
        f"failed {c.get('tasks_failed', 0)}, finished twice {c.get('tasks_finished_twice', 0)}, "
        f"runs lost to dead workers {c.get('runs_lost', 0)}" + (f"; outputs in {out}/" if out else ""),
        highlight=False,
    )


async def _submit(
    cfg,
    trace: str | None,
    compress: float,
    max_jobs: int | None,
    tasks: int,
    duration: float,
    command: str,
    kind: str,
    stall: float,
    in_process: bool,
):
    from megha.live.client import LiveClient, one_job, prepare_workload, to_run_result
    from megha.live.deploy import LocalDeployment, datacenter_of, layout_of, make_transport

    dc = datacenter_of(cfg)
    layout = layout_of(cfg, dc)
    dep = None
    if in_process:
        dep = await LocalDeployment(cfg, layout=layout).start()
        transport = dep.transport("client")
    else:
        transport = make_transport(cfg, "client", give_up_after=10.0)
    cl = LiveClient(cfg, transport, layout)
    await cl.start()
    try:
        if trace:
            w = prepare_workload(cfg, trace, dc, compress, max_jobs)
        else:
            w = one_job(tasks, duration)
        run = await cl.run(w, dc, kind=kind, command=command, stall_timeout=stall)
        return to_run_result(run, cfg, dc, trace or "one-job")
    finally:
        await cl.close()
        if dep is not None:
            await dep.close()


def _submit_and_report(
    cfg, trace, compress, max_jobs, tasks, duration, command, kind, out, compare, stall, in_process
) -> None:
    from megha.metrics.report import render_compare_table, summarize, write_run

    if command and kind == "sleep":
        kind = "command"
    res = asyncio.run(_submit(cfg, trace, compress, max_jobs, tasks, duration, command, kind, stall, in_process))
    if compare:
        from megha.live.compare import compare_live_and_sim

        out = out or Path("megha-live-out")
        doc = compare_live_and_sim(res, cfg, out)
        _print_result(doc["live"], out / "live")
        out_console.print(
            render_compare_table([doc["live"], doc["simulated"]], title=f"{doc['live']['trace']}: live vs simulated")
        )
        o = doc["ordering"]["completion"]
        console.print(
            f"ordering of job completions, live vs simulated: concordance {o['concordance']:.3f} "
            f"(Kendall tau {o['kendall_tau']:.3f}, Spearman {o['spearman']:.3f}, {o['jobs']} jobs); "
            f"outputs in {out}/",
            highlight=False,
        )
        live_doc = doc["live"]
    else:
        live_doc = write_run(res, out) if out else summarize(res)
        _print_result(live_doc, out)
    for tid, why in list(res.describe.get("failures", {}).items())[:10]:
        console.print(f"[yellow]task {tid} failed:[/] {why}")
    if not live_doc["completed"]:
        console.print(f"[bold red]run did not finish:[/] {live_doc['unfinished_reason']}")
        raise typer.Exit(3)


TraceOpt = Annotated[str | None, typer.Option("--trace", "-t", help="trace file or sample:NAME")]
CompressOpt = Annotated[float, typer.Option("--compress", help="divide arrival times and durations by this")]


@live_app.command("submit")
def submit_cmd(
    config: ConfigOpt = None,
    trace: TraceOpt = None,
    compress: CompressOpt = 1.0,
    max_jobs: Annotated[int | None, typer.Option("--max-jobs", help="only the first N jobs")] = None,
    tasks: Annotated[int, typer.Option("--tasks", help="one job of this many tasks (without --trace)")] = 1,
    duration: Annotated[float, typer.Option("--duration", help="task duration of the one job (s)")] = 1.0,
    command: Annotated[str, typer.Option("--command", help="run this command line per task ({task}, {duration})")] = "",
    kind: Annotated[str, typer.Option("--kind", help="sleep | cpu | command")] = "sleep",
    out: Annotated[Path | None, typer.Option("--out", help="write summary.json, tables and plots here")] = None,
    compare: Annotated[bool, typer.Option("--compare", help="also simulate the same trace; compare")] = False,
    stall: Annotated[float, typer.Option("--stall-timeout", help="give up after this long without progress")] = 60.0,
) -> None:
    """Submit a trace (time-compressed) or one job to the running deployment and report like the simulator."""
    _logging(False)
    cfg = _cfg(config)
    _submit_and_report(cfg, trace, compress, max_jobs, tasks, duration, command, kind, out, compare, stall, False)


@live_app.command("run")
def run_cmd(
    config: ConfigOpt = None,
    trace: TraceOpt = "sample:YH_small",
    compress: CompressOpt = 10.0,
    max_jobs: Annotated[int | None, typer.Option("--max-jobs")] = None,
    out: Annotated[Path | None, typer.Option("--out")] = None,
    compare: Annotated[bool, typer.Option("--compare/--no-compare")] = True,
    stall: Annotated[float, typer.Option("--stall-timeout")] = 60.0,
) -> None:
    """A whole deployment in this process (in-process bus unless the file says nats), then submit a trace."""
    _logging(False)
    cfg = _cfg(config)
    if config is None:
        cfg = cfg.model_copy(update={"broker": cfg.broker.model_copy(update={"kind": "inproc"})})
    _submit_and_report(cfg, trace, compress, max_jobs, 1, 1.0, "", "sleep", out, compare, stall, True)


@live_app.command("bench")
def bench_cmd(
    rates: Annotated[str, typer.Option("--rates", help="comma-separated task rates (tasks/s)")] = "1000,2000,3000",
    seconds: Annotated[float, typer.Option("--seconds", help="per rate")] = 4.0,
    mode: Annotated[
        str, typer.Option("--mode", help="nats (services in this process, via nats-server) | procs | inproc")
    ] = "nats",
    per_job: Annotated[int, typer.Option("--tasks-per-job")] = 1,
) -> None:
    """Placement latency (submit → task start) at sustained rates; prints the highest sustained rate."""
    from megha.live.bench import main

    if mode not in ("nats", "procs", "inproc"):
        console.print("[red]error:[/] --mode must be nats, procs or inproc")
        raise typer.Exit(2)
    main([float(r) for r in rates.split(",")], seconds, mode, per_job)
