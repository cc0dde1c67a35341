"""The authors' own result files, reproduced: the fidelity profiles (``-o profile=megha20|iot23``) checked against
the numbers the papers' simulators wrote.

The Megha 2020 authors shipped their simulator's per-job results for the Google sub-trace on 10,000 unconstrained
single-slot workers (``logs/Final Analysis``; summarized in the project's notes on the reference simulators):

* 1 GM × 1 LM ("Megha centralised"): delay median 0.034 s, p90 7.99 s, p99 417.1 s, mean 29.1 s;
* 4 GMs × 25 LMs: median 2.03 s, p90 42.7 s, p99 1,473.2 s, mean 67.7 s;
* 4 GMs × 25 LMs at 50,000 workers: 0.0015 / 0.002 / 0.002 s and mean 0.002 s (no queueing at all);
* their Sparrow run on the 10,000 workers: median 3,877.5 s, p90 6,715.1 s, p99 14,198.1 s, mean 4,524.1 s (the
  Sparrow parameters they used are not recorded; informational).

The IoT 2023 authors' PigeonC simulator on YH1_sub with its 10k cluster file (``pigeon_D10M100S10000``): median
1,691.5 s, p99 251,975 s. Their Yahoo full-trace results are not reproduced: that trace is not bundled.

Each run here is ours with the matching profile (``megha``/``megha-central`` ``-o profile=megha20``, durations
truncated and arrivals de-phased as that simulator loads the trace; ``pigeonc -o profile=iot23``). The authors
published one run per configuration, one draw of their simulator's random choices; ours are ``--set seeds=N``
runs (default 3; 1 with ``--quick``) and the claims check the **median over seeds** of each statistic, with every
seed's value in ``runs.csv``. Tolerances are the ones the project set itself for these profiles: p99 within 25 %,
p90 within 30 %, the median within a factor 2 (a median of a few seconds moves with a single heartbeat), the mean
within 25 %. ``--quick`` runs the two 10,000-worker Megha configurations once and skips the rest (reported as not
measured). ``--set cases=a,b`` runs only those cases; ``--set max_jobs=N`` the first N jobs of each trace (a smoke
test: the authors' figures are for whole traces).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from megha.config import RunConfig
from megha.experiments.registry import ReproContext, experiment

GOOG = "sample:GOOG_subtrace"
STATS = ("p50", "p90", "p99", "mean")


def _megha20(workers: int, gms: int, lms: int) -> dict[str, Any]:
    """A Megha run as the 2020 authors' simulator made it: the Google sub-trace, unconstrained single-slot workers."""
    return dict(
        scheduler="megha",
        trace=GOOG,
        workers=workers,
        gms=gms,
        lms=lms,
        constraints=False,
        options={"profile": "megha20"},
    )


#: case id -> (what, the authors' delay statistics in seconds, how we run it)
CASES: dict[str, dict[str, Any]] = {
    "megha20-1x1": {
        "what": "Megha 1 GM × 1 LM, GOOG_subtrace, 10,000 unconstrained workers",
        "authors": {"p50": 0.034, "p90": 7.99, "p99": 417.1, "mean": 29.1},
        "config": _megha20(10_000, 1, 1),
        "quick": True,
    },
    "megha20-4x25": {
        "what": "Megha 4 GMs × 25 LMs, GOOG_subtrace, 10,000 unconstrained workers",
        "authors": {"p50": 2.03, "p90": 42.7, "p99": 1473.2, "mean": 67.7},
        "config": _megha20(10_000, 4, 25),
        "quick": True,
    },
    "megha20-4x25-50k": {
        "what": "Megha 4 GMs × 25 LMs, GOOG_subtrace, 50,000 unconstrained workers",
        "authors": {"p50": 0.0015, "p90": 0.002, "p99": 0.002, "mean": 0.002},
        "config": _megha20(50_000, 4, 25),
        "quick": False,
    },
    "sparrow-10k": {
        "what": "Sparrow, GOOG_subtrace, 10,000 unconstrained workers (the authors' Sparrow parameters unrecorded)",
        "authors": {"p50": 3877.5, "p90": 6715.1, "p99": 14198.1, "mean": 4524.1},
        "config": dict(scheduler="sparrow", trace=GOOG, workers=10_000, constraints=False),
        "quick": False,
        "informational": True,
    },
    "pigeonc-iot23": {
        "what": "PigeonC 10 distributors × 100 masters, YH1_sub, the authors' 10k constrained cluster",
        "authors": {"p50": 1691.5, "p99": 251975.0},
        "config": dict(
            scheduler="pigeonc",
            trace="sample:YH1_sub",
            cluster="sample:pigeon_D10M100S10000",
            constraints=True,
            options={"profile": "iot23"},
        ),
        "quick": False,
    },
}

#: statistic -> (kind, tolerance): "pct" within that many per cent, "factor" within that factor
TOLERANCE: dict[str, tuple[str, float]] = {
    "p50": ("factor", 2.0),
    "p90": ("pct", 30.0),
    "p99": ("pct", 25.0),
    "mean": ("pct", 25.0),
}


def _seeds(ctx: ReproContext) -> list[int]:
    n = int(ctx.extra.get("seeds", 1 if ctx.quick else 3))
    if n < 1:
        from megha.errors import InputError

        raise InputError(f"--set seeds={n}: give at least one seed")
    return [ctx.seed + i for i in range(n)]


def run_case(ctx: ReproContext, case: str, seed: int) -> dict[str, Any]:
    """One seed of one case: its delay statistics (seconds)."""
    from megha.metrics.report import summarize

    cfg = RunConfig(seed=seed, max_jobs=ctx.extra.get("max_jobs"), **CASES[case]["config"])
    doc = summarize(ctx.simulate(cfg, label=f"{case} seed {seed}"))
    d = doc["delay"]
    row = {"case": case, "seed": seed, **{k: d.get(k) for k in STATS}, "completed": doc["completed"]}
    ctx.log(f"    p50 {d['p50']:.4g} s, p90 {d['p90']:.4g} s, p99 {d['p99']:.4g} s, mean {d['mean']:.4g} s")
    return row


def _median(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return float(np.median(vals)) if vals else None


@experiment(
    "authors-results",
    "the fidelity profiles against the authors' shipped result files: Megha 2020 (GOOG_subtrace, 1×1 and 4×25 at "
    "10k, 4×25 at 50k, their Sparrow run) and the IoT 2023 PigeonC (YH1_sub)",
    "megha20",
    quick_note="the two 10,000-worker Megha configurations, one seed",
    figures="the authors' result files",
    claims=lambda doc, ctx: reference_claims(doc),
)
def run(ctx: ReproContext) -> dict:
    """Experiment ``authors-results``: the fidelity profiles against the authors' shipped result files."""
    from megha.metrics.format import markdown_table
    from megha.metrics.tables import write_csv

    only = ctx.extra.get("cases")
    names = [c.strip() for c in str(only).split(",")] if only else list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        from megha.errors import InputError

        raise InputError(f"--set cases=: unknown case {unknown[0]!r} (cases: {', '.join(CASES)})")
    seeds = _seeds(ctx)
    rows: list[dict] = []
    cases: dict[str, dict] = {}
    for name in names:
        spec = CASES[name]
        if ctx.quick and not spec["quick"]:
            ctx.log(f"  {name}: skipped with --quick")
            continue
        ctx.log(f"  [bold]{name}[/]: {spec['what']}")
        runs = [run_case(ctx, name, s) for s in seeds]
        rows.extend(runs)
        cases[name] = {
            "what": spec["what"],
            "authors": spec["authors"],
            "seeds": seeds,
            "median_over_seeds": {k: _median(runs, k) for k in STATS},
            "per_seed": runs,
            "informational": bool(spec.get("informational")),
        }
    write_csv(rows, ctx.out / "runs.csv")
    table = table_rows(cases)
    md = markdown_table(table, ["case", "statistic", "authors", "ours (median)", "seeds min–max"])
    (ctx.out / "authors_results.md").write_text(md)
    (ctx.out / "runs.json").write_text(json.dumps(cases, indent=2))
    ctx.log(md)
    return {"cases": cases, "seeds": seeds, "tolerance": {k: list(v) for k, v in TOLERANCE.items()}, "table": table}


def table_rows(cases: dict[str, dict]) -> list[dict[str, str]]:
    """One row per (case, statistic) the authors reported: theirs, our median over seeds, our range."""
    from megha.metrics import format as F

    out = []
    for name, c in cases.items():
        for k, ref in c["authors"].items():
            vals = [r[k] for r in c["per_seed"] if r.get(k) is not None]
            out.append(
                {
                    "case": name,
                    "statistic": k,
                    "authors": F.duration(ref),
                    "ours (median)": F.duration(c["median_over_seeds"].get(k)),
                    "seeds min–max": f"{F.duration(min(vals))} – {F.duration(max(vals))}" if vals else F.MISSING,
                }
            )
    return out


# --- claims ------------------------------------------------------------------------------------------------------
WHY = {
    "megha20-4x25": "the authors published one run; our p99 varies by about ±15 % between seeds (runs.csv) while the "
    "median and the mean match theirs: their tail is one draw of the random partition and node choices",
    "megha20-1x1": "",
    "megha20-4x25-50k": "",
    "sparrow-10k": "the Sparrow parameters of the authors' run are not recorded (the notes on their simulator: "
    "'not verified'); ours is the Sparrow paper's defaults (probe ratio 2, late binding) without constraints",
    "pigeonc-iot23": "",
}


def reference_claims(doc: dict) -> list:
    """For every case and statistic the authors reported: our median over seeds within the tolerance."""
    from megha.experiments import claims as C

    out = []
    for name, spec in CASES.items():
        c = doc.get("cases", {}).get(name)
        for k, ref in spec["authors"].items():
            measured = None if c is None else c["median_over_seeds"].get(k)
            kind, tol = TOLERANCE[k]
            what = f"{spec['what']}: delay {k} as in the authors' result file"
            note = "(informational)" if spec.get("informational") else ""
            if name == "megha20-4x25-50k":  # no queueing at all: every delay a few message hops
                out.append(
                    C.at_most(
                        f"{name}/{k}",
                        "authors' results",
                        what + " (no queueing: a few milliseconds)",
                        measured,
                        0.01,
                        paper=C.fmt_seconds(ref),
                        fmt=C.fmt_seconds,
                        why_not=WHY[name],
                    )
                )
            elif kind == "factor":
                out.append(
                    C.within_factor(
                        f"{name}/{k}", "authors' results", what, measured, ref, tol, why_not=WHY[name], note=note
                    )
                )
            else:
                out.append(
                    C.within_pct(
                        f"{name}/{k}", "authors' results", what, measured, ref, tol, why_not=WHY[name], note=note
                    )
                )
    return out
