"""IoT 2023 paper (seed 004), Figs. 6, 8, 9 and 10: Megha vs PigeonC, Random vs Minimum-Constraints matching.

* ``iot23-synthetic`` — syn_250, syn_500 and syn_1000 (2,000 jobs of 250/500/1,000 one-second tasks, one job per
  second) on the papers' 10,000 constrained workers (Megha: 5 GMs × 5 LMs, ``sample:megha_G5L5S10000``; PigeonC:
  10 distributors × 100 masters over the same workers, ``sample:pigeon_D10M100S10000``).
* ``iot23-google`` — the Google sub-trace (10,000 jobs, 312,558 tasks) on 20,000 generated constrained workers
  (Megha 5 GMs × 10 LMs, i.e. 400-worker partitions as in the 10,000-worker file; PigeonC 10 × 100 masters of
  200 workers).

Each writes CDFs of the delay in job response time (Figs. 6/8), the CDF of utilization over time (Fig. 10), PigeonC's
mean utilization normalized by Megha's (Fig. 9), a table of delay percentiles, the workload's offered load — total
(Table 1) and per constraint (Fig. 4), see :func:`offered_load` — and ``summary.json`` with every run's delay
summary and counters next to the paper's reported numbers. ``megha-central`` (1 GM × 1 LM) is run as
the centralized reference, and ``PigeonC_iot23`` is PigeonC as the authors' simulator runs it (``profile=iot23``:
master weights from its constraint-set table, which counts for a task workers that do not satisfy it — what makes
the paper's PigeonC queues grow on the synthetic traces —, the fewest-constraints worker, the 2 s short/long cutoff
on the trace's field 3, FQW+1 short tasks per long one); ``Megha_iot23`` likewise when the Megha family offers
that profile. The paper averages three seeds; we run one.

``--quick``: the first jobs of each trace only (the onset of the queues, not their steady state).
``megha reproduce iot23-google --set workers=N`` runs the Google sub-trace on N workers instead (10,000 = the papers'
cluster files). At 10,000 the trace overloads the datacenter for about ten hours (offered load p99 1.53, constraint
5 at about 1.9x its workers in the busy hours): every scheduler, even an ideal centralized one, then has job delays of
thousands of seconds, and PigeonC's short-job priority gives it the lower median (see Table 1 / Fig. 4 outputs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from megha.config import RunConfig
from megha.experiments.registry import ReproContext, experiment
from megha.metrics import summary as S
from megha.schedulers import registry

if TYPE_CHECKING:
    from megha.model.topology import Datacenter
    from megha.model.workload import Workload

MEGHA_CLUSTER = "sample:megha_G5L5S10000"
PIGEON_CLUSTER = "sample:pigeon_D10M100S10000"
#: The paper ran the Google sub-trace on 20,000 workers (§5); on 10,000 it overloads the datacenter (its busy hours
#: offer 1.17x the capacity, and constraint 5's tasks 1.9x their workers), so every scheduler queues for hours.
GOOGLE_WORKERS = 20000
POLICIES = (("rand", "random"), ("min", "min-constraints"))

#: The paper's reported numbers (seed 004 §6), for side-by-side reading.
PAPER = {
    "syn_250": {
        "PigeonC_rand": {"p50": 1.003},
        "PigeonC_min": {"p50": 1.002},
        "Megha_rand": {"p50": 0.0015},
        "Megha_min": {"p50": 0.0015},
    },
    "syn_500": {
        "PigeonC_rand": {"p50": 507.74},
        "PigeonC_min": {"p50": 520.60},
        "Megha_rand": {"p50": 0.0015},
        "Megha_min": {"p50": 0.0015},
    },
    "syn_1000": {
        "PigeonC_rand": {"p50": 1416.88},
        "PigeonC_min": {"p50": 1449.3},
        "Megha_rand": {"p50": 0.67},
        "Megha_min": {"p50": 0.33},
    },
    "GOOG_subtrace": {
        "PigeonC_rand": {"p50": 0.0015},
        "PigeonC_min": {"p50": 0.0015},
        "Megha_rand": {"p50": 0.0015},
        "Megha_min": {"p50": 0.0015},
        "note": "Megha's p99 delay of short jobs 5.3x lower than PigeonC's",
    },
    "finding": "Megha's p99 delay at least 10x lower than PigeonC's; Megha's utilization higher",
}


# --- shared helpers (also used by megha20) -------------------------------------------------------------------
def run_case(ctx: ReproContext, cfg: RunConfig, label: str) -> dict:
    """Run one configuration; keep the summary and the per-job / per-task arrays the figures need."""
    from megha.metrics.report import summarize

    res = ctx.simulate(cfg, label=label)
    doc = summarize(res)
    jobs = S.job_table(res.workload, res.recorder, res.feasible)
    rec = res.recorder
    started = res.feasible & np.isfinite(rec.start)
    total = (
        float(res.datacenter.n_workers)
        if res.datacenter.capacity is None
        else float(res.datacenter.capacity[:, 0].sum())
    )
    weights = None if res.datacenter.capacity is None else res.workload.task_demand[:, 0]
    times, util = S.utilization_series(rec, total, weights)
    # Fig. 10 samples the same window as the mean (Fig. 9): the arrival window (see megha.metrics.summary)
    t0, t1 = doc["utilization"]["window_start"], doc["utilization"]["window_end"]
    grid = np.linspace(t0, t1, 4000) if t1 > t0 else np.array([t0])
    util_samples = S.step_at(times, util, grid)
    out = {
        "label": label,
        "scheduler": cfg.scheduler,
        "options": doc["config"]["options"],
        "completed": doc["completed"],
        "unfinished_reason": doc["unfinished_reason"],
        "delay": doc["delay"],
        "allocation_time": doc["allocation_time"],
        "utilization_mean": doc["utilization_mean"],
        "utilization_mean_whole_run": doc["utilization"]["mean_whole_run"],
        "counters": doc["counters"],
        "messages": doc["messages"],
        "deployment": doc["deployment"],
        "tasks": doc["tasks"],
        "wall_seconds": doc["wall_seconds"],
        "_delays": jobs["delay"],
        "_alloc": (rec.start - rec.arrival)[started],
        "_util": util_samples,
    }
    ctx.log(
        f"    delay p50 {fmt(doc['delay']['p50'])}, p99 {fmt(doc['delay']['p99'])}, "
        f"utilization {100 * doc['utilization_mean']:.1f} %"
    )
    return out


def fmt(x: float | None) -> str:
    """A duration as text (the project's formatter)."""
    from megha.metrics.format import duration

    return duration(x)


def public(run: dict) -> dict:
    """The JSON-able part of a :func:`run_case` result."""
    return {k: v for k, v in run.items() if not k.startswith("_")}


def write_table(rows: list[dict], path: Path, cols: list[str]) -> None:
    """CSV and a Markdown copy of the same rows (seconds and utilization fractions in the CSV; units and percents
    in the Markdown)."""
    from megha.metrics.format import markdown_table
    from megha.metrics.tables import write_csv

    write_csv(rows, path.with_suffix(".csv"), columns=cols)
    kinds = {c: "percent" for c in cols if c.startswith("util")}
    path.with_suffix(".md").write_text(markdown_table(rows, cols, kinds=kinds, float_kind="duration"))


def delay_row(group: str, run: dict) -> dict:
    """The table row of one run's job-delay percentiles."""
    d = run["delay"]
    return {
        "workload": group,
        "scheduler": run["label"],
        "p50": d["p50"],
        "mean": d["mean"],
        "p90": d["p90"],
        "p99": d["p99"],
        "p999": d["p999"],
        "max": d["max"],
        "util_mean": run["utilization_mean"],
        "completed": run["completed"],
    }


def utilization_cdf(series: dict[str, np.ndarray], path: Path, title: str) -> None:
    """Plot the CDFs of the runs' utilization series to ``path``."""
    from megha.metrics.report import plot_cdfs

    plot_cdfs(series, path, title=title, xlabel="utilization (fraction of workers busy)", log=False)


def bars(values: dict[str, float], path: Path, title: str, ylabel: str, ref: float | None = 1.0) -> None:
    """Plot ``values`` as a bar chart to ``path`` (a dashed line at ``ref`` if given)."""
    from megha.metrics.plots import new_figure, save

    fig, ax = new_figure(6.4, 4.0, dpi=120)
    keys = list(values)
    ax.bar(range(len(keys)), [values[k] for k in keys], color="tab:orange")
    ax.set_xticks(range(len(keys)), keys)
    if ref is not None:
        ax.axhline(ref, color="grey", lw=1, ls="--")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    save(fig, path, dpi=120)


# --- the workload's offered load (Table 1 and Fig. 4) ---------------------------------------------------------
LOAD_STATS = {"median": 50.0, "mean": None, "p95": 95.0, "p99": 99.0}


def _active_per_second(arrival: np.ndarray, duration: np.ndarray, t0: float, horizon: int) -> np.ndarray:
    """Tasks active in each whole second ``[t0 + s, t0 + s + 1)`` if every task started when it arrived."""
    lo = np.floor(arrival - t0).astype(np.int64)
    hi = np.floor(arrival + duration - t0).astype(np.int64)
    diff = np.bincount(lo, minlength=horizon + 1)[: horizon + 1] - np.bincount(hi, minlength=horizon + 1)[: horizon + 1]
    return np.cumsum(diff)[:horizon]


def _stats(x: np.ndarray) -> dict:
    out = {k: (float(x.mean()) if q is None else float(np.percentile(x, q))) for k, q in LOAD_STATS.items()}
    out["max"] = float(x.max())
    out["share_above_1"] = float((x > 1.0).mean())
    return out


def offered_load(workload: Workload, datacenter: Datacenter) -> dict:
    """The load a workload puts on a datacenter, as the IoT 2023 paper defines it (§2.3, Table 1, Fig. 4).

    Every task is taken to run from its arrival for its duration (no queuing); per second, the load is the number
    of active tasks over the number of workers, and the load of constraint ``k`` is the number of active tasks that
    need ``k`` over the number of workers that have ``k``. Returns the median, mean, p95, p99, max and the share of
    seconds above 1 of the total load (``"total"``) and of each constraint (``"per_constraint"``, a list of 21
    dicts, each also with ``"supply"``: its workers; constraints no worker has get ``None``). Seconds span from
    the first arrival to the last ideal completion. A share above 1 means queuing is unavoidable for any
    scheduler during those seconds.
    """
    from megha.model.constraints import NUM_CONSTRAINTS

    if workload.n_tasks == 0:
        raise ValueError("offered_load: the workload has no tasks")
    if datacenter.n_workers == 0:
        raise ValueError("offered_load: the datacenter has no workers")
    arr = workload.task_arrival
    dur = workload.task_duration
    t0 = float(np.floor(arr.min()))
    horizon = max(1, int(np.floor((arr + dur).max() - t0)) + 1)
    total = _active_per_second(arr, dur, t0, horizon) / float(datacenter.n_workers)
    tmask = workload.masks
    wmask = datacenter.worker_masks
    per: list[dict | None] = []
    for k in range(NUM_CONSTRAINTS):
        bit = np.uint32(1 << k)
        supply = int(np.count_nonzero(wmask & bit))
        need = (tmask & bit) != 0
        if supply == 0:
            per.append(None)
            continue
        if not need.any():
            zero = {key: 0.0 for key in LOAD_STATS} | {"max": 0.0, "share_above_1": 0.0}
            per.append(zero | {"supply": supply, "tasks": 0})
            continue
        load = _active_per_second(arr[need], dur[need], t0, horizon) / float(supply)
        per.append(_stats(load) | {"supply": supply, "tasks": int(need.sum())})
    return {"seconds": horizon, "workers": datacenter.n_workers, "total": _stats(total), "per_constraint": per}


def write_load(load: dict, name: str, out: Path) -> None:
    """Table 1 (``table1_load_<name>.md/.csv``) and Fig. 4 (``fig4_constraint_load_<name>.png``) of one workload."""
    from megha.metrics.plots import new_figure, save

    cols = ["constraint", "supply", "tasks", *LOAD_STATS, "max", "share_above_1"]
    rows = [{"constraint": "all", "supply": load["workers"], "tasks": None, **load["total"]}]
    rows += [{"constraint": k, **v} for k, v in enumerate(load["per_constraint"]) if v is not None]
    from megha.metrics.format import markdown_table
    from megha.metrics.tables import write_csv

    write_csv(rows, out / f"table1_load_{name}.csv", columns=cols)
    (out / f"table1_load_{name}.md").write_text(markdown_table(rows, cols))
    ks = [k for k, v in enumerate(load["per_constraint"]) if v is not None]
    fig, ax = new_figure(9.0, 4.0, dpi=120)
    width = 0.8 / len(LOAD_STATS)
    for i, stat in enumerate(LOAD_STATS):
        ax.bar(
            np.arange(len(ks)) + (i - (len(LOAD_STATS) - 1) / 2) * width,
            [load["per_constraint"][k][stat] for k in ks],
            width,
            label=stat,
        )
    ax.axhline(1.0, color="grey", lw=1, ls="--")
    ax.set_xticks(range(len(ks)), [str(k) for k in ks])
    ax.set_xlabel("constraint id")
    ax.set_ylabel("load (active tasks needing it / workers with it)")
    ax.set_title(f"{name}: per-constraint load on {load['workers']:,} workers")
    ax.legend()
    save(fig, out / f"fig4_constraint_load_{name}.png", dpi=120)


# --- the comparison -----------------------------------------------------------------------------------------
def _configs(trace: str, seed: int, max_jobs: int | None, workers: int | None) -> list[tuple[str, RunConfig]]:
    out = []
    common = dict(trace=trace, seed=seed, max_jobs=max_jobs, constraints=True)
    for short, pol in POLICIES:
        if workers is None:
            m = RunConfig(scheduler="megha", cluster=MEGHA_CLUSTER, options={"policy": pol}, **common)
            p = RunConfig(scheduler="pigeonc", cluster=PIGEON_CLUSTER, options={"policy": pol}, **common)
        else:
            m = RunConfig(
                scheduler="megha",
                workers=workers,
                gms=5,
                lms=max(1, workers // 2000),
                options={"policy": pol},
                **common,
            )
            p = RunConfig(
                scheduler="pigeonc",
                workers=workers,
                options={"policy": pol, "masters": 100, "distributors": 10},
                **common,
            )
        out.append((f"Megha_{short}", m))
        out.append((f"PigeonC_{short}", p))
    iot23 = {"profile": "iot23"}
    if workers is None:
        c = RunConfig(scheduler="megha-central", cluster=MEGHA_CLUSTER, **common)
        ref = RunConfig(scheduler="pigeonc", cluster=PIGEON_CLUSTER, options=iot23, **common)
        mref = RunConfig(scheduler="megha", cluster=MEGHA_CLUSTER, options=iot23, **common)
    else:
        c = RunConfig(scheduler="megha-central", workers=workers, **common)
        ref = RunConfig(
            scheduler="pigeonc", workers=workers, options={"masters": 100, "distributors": 10, **iot23}, **common
        )
        mref = RunConfig(
            scheduler="megha", workers=workers, gms=5, lms=max(1, workers // 2000), options=iot23, **common
        )
    out.append(("Megha_central", c))
    out.append(("PigeonC_iot23", ref))
    if "iot23" in registry.get("megha").profiles:  # the authors' Megha 3.0, when the Megha family offers it
        out.append(("Megha_iot23", mref))
    return out


def compare_workloads(ctx: ReproContext, workloads: list[tuple[str, str, int | None, int | None]], fig: str) -> dict:
    """Run every configuration on every workload ``(name, trace, max_jobs, workers)``; write tables and figures."""
    from megha.metrics.report import plot_cdfs

    rows: list[dict] = []
    doc: dict = {"workloads": {}, "paper_reported": PAPER}
    norm: dict[str, float] = {}
    fig9: dict[str, dict[str, float]] = {}
    from megha.runner import load_inputs

    for name, trace, max_jobs, workers in workloads:
        ctx.log(f"[bold]{name}[/]" + (f" (first {max_jobs} jobs)" if max_jobs else ""))
        configs = _configs(trace, ctx.seed, max_jobs, workers)
        load = offered_load(*load_inputs(configs[0][1]))
        write_load(load, name, ctx.out)
        tot = load["total"]
        worst = max(
            (k for k, v in enumerate(load["per_constraint"]) if v is not None),
            key=lambda k: load["per_constraint"][k]["p99"],
        )
        ctx.log(
            f"  offered load: median {tot['median']:.3g}, mean {tot['mean']:.3g}, p99 {tot['p99']:.3g} "
            f"(> 1 in {100 * tot['share_above_1']:.1f} % of seconds); highest per-constraint p99: "
            f"constraint {worst} at {load['per_constraint'][worst]['p99']:.3g}"
        )
        runs = {label: run_case(ctx, cfg, f"{name} {label}") for label, cfg in configs}
        for label, r in runs.items():
            r["label"] = label
            rows.append(delay_row(name, r))
        plot_cdfs(
            {k: r["_delays"] for k, r in runs.items()},
            ctx.out / f"{fig}_delay_cdf_{name}.png",
            title=f"{name}: delay in job response time",
        )
        utilization_cdf(
            {k: runs[k]["_util"] for k in ("Megha_rand", "PigeonC_rand", "PigeonC_iot23")},
            ctx.out / f"fig10_utilization_cdf_{name}.png",
            title=f"{name}: utilization over time",
        )
        mu = np.mean([runs[f"Megha_{p}"]["utilization_mean"] for p, _ in POLICIES])
        pu = np.mean([runs[f"PigeonC_{p}"]["utilization_mean"] for p, _ in POLICIES])
        norm[name] = float(pu / mu) if mu > 0 else float("nan")
        fig9[name] = _fig9(runs)
        checks = {
            f"megha_{p}_p99_below_pigeonc_{p}": runs[f"Megha_{p}"]["delay"]["p99"]
            < runs[f"PigeonC_{p}"]["delay"]["p99"]
            for p, _ in POLICIES
        }
        checks.update(
            {
                f"p99_ratio_pigeonc_over_megha_{p}": _ratio(
                    runs[f"PigeonC_{p}"]["delay"]["p99"], runs[f"Megha_{p}"]["delay"]["p99"]
                )
                for p, _ in POLICIES
            }
        )
        megha_ref = _megha_ref(runs)
        checks["p99_ratio_pigeonc_iot23_over_megha"] = _ratio(
            runs["PigeonC_iot23"]["delay"]["p99"], runs[megha_ref]["delay"]["p99"]
        )
        checks["p50_ratio_pigeonc_iot23_over_megha"] = _ratio(
            runs["PigeonC_iot23"]["delay"]["p50"], runs[megha_ref]["delay"]["p50"]
        )
        checks["megha_of_iot23_ratios"] = megha_ref
        doc["workloads"][name] = {
            "trace": trace,
            "max_jobs": max_jobs,
            "workers": workers or 10000,
            "runs": {k: public(r) for k, r in runs.items()},
            "normalized_utilization_pigeonc_over_megha": norm[name],
            "normalized_utilization": fig9[name],
            "offered_load": load,
            "checks": checks,
        }
        ctx.log(
            f"  PigeonC/Megha utilization {norm[name]:.3f}; p99 PigeonC/Megha "
            f"rand {checks['p99_ratio_pigeonc_over_megha_rand']:.3g}, "
            f"min {checks['p99_ratio_pigeonc_over_megha_min']:.3g}, "
            f"authors' PigeonC (iot23) over {megha_ref} {checks['p99_ratio_pigeonc_iot23_over_megha']:.3g}"
        )
    fig9_bars(fig9, ctx.out / "fig9_normalized_utilization.png")
    write_table(
        rows,
        ctx.out / "delays",
        ["workload", "scheduler", "p50", "mean", "p90", "p99", "p999", "max", "util_mean", "completed"],
    )
    (ctx.out / "normalized_utilization.json").write_text(json.dumps(norm, indent=2) + "\n")
    doc["normalized_utilization"] = norm
    doc["fig9"] = fig9
    return doc


FIG9 = {
    "arrival window": ("PigeonC", "utilization_mean"),
    "whole run": ("PigeonC", "utilization_mean_whole_run"),
    "authors' code, arrival window": ("PigeonC_iot23", "utilization_mean"),
    "authors' code, whole run": ("PigeonC_iot23", "utilization_mean_whole_run"),
}


#: prefix of the Fig. 9 ratios of the authors' code (:data:`FIG9`)
AUTHORS = "authors' code, "


def _megha_ref(runs: dict) -> str:
    """The Megha run the authors' PigeonC (``PigeonC_iot23``) is set beside: the authors' Megha 3.0 when run."""
    return "Megha_iot23" if "Megha_iot23" in runs else "Megha_rand"


def _fig9(runs: dict) -> dict[str, float]:
    """PigeonC's mean utilization over Megha's (both matching policies averaged, as the paper does): over the
    arrival window (our headline definition), over the whole run (until the last task ends, where a longer drain
    lowers the mean), and the same for the authors' code: PigeonC ``profile=iot23`` over Megha ``profile=iot23``
    (Megha Random when the Megha family offers no such profile)."""
    out = {}
    for key, (who, col) in FIG9.items():
        if who == "PigeonC":
            mu = np.mean([runs[f"Megha_{p}"][col] for p, _ in POLICIES])
            pu = np.mean([runs[f"PigeonC_{p}"][col] for p, _ in POLICIES])
        else:
            mu, pu = runs[_megha_ref(runs)][col], runs[who][col]
        out[key] = float(pu / mu) if mu and mu > 0 else float("nan")
    return out


def fig9_bars(fig9: dict[str, dict[str, float]], path: Path) -> None:
    """Fig. 9: PigeonC / Megha mean utilization per workload, one bar per definition, values printed on the bars
    and the y axis zoomed to where they lie (the differences are a few per cent)."""
    from megha.metrics.plots import new_figure, save

    names = list(fig9)
    keys = list(FIG9)
    fig, ax = new_figure(7.6, 4.2, dpi=120)
    width = 0.8 / len(keys)
    vals = [v for n in names for v in fig9[n].values() if np.isfinite(v)]
    for i, k in enumerate(keys):
        ys = [fig9[n].get(k, np.nan) for n in names]
        xs = np.arange(len(names)) + (i - (len(keys) - 1) / 2) * width
        bars_ = ax.bar(xs, ys, width, label=k)
        ax.bar_label(bars_, labels=[f"{y:.3f}" if np.isfinite(y) else "" for y in ys], fontsize=6, rotation=90)
    lo = min([*vals, 1.0])
    ax.set_ylim(max(0.0, lo - 0.25 * (1.0 - lo) - 0.01), 1.0 + 0.25 * (1.0 - lo) + 0.02)
    ax.axhline(1.0, color="grey", lw=1, ls="--")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("PigeonC / Megha mean utilization")
    ax.set_title("Fig. 9: PigeonC's utilization normalized to Megha's")
    ax.legend(fontsize="x-small", loc="lower left")
    save(fig, path, dpi=120)


def _ratio(a: float | None, b: float | None) -> float:
    if a is None or b is None or b <= 0:
        return float("nan")
    return float(a / b)


@experiment(
    "iot23-synthetic",
    "Megha vs PigeonC (random / min-constraints) on syn_250/500/1000, 10,000 constrained workers",
    "iot23",
    figures="Figs. 6, 9, 10",
    claims=lambda doc, ctx: iot23_claims(doc, ctx, "Fig. 6"),
)
def run_synthetic(ctx: ReproContext) -> dict:
    """Experiment ``iot23-synthetic``: Megha vs PigeonC on syn_250/500/1000 (Figs. 6, 9, 10)."""
    jobs = 100 if ctx.quick else None
    workloads = [(n, f"sample:{n}", jobs, None) for n in ("syn_250", "syn_500", "syn_1000")]
    return compare_workloads(ctx, workloads, "fig6")


@experiment(
    "iot23-google",
    "Megha vs PigeonC (random / min-constraints) on the Google sub-trace, 20,000 constrained workers",
    "iot23",
    figures="Figs. 8, 9, 10",
    claims=lambda doc, ctx: iot23_claims(doc, ctx, "Fig. 8"),
)
def run_google(ctx: ReproContext) -> dict:
    """Experiment ``iot23-google``: Megha vs PigeonC on the Google sub-trace (Figs. 8, 9, 10)."""
    jobs = 1500 if ctx.quick else None
    workers = int(ctx.extra.get("workers", GOOGLE_WORKERS))
    if workers < 1:
        raise ValueError(f"iot23-google: workers must be positive, got {workers}")
    # 10,000 = the papers' cluster files (Megha 5 x 5 x 400, PigeonC 10 x 100 x 100); other sizes are generated
    return compare_workloads(
        ctx, [("GOOG_subtrace", "sample:GOOG_subtrace", jobs, None if workers == 10000 else workers)], "fig8"
    )


# --- the paper's claims (megha.experiments.claims) -----------------------------------------------------------------
#: PigeonC and Megha median delays the paper reports per workload (§6), Random matching
PAPER_P50 = {"syn_250": (1.003, 0.0015), "syn_500": (507.74, 0.0015), "syn_1000": (1416.88, 0.67)}

WHY_MILD_PIGEONC = (
    "PigeonC as the paper's text describes it queues far less than the authors' code: their distributor weights "
    "and worker choice (PigeonC_iot23 here, -o profile=iot23) make its masters' queues grow"
)


def iot23_claims(doc: dict, ctx: ReproContext, fig: str) -> list:
    """Claims of the IoT 2023 paper for Figs. 6/8 (delays), 9 (normalized utilization) and 10."""
    from megha.experiments import claims as C

    out = []
    for name, w in doc.get("workloads", {}).items():
        runs = w["runs"]
        d = {k: r["delay"] for k, r in runs.items()}
        r99 = C.ratio(d["PigeonC_rand"]["p99"], d["Megha_rand"]["p99"])
        out.append(
            C.at_least(
                f"{name}/p99-10x",
                fig,
                f"{name}: Megha's p99 delay at least 10x lower than PigeonC's (Random)",
                r99,
                10.0,
                paper="≥ 10× (abstract, §8)",
                why_not=WHY_MILD_PIGEONC + f"; the authors' code gives PigeonC/Megha p99 "
                f"{C.fmt_ratio(C.ratio(d['PigeonC_iot23']['p99'], d[_megha_ref(d)]['p99']))}",
            )
        )
        if name in PAPER_P50:
            pig, meg = PAPER_P50[name]
            out.append(
                C.within_factor(
                    f"{name}/pigeonc-p50",
                    fig,
                    f"{name}: PigeonC's median delay (Random)",
                    d["PigeonC_rand"]["p50"],
                    pig,
                    2.0,
                    why_not=WHY_MILD_PIGEONC + f" (authors' code: {C.fmt_seconds(d['PigeonC_iot23']['p50'])})",
                )
            )
            out.append(
                C.within_factor(
                    f"{name}/megha-p50",
                    fig,
                    f"{name}: Megha's median delay (Random)",
                    d["Megha_rand"]["p50"],
                    meg,
                    2.0,
                    why_not="the median is the three 0.5 ms hops of an uncontended placement (1.5 ms) or a "
                    "retry after an inconsistency (2.5 ms); the paper's 0.67 s on syn_1000 means most jobs "
                    "waited for a worker, which our Megha (work-conserving GM queues, 5 s deltas) avoids at 10 % load",
                )
            )
            out.append(
                C.at_least(
                    f"{name}/p50-10x",
                    fig,
                    f"{name}: Megha's median delay at least an order of magnitude below PigeonC's (Finding 1)",
                    C.ratio(d["PigeonC_rand"]["p50"], d["Megha_rand"]["p50"]),
                    10.0,
                    paper="≥ 10× (Finding 1)",
                    why_not=WHY_MILD_PIGEONC,
                )
            )
        else:
            for who in ("Megha_rand", "PigeonC_rand"):
                out.append(
                    C.within_factor(
                        f"{name}/{who}-p50",
                        fig,
                        f"{name}: {who.split('_')[0]}'s median delay about 1.5 ms",
                        d[who]["p50"],
                        0.0015,
                        2.0,
                        why_not="",
                    )
                )
        for who in ("Megha_rand", "PigeonC_rand") if name not in PAPER_P50 else ():
            orders = C.ratio(d[who]["p99"], d[who]["p50"])
            orders = None if orders is None else float(np.log10(orders))
            out.append(
                C.is_true(
                    f"{name}/{who}-spread",
                    fig,
                    f"{name}: {who.split('_')[0]}'s p99 delay 3 to 6 orders of magnitude above its median (Finding 2)",
                    None if orders is None else 2.5 <= orders < 6.5,
                    paper="3–6 orders",
                    measured_text=C.MISSING if orders is None else f"{orders:.1f} orders",
                    tolerance="rounds to 3–6",
                    why_not=f"the median is the {C.fmt_seconds(d[who]['p50'])} of an uncontended placement (three "
                    "0.5 ms hops), so any p99 above ~5,000 s is more than six orders above it; the paper's own "
                    "numbers for this trace (median 1.5 ms, delays up to 1.5e4 s) span seven",
                )
            )
        f9 = w.get("normalized_utilization") or {}
        for key in ("arrival window", "whole run"):
            v = f9.get(key)
            out.append(
                C.is_true(
                    f"{name}/fig9-{key.replace(' ', '-')}",
                    "Fig. 9",
                    f"{name}: Megha's mean utilization higher than PigeonC's ({key})",
                    None if v is None else v < 1.0,
                    paper="PigeonC / Megha < 1 (Finding 3)",
                    measured_text=C.MISSING if v is None else f"{v:.4f}",
                    tolerance="< 1",
                    why_not=(
                        "utilization is the work running at each instant: a job's delay here comes from its last "
                        "few tasks, so PigeonC runs nearly the same work in the window; "
                        if key == "arrival window"
                        else "the whole-run mean is work / (workers x span), and the span ends with the longest "
                        "task, the same for both; "
                    )
                    + WHY_MILD_PIGEONC
                    + f" (authors' code: {C.fmt_number(f9.get(AUTHORS + key))})",
                )
            )
        um = [runs[f"Megha_{p}"]["utilization_mean"] for p, _ in POLICIES]
        up = [runs[f"PigeonC_{p}"]["utilization_mean"] for p, _ in POLICIES]
        diff = 100 * max(abs(um[0] - um[1]), abs(up[0] - up[1]))
        out.append(
            C.at_most(
                f"{name}/util-policies",
                "Fig. 9",
                f"{name}: utilization under Random and Minimum Constraints within 0.5 percentage points (Megha, "
                "PigeonC)",
                diff,
                0.5,
                paper="< 0.5 %",
                fmt=lambda x: C.MISSING if x is None else f"{x:.2g} points",
                why_not="the two policies place different tasks first when the datacenter is saturated",
            )
        )
    return out
