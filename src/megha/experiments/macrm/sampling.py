"""``macrm-sampling`` — thesis Figs 3.4, 3.5, 3.7 and 3.8: service time vs load for the sampling techniques."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from megha.experiments.macrm.claims import sampling_claims
from megha.experiments.macrm.common import (
    NET,
    PAPER,
    PER_RESPONDER,
    WARMUP,
    _fmt_check,
    _pct,
    _stats,
    _table,
    fmt_ms,
)
from megha.experiments.macrm.inputs import (
    cluster,
    poisson_jobs,
    service_times,
    shift,
    simulate_inputs,
    slot_background,
)
from megha.experiments.registry import ReproContext, experiment
from megha.metrics.plots import new_grid, save

SAMPLING_VARIANTS = {
    "power of two": {"rate": "fixed", "doubling": False, "centralized": False, "max_retries": 50},
    "doubling": {"rate": "fixed", "doubling": True, "centralized": False, "max_retries": 50},
    "adaptive": {"rate": "adaptive", "doubling": True, "centralized": False, "max_retries": 50},
    "adaptive + centralized": {"rate": "adaptive", "doubling": True, "centralized": True},
}


@experiment(
    "macrm-sampling",
    "average service time vs load for power-of-two sampling, doubling, "
    "the adaptive rate, and adaptive + the switch to centralized mode (200 four-core machines)",
    "macrm",
    figures="Figs. 3.4, 3.5, 3.7, 3.8",
    claims=lambda doc, ctx: sampling_claims(doc),
    quick_note="6 loads, 60 jobs per point",
)
def run_sampling(ctx: ReproContext) -> dict:
    """Experiment ``macrm-sampling``: average service time vs load for MACRM's sampling variants (Figs. 3.4, 3.5,
    3.7, 3.8)."""
    loads = [0.6, 0.7, 0.8, 0.85, 0.9, 0.95] if ctx.quick else [0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]
    n_jobs = int(ctx.extra.get("jobs", 60 if ctx.quick else 100))
    n_nodes, cores = 200, 4
    base = {
        "heartbeat": 1.0,
        "sampling_timeout": 0.005,
        "jm_demand": {"cpu": 1.0},
        "trackers": 1,
        "per_responder": str(ctx.extra.get("per_responder", PER_RESPONDER)),
        "round_end": str(ctx.extra.get("round_end", "all")),
    }
    rows, res_doc = [], {}
    for load in loads:
        rng = np.random.default_rng([ctx.seed, round(load * 100)])
        dc = cluster(
            np.full((n_nodes, 1), float(cores)),
            slot_background(n_nodes, cores, load, rng),
            ("cpu",),
            f"ch3-{n_nodes}x{cores}",
        )
        w = shift(poisson_jobs(n_jobs, rng), WARMUP)
        for name, opts in SAMPLING_VARIANTS.items():
            r = simulate_inputs(
                w, dc, "macrm", {**base, **opts}, seed=ctx.seed, network_delay=NET, label=f"poisson{n_jobs}"
            )
            st = service_times(r)
            c = r.counters
            row = {
                "load": f"{round(load * 100)} %",
                "variant": name,
                **{f"service_{k}": v for k, v in _stats(st).items()},
                "failed_rounds_per_job": c.get("macrm_jm_sampling_failures", 0) / n_jobs,
                "samples_per_job": c.get("macrm_jm_samples", 0) / n_jobs,
                "leftover_to_central": c.get("macrm_jm_leftover_to_central", 0),
                "central_s": c.get("macrm_arb_time_central_ms", 0) / 1000.0,
                "completed": r.unfinished_reason is None,
            }
            rows.append(row)
            res_doc.setdefault(name, {})[f"{load:.2f}"] = row
        ctx.log(
            f"  load {100 * load:.0f} %: "
            + ", ".join(
                f"{r['variant']} {fmt_ms(r['service_mean'])} ({r['failed_rounds_per_job']:.2f} failed rounds/job)"
                for r in rows[-len(SAMPLING_VARIANTS) :]
            )
        )
    _table(
        rows,
        ctx.out / "sampling",
        [
            "load",
            "variant",
            "service_mean",
            "service_p50",
            "failed_rounds_per_job",
            "samples_per_job",
            "leftover_to_central",
            "central_s",
            "completed",
        ],
    )
    _plot_sampling(res_doc, loads, ctx.out / "fig3_4-3_8_service_time.png")

    def at(name: str, load: float, key: str = "service_mean") -> float | None:
        return res_doc[name][f"{load:.2f}"][key]

    hi = [x for x in loads if x >= 0.85]
    checks = {
        "doubling_cuts_failed_rounds_at_high_load": all(
            at("doubling", x, "failed_rounds_per_job") <= at("power of two", x, "failed_rounds_per_job") for x in hi
        ),
        "adaptive_cuts_failed_rounds_at_high_load": all(
            at("adaptive", x, "failed_rounds_per_job") <= at("doubling", x, "failed_rounds_per_job") for x in hi
        ),
        "doubling_vs_power_of_two_at_95_pct": _pct(at("doubling", 0.95), at("power of two", 0.95)),
        "adaptive_vs_doubling_at_95_pct": _pct(at("adaptive", 0.95), at("doubling", 0.95)),
        "adaptive_vs_power_of_two_at_95_pct": _pct(at("adaptive", 0.95), at("power of two", 0.95)),
        "centralized_vs_adaptive_at_90_pct": _pct(at("adaptive + centralized", 0.9), at("adaptive", 0.9)),
        "centralized_vs_adaptive_at_95_pct": _pct(at("adaptive + centralized", 0.95), at("adaptive", 0.95)),
    }
    ctx.log("  " + ", ".join(_fmt_check(k, v) for k, v in checks.items()))
    return {
        "cluster": f"{n_nodes} x {cores} cores",
        "jobs_per_point": n_jobs,
        "loads": loads,
        "variants": SAMPLING_VARIANTS,
        "options": base,
        "results": res_doc,
        "checks": checks,
        "paper_reported": PAPER["sampling"],
    }


def _plot_sampling(doc: dict, loads: list[float], path: Path) -> None:
    fig, axes = new_grid(2, 2, 10, 7, dpi=110, sharex=True)
    panels = [
        ("Fig. 3.4: power of two", ["power of two"]),
        ("Fig. 3.5: + doubling after failure", ["power of two", "doubling"]),
        ("Fig. 3.7: + adaptive initial rate", ["power of two", "doubling", "adaptive"]),
        ("Fig. 3.8: + switch to centralized", ["adaptive", "adaptive + centralized"]),
    ]
    x = [100 * v for v in loads]
    for ax, (title, names) in zip(axes.ravel(), panels, strict=True):
        for n in names:
            y = [1000 * (doc[n][f"{v:.2f}"]["service_mean"] or np.nan) for v in loads]
            ax.plot(x, y, marker="o", label=n)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("average service time (ms)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    for ax in axes[1]:
        ax.set_xlabel("cluster load (%)")
    save(fig, path, dpi=110)
