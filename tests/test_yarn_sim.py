"""YARN-like RM end to end: heartbeat-gated delays, exactly-once without over-commit (hypothesis), determinism."""

from __future__ import annotations

import numpy as np

from megha.config import RunConfig
from megha.metrics.summary import job_table
from megha.runner import simulate


def test_allocation_and_completion_wait_for_heartbeats():
    r = simulate(
        RunConfig(scheduler="yarn", trace="sample:YH_small", workers=200, options={"heartbeat": 3.0, "scan": "first"})
    )
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


def test_node_managers_in_process_give_the_same_run_as_a_separate_component(monkeypatch):
    """The simulator's in-process node managers (SimResourceManager) reproduce the multi-component form exactly:
    every task's decision, start, end, node and completion-known instant, the run's end and the message counts."""
    import pytest

    import megha.schedulers.centralized as yarn_pkg
    from megha.metrics.fingerprint import fingerprint
    from tests.tracegen import write_trace

    # contended: tasks queue at the RM, several containers end within one heartbeat period, users for fair
    trace = write_trace([(i * 0.3, [0.2 + (i * 7 % 5) * 0.7, 2.5, 0.1][: 1 + i % 3] * (1 + i % 4)) for i in range(70)])
    for opts in ({}, {"queue": "fair"}, {"queue": "fewest-tasks", "scan": "first"}, {"scan": "random", "heartbeat": 2}):
        cfg = RunConfig(scheduler="yarn", trace=trace, workers=12, seed=3, options=opts)
        fast = simulate(cfg)
        with monkeypatch.context() as mp:
            mp.setattr(yarn_pkg, "node_managers_in_process", lambda ctx: False)
            slow = simulate(cfg)
        assert fast.unfinished_reason is None and slow.unfinished_reason is None
        assert fast.events < slow.events
        for col in ("scheduled", "start", "end", "known", "worker", "comm"):
            assert np.array_equal(getattr(fast.recorder, col), getattr(slow.recorder, col), equal_nan=True), (opts, col)
        assert fingerprint(fast) == fingerprint(slow)
        assert fast.end_time == slow.end_time
        assert fast.message_counts == slow.message_counts
        assert fast.counters == slow.counters, opts
    with pytest.raises(ValueError, match="slot mode"):
        from megha.schedulers.centralized.heartbeats import HeartbeatSchedule
        from megha.schedulers.centralized.simrm import SimResourceManager

        SimResourceManager(
            "rm", "nm", "nm", np.zeros(2, dtype=np.uint32), np.ones((2, 2)), HeartbeatSchedule(np.zeros(2), 1.0), None
        )
