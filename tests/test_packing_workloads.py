"""Workload generators and trace slotting of the packing experiments; one reproduction end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest

from megha.errors import InputError
from megha.experiments.registry import ReproContext, run_experiment
from megha.schedulers.packing.slotted import SlotWorkload
from megha.schedulers.packing.workloads import (
    discrete_sizes,
    from_trace,
    geometric_service,
    google_2011_requests,
    mean_size,
    poisson_arrivals,
    synthetic,
)
from megha.workload.tracefile import load_workload


def test_generators_have_the_requested_moments():
    rng = np.random.default_rng(0)
    arr = poisson_arrivals(2.5, 20_000, rng)
    assert abs(arr.size / 20_000 - 2.5) < 0.05 and (np.diff(arr) >= 0).all()
    s = geometric_service(100, 50_000, rng)
    assert s.min() >= 1 and abs(s.mean() - 100) < 2
    d = discrete_sizes([0.2, 0.45], [2, 1], 30_000, rng)
    assert abs((d == 0.2).mean() - 2 / 3) < 0.01
    wl = synthetic(0.5, 10_000, rng, sizes=("uniform", 0.1, 0.5), service=("fixed", 7))
    assert (wl.service == 7).all() and wl.size.min() >= 0.1 and wl.size.max() <= 0.5
    assert abs(wl.offered_load(1) - 0.5 * 0.3 * 7) < 0.05
    assert mean_size(("discrete", [0.2, 0.45], [2, 1])) == pytest.approx((0.4 + 0.45) / 3)
    cpu, mem = google_2011_requests(5000, rng)
    assert cpu.min() > 0 and cpu.max() <= 1 and mem.min() > 0 and mem.max() <= 0.75
    assert 0.005 < np.median(np.maximum(cpu, mem)) < 0.1


def test_bad_inputs_are_named():
    rng = np.random.default_rng(0)
    with pytest.raises(InputError, match="uniform sizes"):
        synthetic(1.0, 10, rng, sizes=("uniform", 0.5, 1.5))
    with pytest.raises(InputError, match="discrete sizes"):
        discrete_sizes([0.0, 0.5], None, 3, rng)
    with pytest.raises(InputError, match="non-decreasing"):
        SlotWorkload([3, 1], [0.5, 0.5], [1, 1])
    with pytest.raises(InputError, match="service"):
        SlotWorkload([0, 1], [0.5, 0.5], [1, 0])


def test_from_trace_slots_and_scaling(tiny_trace):
    w = load_workload(tiny_trace)
    sizes = np.full(w.n_tasks, 0.25)
    wl = from_trace(w, 0.5, 1.0, sizes=sizes)
    assert wl.n == w.n_tasks
    assert wl.arrival.tolist() == sorted(wl.arrival.tolist())
    assert int(wl.arrival[-1]) == 20  # job at 10 s, 0.5 s slots
    assert wl.service.min() >= 1
    fast = from_trace(w, 0.5, 2.0, sizes=sizes)
    assert int(fast.arrival[-1]) == 10  # arrival times divided by the traffic scaling
    with pytest.raises(InputError, match="no resource requests"):
        from_trace(w, 0.5)


@pytest.mark.slow
def test_reproduce_unstable_vqs_quick(tmp_path):
    ctx = ReproContext(out=tmp_path, quick=True, log=lambda s: None)
    doc = run_experiment("psychas-unstable-vqs", ctx)
    assert doc["matches_paper"]
    assert doc["policies"]["vqs"]["unstable_runs"] == 2 and doc["policies"]["bf-js"]["unstable_runs"] == 0
    assert (tmp_path / "queue_over_time.png").exists() and (tmp_path / "queue_over_time.csv").exists()
    assert json.loads((tmp_path / "summary.json").read_text())["experiment"] == "psychas-unstable-vqs"
