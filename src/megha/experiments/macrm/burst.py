"""``macrm-burst`` — thesis Fig. 4.3 / Appendix A: maximum service time of bursts of jobs at 70-90 % load."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from megha.experiments.macrm.claims import burst_claims
from megha.experiments.macrm.common import (
    CH4_HEARTBEAT,
    GROUPS,
    NET_CH4,
    PAPER,
    PER_RESPONDER,
    WARMUP,
    _diag_summary,
    _fmt_check,
    _pct,
    _ratio,
    _service,
    _table,
    ch4_schedulers,
    fmt_ms,
    request_scale,
    sampler_diagnostics,
)
from megha.experiments.macrm.inputs import (
    _google_trace,
    burst_jobs,
    cluster,
    gaussian_background,
    google_machines,
    simulate_inputs,
)
from megha.experiments.registry import ReproContext, experiment
from megha.metrics.plots import new_panels, save


@experiment(
    "macrm-burst",
    "maximum service time of bursts of 5-20 jobs of 10-40 tasks at initial loads 70-90 % (MACRM, YARN, Sparrow)",
    "macrm",
    figures="Fig. 4.3, Appendix A",
    claims=lambda doc, ctx: burst_claims(doc),
    quick_note="loads 70/80/90 %, bursts 5 or 20 jobs of 10 or 40 tasks, one set",
)
def run_burst(ctx: ReproContext) -> dict:
    """Experiment ``macrm-burst``: maximum service time of job bursts (Fig. 4.3, Appendix A)."""
    n_nodes = int(ctx.extra.get("nodes", 500))
    if ctx.quick:
        loads, n_jobs, n_tasks, sets = [0.7, 0.8, 0.9], [5, 20], [10, 40], 1
    else:
        loads, n_jobs, n_tasks, sets = GROUPS, [5, 10, 15, 20], [10, 20, 30, 40], 5
    sets = int(ctx.extra.get("sets", sets))
    net = float(ctx.extra.get("net", NET_CH4))
    scale = request_scale(ctx)
    g = _google_trace()
    scheds = ch4_schedulers(
        n_nodes, str(ctx.extra.get("per_responder", PER_RESPONDER)), str(ctx.extra.get("round_end", "all")), net
    )
    samplers = [lab for lab, sched, *_ in scheds if sched == "macrm"]
    phys = google_machines(n_nodes)
    maxima: dict[str, dict[tuple, list[float]]] = {lab: {} for lab, *_ in scheds}
    diag: dict[str, dict[float, list[dict]]] = {lab: {L: [] for L in loads} for lab in samplers}
    for L in loads:
        for J in n_jobs:
            for T in n_tasks:
                for k in range(sets):
                    rng = np.random.default_rng([ctx.seed, k, round(L * 100), J, T])
                    dc = cluster(phys, gaussian_background(phys, L, rng), ("cpu", "mem"), f"google{n_nodes}")
                    at = WARMUP + float(rng.uniform(0.0, CH4_HEARTBEAT))  # bursts come at any heartbeat phase
                    w = burst_jobs(rng, J, T, at, max_duration=10.0, trace=g, scale=scale)
                    for lab, sched, opts, how in scheds:
                        r = simulate_inputs(
                            w,
                            dc,
                            sched,
                            opts,
                            seed=ctx.seed + k,
                            network_delay=net,
                            stall_timeout=600.0,
                            label=f"burst{J}x{T}",
                        )
                        if lab in diag:
                            diag[lab][L].append(sampler_diagnostics(r))
                        st = _service(r, how)
                        maxima[lab].setdefault((L, J, T), []).append(
                            float(np.max(st)) if np.isfinite(st).all() else np.nan
                        )
        fails = ", ".join(f"{lab} {_diag_summary(diag[lab][L])['failed_rounds_per_job']:.2f}" for lab in samplers)
        ctx.log(
            f"  {int(L * 100)} %: "
            + ", ".join(f"{lab} {fmt_ms(_mean_max(maxima[lab], L))}" for lab, *_ in scheds)
            + f" (mean of burst maxima); failed sampling rounds per job: {fails}"
        )
    rows = []
    results: dict = {}
    for lab, *_ in scheds:
        for (L, J, T), v in sorted(maxima[lab].items()):
            arr = np.array(v)
            ok = arr[np.isfinite(arr)]
            mean = float(ok.mean()) if ok.size else None
            rows.append(
                {
                    "scheduler": lab,
                    "load": f"{int(L * 100)} %",
                    "jobs": J,
                    "tasks": T,
                    "max_service_mean": mean,
                    "incomplete_bursts": int(arr.size - ok.size),
                }
            )
            results.setdefault(lab, {}).setdefault(f"{int(L * 100)}", {})[f"{J}x{T}"] = mean
    _table(rows, ctx.out / "burst", ["scheduler", "load", "jobs", "tasks", "max_service_mean", "incomplete_bursts"])
    _plot_burst(results, [lab for lab, *_ in scheds], loads, n_jobs, n_tasks, ctx.out / "fig4_3_burst.png")

    def avg(lab: str, L: float) -> float | None:
        return _mean_max(maxima[lab], L)

    checks = {
        "macrm_below_yarn_every_load": all((avg("MACRM", L) or 1e9) < (avg("YARN", L) or 0) for L in loads),
        "macrm_below_sparrow_at_85_90": all(
            (avg("MACRM", L) or 1e9) < (avg("Sparrow", L) or 0) for L in loads if L >= 0.85
        ),
        "macrm_below_sparrow_thesis_at_85_90": all(
            (avg("MACRM", L) or 1e9) < (avg("Sparrow-thesis", L) or 0) for L in loads if L >= 0.85
        ),
        **{f"macrm_vs_yarn_{int(L * 100)}_pct": _pct(avg("MACRM", L), avg("YARN", L)) for L in loads},
        **{f"macrm_vs_sparrow_{int(L * 100)}_pct": _pct(avg("MACRM", L), avg("Sparrow", L)) for L in loads},
        **{
            f"macrm_vs_sparrow_thesis_{int(L * 100)}_pct": _pct(avg("MACRM", L), avg("Sparrow-thesis", L))
            for L in loads
        },
        "sparrow_thesis_90_over_70": _ratio(avg("Sparrow-thesis", max(loads)), avg("Sparrow-thesis", min(loads))),
        "macrm_90_over_70": _ratio(avg("MACRM", max(loads)), avg("MACRM", min(loads))),
    }
    ctx.log("  " + ", ".join(_fmt_check(k, v) for k, v in checks.items()))
    diagnostics = {lab: {f"{int(L * 100)}": _diag_summary(diag[lab][L]) for L in loads} for lab in samplers}
    return {
        "nodes": n_nodes,
        "loads": loads,
        "jobs": n_jobs,
        "tasks": n_tasks,
        "sets": sets,
        "network_delay": net,
        "schedulers": {lab: {"scheduler": s, "options": o, "completion": how} for lab, s, o, how in scheds},
        "results": results,
        "sampler_diagnostics": diagnostics,
        "checks": checks,
        "paper_reported": PAPER["burst_ms_appendix_A"],
    }


def _mean_max(d: dict, L: float) -> float | None:
    v = np.array([x for (ll, _, _), xs in d.items() if ll == L for x in xs], dtype=np.float64)
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else None


def _plot_burst(
    results: dict, labels: list[str], loads: list[float], n_jobs: list[int], n_tasks: list[int], path: Path
) -> None:
    fig, axes = new_panels(len(labels), 4, 4, dpi=110, sharey=True)
    x = [100 * v for v in loads]
    for ax, lab in zip(axes, labels, strict=True):
        for J in n_jobs:
            for T in n_tasks:
                y = [1000 * (results[lab].get(f"{int(L * 100)}", {}).get(f"{J}x{T}") or np.nan) for L in loads]
                ax.plot(x, y, marker="o", label=f"{J} jobs x {T} tasks")
        ax.set_title(lab)
        ax.set_xlabel("initial load (%)")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("max service time per burst (ms)")
    axes[-1].legend(fontsize=7)
    save(fig, path, dpi=110)
