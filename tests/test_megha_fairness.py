"""Fairness with preemption (Megha paper §VI-E), on a small version of the paper's scenario."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megha.config import RunConfig
from megha.experiments.megha_fairness import SHARES, USER_GMS, unfairness_episodes
from megha.runner import simulate


def scenario(workers: int):
    cfg = RunConfig(
        scheduler="megha",
        trace="sample:GOOG_subtrace",
        max_jobs=60,
        workers=workers,
        gms=3,
        lms=2,
        options={"shares": SHARES, "user_gms": USER_GMS},
    )
    return simulate(cfg)


def test_contention_triggers_preemption_and_shares_are_restored():
    small, large = scenario(200), scenario(500)
    for r in (small, large):
        assert r.unfinished_reason is None
        assert (r.recorder.finishes[r.feasible] == 1).all()
        assert r.counters["preemptions"] > 0
        assert r.counters["preemption_attempts"] >= r.counters["preemptions_granted"]
        assert r.counters["tasks_requeued_after_preemption"] == r.counters["preemptions"]
    # a smaller datacenter means more contention: longer allocation times and more repartitions
    assert small.counters["repartitions"] > large.counters["repartitions"]
    a_small = np.nanmedian(small.recorder.start - small.recorder.arrival)
    a_large = np.nanmedian(large.recorder.start - large.recorder.arrival)
    assert a_small > a_large
    # no user with waiting tasks that preemption could serve stays below its share for long
    ep = unfairness_episodes(small)
    assert ep["longest_unfair_episode_s"] <= 3 * ep["sample_step_s"] + 1e-9


def test_without_shares_there_is_no_preemption():
    cfg = RunConfig(scheduler="megha", trace="sample:GOOG_subtrace", max_jobs=60, workers=200, gms=3, lms=2)
    r = simulate(cfg)
    assert r.counters.get("preemptions", 0) == 0


@given(
    jobs=st.lists(
        st.tuples(
            st.floats(0, 10).map(lambda x: round(x, 2)),
            st.lists(st.floats(0.05, 6).map(lambda x: round(x, 2)), min_size=1, max_size=10),
        ),
        min_size=2,
        max_size=20,
    ),
    workers=st.integers(6, 24),
    seed=st.integers(0, 100),
    resources=st.booleans(),
)
@settings(
    max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)  # fixed examples: CI runs the same ones every time
def test_preemption_keeps_exactly_once_and_no_overcommit(jobs, workers, seed, resources):
    d = Path(tempfile.mkdtemp())
    (d / "w.tr").write_text("".join(f"{a} {len(ds)} 1 " + " ".join(map(str, ds)) + "\n" for a, ds in jobs))
    cfg = RunConfig(
        scheduler="megha",
        trace=str(d / "w.tr"),
        workers=workers,
        gms=3,
        lms=2,
        seed=seed,
        resources=resources,
        capacity={"cpu": 4, "mem": 8},
        demand={"cpu": 2, "mem": 1},
        options={"shares": [0.1, 0.25, 0.15, 0.5], "user_gms": [0, 1, 1, 2], "heartbeat": 1.0},
    )
    r = simulate(cfg)
    assert r.unfinished_reason is None
    assert (r.recorder.finishes[r.feasible] == 1).all()
