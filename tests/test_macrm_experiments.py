"""MACRM reproductions: the generators match the thesis's setup, and each experiment runs end to end (tiny sizes)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from megha.errors import InputError
from megha.experiments.macrm import (
    CPU_MEAN,
    NET_CH4,
    SPARROW_THESIS,
    ch4_schedulers,
    cluster,
    gaussian_background,
    google_jobs,
    google_machines,
    google_requests,
    offered_load,
    poisson_jobs,
    sampler_diagnostics,
    simulate_inputs,
    slot_background,
    workload_from_jobs,
)
from megha.experiments.registry import ReproContext, run_experiment


def test_google_machine_mix_matches_the_thesis_totals():
    phys = google_machines(500)
    assert phys.shape == (500, 2)
    assert phys[:, 0].sum() == pytest.approx(3177)  # "3770 Gigabyte of memory and 3177 cores in total"
    assert phys[:, 1].sum() == pytest.approx(3771.84)
    assert ((phys[:, 0] == 6) & (phys[:, 1] == 8)).sum() == 268  # platform B 0.5/0.5


def test_backgrounds_hit_their_load():
    rng = np.random.default_rng(0)
    phys = google_machines(500)
    for load in (0.55, 0.7, 0.9):
        bg = gaussian_background(phys, load, rng)
        assert (bg >= 0).all() and (bg <= phys + 1e-12).all()
        assert (bg / phys).mean(axis=0) == pytest.approx([load, load], abs=1e-6)
    s = slot_background(200, 4, 0.75, rng)
    assert s.sum() == 600 and s.max() <= 4


def test_requests_and_synthetic_jobs():
    req = google_requests(20000, np.random.default_rng(1))
    assert req[:, 0].mean() == pytest.approx(CPU_MEAN, rel=0.05) and req[:, 0].max() <= 0.5
    w = poisson_jobs(50, np.random.default_rng(2))
    assert w.n_tasks == 450 and (w.task_demand == 1).all()
    first = w.job_first_task
    assert all((w.task_duration[f : f + 9] == w.task_duration[f]).all() for f in first)


def test_offered_load_counts_background_and_live_tasks():
    phys = np.full((2, 1), 10.0)
    dc = cluster(phys, np.array([[5.0], [0.0]]), ("cpu",), "t")
    w = workload_from_jobs(np.array([0.0, 1.0]), [1, 1], np.array([2.0, 0.5]), np.array([[4.0], [2.0]]), ("cpu",), "t")
    assert offered_load(w, dc, np.array([-1.0, 0.0, 1.2, 1.6, 2.5])).tolist() == pytest.approx(
        [0.25, 0.45, 0.55, 0.45, 0.25]
    )
    assert dc.capacity[:, 0].tolist() == [5.0, 10.0]


def test_arrival_jitter_keeps_order_and_the_mean_gap():
    phys = google_machines(60)
    w0 = google_jobs(np.random.default_rng(3), 200, 4.5, 0.5, 10.0, phys.sum(axis=0))
    w1 = google_jobs(np.random.default_rng(3), 200, 4.5, 0.5, 10.0, phys.sum(axis=0), jitter=0.05)
    assert (w0.job_num_tasks == w1.job_num_tasks).all() and (w0.task_demand == w1.task_demand).all()
    assert np.allclose(w0.job_arrival, 4.5 + 0.5 * np.arange(200))
    off = w1.job_arrival - w0.job_arrival
    assert (np.abs(off) <= 0.05).all() and off.std() > 0.02 and (np.diff(w1.job_arrival) > 0).all()
    with pytest.raises(InputError, match="jitter"):
        google_jobs(np.random.default_rng(3), 5, 4.5, 0.5, 10.0, phys.sum(axis=0), jitter=0.25)


def test_chapter_4_systems_follow_the_thesis_text():
    scheds = {lab: (s, o) for lab, s, o, _ in ch4_schedulers(500)}
    macrm, sparrow = scheds["MACRM"][1], scheds["Sparrow-thesis"][1]
    assert macrm["per_responder"] == sparrow["per_responder"] == "one"  # n tasks on n of the d x n nodes
    assert macrm["sampling_timeout"] == sparrow["sampling_timeout"] == 0.003  # Fig. 4.2's caption
    assert macrm["heartbeat"] == 2.0 and macrm.get("jm_placement", "heartbeat") == "heartbeat"
    assert sparrow["jm_placement"] == "sampling" and sparrow["hb_blocks_sampling"] is False
    assert (sparrow["rate"], sparrow["initial_rate"], sparrow["doubling"], sparrow["centralized"]) == (
        "fixed",
        2.0,
        False,
        False,
    )
    assert SPARROW_THESIS["max_retries"] > 1000 and NET_CH4 == 0.0004


def test_sampler_diagnostics_of_a_small_run():
    phys = np.full((20, 2), 4.0)
    dc = cluster(phys, np.zeros_like(phys), ("cpu", "mem"), "t")
    w = workload_from_jobs(np.array([1.0, 1.5]), [3, 2], np.ones(5), np.full((5, 2), 0.5), ("cpu", "mem"), "t")
    r = simulate_inputs(w, dc, "macrm", {**SPARROW_THESIS, "per_responder": "one"}, network_delay=NET_CH4)
    d = sampler_diagnostics(r)
    assert d["jobs"] == 2 and d["rounds"] >= 2 and 0 < d["answered"] <= d["inquiries"]
    assert d["jm_wait"].shape == (2,) and (d["jm_wait"] >= 3 * NET_CH4 - 1e-12).all()  # inquiry, answer, container


@pytest.mark.parametrize(
    ("exp", "extra"),
    [
        ("macrm-sampling", {"jobs": 8}),
        ("macrm-service-time", {"nodes": 60, "jobs": 30}),
        ("macrm-burst", {"nodes": 60}),
    ],
)
def test_reproductions_run_end_to_end(tmp_path, exp, extra):
    ctx = ReproContext(out=tmp_path, quick=True, log=lambda s: None, extra=extra)
    doc = run_experiment(exp, ctx)
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["experiment"] == exp and "checks" in doc and "paper_reported" in doc
    assert list(tmp_path.glob("*.png")) and list(tmp_path.glob("*.csv"))
