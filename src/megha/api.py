"""The Python API: the ``megha`` command's runs from a notebook, with pandas DataFrames.

>>> import megha
>>> r = megha.simulate(scheduler="megha", trace="sample:YH_small", workers=1000, seed=1)
>>> r.summary["delay"]["p50"], len(r.jobs)
(0.0015, 10)
>>> df = megha.compare(["megha", "sparrow"], trace="sample:YH_small", workers=1000)
>>> list(df.index)
['megha', 'sparrow']

The defaults are the command line's: without ``workers=`` or ``cluster=``, :func:`simulate` runs the papers'
10,000-worker datacenter file and :func:`compare` the datacenter the papers used for the trace; :func:`compare`
runs the first 1,000 jobs unless told otherwise. Errors are :class:`megha.errors.InputError` (a
:class:`megha.errors.MeghaError`) whose messages name the argument (``workers=``), not a command-line flag.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megha.config import RunConfig
from megha.errors import InputError
from megha.errors import did_you_mean as suggest

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from megha.metrics.result import RunResult

__all__ = ["Result", "compare", "schedulers", "simulate", "sweep"]

#: RunConfig fields that :func:`simulate` takes as keyword arguments; any other keyword is a scheduler option
RUN_FIELDS = tuple(RunConfig.model_fields)
_ALIASES = {"truncate": "truncate_durations"}


class Result:
    """One simulation: its summary, per-job, per-task and utilization tables, and a CDF plot.

    ``raw`` is the underlying :class:`megha.metrics.result.RunResult` (numpy arrays, the recorder, the workload).
    Tables are built on first access.
    """

    def __init__(self, raw: RunResult) -> None:
        self.raw = raw

    @property
    def scheduler(self) -> str:
        """The scheduler's registered name."""
        return self.raw.scheduler

    @property
    def config(self) -> RunConfig:
        """The run's configuration (pass it to :func:`megha.runner.simulate` to repeat the run)."""
        return self.raw.config

    @property
    def completed(self) -> bool:
        """Every feasible task ran to completion (otherwise ``summary['unfinished_reason']`` says why)."""
        return self.raw.unfinished_reason is None

    @cached_property
    def summary(self) -> dict[str, Any]:
        """The ``summary.json`` document: delay and allocation-time percentiles (seconds), utilization (a
        fraction), counters grouped by namespace (``{"run": {...}, "megha": {...}}``), the resolved configuration."""
        from megha.metrics.report import summarize

        return summarize(self.raw)

    @cached_property
    def jobs(self) -> pd.DataFrame:
        """One row per job: job, arrival, tasks, tasks_feasible, ideal, completion, delay (seconds), user."""
        import pandas as pd

        from megha.metrics.summary import job_table

        return pd.DataFrame(job_table(self.raw.workload, self.raw.recorder, self.raw.feasible))

    @cached_property
    def tasks(self) -> pd.DataFrame:
        """One row per task: times, worker, allocation time and its components (seconds)."""
        import pandas as pd

        from megha.metrics.summary import task_table

        return pd.DataFrame(task_table(self.raw.workload, self.raw.recorder, self.raw.feasible))

    @cached_property
    def utilization(self) -> pd.DataFrame:
        """Utilization over time (a step function): ``time`` (s) and ``utilization`` (a fraction of the
        datacenter's slots, or of its first resource in resource mode)."""
        import pandas as pd

        from megha.metrics import summary as S

        raw = self.raw
        dc, demand = raw.datacenter, raw.workload.task_demand
        if dc.capacity is not None and demand is not None:  # resource mode: the first resource (CPU), as reports
            total, weights = float(dc.capacity[:, 0].sum()), demand[:, 0]
        else:
            total, weights = float(dc.n_workers), None
        times, util = S.utilization_series(raw.recorder, total, weights)
        return pd.DataFrame({"time": times, "utilization": util})

    def plot_cdf(self, what: str = "delay", ax: Any = None, label: str | None = None, log: bool = True) -> Any:
        """Plot the CDF of job delays (``what='delay'``) or task allocation times (``'allocation'``) on ``ax``
        (a new figure when None); returns the matplotlib Axes."""
        from megha.metrics.plots import cdf_axes

        if what == "delay":
            values, xlabel = self.jobs["delay"].to_numpy(), "delay in job response time (s)"
        elif what == "allocation":
            t = self.tasks
            values, xlabel = t["allocation"][t["feasible"]].to_numpy(), "allocation time (s)"
        else:
            raise InputError(f"plot_cdf(what={what!r}): use 'delay' or 'allocation'")
        return cdf_axes({label or self.scheduler: values}, ax=ax, xlabel=xlabel, log=log)

    def save(self, out: str | Path, force: bool = False, csv: bool = False, plots: bool = True) -> Path:
        """Write the run's files (``summary.json``, Parquet tables, ``delay_cdf.png``) into ``out``, which must be
        empty or missing unless ``force``."""
        from megha.cli_common import check_out_dir
        from megha.metrics.report import write_run

        out = Path(out)
        check_out_dir(out, force, what="out=", flag="force=True")
        write_run(self.raw, out, csv=csv, plots=plots)
        return out

    def __repr__(self) -> str:
        from megha.metrics.format import duration

        d = self.summary["delay"]
        state = "" if self.completed else ", unfinished"
        return (
            f"<megha.Result {self.scheduler} on {self.summary['trace']} ({self.summary['workers']:,} workers"
            f"{state}): {self.summary['jobs']:,} jobs, delay p50 {duration(d.get('p50'))}, "
            f"p99 {duration(d.get('p99'))}>"
        )


def schedulers() -> list[str]:
    """Names of every registered scheduler (built-in and plug-ins)."""
    from megha.schedulers import registry

    return registry.names()


#: the command-line flag of each RunConfig field that has one (error messages of the CLI name the flag)
CLI_FLAGS = {
    "scheduler": "--scheduler",
    "trace": "--trace",
    "cluster": "--cluster",
    "workers": "--workers",
    "gms": "--gms",
    "lms": "--lms",
    "seed": "--seed",
    "constraints": "--constraints",
    "truncate_durations": "--truncate",
    "dephase": "--dephase",
    "resources": "--resources",
    "capacity": "--capacity",
    "demand": "--demand",
    "network_delay": "--network-delay",
    "max_jobs": "--max-jobs",
    "load_scale": "--load-scale",
    "processing_model": "--processing",
    "options": "--opt",
}


def arg_name(field: str, style: str = "api") -> str:
    """How a run setting is called in messages: ``workers=`` (API) or ``--workers`` (CLI)."""
    if style == "cli":
        return CLI_FLAGS.get(field, field)
    return f"{field}="


def build_config(data: dict[str, Any], who: str = "", style: str = "api") -> RunConfig:
    """A RunConfig from settings, with pydantic's errors turned into an InputError naming the arguments."""
    from pydantic import ValidationError

    try:
        return RunConfig(**data)
    except ValidationError as e:
        msgs = []
        for err in e.errors():
            loc = [str(x) for x in err["loc"]]
            name = arg_name(loc[0], style) if loc else "?"
            if len(loc) > 1:
                name += " " + ".".join(loc[1:])
            msgs.append(f"{name}: {err['msg']}")
        raise InputError(f"{who}{'; '.join(msgs)}") from None


def validate_config(cfg: RunConfig, who: str = "", style: str = "api") -> None:
    """Check what a run needs before it starts: the scheduler name (with a suggestion), its options, its mode,
    the trace and cluster (bundled names or existing files). Raises InputError; ``who`` prefixes messages."""
    from megha.schedulers import registry

    spec = registry.find(cfg.scheduler)
    if spec is None:
        names = registry.names()
        raise InputError(
            f"{who}unknown scheduler {cfg.scheduler!r}{suggest(cfg.scheduler, names)}; known: {', '.join(names)}"
        )
    try:
        registry.parse_options(spec, cfg.options)
    except InputError as e:
        raise InputError(f"{who}{e}") from None
    mode = "resource" if cfg.resources else "slot"
    if mode not in spec.modes:
        raise InputError(
            f"{who}scheduler {cfg.scheduler!r} does not run in {mode} mode "
            f"({arg_name('resources', style)}{'' if style == 'cli' else cfg.resources}; it supports "
            f"{', '.join(spec.modes)})"
        )
    if cfg.workers is not None and cfg.cluster is not None:
        raise InputError(f"{who}give either {arg_name('workers', style)} or {arg_name('cluster', style)}, not both")
    if cfg.workers is None and cfg.cluster is None:
        raise InputError(f"{who}give a datacenter: {arg_name('workers', style)} or {arg_name('cluster', style)}")
    _check_file(cfg.trace, "trace", who, arg_name("trace", style))
    if cfg.cluster is not None:
        _check_file(cfg.cluster, "cluster", who, arg_name("cluster", style))
    if cfg.faults is not None:
        from megha.runner.faults import load_faults

        try:
            load_faults(cfg.faults)
        except InputError as e:
            raise InputError(f"{who}{e}") from None


def _config(
    scheduler: str,
    trace: str,
    workers: int | None,
    cluster: str | None,
    run: dict[str, Any],
    options: dict[str, Any],
    who: str,
    style: str = "api",
) -> RunConfig:
    """A validated RunConfig, with errors that speak of the function's arguments (or the CLI's flags)."""
    if workers is not None and cluster is not None:
        raise InputError(f"{who}give either {arg_name('workers', style)} or {arg_name('cluster', style)}, not both")
    data = {"scheduler": scheduler, "trace": trace, "workers": workers, "cluster": cluster, **run}
    data["options"] = {**dict(run.get("options") or {}), **options}
    cfg = build_config(data, who, style)
    validate_config(cfg, who, style)
    return cfg


def _check_file(ref: str, kind: str, who: str, arg: str) -> None:
    from megha import samples

    if ref.startswith(samples.PREFIX):
        table = samples.TRACES if kind == "trace" else samples.CLUSTERS
        name = ref[len(samples.PREFIX) :]
        if name not in table:
            refs = [f"sample:{n}" for n in table]
            raise InputError(
                f"{who}{arg} unknown bundled {kind} {ref!r}{suggest(ref, refs)}; bundled: {', '.join(refs)}"
            )
    elif not Path(ref).exists():
        raise InputError(f"{who}{arg} {ref}: no such file")


def _split(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Keyword arguments → (RunConfig fields, scheduler options)."""
    run: dict[str, Any] = {}
    opts: dict[str, Any] = {}
    for k, v in kwargs.items():
        k = _ALIASES.get(k, k)
        if k in RUN_FIELDS:
            run[k] = v
        else:
            opts[k] = v
    return run, opts


def simulate(
    scheduler: str = "megha",
    trace: str = "sample:GOOG_subtrace",
    *,
    workers: int | None = None,
    cluster: str | None = None,
    seed: int = 0,
    progress: Callable[[float, int, int], None] | None = None,
    **options: Any,
) -> Result:
    """Simulate one scheduler on one trace and datacenter (``megha simulate``).

    ``trace``: a ``.tr``/``.tr.gz``/``.parquet`` file or ``sample:NAME``. The datacenter: ``workers=N`` generates
    one, ``cluster=`` loads a file or ``sample:NAME``; neither gives the papers' 10,000-worker file. Other keyword
    arguments are run settings (fields of :class:`megha.config.RunConfig`: ``gms``, ``lms``, ``max_jobs``,
    ``load_scale``, ``constraints``, ``resources``, ``capacity``, ``demand``, ``network_delay``,
    ``truncate_durations``, ``dephase``, …) or, for any other name, scheduler options (``heartbeat=10``; see
    :func:`schedulers` and ``megha schedulers``); ``options={...}`` passes options as a dict.
    ``progress(now, done, total)`` is called during long runs.
    """
    from megha.runner import simulate as run

    run_kw, opts = _split(options)
    if cluster is None and workers is None:
        from megha.samples import DEFAULT_CLUSTER

        cluster = DEFAULT_CLUSTER
    cfg = _config(scheduler, trace, workers, cluster, {"seed": seed, **run_kw}, opts, "simulate(): ")
    return Result(run(cfg, progress=progress))


def compare(
    schedulers: Iterable[str] | str | None = None,
    trace: str = "sample:GOOG_subtrace",
    *,
    workers: int | None = None,
    cluster: str | None = None,
    seed: int = 0,
    max_jobs: int | None = 1000,
    results: dict[str, Result] | None = None,
    **options: Any,
) -> pd.DataFrame:
    """Run several schedulers on the same workload and datacenter (``megha compare``); one row per scheduler,
    indexed by name: delay percentiles (seconds), mean utilization (a fraction), inconsistencies, infeasible
    tasks, wall time and whether the run completed.

    ``schedulers``: names (a list or a comma-separated string); default: the command line's default comparison
    (every scheduler registered with ``in_compare``). Every name and option is checked before the first run.
    ``max_jobs`` defaults to 1,000 as in ``megha compare`` (None: the whole trace). Without ``workers``/``cluster``
    the papers' datacenter for the trace is used (the Google sample: 20,000 generated workers). Keyword arguments
    are as for :func:`simulate`; scheduler options apply to every scheduler that has them and must belong to at
    least one. Pass a dict as ``results`` to receive each scheduler's :class:`Result`.
    """
    import pandas as pd

    from megha.metrics.report import compare_rows, summarize
    from megha.runner import simulate as run

    names = default_compare(schedulers, "compare(): ")
    run_kw, opts = _split(options)
    if cluster is None and workers is None:
        from megha.samples import DEFAULT_CLUSTER, PAPER_WORKERS

        workers = PAPER_WORKERS.get(trace)
        if workers is None:
            cluster = DEFAULT_CLUSTER
    cfgs = compare_configs(
        names, trace, workers, cluster, {"seed": seed, "max_jobs": max_jobs, **run_kw}, opts, "compare(): "
    )
    summaries = []
    for cfg in cfgs:
        r = Result(run(cfg))
        if results is not None:
            results[cfg.scheduler] = r
        summaries.append(summarize(r.raw))
    return pd.DataFrame(compare_rows(summaries)).set_index("scheduler")


def default_compare(schedulers: Iterable[str] | str | None, who: str = "") -> list[str]:
    """The schedulers of a comparison: the given names, or the default comparison set."""
    from megha.schedulers import registry

    if schedulers is None:
        return [n for n in registry.names() if registry.get(n).in_compare]
    if isinstance(schedulers, str):
        schedulers = schedulers.split(",")
    names = [s.strip() for s in schedulers if s.strip()]
    if not names:
        raise InputError(f"{who}no scheduler given")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"{who}scheduler(s) given twice: {', '.join(dup)}")
    return names


def compare_configs(
    names: list[str],
    trace: str,
    workers: int | None,
    cluster: str | None,
    run: dict[str, Any],
    options: dict[str, Any],
    who: str,
    explicit: bool = True,
    style: str = "api",
) -> list[RunConfig]:
    """Validate every run of a comparison before any starts. Options go to the schedulers whose options model
    has them; an option no scheduler has is an error. Schedulers that cannot run in the requested mode are an
    error when named (``explicit``), skipped otherwise."""
    from megha.schedulers import registry

    known = registry.names()
    bad = [n for n in names if n not in known]
    if bad:
        hints = "; ".join(f"{n!r}{suggest(n, known)}" for n in bad)
        raise InputError(f"{who}unknown scheduler(s) {hints}; known: {', '.join(known)}")
    if options:
        fields = set()
        for n in names:
            fields |= set(registry.get(n).options.model_fields)
        stray = [k for k in options if k not in fields]
        if stray:
            raise InputError(
                f"{who}option(s) {', '.join(stray)} belong to none of {', '.join(names)} (see `megha schedulers`)"
            )
    mode = "resource" if run.get("resources") else "slot"
    cfgs = []
    for n in names:
        spec = registry.get(n)
        if mode not in spec.modes and not explicit:
            continue
        mine = {k: v for k, v in options.items() if k in spec.options.model_fields}
        cfgs.append(_config(n, trace, workers, cluster, run, mine, who, style))
    if not cfgs:
        raise InputError(f"{who}none of the schedulers runs in {mode} mode")
    return cfgs


def sweep(
    spec: str | Path | dict[str, Any],
    out: str | Path | None = None,
    *,
    workers: int | None = None,
    address: str | None = None,
    resume: bool = False,
    force: bool = False,
    report: bool = True,
    progress: bool = False,
) -> pd.DataFrame:
    """Run a parameter sweep (``megha sweep``) and return its results table, one row per run (the
    ``results.parquet`` of the sweep directory, ``megha-sweep/NAME`` unless ``out``).

    ``spec``: a sweep file (``.toml``/``.json``) or the same structure as a dict (``{"base": {...}, "grid":
    {...}}``). ``workers``: runs at a time; ``address``: a Ray cluster (``"auto"``, ``"ray://host:10001"``) or
    ``"local"`` for a new local Ray instance. A directory with finished runs needs ``resume=True`` or
    ``force=True``.
    """
    import pandas as pd

    from megha.sweep.runner import run_sweep

    try:
        res = run_sweep(
            spec,
            out=out,
            workers=workers,
            address=address,
            resume=resume,
            force=force,
            progress=progress,
            log=(print if progress else (lambda s: None)),
            report=report,
        )
    except InputError as e:  # the sweep runner speaks the command line's terms
        msg = str(e)
        for flag, arg in (("--resume", "resume=True"), ("--force", "force=True"), ("--workers", "workers=")):
            msg = msg.replace(flag, arg)
        raise InputError(f"sweep(): {msg}") from None
    df = pd.read_parquet(res.table_path)
    df.attrs["out"] = str(res.out)
    return df
