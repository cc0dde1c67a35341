"""Megha paper (seed 000) §VI-A: Megha vs Sparrow (Figs. 3-4) and decentralized vs centralized Megha (Fig. 6).

* ``megha20-sparrow`` — allocation time (task start − arrival) and delay in job response time, median … 99.99th
  percentile, of Megha and Sparrow (and Megha 1 GM × 1 LM) on 10,000 constrained single-slot workers
  (``sample:megha_G5L5S10000``). The paper used a 10,173-task Cloudera sample that is not public; we use the
  bundled synthetic Facebook sub-trace (SWIM, like the Cloudera traces) and the Google sub-trace. No processing
  costs for anyone, one-way network delay 0.5 ms (the Sparrow simulator's only costs). The paper's finding:
  Sparrow's median allocation time is below Megha's, but its tail is far longer (tens of seconds, max 100 s,
  vs Megha's < 1.5 s): two orders of magnitude at the 99th percentile.
* ``megha20-central`` — Megha (5 GMs × 5 LMs at 10,000 workers, 5 × 10 at 20,000: 400-worker partitions) vs the
  same code with 1 GM × 1 LM, and the YARN-like RM, on the constrained Facebook sub-trace. The paper's finding:
  the centralized configuration has much higher allocation times than Megha, more so at 20,000 workers.

  Centralization only costs time when components have processing costs. Where the paper's costs come from: "The
  Megha simulator is a single-node deployment of the prototype. Therefore, unlike the Sparrow simulator, it also
  takes into account scheduling overheads such as the overheads of message processing and the overheads from the
  decision-making incurred at each LM, GM, and worker node" (§V-B); the centralized configuration is slower "due
  to the decrease in parallelism in the GMs and LMs" (§VI-A); allocation time grows with "the amount of global
  state, and the size of each LM update that a GM must process as the number of workers increases" (§VI-C), and
  more LMs mean smaller updates, "resulting in smaller processing overheads per request" (§VI-D); a match is
  O(n · log_size partition_size) (§IV-B3). The paper gives no numbers but says processing is under 3 % of the
  (median) allocation time and framework queuing about 7 % (Fig. 7). So the cost model here is ours, in that
  shape: every message costs a GM, LM or RM ``base_cost`` (default 0.1 ms), plus ``per_task_per_worker`` (default
  10 ns) × the workers in the component's share of the state, per task in it — a GM's share is ``N / G``
  workers, an LM's ``N / L``, the RM's ``N``. Both are parameters (``--set base_cost=... per_task_per_worker=...``)
  and the experiment reports every case with the model and without any processing cost (``--set costs=model``
  or ``costs=none`` runs one of them); the share of processing in the median allocation time is reported to
  compare with Fig. 7's "< 3 %". The measured on-CPU cost of each scheduler, from real runs of the same state
  machines, is the run option ``--processing measured`` (not this experiment's model).

LM heartbeats every 10 s (the 2020 paper's setting). ``--quick`` runs the first jobs of each trace.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from megha.config import RunConfig
from megha.experiments.iot23 import bars, fmt, public, run_case, write_table
from megha.experiments.registry import ReproContext, experiment

MEGHA_CLUSTER = "sample:megha_G5L5S10000"
PERCENTILES = {"p50": 50.0, "mean": None, "p90": 90.0, "p99": 99.0, "p99.9": 99.9, "p99.99": 99.99}
HEARTBEAT = 10.0
BASE_COST = 1e-4
PER_TASK_PER_WORKER = 1e-8

PAPER_SPARROW = {
    "megha_allocation_max": "< 1.5 s",
    "sparrow_allocation_max": "~100 s (tens of seconds in the tail)",
    "median": "Sparrow's median allocation time below Megha's",
    "p99": "Megha two orders of magnitude below Sparrow",
}
PAPER_CENTRAL = "1 GM x 1 LM: very high allocation times compared with decentralized Megha (10k and 20k workers)"


def percentiles(values: np.ndarray) -> dict[str, float | None]:
    """The finite values' statistics named in ``PERCENTILES`` (percentiles, and the mean where no percentile is
    given); None for each when there are none."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {k: None for k in PERCENTILES}
    out: dict[str, float | None] = {}
    for k, q in PERCENTILES.items():
        out[k] = float(v.mean()) if q is None else float(np.percentile(v, q))
    return out


def percentile_bars(series: dict[str, dict[str, float | None]], path: str | Path, title: str) -> None:
    """Fig. 4: grouped bars of the percentiles, log scale."""
    from megha.metrics.plots import new_figure, save

    fig, ax = new_figure(7.2, 4.2, dpi=120)
    keys = list(PERCENTILES)
    x = np.arange(len(keys))
    width = 0.8 / max(len(series), 1)
    for i, (label, pct) in enumerate(series.items()):
        vals = [max(pct[k] or 0.0, 1e-6) for k in keys]
        ax.bar(x + (i - (len(series) - 1) / 2) * width, vals, width=width, label=label)
    ax.set_xticks(x, ["median" if k == "p50" else k for k in keys])
    ax.set_yscale("log")
    ax.set_ylabel("seconds")
    ax.set_title(title)
    ax.legend()
    ax.grid(True, axis="y", which="both", alpha=0.3)
    save(fig, path, dpi=120)


def _ratio(a: float | None, b: float | None) -> float:
    return float("nan") if a is None or b is None or b <= 0 else float(a / b)


@experiment(
    "megha20-sparrow",
    "allocation time and delay percentiles (median ... 99.99th), Megha vs Sparrow, 10,000 constrained workers",
    "megha20",
    figures="Figs. 3-4",
    claims=lambda doc, ctx: sparrow_claims(doc),
)
def run_sparrow(ctx: ReproContext) -> dict:
    """Experiment ``megha20-sparrow``: allocation time and delay percentiles, Megha vs Sparrow (Figs. 3-4)."""
    from megha.metrics.report import plot_cdfs

    workloads = [
        ("FB_sub", "sample:synthetic_FB_sub_2000jobs", 500 if ctx.quick else None),
        ("GOOG_subtrace", "sample:GOOG_subtrace", 2000 if ctx.quick else None),
    ]
    scheds = [
        ("Megha", "megha", {"heartbeat": HEARTBEAT}),
        ("Sparrow", "sparrow", {}),
        ("Megha_central", "megha-central", {"heartbeat": HEARTBEAT}),
    ]
    doc: dict = {"workloads": {}, "paper_reported": PAPER_SPARROW, "percentiles": list(PERCENTILES)}
    rows = []
    for name, trace, max_jobs in workloads:
        ctx.log(f"[bold]{name}[/]" + (f" (first {max_jobs} jobs)" if max_jobs else ""))
        runs = {}
        for label, sched, opts in scheds:
            cfg = RunConfig(
                scheduler=sched,
                trace=trace,
                cluster=MEGHA_CLUSTER,
                max_jobs=max_jobs,
                seed=ctx.seed,
                constraints=True,
                options=opts,
            )
            r = run_case(ctx, cfg, f"{name} {label}")
            r["label"] = label
            r["allocation_percentiles"] = percentiles(r["_alloc"])
            r["delay_percentiles"] = percentiles(r["_delays"])
            runs[label] = r
            for what in ("allocation", "delay"):
                rows.append(
                    {
                        "workload": name,
                        "scheduler": label,
                        "metric": what,
                        **r[f"{what}_percentiles"],
                        "completed": r["completed"],
                    }
                )
        plot_cdfs(
            {k: r["_alloc"] for k, r in runs.items()},
            ctx.out / f"fig3_allocation_cdf_{name}.png",
            title=f"{name}: allocation time",
            xlabel="allocation time (s)",
        )
        plot_cdfs(
            {k: r["_delays"] for k, r in runs.items()},
            ctx.out / f"delay_cdf_{name}.png",
            title=f"{name}: delay in job response time",
        )
        percentile_bars(
            {k: r["allocation_percentiles"] for k, r in runs.items()},
            ctx.out / f"fig4_allocation_percentiles_{name}.png",
            f"{name}: allocation time",
        )
        m, s = runs["Megha"], runs["Sparrow"]
        checks = {
            "sparrow_over_megha_delay_p99": _ratio(s["delay"]["p99"], m["delay"]["p99"]),
            "sparrow_over_megha_allocation_p99": _ratio(
                s["allocation_percentiles"]["p99"], m["allocation_percentiles"]["p99"]
            ),
            "sparrow_over_megha_allocation_p50": _ratio(
                s["allocation_percentiles"]["p50"], m["allocation_percentiles"]["p50"]
            ),
        }
        checks["sparrow_delay_p99_at_least_10x_megha"] = checks["sparrow_over_megha_delay_p99"] >= 10
        doc["workloads"][name] = {
            "trace": trace,
            "max_jobs": max_jobs,
            "workers": 10000,
            "runs": {k: public(r) for k, r in runs.items()},
            "checks": checks,
        }
        ctx.log(
            f"  Sparrow/Megha p99: delay {checks['sparrow_over_megha_delay_p99']:.3g}, allocation "
            f"{checks['sparrow_over_megha_allocation_p99']:.3g}"
        )
    write_table(rows, ctx.out / "percentiles", ["workload", "scheduler", "metric", *PERCENTILES, "completed"])
    return doc


def _processing(
    n_workers: int, gms: int, lms: int, base_cost: float = BASE_COST, per_worker: float = PER_TASK_PER_WORKER
) -> tuple[dict, dict]:
    """The processing model: per message ``base_cost`` at a GM, LM or RM, plus ``per_worker`` × the workers in the
    component's share of the state per task in the message (``N / G`` for a GM, ``N / L`` for an LM, ``N``)."""
    if base_cost == 0 and per_worker == 0:
        return {}, {}
    base = {"gm": base_cost, "lm": base_cost, "rm": base_cost}
    per = {
        "gm": per_worker * n_workers / gms,
        "lm": per_worker * n_workers / lms,
        "rm": per_worker * n_workers,
    }
    return base, per


def _central_params(ctx: ReproContext) -> tuple[list[str], float, float]:
    from megha.errors import InputError

    x = ctx.extra or {}
    costs = x.get("costs", "both")
    cases = {"both": ["model", "none"], "model": ["model"], "none": ["none"]}.get(str(costs))
    if cases is None:
        raise InputError(f"megha20-central: costs must be both, model or none (got {costs!r})")
    try:
        base = float(x.get("base_cost", BASE_COST))
        per = float(x.get("per_task_per_worker", PER_TASK_PER_WORKER))
    except (TypeError, ValueError):
        raise InputError("megha20-central: base_cost and per_task_per_worker must be numbers (seconds)") from None
    if base < 0 or per < 0:
        raise InputError("megha20-central: base_cost and per_task_per_worker must be >= 0")
    return cases, base, per


@experiment(
    "megha20-central",
    "allocation time of decentralized Megha vs 1 GM x 1 LM (and a YARN-like RM) at 10,000 and 20,000 workers",
    "megha20",
    figures="Fig. 6",
    claims=lambda doc, ctx: central_claims(doc),
)
def run_central(ctx: ReproContext) -> dict:
    """Experiment ``megha20-central``: decentralized Megha vs one GM and LM (and a YARN-like RM) (Fig. 6)."""
    from megha.metrics.report import plot_cdfs

    trace = "sample:synthetic_FB_sub_2000jobs"
    max_jobs = 700 if ctx.quick else None
    layouts = {10000: (5, 5), 20000: (5, 10)}
    cost_cases, base_cost, per_worker = _central_params(ctx)
    doc: dict = {
        "trace": trace,
        "max_jobs": max_jobs,
        "paper_reported": PAPER_CENTRAL,
        "sizes": {},
        "processing": {
            "base_per_message": base_cost,
            "per_task_per_worker_of_state": per_worker,
            "cases": cost_cases,
            "source": "our model in the shape the paper describes (§III, §V-B, §VI-A, §VI-C, §VI-D); no numbers in "
            "the paper beyond Fig. 7 (processing < 3 % of the median allocation time)",
        },
    }
    rows = []
    allocs: dict[str, np.ndarray] = {}
    for cost in cost_cases:
        sizes: dict = {}
        for n, (g, lm) in layouts.items():
            what = "with the processing model" if cost == "model" else "without processing costs"
            ctx.log(f"[bold]{n:,} workers, {what}[/]" + (f" (first {max_jobs} jobs)" if max_jobs else ""))
            runs = {}
            cases = [
                (f"Megha {g}x{lm}", "megha", g, lm, {"heartbeat": HEARTBEAT}),
                ("Megha 1x1", "megha-central", 1, 1, {"heartbeat": HEARTBEAT}),
                ("YARN-like", "yarn", 1, 1, {"heartbeat": 1.0}),
            ]
            for label, sched, gg, ll, opts in cases:
                base, per = _processing(n, gg, ll, base_cost, per_worker) if cost == "model" else ({}, {})
                cluster = MEGHA_CLUSTER if n == 10000 else None
                cfg = RunConfig(
                    scheduler=sched,
                    trace=trace,
                    cluster=cluster,
                    workers=None if cluster else n,
                    gms=gg if sched == "megha" else None,
                    lms=ll if sched == "megha" else None,
                    max_jobs=max_jobs,
                    seed=ctx.seed,
                    constraints=True,
                    options=opts,
                    processing=base,
                    processing_per_item=per,
                )
                r = run_case(ctx, cfg, f"{n} {label} ({cost})")
                r["label"] = label
                r["allocation_percentiles"] = percentiles(r["_alloc"])
                at = r["allocation_time"]  # Fig. 7: components by their median, as a share of the median total
                r["processing_share_of_median_allocation"] = _ratio(at["processing"]["p50"], at["total"]["p50"])
                runs[label] = r
                key = f"{label} ({n // 1000}k)" + ("" if cost == "model" else ", no costs")
                allocs[key] = r["_alloc"]
                rows.append(
                    {
                        "costs": cost,
                        "workers": n,
                        "scheduler": label,
                        **r["allocation_percentiles"],
                        "delay_p50": r["delay"]["p50"],
                        "delay_p99": r["delay"]["p99"],
                        "completed": r["completed"],
                    }
                )
            dec, cen = runs[f"Megha {g}x{lm}"], runs["Megha 1x1"]
            checks = {
                f"central_over_decentral_allocation_{k}": _ratio(
                    cen["allocation_percentiles"][k], dec["allocation_percentiles"][k]
                )
                for k in ("p50", "p90", "p99")
            }
            sizes[str(n)] = {"runs": {k: public(r) for k, r in runs.items()}, "checks": checks}
            ctx.log(
                f"  1x1 / decentralized allocation ({cost}): "
                + ", ".join(f"{k.rsplit('_', 1)[1]} {v:.3g}" for k, v in checks.items())
            )
        if cost == cost_cases[0]:
            doc["sizes"] = sizes
            doc["costs"] = cost
        if cost == "none":
            doc["without_costs"] = {"sizes": sizes}
    plot_cdfs(
        allocs,
        ctx.out / "fig6_allocation_cdf.png",
        title="allocation time: decentralized vs centralized",
        xlabel="allocation time (s)",
    )
    bars(
        {k: float(np.median(v)) if v.size else 0.0 for k, v in allocs.items()},
        ctx.out / "median_allocation.png",
        "median allocation time",
        "seconds",
        ref=None,
    )
    write_table(
        rows,
        ctx.out / "allocation",
        ["costs", "workers", "scheduler", *PERCENTILES, "delay_p50", "delay_p99", "completed"],
    )
    ctx.log(
        "  "
        + "; ".join(
            f"{r['workers'] // 1000}k {r['scheduler']} ({r['costs']}): p50 {fmt(r['p50'])} p99 {fmt(r['p99'])}"
            for r in rows
        )
    )
    return doc


# --- the paper's claims (megha.experiments.claims) -----------------------------------------------------------------
def sparrow_claims(doc: dict) -> list:
    """§VI-A, Figs. 3-4: Sparrow's median allocation time below Megha's, its tail far longer (up to 100 s), Megha's
    allocation time always below 1.5 s."""
    from megha.experiments import claims as C

    out = []
    for name, w in doc.get("workloads", {}).items():
        m, s = w["runs"]["Megha"], w["runs"]["Sparrow"]
        overloaded = (
            "the Google sub-trace offers more work than 10,000 workers hold for about ten hours (offered load p99 "
            "1.53, see iot23-google's Table 1): every scheduler queues for hours there; the paper's Cloudera "
            "sample was light"
            if name == "GOOG_subtrace"
            else ""
        )
        out.append(
            C.at_most(
                f"{name}/megha-max",
                "Fig. 3",
                f"{name}: Megha's allocation time consistently below 1.5 s (its maximum)",
                m["allocation_time"]["total"]["max"],
                1.5,
                paper="< 1.5 s",
                fmt=C.fmt_seconds,
                why_not=overloaded
                or "the tail is the jobs whose rarest task fits only 2-10 of the 10,000 workers: they wait for "
                "one of those (on the first 500 jobs the worst such job waits 358 s; 1 GM x 1 LM has the same "
                "tail); the paper's Cloudera sample had no synthesized constraints this rare",
            )
        )
        out.append(
            C.at_most(
                f"{name}/median",
                "Fig. 4",
                f"{name}: Sparrow's median allocation time below Megha's (Sparrow / Megha)",
                C.ratio(s["allocation_percentiles"]["p50"], m["allocation_percentiles"]["p50"]),
                1.0,
                paper="< 1× (Sparrow lower)",
                why_not=overloaded
                or "an uncontended placement costs Sparrow three one-way hops (probe, get-task, task: 1.5 ms) and "
                "Megha two (GM -> LM -> worker: 1 ms); the paper's Megha simulator ran the prototype with its "
                "processing costs while the Sparrow simulator charged network delay only",
            )
        )
        out.append(
            C.at_least(
                f"{name}/p99",
                "Fig. 4",
                f"{name}: Megha's 99th-percentile allocation time two orders of magnitude below Sparrow's",
                C.ratio(s["allocation_percentiles"]["p99"], m["allocation_percentiles"]["p99"]),
                100.0,
                paper="≈ 100×",
                why_not=overloaded
                or "Megha's own tail (the jobs whose rarest task fits a handful of workers, see megha-max) caps "
                "the ratio: Sparrow's p99 is far above Megha's, but not by 100x",
            )
        )
        out.append(
            C.within_factor(
                f"{name}/sparrow-max",
                "Fig. 3",
                f"{name}: Sparrow's allocation times run into tens of seconds (maximum about 100 s)",
                s["allocation_time"]["total"]["max"],
                100.0,
                10.0,
                paper="max ≈ 100 s",
                why_not=overloaded or "the length of Sparrow's tail depends on the trace's longest tasks",
            )
        )
    return out


def central_claims(doc: dict) -> list:
    """§VI-B, Fig. 6: the centralized configuration (1 GM x 1 LM) has much higher allocation times than Megha.

    The claims are checked on the runs with the processing-cost model (the paper's simulator charged its
    prototype's costs); the runs without processing costs are reported in each claim's note.
    """
    from megha.experiments import claims as C

    out = []
    p = doc.get("processing", {})
    cost = (
        "the penalty of the centralized configuration comes entirely from the processing-cost model the "
        f"experiment adds ({C.fmt_seconds(p.get('base_per_message'))} per message plus "
        f"{p.get('per_task_per_worker_of_state', 0) * 1e9:.3g} ns per worker of state per task; our model, the "
        "paper gives no numbers): without processing costs one GM and one LM are as fast as many"
    )
    without = doc.get("without_costs", {}).get("sizes", {})
    sizes = doc.get("sizes", {}) if doc.get("costs", "model") == "model" else {}
    for n, size in sizes.items():
        ch = size.get("checks", {})
        for k in ("p50", "p99"):
            nc = without.get(n, {}).get("checks", {}).get(f"central_over_decentral_allocation_{k}")
            note = f"Without processing costs: {C.fmt_ratio(nc)}." if nc is not None else ""
            out.append(
                C.at_least(
                    f"{n}/{k}",
                    "Fig. 6",
                    f"{int(n):,} workers: 1 GM x 1 LM allocation time ({k}) well above decentralized Megha's",
                    ch.get(f"central_over_decentral_allocation_{k}"),
                    2.0,
                    paper="'very high' (no number given)",
                    why_not=cost,
                    note=note,
                )
            )
    return out
