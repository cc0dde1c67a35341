"""PigeonC/Pigeon end to end: minimum delay, exactly-once without over-commit (hypothesis), determinism."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megha.config import RunConfig
from megha.metrics.summary import job_table
from megha.runner import simulate


def write_trace(jobs) -> str:
    p = Path(tempfile.mkdtemp()) / "w.tr"
    p.write_text("".join(f"{a} {len(d)} {np.mean(d)} " + " ".join(map(str, d)) + "\n" for a, d in jobs))
    return str(p)


@pytest.mark.parametrize("sched", ["pigeonc", "pigeon"])
def test_idle_datacenter_delay_is_three_network_delays(sched):
    r = simulate(RunConfig(scheduler=sched, trace="sample:YH_small", cluster="sample:pigeon_D10M100S10000"))
    d = job_table(r.workload, r.recorder, r.feasible)["delay"]
    assert r.unfinished_reason is None
    assert np.allclose(d, 0.0015, atol=1e-9), d  # distributor->master, master->worker, master->distributor
    assert r.describe["masters"] == 100 and r.describe["distributors"] == 10 and r.describe["fqw"] == 20


job_st = st.tuples(
    st.floats(0, 20, allow_nan=False).map(lambda x: round(x, 3)),
    st.lists(st.floats(0.01, 8, allow_nan=False).map(lambda x: round(x, 3)), min_size=1, max_size=12),
)


@given(
    jobs=st.lists(job_st, min_size=1, max_size=25),
    workers=st.integers(2, 40),
    masters=st.integers(1, 4),
    dists=st.integers(1, 3),
    sched=st.sampled_from(["pigeonc", "pigeon"]),
    policy=st.sampled_from(["random", "min-constraints", "first"]),
    fqw=st.integers(0, 3),
    cutoff=st.sampled_from([0.5, 2.0, 100.0]),
    constraints=st.booleans(),
    seed=st.integers(0, 1000),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_feasible_task_completes_exactly_once_without_overcommit(
    jobs, workers, masters, dists, sched, policy, fqw, cutoff, constraints, seed
):
    masters = min(masters, workers)
    cfg = RunConfig(
        scheduler=sched,
        trace=write_trace(jobs),
        workers=workers,
        constraints=constraints,
        seed=seed,
        options={"masters": masters, "distributors": dists, "policy": policy, "fqw": fqw, "cutoff": cutoff},
    )
    r = simulate(cfg)  # the workers raise on any over-commit; the runner checks exactly-once
    assert r.unfinished_reason is None
    rec = r.recorder
    assert (rec.finishes[r.feasible] == 1).all() and (rec.launches[r.feasible] == 1).all()
    assert (rec.finishes[~r.feasible] == 0).all()
    # a task runs only on a worker that satisfies its constraints, inside one master's group
    ran = r.feasible
    wm = r.datacenter.worker_masks[rec.worker[ran]]
    assert ((r.workload.masks[ran] & ~wm) == 0).all()
    assert r.counters["pigeon_left_queued"] == 0


def test_same_seed_same_result_and_seed_changes_choices():
    trace = write_trace([(i * 0.3, [1.0 + (i * 7 % 5)] * (1 + i % 6)) for i in range(40)])

    def run(seed):
        return simulate(
            RunConfig(
                scheduler="pigeonc", trace=trace, workers=12, seed=seed, options={"masters": 3, "distributors": 2}
            )
        )

    a, b, c = run(3), run(3), run(4)
    assert np.array_equal(a.recorder.start, b.recorder.start, equal_nan=True)
    assert np.array_equal(a.recorder.worker, b.recorder.worker)
    assert not np.array_equal(a.recorder.worker, c.recorder.worker)


def test_bad_option_is_a_clear_error():
    from megha.errors import InputError

    with pytest.raises(InputError, match="policy"):
        simulate(RunConfig(scheduler="pigeonc", trace="sample:YH_small", workers=10, options={"policy": "best"}))
