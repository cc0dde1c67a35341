"""YARN-like RM end to end: heartbeat-gated delays, exactly-once without over-commit (hypothesis), determinism."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megha.config import RunConfig
from megha.metrics.summary import job_table
from megha.runner import simulate


def write_trace(jobs) -> str:
    p = Path(tempfile.mkdtemp()) / "w.tr"
    p.write_text("".join(f"{a} {len(d)} {np.mean(d)} " + " ".join(map(str, d)) + "\n" for a, d in jobs))
    return str(p)


def test_allocation_and_completion_wait_for_heartbeats():
    r = simulate(RunConfig(scheduler="yarn", trace="sample:YH_small", workers=200, options={"heartbeat": 3.0}))
    assert r.unfinished_reason is None
    rec = r.recorder
    started = np.isfinite(rec.start)
    alloc = rec.start[started] - rec.arrival[started]
    assert (alloc >= 0.001 - 1e-12).all() and (alloc <= 3.0 + 0.001 + 1e-9).all()
    report = rec.known[started] - rec.end[started]  # finished containers are reported at the next tick
    assert (report >= 0.0005 - 1e-12).all() and (report <= 3.0 + 0.0005 + 1e-9).all()
    assert report.mean() > 0.3
    d = job_table(r.workload, r.recorder, r.feasible)["delay"]
    assert (d > 0).all() and (d < 2 * 3.0 + 0.01).all()


def test_longer_heartbeat_period_means_longer_delays():
    def p50(hb):
        r = simulate(RunConfig(scheduler="yarn", trace="sample:YH_small", workers=500, options={"heartbeat": hb}))
        return np.median(job_table(r.workload, r.recorder, r.feasible)["delay"])

    assert p50(3.0) > p50(1.0)


job_st = st.tuples(
    st.floats(0, 20, allow_nan=False).map(lambda x: round(x, 3)),
    st.lists(st.floats(0.01, 8, allow_nan=False).map(lambda x: round(x, 3)), min_size=1, max_size=12),
)


@given(
    jobs=st.lists(job_st, min_size=1, max_size=25),
    workers=st.integers(1, 40),
    heartbeat=st.sampled_from([0.3, 1.0, 3.0]),
    queue=st.sampled_from(["fifo", "fair"]),
    am=st.sampled_from([0.0, 0.5]),
    constraints=st.booleans(),
    resources=st.booleans(),
    seed=st.integers(0, 1000),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_feasible_task_completes_exactly_once_without_overcommit(
    jobs, workers, heartbeat, queue, am, constraints, resources, seed
):
    cfg = RunConfig(
        scheduler="yarn",
        trace=write_trace(jobs),
        workers=workers,
        constraints=constraints,
        resources=resources,
        capacity={"cpu": 4.0, "mem": 4.0},
        demand={"cpu": 1.5, "mem": 1.0},
        seed=seed,
        options={"heartbeat": heartbeat, "queue": queue, "am_overhead": am},
    )
    r = simulate(cfg)  # the node managers raise on any over-commit; the runner checks exactly-once
    assert r.unfinished_reason is None
    rec = r.recorder
    assert (rec.finishes[r.feasible] == 1).all() and (rec.launches[r.feasible] == 1).all()
    ran = r.feasible
    wm = r.datacenter.worker_masks[rec.worker[ran]]
    assert ((r.workload.masks[ran] & ~wm) == 0).all()
    assert r.counters["yarn_left_queued"] == 0


def test_same_seed_same_result():
    trace = write_trace([(i * 0.2, [1.0 + (i * 7 % 5)] * (1 + i % 6)) for i in range(40)])

    def run(seed):
        return simulate(RunConfig(scheduler="yarn", trace=trace, workers=12, seed=seed))

    a, b, c = run(3), run(3), run(4)
    assert np.array_equal(a.recorder.start, b.recorder.start, equal_nan=True)
    assert np.array_equal(a.recorder.worker, b.recorder.worker)
    assert not np.array_equal(a.recorder.start, c.recorder.start, equal_nan=True)
