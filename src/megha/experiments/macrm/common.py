"""What the three MACRM reproductions share: the paper's reported numbers, chapter 4's scheduler line-up (MACRM,
YARN, Sparrow and the thesis's Sparrow), sampler diagnostics and table/plot helpers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from megha.errors import InputError
from megha.experiments.macrm.inputs import (
    CORES_PER_UNIT,
    GB_PER_UNIT,
    direct_service_times,
    service_times,
)
from megha.experiments.registry import ReproContext
from megha.metrics.result import RunResult

PAPER = {
    "service_time_ms_70": {"MACRM": 12.19, "Sparrow": 10.96},
    "macrm_vs_yarn": "32 % lower at 70 % load, 56 % lower at 90 % load",
    "macrm_vs_sparrow": "up to 49 % lower at 90 % load (behind Sparrow at 70 %)",
    "sparrow_growth": "Sparrow's service time grows steeply with load (Fig. 4.2; Appendix A, 5 jobs x 10 tasks: "
    "11.05 ms at 70 %, 14.47 at 80 %, 19.41 at 85 %, 28.68 at 90 %: x2.6 from 70 to 90 %), MACRM's "
    "does not (12.30 -> 14.55 ms)",
    "sampling": "doubling cuts service time > 25 % at 95 %; adaptive rate up to 21 % / 43 % better than doubling / "
    "power of two at 95 %; the switch to centralized mode lowers it further at >= 90 %",
    "burst_ms_appendix_A": {
        "Sparrow": {
            70: [[11.051, 11.330], [11.432, 12.594]],
            80: [[14.474, 15.888], [16.204, 22.760]],
            90: [[28.683, 33.108], [34.589, 59.986]],
        },
        "MACRM": {
            70: [[12.299, 12.681], [12.792, 14.489]],
            80: [[13.807, 14.975], [15.307, 21.280]],
            90: [[14.548, 14.973], [15.043, 16.698]],
        },
        "YARN": {
            70: [[19.240, 40.958], [43.758, 121.033]],
            80: [[24.029, 56.607], [58.158, 175.120]],
            90: [[37.219, 102.374], [78.323, 254.792]],
        },
        "layout": "[[5 jobs x 10 tasks, 5 x 40], [20 x 10, 20 x 40]] (20 x * at 90 % for YARN: 15 jobs)",
    },
}


# --- shared experiment plumbing ------------------------------------------------------------------------------------
NET = 0.0005  # chapter 3's one-way delay: "network round trip to one millisecond" (thesis §3.1.4)
NET_CH4 = 0.0004  # chapter 4's: "the mean Round Trip Time (RTT) between actual machines ... is 0.8 millisecond"
PER_RESPONDER = "one"  # "places the n tasks of the job on the least loaded of d x n randomly selected nodes" (§3.1.3)
ARRIVAL_JITTER = 0.05  # s: breaks the lock between 500 ms arrivals and 2 s heartbeats (see the module docstring)
WARMUP = 4.5  # every node heartbeats at least twice before the first job (thesis §4.1.2, step c)
CH4_HEARTBEAT = 2.0
GROUPS = [0.70, 0.75, 0.80, 0.85, 0.90]  # Fig. 4.2's load groups (and Fig. 4.3's loads)
MACRM_CH4 = {
    "heartbeat": CH4_HEARTBEAT,
    "sampling_timeout": 0.003,
    "jm_demand": {"cpu": 0.05, "mem": 0.05},
    "jm_heartbeat": CH4_HEARTBEAT,
}


SPARROW_THESIS = {
    **MACRM_CH4,
    "rate": "fixed",
    "initial_rate": 2.0,
    "doubling": False,
    "centralized": False,
    "max_retries": 100000,
    "jm_placement": "sampling",
    "hb_blocks_sampling": False,
}
"""The Sparrow of the thesis's chapter 4, built from MACRM's own agents with the rules the thesis gives it:

* "the jobs are submitted to a queue that allocates containers for their schedulers (like job managers in YARN) by
  random sampling, and then the schedulers try to allocate resources for the tasks again by the means of random
  sampling" (§4 intro): ``jm_placement="sampling"`` (two nodes per container, the least loaded responder);
* "the timeout for sampling retry in both MACRM and Sparrow is 3ms" (Fig. 4.2): the same sampling timeout, a
  failed round is sampled again, without end (``max_retries`` unbounded, no central fallback);
* Sparrow's growth is blamed on the chance of finding free resources, "not the case for MACRM ... the result of
  using adaptive initial sampling rate and doubling sampling rate after each failure" (§4.2.1): a fixed d = 2, no
  doubling;
* a sampled node answers under Fig. 3.3's rules — one pending sampling at a time, only with free resources (a
  timeout is needed only because nodes stay silent) — but the thesis's Sparrow "does not monitor cluster nodes"
  (§4.2.3) and "does not require heartbeats from nodes" (§4.2.3): no waiting for heartbeat replies
  (``hb_blocks_sampling=False``; our trackers still receive heartbeats, for liveness and statistics only).

The registered ``sparrow`` (worker queues, late binding, long-lived schedulers) is reported beside it as
"Sparrow"."""


def ch4_schedulers(
    n_nodes: int, per_responder: str = PER_RESPONDER, round_end: str = "all", net: float = NET_CH4
) -> list[tuple[str, str, dict, str]]:
    """(label, scheduler, options, how completion is timed) for chapter 4's comparisons."""
    am = CH4_HEARTBEAT / n_nodes + net  # an AM container waits for the next heartbeat of some node, then starts
    pr = {"per_responder": per_responder, "round_end": round_end}
    return [
        ("MACRM", "macrm", {**MACRM_CH4, **pr}, "known"),
        ("YARN", "yarn", {"heartbeat": CH4_HEARTBEAT}, "direct"),
        ("YARN+AM", "yarn", {"heartbeat": CH4_HEARTBEAT, "am_overhead": round(am, 6)}, "direct"),
        ("Sparrow", "sparrow", {}, "known"),
        ("Sparrow-thesis", "macrm", {**SPARROW_THESIS, **pr}, "known"),
    ]


def request_scale(ctx: ReproContext) -> np.ndarray:
    """``--set request_units=normalized`` reads Table 4.3's requests as fractions of the largest machine (x 12 cores,
    x 16 GB: about 12x larger tasks, nodes fill up task by task); the default reads them as cores and GB."""
    units = str(ctx.extra.get("request_units", "absolute"))
    if units not in ("absolute", "normalized"):
        raise InputError(f"request_units must be 'absolute' or 'normalized', got {units!r}")
    return np.array([CORES_PER_UNIT, GB_PER_UNIT]) if units == "normalized" else np.ones(2)


def _service(res: RunResult, how: str) -> np.ndarray:
    return direct_service_times(res, res.config.network_delay) if how == "direct" else service_times(res)


def sampler_diagnostics(res: RunResult, sel: np.ndarray | None = None) -> dict:
    """For a ``macrm`` run: per selected job the wait from arrival to its (first) job manager's start, and the run's
    sampling counters (inquiries and answers at the nodes, job managers' rounds and failed rounds, jobs)."""
    w = res.workload
    start = np.full(w.n_jobs, np.nan)
    for jm in res.extras["runtime"].jms:
        if jm.attempt == 0:
            start[jm.job] = jm.started_at
    wait = start - w.job_arrival
    c = res.counters
    return {
        "jm_wait": wait if sel is None else wait[sel],
        "inquiries": c.get("macrm_nm_inquiries", 0),
        "answered": c.get("macrm_nm_answered", 0),
        "rounds": c.get("macrm_jm_rounds", 0),
        "failed_rounds": c.get("macrm_jm_sampling_failures", 0),
        "jobs": w.n_jobs,
    }


def _diag_summary(ds: list[dict]) -> dict:
    """Pooled :func:`sampler_diagnostics` of several runs."""
    tot = {k: sum(d[k] for d in ds) for k in ("inquiries", "answered", "rounds", "failed_rounds", "jobs")}
    wait = np.concatenate([d["jm_wait"] for d in ds]) if ds else np.zeros(0)
    wait = wait[np.isfinite(wait)]
    return {
        "jm_wait": float(wait.mean()) if wait.size else None,
        "answer_rate": tot["answered"] / tot["inquiries"] if tot["inquiries"] else None,
        "failed_rounds_per_job": tot["failed_rounds"] / tot["jobs"] if tot["jobs"] else None,
        "rounds_per_job": tot["rounds"] / tot["jobs"] if tot["jobs"] else None,
    }


def _stats(v: np.ndarray) -> dict:
    v = np.asarray(v, dtype=np.float64)
    ok = v[np.isfinite(v)]
    return {
        "mean": float(ok.mean()) if ok.size else None,
        "p50": float(np.median(ok)) if ok.size else None,
        "n": int(v.size),
        "incomplete": int(v.size - ok.size),
    }


def _fmt_check(k: str, v: float | bool | None) -> str:
    if isinstance(v, float):
        return f"{k} {v:.2f}x" if k.endswith("_over_70") else f"{k} {v:.0f} %"
    return f"{k} {v}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b <= 0 else float(a / b)


def _pct(better: float | None, worse: float | None) -> float | None:
    if better is None or worse is None or worse <= 0:
        return None
    return float(100.0 * (1.0 - better / worse))


TIME_COLS = ("_mean", "_p50", "service_mean", "service_p50", "_jm_wait")


def _table(rows: list[dict], path: Path, cols: list[str]) -> None:
    """CSV (raw values, seconds) and a Markdown copy (times with their unit, counts as numbers)."""
    from megha.metrics.format import markdown_table
    from megha.metrics.tables import write_csv

    write_csv(rows, path.with_suffix(".csv"), columns=cols)
    kinds = {c: "duration" for c in cols if c.endswith(TIME_COLS) or c == "max_service_mean"}
    path.with_suffix(".md").write_text(markdown_table(rows, cols, kinds=kinds))


def fmt_ms(x: float | None) -> str:
    """A duration as text (the project's formatter)."""
    from megha.metrics.format import duration

    return duration(x)
