"""PigeonC/Pigeon end to end: minimum delay, exactly-once without over-commit (hypothesis), determinism."""

from __future__ import annotations

import numpy as np
import pytest

from megha.config import RunConfig
from megha.metrics.summary import job_table
from megha.runner import simulate
from tests.tracegen import write_trace


@pytest.mark.parametrize("sched", ["pigeonc", "pigeon"])
def test_idle_datacenter_delay_is_three_network_delays(sched):
    r = simulate(RunConfig(scheduler=sched, trace="sample:YH_small", cluster="sample:pigeon_D10M100S10000"))
    d = job_table(r.workload, r.recorder, r.feasible)["delay"]
    assert r.unfinished_reason is None
    assert np.allclose(d, 0.0015, atol=1e-9), d  # distributor->master, master->worker, master->distributor
    assert r.describe["masters"] == 100 and r.describe["distributors"] == 10 and r.describe["fqw"] == 20


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
