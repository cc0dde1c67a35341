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
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:
    from megha.live.config import LiveConfig
    from megha.live.messages import Status
    from megha.metrics.result import RunResult

console = Console(stderr=True)
out_console = Console()

live_app = typer.Typer(help="The live runtime: Megha as real processes over a message broker.", no_args_is_help=True)

ConfigOpt = Annotated[str | None, typer.Option("--config", "-c", help="deployment file (TOML/JSON)")]
IndexOpt = Annotated[int, typer.Option("--index", "-i", help="which GM / LM / worker host")]


def attach(app: typer.Typer) -> None:
    """Add ``megha live …`` to the main command."""
    app.add_typer(live_app, name="live")


def _cfg(path: str | None) -> LiveConfig:
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


async def _ready(cfg: LiveConfig, timeout: float) -> list[str]:
    """Wait, ``timeout`` seconds in all, until the deployment just launched takes work; returns what is not ready
    (empty: ready). The client waits for the credentials ``up`` generates, connects, reads its events stream and
    watches the status reports, each step bounded by what is left of ``timeout``."""
    from megha.live import supervisor
    from megha.live.client import LiveClient
    from megha.live.deploy import layout_of, make_transport

    end = time.monotonic() + timeout
    await supervisor.wait_credentials(cfg, "client", timeout)
    if supervisor.failure(cfg) is not None:
        return [supervisor.failure(cfg)]
    left = max(1.0, end - time.monotonic())
    cl = LiveClient(cfg, make_transport(cfg, "cli", give_up_after=left, role="client"), layout_of(cfg))
    try:
        await cl.start(timeout=max(1.0, end - time.monotonic()))
        await cl.wait_ready(max(0.0, end - time.monotonic()))
        return []
    except (TimeoutError, ConnectionError) as e:
        return [str(e)]
    finally:
        await cl.close()


@live_app.command("up")
def up_cmd(
    config: ConfigOpt = None,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to wait until ready")] = 60.0,
    broker: Annotated[
        str | None,
        typer.Option("--broker", help="join this running NATS broker (JetStream on) instead of starting one"),
    ] = None,
) -> None:
    """Start a whole local deployment (nats-server with generated credentials, LMs, GMs, worker hosts)."""
    from megha.live import supervisor
    from megha.live.transport import NoBrokerError

    cfg = _cfg(config)
    if cfg.broker.kind != "nats":
        console.print("[red]error:[/] `up` runs processes over NATS; use `megha live run` for the in-process bus")
        raise typer.Exit(2)
    if broker:
        cfg = cfg.model_copy(update={"broker": cfg.broker.model_copy(update={"url": broker, "start_server": False})})
        path = Path(cfg.state_dir) / "deployment.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(cfg.model_dump_json())
        config = str(path)
    elif cfg.broker.start_server:
        b = cfg.broker
        if supervisor.nats_server_binary(cfg) is None:
            console.print(
                "[red]error:[/] nats-server is not installed (apt-get install -y nats-server); or --broker URL"
            )
            raise typer.Exit(2)
        if supervisor.port_open(b.bind, b.port):
            console.print(
                f"[red]error:[/] port {b.bind}:{b.port} is already in use; stop what listens there, choose another "
                f"broker.port, or join a running broker with --broker URL",
                highlight=False,
            )
            raise typer.Exit(2)
    try:
        pid = supervisor.launch(cfg, config)
    except RuntimeError as e:
        console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    t = time.perf_counter()
    try:
        probs = asyncio.run(_ready(cfg, timeout))
    except NoBrokerError as e:
        probs = [str(e)]
    if supervisor.failure(cfg) is not None:
        probs = [supervisor.failure(cfg)]
    if probs:
        console.print(f"[red]deployment not ready after {timeout:.0f} s:[/] {probs[0]}  (logs: {cfg.state_dir}/logs)")
        supervisor.terminate(cfg)
        raise typer.Exit(3)
    m = cfg.megha
    console.print(
        f"up in {time.perf_counter() - t:.1f} s: {m.gms} GMs, {m.lms} LMs"
        f"{' (+ standbys)' if cfg.ha.lm_standby else ''}, {cfg.workers.hosts} worker hosts, "
        f"{cfg.datacenter.workers} workers; broker {cfg.broker.resolved_url()}; supervisor pid {pid}; "
        f"credentials and logs in {cfg.state_dir}/"
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


async def _collect_status(cfg: LiveConfig, seconds: float) -> dict[str, Status]:
    from megha.live.client import LiveClient
    from megha.live.deploy import layout_of, make_transport

    cl = LiveClient(cfg, make_transport(cfg, "status", give_up_after=8.0, role="client"), layout_of(cfg))
    await cl.start()
    await asyncio.sleep(seconds)
    await cl.close()
    return cl.statuses


def _no_broker(e: Exception) -> None:
    console.print(f"[red]error:[/] {e}", highlight=False)
    raise typer.Exit(3)


def render_status(statuses: dict, cfg: LiveConfig) -> object:
    """A table of every expected service and the tasks in flight."""
    from rich.table import Table

    from megha.live.health import evaluate

    doc = evaluate(cfg, statuses)
    now = time.time()
    t = Table(title=f"megha live: {cfg.name} ({'healthy' if doc['healthy'] else 'UNHEALTHY'})")
    for col in ("service", "state", "role", "last seen", "queue / running", "details"):
        t.add_column(col)
    latest = {}
    for s in statuses.values():
        inst = (s.src, s.info.get("pid"), s.info.get("instance"))
        if inst not in latest or latest[inst].t < s.t:
            latest[inst] = s
    by_pid_src = {(s.info.get("pid"), s.src): s for s in latest.values() if now - s.t < 3}
    for e in doc["services"]:
        s = next((x for (pid, _), x in by_pid_src.items() if pid == e["pid"] and x.kind == e["kind"]), None)
        q = det = ""
        if s is not None:
            i = s.info
            c = i.get("counters", {})
            if s.kind == "gm":
                q = f"queue {i.get('queue')} / placed {i.get('placed_running')}"
                det = f"synced {i.get('synced')}/{i.get('lms')}, in flight {i.get('in_flight')}, stuck {i.get('stuck')}"
            elif s.kind == "lm":
                q = f"running {i.get('running')}"
                det = (
                    f"hosts {i.get('hosts_alive')}/{i.get('hosts_known')}, down workers {i.get('down_workers')}, "
                    f"relaunched {c.get('tasks_relaunched', 0)}, inconsistencies {c.get('inconsistencies', 0)}"
                )
            else:
                q = f"running {i.get('running')}"
                det = f"finished {c.get('tasks_finished', 0)}, failed {c.get('tasks_failed', 0)}"
        seen = "never" if e["last_seen"] is None else f"{e['last_seen']:.1f}s ago"
        color = {"up": "green", "down": "red", "deposed": "yellow"}[e["state"]]
        t.add_row(e["name"], f"[{color}]{e['state']}[/]", e["role"], seen, q, det)
    tk = doc["tasks"]
    t.caption = (
        f"tasks in flight {tk['in_flight']} (<1s {tk['age_1s']}, <10s {tk['age_10s']}, <60s {tk['age_60s']}, "
        f"older {tk['age_older']}); stuck {tk['stuck']}; runs lost and waiting {doc['lost']['relaunch_pending']}"
        + ("" if doc["healthy"] else "; problems: " + "; ".join(doc["problems"][:5]))
    )
    return t


@live_app.command("status")
def status_cmd(
    config: ConfigOpt = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="refresh until Ctrl-C")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print the health document as JSON")] = False,
) -> None:
    """Every service the deployment should have (up / down / deposed, last seen), tasks in flight by age, stuck
    and lost tasks. Exit code 1 when the deployment is unhealthy, 3 when no broker is reachable."""
    from megha.live.health import evaluate
    from megha.live.transport import NoBrokerError

    cfg = _cfg(config)
    if not watch:
        try:
            st = asyncio.run(_collect_status(cfg, 1.5))
        except NoBrokerError as e:
            _no_broker(e)
        doc = evaluate(cfg, st)
        if json_out:
            out_console.print_json(json.dumps(doc))
        else:
            out_console.print(render_status(st, cfg))
        if not doc["healthy"]:
            raise typer.Exit(1)
        return
    from rich.live import Live

    async def loop() -> None:
        from megha.live.client import LiveClient
        from megha.live.deploy import layout_of, make_transport

        cl = LiveClient(cfg, make_transport(cfg, "status", give_up_after=8.0, role="client"), layout_of(cfg))
        await cl.start()
        with Live(render_status({}, cfg), console=out_console, refresh_per_second=2) as live:
            while True:
                await asyncio.sleep(0.5)
                live.update(render_status(cl.statuses, cfg))

    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(loop())
    except NoBrokerError as e:
        _no_broker(e)


def _print_result(doc: dict, out: Path | None) -> None:
    from megha.metrics.counters import merged
    from megha.metrics.report import render_compare_table

    out_console.print(render_compare_table([doc], title=f"{doc['trace']} on {doc['workers']:,} workers (live)"))
    a = doc["allocation_time"]["total"]
    c = merged(doc["counters"])
    console.print(
        f"{doc['tasks_completed']:,}/{doc['tasks'] - doc['tasks_infeasible']:,} tasks completed; "
        f"placement (submit→start) p50 {1e3 * (a['p50'] or 0):.2f} ms, p99 {1e3 * (a['p99'] or 0):.2f} ms; "
        f"failed {c.get('tasks_failed', 0)}, finished twice {c.get('tasks_finished_twice', 0)}, "
        f"runs lost to dead workers {c.get('runs_lost', 0)}" + (f"; outputs in {out}/" if out else ""),
        highlight=False,
    )


async def _submit(
    cfg: LiveConfig,
    trace: str | None,
    compress: float,
    max_jobs: int | None,
    tasks: int,
    duration: float,
    command: str,
    kind: str,
    stall: float,
    in_process: bool,
) -> RunResult:
    from megha.live.client import LiveClient, one_job, prepare_workload, to_run_result
    from megha.live.deploy import LocalDeployment, datacenter_of, layout_of, make_transport

    dc = datacenter_of(cfg)
    layout = layout_of(cfg, dc)
    dep = None
    if in_process:
        dep = await LocalDeployment(cfg, layout=layout).start()
        transport = dep.transport("client")
    else:
        transport = make_transport(cfg, "client", give_up_after=10.0, role="client")
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
    cfg: LiveConfig,
    trace: str | None,
    compress: float,
    max_jobs: int | None,
    tasks: int,
    duration: float,
    command: str,
    kind: str,
    out: Path | None,
    compare: bool,
    stall: float,
    in_process: bool,
) -> None:
    from megha.live.transport import NoBrokerError
    from megha.metrics.report import render_compare_table, summarize, write_run

    if command and kind == "sleep":
        kind = "command"
    try:
        res = asyncio.run(_submit(cfg, trace, compress, max_jobs, tasks, duration, command, kind, stall, in_process))
    except NoBrokerError as e:
        _no_broker(e)
    except TimeoutError as e:
        console.print(f"[red]error:[/] {e}", highlight=False)
        raise typer.Exit(3) from None
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
    lm_standby: Annotated[
        bool, typer.Option("--lm-standby", help="every LM with a standby (replication log on the placement path)")
    ] = False,
    hops: Annotated[
        bool,
        typer.Option("--hops", help="also the median of each hop (client → GM → LM → host → start), from the broker"),
    ] = False,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            help="workers of the bench's datacenter (0: at least 1,000 and enough that at most half are busy at the "
            "highest rate, so no task waits for a free worker)",
        ),
    ] = 0,
) -> None:
    """Placement latency (submit → task start) at sustained rates, with CPU seconds per 1,000 tasks of the broker,
    the services and the client; prints the highest sustained rate."""
    from megha.live.bench import main

    if mode not in ("nats", "procs", "inproc"):
        console.print("[red]error:[/] --mode must be nats, procs or inproc")
        raise typer.Exit(2)
    try:
        rs = [float(r) for r in rates.split(",")]
    except ValueError:
        console.print(f"[red]error:[/] --rates must be comma-separated numbers (tasks/s), not {rates!r}")
        raise typer.Exit(2) from None
    if not rs or any(not r > 0 for r in rs) or not seconds > 0 or per_job < 1 or workers < 0:
        console.print("[red]error:[/] --rates and --seconds must be > 0, --tasks-per-job >= 1 and --workers >= 0")
        raise typer.Exit(2)
    main(rs, seconds, mode, per_job, lm_standby, hops and mode != "inproc", workers)


@live_app.command("chaos")
def chaos_cmd(
    seconds: Annotated[float, typer.Option("--seconds", help="how long to submit work and inject faults")] = 60.0,
    seed: Annotated[int, typer.Option("--seed", help="seed of the fault schedule and workload")] = 0,
    rate: Annotated[float, typer.Option("--rate", help="tasks per second submitted")] = 20.0,
    json_out: Annotated[bool, typer.Option("--json", help="print the report as one JSON object")] = False,
    faults: Annotated[
        str | None,
        typer.Option(
            "--faults",
            help="replay this fault schedule (the TOML `megha simulate --faults` reads) instead of random faults: "
            "kinds gm, lm, worker, partition, broker",
        ),
    ] = None,
    trace: Annotated[
        str | None, typer.Option("--trace", "-t", help="with --faults: submit this trace (e.g. sample:YH_small)")
    ] = None,
    compress: Annotated[
        float,
        typer.Option("--compress", help="with --faults: divide the trace's and the schedule's times by this"),
    ] = 1.0,
    max_jobs: Annotated[int | None, typer.Option("--max-jobs", help="with --trace: only the first N jobs")] = None,
    hosts: Annotated[
        int, typer.Option("--hosts", help="with --faults: worker host processes (laid out by LM; >= 2)")
    ] = 4,
    scenario: Annotated[
        str,
        typer.Option(
            "--scenario",
            help="random faults on: plain (the default deployment), fairness (two users' shares 0.5/0.5, "
            "preemption) or handoff (handoff_after: waiting tasks handed to LMs)",
        ),
    ] = "plain",
) -> None:
    """A local deployment (loopback) under a steady workload while GMs, LMs (active and standby), worker hosts
    and the broker are killed at random, or as a fault schedule says (--faults FILE.toml); reports submitted,
    completed, lost, duplicated and the faults. Exit code 1 when a task was lost or ran twice."""
    from megha.live import supervisor
    from megha.live.chaos import main
    from megha.live.config import LiveConfig

    if not seconds > 0 or not rate > 0:
        console.print("[red]error:[/] --seconds and --rate must be > 0")
        raise typer.Exit(2)
    if not compress > 0:
        console.print("[red]error:[/] --compress must be > 0")
        raise typer.Exit(2)
    if (trace is not None or max_jobs is not None) and faults is None:
        console.print("[red]error:[/] --trace and --max-jobs go with --faults FILE")
        raise typer.Exit(2)
    from megha.live.chaos import SCENARIOS

    if scenario not in SCENARIOS:
        console.print(f"[red]error:[/] --scenario must be one of {', '.join(SCENARIOS)}, got {scenario!r}")
        raise typer.Exit(2)
    if scenario != "plain" and faults is not None:
        console.print("[red]error:[/] --scenario goes with random faults, not with --faults FILE")
        raise typer.Exit(2)
    if supervisor.nats_server_binary(LiveConfig()) is None:
        console.print("[red]error:[/] nats-server is not installed (apt-get install -y nats-server)")
        raise typer.Exit(2)
    if faults is not None:
        from megha.errors import MeghaError
        from megha.live.replay import replay_main

        try:
            code = replay_main(faults, trace, compress, seconds, rate, hosts, max_jobs, json_out)
        except MeghaError as e:
            console.print(f"[red]error:[/] {e}", highlight=False)
            raise typer.Exit(2) from None
        raise typer.Exit(code)
    raise typer.Exit(main(seconds, seed, json_out, rate, scenario=scenario))
