"""Put a live run beside a simulation of the same (time-compressed) trace.

The live run's workload — the trace as submitted, with the measured submission times as arrivals and the same
task constraints — is written to ``trace.parquet`` and simulated with ``megha`` on the same datacenter and
Megha settings; both runs get the simulator's outputs (``live/`` and ``simulated/``), an overlaid delay CDF,
a table of delay percentiles, and *ordering* figures: how often a pair of jobs finishes in the same order in
both runs (concordance, Kendall's tau) and the rank correlation of per-job completion times (Spearman).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from megha.config import RunConfig
from megha.live.config import LiveConfig
from megha.metrics import summary as S
from megha.metrics.report import plot_cdfs, summarize, write_run
from megha.runner import RunResult, simulate


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    r = np.empty(x.size)
    r[order] = np.arange(x.size)
    return r


def ordering(a: np.ndarray, b: np.ndarray, max_pairs_n: int = 3000, seed: int = 0) -> dict[str, float | int]:
    """Agreement of the orders of ``a`` and ``b`` (same items): concordant pair fraction, Kendall tau, Spearman."""
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    n = a.size
    if n < 2:
        return {"jobs": int(n), "concordance": 1.0, "kendall_tau": 1.0, "spearman": 1.0}
    if n > max_pairs_n:
        idx = np.random.default_rng(seed).choice(n, max_pairs_n, replace=False)
        a2, b2 = a[idx], b[idx]
    else:
        a2, b2 = a, b
    sa = np.sign(a2[:, None] - a2[None, :])
    sb = np.sign(b2[:, None] - b2[None, :])
    iu = np.triu_indices(a2.size, 1)
    prod = (sa * sb)[iu]
    conc = int((prod > 0).sum())
    disc = int((prod < 0).sum())
    tau = (conc - disc) / max(conc + disc, 1)
    ra, rb = _ranks(a), _ranks(b)
    sp = float(np.corrcoef(ra, rb)[0, 1]) if ra.std() > 0 and rb.std() > 0 else 1.0
    return {"jobs": int(n), "concordance": conc / max(conc + disc, 1), "kendall_tau": float(tau), "spearman": sp}


def simulate_same(res: RunResult, cfg: LiveConfig, out: Path) -> RunResult:
    """Simulate Megha on exactly the workload and datacenter of a live run."""
    from megha.workload.tracefile import write_columnar

    out.mkdir(parents=True, exist_ok=True)
    path = out / "trace.parquet"
    write_columnar(res.workload, path)
    d, m = cfg.datacenter, cfg.megha
    rc = RunConfig(
        scheduler="megha",
        trace=str(path),
        cluster=d.cluster,
        workers=None if d.cluster else d.workers,
        gms=m.gms,
        lms=m.lms,
        seed=d.seed,
        constraints=d.constraints,
        resources=d.resources,
        capacity=d.capacity,
        demand=d.demand,
        dephase=False,
        # the same MeghaOptions, live overrides (heartbeat) included; with fairness shares each job keeps the user
        # queue the live client gave it (the workload written above carries them)
        options=m.sim_options() | ({"users": "trace"} if m.shares else {}),
    )
    return simulate(rc)


def compare_live_and_sim(res: RunResult, cfg: LiveConfig, out: str | Path) -> dict[str, Any]:
    """Write both runs' outputs under ``out`` and return the comparison document (also ``compare.json``)."""
    out = Path(out)
    live_doc = write_run(res, out / "live", plots=True)
    sim = simulate_same(res, cfg, out)
    sim_doc = write_run(sim, out / "simulated", plots=False)
    jl = S.job_table(res.workload, res.recorder, res.feasible)
    js = S.job_table(sim.workload, sim.recorder, sim.feasible)
    order = {"completion": ordering(jl["completion"], js["completion"]), "delay": ordering(jl["delay"], js["delay"])}
    live_doc = dict(live_doc, scheduler="megha (live)")
    sim_doc = dict(sim_doc, scheduler="megha (simulated)")
    plot_cdfs(
        {"megha (live)": jl["delay"], "megha (simulated)": js["delay"]},
        out / "delay_cdf.png",
        title=f"{res.workload.name}: live vs simulated",
    )
    doc = {"live": live_doc, "simulated": sim_doc, "ordering": order}
    (out / "compare.json").write_text(
        json.dumps({"runs": [_row(live_doc), _row(sim_doc)], "ordering": order}, indent=2) + "\n"
    )
    return doc


def _row(s: dict) -> dict:
    return {
        "scheduler": s["scheduler"],
        **{f"delay_{k}": s["delay"].get(k) for k in ("mean", "p50", "p90", "p99", "max")},
        "allocation_p50": s["allocation_time"]["total"].get("p50"),
        "utilization_mean": s["utilization_mean"],
        "completed": s["completed"],
        "tasks_completed": s["tasks_completed"],
    }


__all__ = ["compare_live_and_sim", "ordering", "simulate_same", "summarize"]
