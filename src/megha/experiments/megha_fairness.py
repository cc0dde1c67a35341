"""Megha paper §VI-E (Figs. 10–11): global fairness with preemption under contention.

Four user queues with shares 10 %, 25 %, 15 % and 50 %; user 1 maps to GM 1, users 2 and 3 to GM 2, user 4 to
GM 3; datacenters of 200, 500 and 1,500 workers. The paper uses a 4,550-task google_19 sample that is not public;
we use the first jobs of the bundled Google sub-trace with about as many tasks (jobs get users at random). The
paper's finding: allocation time, repartitions, preemption attempts and preemptions all rise as the datacenter
shrinks. We also measure *unfairness episodes* (:func:`unfairness_episodes`): intervals in which a user with
waiting tasks is below its share while another user, holding a worker that suits one of those tasks, is above its
own by a task or more; every run reports whether its longest episode stays within :data:`ALLOWED_UNFAIR_S`.

Two workloads are run. With a *light* one (the first 25 jobs, ~500 tasks; the largest datacenter is rarely
contended) every counter rises as the datacenter shrinks, as in the paper. With a *heavy* one (150 jobs, ~20,000
tasks; every size saturated) allocation time, repartitions and preemption attempts still rise, but the number of
preemptions falls: once every size is saturated, rebalancing a user from over to under its share moves a number of
tasks proportional to the datacenter's size, and at 200 workers most attempts are refused because the victim's few
workers do not satisfy the waiting task's placement constraints. The paper's 4,550-task google_19 sample is not
public, so which regime it was in cannot be checked; its steep fall of every counter with size suggests the light
one.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from megha.config import RunConfig
from megha.experiments.registry import ReproContext, experiment
from megha.metrics import summary as S

if TYPE_CHECKING:
    from megha.metrics.result import RunResult

SHARES = [0.10, 0.25, 0.15, 0.50]
USER_GMS = [0, 1, 1, 2]
#: the longest unfair episode the scenario allows (s): 24 heartbeats of 5 s. A user below its share retries
#: preemption at least once per heartbeat, and a refusal tells its GM which workers the victim holds, so a fixable
#: violation should not outlast a few heartbeats; two 60 s samples in a row is the bound we check.
ALLOWED_UNFAIR_S = 120.0


def unfairness_episodes(res: RunResult, step: float = 60.0, max_samples: int = 20_000) -> dict:
    """Longest and total time during which fairness is violated in a way preemption could fix (slot mode).

    Sampled every ``step`` seconds (coarser only for runs longer than ``max_samples`` steps): a violation is a
    user with waiting tasks whose usage is below its share (by more than one task and 5 % of the share) while at
    least one of its waiting tasks suits a worker held by a user over its share by at least one task (one that
    could give a task up and still hold its share, as Megha's preemption requires). A user whose tasks only fit
    workers it already occupies is limited by its placement constraints, not by unfairness.
    """
    rec = res.recorder
    user = np.asarray(res.extras["job_user"])[res.workload.task_job]
    masks = res.workload.masks
    wmask = res.datacenter.worker_masks
    total = float(res.datacenter.n_workers)
    shares = np.asarray(SHARES)
    ok = res.feasible & np.isfinite(rec.start)
    # all runs: (start, end, task, worker)
    st = [rec.start[ok]]
    en = [rec.end[ok]]
    tk = [np.flatnonzero(ok)]
    wk = [rec.worker[ok]]
    for ids, s0, w0, t in rec.preempted_runs:
        good = np.isfinite(s0)
        st.append(s0[good])
        en.append(np.full(int(good.sum()), t))
        tk.append(ids[good])
        wk.append(w0[good])
    st, en, tk, wk = (np.concatenate(x) for x in (st, en, tk, wk))
    t0 = float(np.nanmin(rec.arrival))
    t1 = float(np.nanmax(en)) if en.size else t0
    step = max(step, (t1 - t0) / max_samples)
    grid = np.arange(t0, t1, step)
    first_start = np.full(rec.n, np.inf)
    np.minimum.at(first_start, tk, st)
    bad = np.zeros(grid.size, dtype=bool)
    for gi, g in enumerate(grid):
        run = (st <= g) & (en > g)
        ru = user[tk[run]]
        usage = np.bincount(ru, minlength=shares.size).astype(float)
        deficit = shares * total - usage
        over = deficit <= -1.0 + 1e-9
        if not over.any():
            continue
        held = np.unique(wmask[wk[run][over[ru]]])
        waiting = res.feasible & (rec.arrival <= g) & (rec.end > g)  # arrived, not finished ...
        waiting[tk[run]] = False  # ... and not running now
        for u in np.flatnonzero(deficit > np.maximum(1.0, 0.05 * shares * total) + 1e-9):
            wm = np.unique(masks[waiting & (user == u)])
            if wm.size and ((wm[:, None] & ~held[None, :]) == 0).any():
                bad[gi] = True
                break
    longest = run_len = 0
    for b in bad:
        run_len = run_len + 1 if b else 0
        longest = max(longest, run_len)
    return {
        "longest_unfair_episode_s": longest * step,
        "total_unfair_time_s": float(bad.sum() * step),
        "sample_step_s": step,
    }


#: workloads: the first jobs of the Google sub-trace. "light" (25 jobs, ~500 tasks) leaves the largest datacenter
#: rarely contended, as the paper's setting must have (its counters fall steeply with size); "heavy" keeps every
#: size saturated, where the *number* of preemptions grows with the datacenter (see the module notes).
WORKLOADS = {"light": 25, "heavy": 150}


@experiment(
    "megha20-fairness",
    "fairness with preemption: 4 users (10/25/15/50 %) on 3 GMs, 200/500/1,500 workers",
    "megha20",
    figures="Figs. 10-11",
    claims=lambda doc, ctx: fairness_claims(doc),
)
def run(ctx: ReproContext) -> dict:
    """Experiment ``megha20-fairness``: fairness with preemption, 4 users on 3 GMs (Figs. 10-11)."""
    sizes = [200, 500] if ctx.quick else [200, 500, 1500]
    workloads = dict(WORKLOADS)
    if ctx.quick:
        workloads["heavy"] = 60
    if "max_jobs" in ctx.extra:
        workloads = {"custom": int(ctx.extra["max_jobs"])}
    out: dict = {
        "sizes": sizes,
        "shares": SHARES,
        "workloads": workloads,
        "runs": {},
        "rises_as_dc_shrinks": {},
        "allowed_unfair_episode_s": ALLOWED_UNFAIR_S,
    }
    from megha.metrics.report import plot_cdfs

    for name, max_jobs in workloads.items():
        delays = {}
        rows = []
        ctx.log(f"  workload {name}: first {max_jobs} jobs of the Google sub-trace")
        for n in sizes:
            cfg = RunConfig(
                scheduler="megha",
                trace="sample:GOOG_subtrace",
                max_jobs=max_jobs,
                workers=n,
                gms=3,
                lms=2,
                seed=ctx.seed,
                options={"shares": SHARES, "user_gms": USER_GMS, "heartbeat": 5.0},
            )
            res = ctx.simulate(cfg, label=f"{name}, {n} workers")
            alloc = res.recorder.start - res.recorder.arrival
            c = res.counters
            ep = unfairness_episodes(res)
            row = {
                "workload": name,
                "workers": n,
                "tasks": int(res.feasible.sum()),
                "allocation_time": S.describe(alloc[res.feasible]),
                "repartitions": int(c.get("repartitions", 0)),
                "preemption_attempts": int(c.get("preemption_attempts", 0)),
                "preemptions": int(c.get("preemptions", 0)),
                "completed": res.unfinished_reason is None,
                **ep,
                "fair_within_allowance": ep["longest_unfair_episode_s"] <= ALLOWED_UNFAIR_S + 1e-9,
            }
            rows.append(row)
            out["runs"][f"{name}/{n}"] = row
            delays[f"{n} workers"] = alloc[res.feasible]
            ctx.log(
                f"    repartitions {row['repartitions']:,}, preemption attempts {row['preemption_attempts']:,}, "
                f"preemptions {row['preemptions']:,}, longest unfair episode "
                f"{ep['longest_unfair_episode_s']:.1f} s"
            )
        # rows are in increasing size: "rises as the DC shrinks" = non-increasing along the list
        out["rises_as_dc_shrinks"][name] = {
            k: all(a[k] >= b[k] for a, b in itertools.pairwise(rows))
            for k in ("repartitions", "preemption_attempts", "preemptions")
        }
        out["rises_as_dc_shrinks"][name]["allocation_time_mean"] = all(
            a["allocation_time"]["mean"] >= b["allocation_time"]["mean"] for a, b in itertools.pairwise(rows)
        )
        plot_cdfs(
            delays,
            ctx.out / f"allocation_cdf_{name}.png",
            title=f"Megha with fairness ({name} workload): allocation time",
            xlabel="allocation time (s)",
        )
        _bars(rows, ctx.out / f"counters_{name}.png")
    import json

    (ctx.out / "runs.json").write_text(json.dumps(list(out["runs"].values()), indent=2))
    return out


def _bars(rows: list[dict], path: str | Path) -> None:
    from megha.metrics.plots import new_figure, save

    fig, ax = new_figure(6.4, 4.0, dpi=120)
    keys = ["repartitions", "preemption_attempts", "preemptions"]
    x = np.arange(len(rows))
    for i, key in enumerate(keys):
        ax.bar(x + (i - 1) * 0.27, [r[key] for r in rows], width=0.27, label=key.replace("_", " "))
    ax.set_xticks(x, [f"{r['workers']} workers" for r in rows])
    ax.set_yscale("symlog")
    ax.legend()
    ax.set_title("Megha fairness: repartitions and preemptions by datacenter size")
    save(fig, path, dpi=120)


# --- the paper's claims (megha.experiments.claims) -----------------------------------------------------------------
def fairness_claims(doc: dict) -> list:
    """§VI-E: allocation time, repartitions, preemption attempts and preemptions rise as the datacenter shrinks;
    fairness is enforced under contention."""
    from megha.experiments import claims as C

    out = []
    fig = {"allocation_time_mean": "Fig. 10"}
    words = {
        "allocation_time_mean": "mean allocation time",
        "repartitions": "repartitions",
        "preemption_attempts": "preemption attempts",
        "preemptions": "preemptions",
    }
    sizes = doc.get("sizes", [])
    order = " → ".join(f"{n:,}" for n in reversed(sizes))
    for wl, rises in doc.get("rises_as_dc_shrinks", {}).items():
        for key, w in words.items():
            if key == "allocation_time_mean":
                vals = [doc["runs"][f"{wl}/{n}"]["allocation_time"]["mean"] for n in sizes]
                text = " → ".join(C.fmt_seconds(v) for v in reversed(vals))
            else:
                text = " → ".join(C.fmt_number(doc["runs"][f"{wl}/{n}"][key]) for n in reversed(sizes))
            out.append(
                C.is_true(
                    f"{wl}/{key}",
                    fig.get(key, "Fig. 11"),
                    f"{wl} workload: {w} rise as the datacenter shrinks ({order} workers)",
                    rises.get(key),
                    paper="rise as the datacenter shrinks",
                    measured_text=text,
                    tolerance="non-increasing with size",
                    why_not="with every size saturated (the heavy workload), rebalancing a user from over to under "
                    "its share moves a number of tasks proportional to the datacenter's size, and at 200 workers "
                    "most attempts are refused because the victim's few workers do not suit the waiting task's "
                    "constraints (see the module notes); the paper's 4,550-task sample is not public, and its "
                    "steep fall of every counter with size suggests the light regime",
                )
            )
    runs = doc.get("runs", {})
    for wl in doc.get("rises_as_dc_shrinks", {}):
        eps = {k.split("/")[1]: r["longest_unfair_episode_s"] for k, r in runs.items() if k.startswith(f"{wl}/")}
        worst = max(eps.values(), default=None)
        out.append(
            C.at_most(
                f"{wl}/fair",
                "Figs. 10-11",
                f"{wl} workload: fairness enforced under contention: no fixable unfairness (a user below its share "
                "while another, above its own, holds a worker its waiting task suits) lasts long (longest episode)",
                worst,
                doc.get("allowed_unfair_episode_s", ALLOWED_UNFAIR_S),
                paper="shares enforced (Algorithm 2)",
                fmt=C.fmt_seconds,
                why_not="longest episodes by size: "
                + ", ".join(f"{n} workers {C.fmt_seconds(v)}" for n, v in eps.items())
                + "; with every size saturated a user below its share regains it one preemption at a time, retried "
                "once per 5 s heartbeat, and many attempts are refused because the victim's workers do not suit the "
                "waiting task (the preemption counters above), so an episode can outlast two 60 s samples",
            )
        )
    return out
