"""Generated Poisson workloads: the offered load asked for, proportional size, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from megha.workload.generate import poisson_workload


@pytest.mark.parametrize("workers", [500, 5000])
def test_offered_load_and_size_follow_the_datacenter(workers):
    w = poisson_workload(workers, load=0.7, tasks_per_worker=10, seed=3)
    offered = w.task_duration.sum() / (w.job_arrival[-1] * workers)
    assert offered == pytest.approx(0.7, rel=0.1)
    assert w.n_tasks == pytest.approx(10 * workers, rel=0.1)
    assert (np.diff(w.job_arrival) >= 0).all() and w.job_arrival[0] == 0
    assert (w.job_num_tasks >= 1).all() and (w.task_duration > 0).all()


def test_same_seed_same_workload():
    a, b, c = (poisson_workload(300, seed=s) for s in (1, 1, 2))
    assert np.array_equal(a.task_duration, b.task_duration) and np.array_equal(a.job_arrival, b.job_arrival)
    assert not np.array_equal(a.task_duration[:100], c.task_duration[:100])


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError):
        poisson_workload(0)
