"""Summary functions on hand-made recorders: utilization over the arrival window, starvation by eligible workers."""

from __future__ import annotations

import numpy as np
import pytest

from megha.metrics import summary as S
from megha.metrics.recorder import TaskRecorder
from megha.model.topology import Datacenter
from megha.model.workload import Workload


def _workload(arrivals, tasks_per_job, durations, masks=None, demand=None) -> Workload:
    return Workload(
        job_arrival=np.asarray(arrivals, dtype=np.float64),
        job_num_tasks=np.asarray(tasks_per_job, dtype=np.int64),
        job_mean_duration=np.ones(len(arrivals)),
        task_duration=np.asarray(durations, dtype=np.float64),
        task_mask=None if masks is None else np.asarray(masks, dtype=np.uint32),
        task_demand=None if demand is None else np.asarray(demand, dtype=np.float64),
        resource_names=() if demand is None else ("cpu",),
    )


def _run(w: Workload, starts, workers) -> TaskRecorder:
    """Each task starts at ``starts[i]`` on ``workers[i]`` and runs for its duration; completion known at its end."""
    rec = TaskRecorder(w.task_arrival)
    for i, (s, wk) in enumerate(zip(starts, workers, strict=True)):
        rec.started([i], s, [wk])
        rec.finished([i], s + w.task_duration[i])
        rec.completion_known([i], s + w.task_duration[i])
    return rec


def test_utilization_over_arrival_window_separates_prompt_from_late():
    # two workers; jobs arrive at 0 and 10, one 10 s task each
    w = _workload([0.0, 10.0], [1, 1], [10.0, 10.0])
    prompt = _run(w, [0.0, 10.0], [0, 1])
    late = _run(w, [5.0, 15.0], [0, 1])
    out = {}
    for name, rec in (("prompt", prompt), ("late", late)):
        times, util = S.utilization_series(rec, 2.0)
        end = float(np.nanmax(rec.end))
        out[name] = S.utilization_summary(times, util, S.arrival_window(w), end)
    # window [0, 10]: prompt runs one task all along (50 %), late only from 5 s (25 %)
    assert out["prompt"]["mean"] == pytest.approx(0.5)
    assert out["late"]["mean"] == pytest.approx(0.25)
    assert out["prompt"]["window"] == "arrivals"
    assert (out["prompt"]["window_start"], out["prompt"]["window_end"]) == (0.0, 10.0)
    # over the whole run the same busy time: 20 task-seconds / (2 workers x span)
    assert out["prompt"]["mean_whole_run"] == pytest.approx(20 / (2 * 20))
    assert out["late"]["mean_whole_run"] == pytest.approx(20 / (2 * 25))
    ser = out["late"]["series"]
    assert len(ser["time"]) == len(ser["utilization"]) == 200
    assert ser["utilization"][0] == 0.0 and ser["utilization"][-1] == pytest.approx(0.5)


def test_utilization_single_arrival_instant_uses_whole_run():
    w = _workload([0.0], [2], [4.0, 2.0])
    rec = _run(w, [0.0, 0.0], [0, 1])
    times, util = S.utilization_series(rec, 2.0)
    u = S.utilization_summary(times, util, S.arrival_window(w), 4.0)
    assert u["window"].startswith("whole run")
    assert u["mean"] == pytest.approx(6 / 8)


def test_step_at_before_first_step_is_zero():
    assert S.step_at(np.array([1.0, 2.0]), np.array([0.5, 0.25]), np.array([0.0, 1.0, 1.5, 3.0])).tolist() == [
        0.0,
        0.5,
        0.5,
        0.25,
    ]


def test_eligible_workers_slot_and_resource_mode():
    # worker masks: 0b01, 0b11, 0b11, 0b10
    dc = Datacenter(worker_masks=np.array([1, 3, 3, 2], dtype=np.uint32))
    w = _workload([0.0, 1.0], [2, 2], [1, 1, 1, 1], masks=[0, 1, 3, 4])
    assert S.eligible_workers(w, dc).tolist() == [4, 3, 2, 0]
    # resource mode: the two 0b11 workers are small
    rdc = Datacenter(
        worker_masks=dc.worker_masks, capacity=np.array([[8.0], [2.0], [2.0], [8.0]]), resource_names=("cpu",)
    )
    rw = _workload([0.0, 1.0], [2, 2], [1, 1, 1, 1], masks=[0, 1, 3, 0], demand=[[4.0], [1.0], [4.0], [1.0]])
    assert S.eligible_workers(rw, rdc).tolist() == [2, 3, 0, 4]


def test_job_rarest_eligible_ignores_infeasible_tasks():
    w = _workload([0.0, 1.0, 2.0], [2, 1, 1], [1, 1, 1, 1])
    eligible = np.array([5, 2, 0, 7])
    feasible = np.array([True, True, False, True])
    assert S.job_rarest_eligible(w, eligible, feasible).tolist() == [2, 0, 7]


def test_eligible_buckets():
    assert S.eligible_buckets(20000) == [(1, 1), (2, 10), (11, 100), (101, 1000), (1001, 10000), (10001, 20000)]
    assert S.eligible_buckets(5) == [(1, 1), (2, 5)]
    assert S.eligible_buckets(1) == [(1, 1)]
    assert S.bucket_label(1001, 10000) == "1,001-10,000"


def test_delay_by_eligible_table():
    delay = np.array([100.0, 200.0, np.nan, 1.0, 2.0, 3.0, 0.5])
    eligible = np.array([1, 1, 1, 50, 50, 50, 900])
    t = S.delay_by_eligible(delay, eligible, 1000)
    rows = {r["workers"]: r for r in t["buckets"]}
    assert list(rows) == ["1", "2-10", "11-100", "101-1,000"]
    assert rows["1"]["jobs"] == 3 and rows["1"]["unfinished"] == 1
    assert rows["1"]["p50"] == pytest.approx(150.0)
    assert rows["2-10"]["jobs"] == 0 and rows["2-10"]["p50"] is None
    assert rows["11-100"]["p50"] == pytest.approx(2.0)
    assert rows["11-100"]["p99"] == pytest.approx(2.98)
    assert t["worst_job"] == {"job": 1, "delay": 200.0, "eligible_workers": 1}


def test_eligible_counts_match_every_pair_compared():
    """The superset-sum count (and its fallback for masks with many bits) equals comparing every task with every
    worker, with and without resource requests."""
    from megha.model.workload import _pairwise_counts, eligible_worker_counts, fits_some_worker

    rng = np.random.default_rng(5)
    for _ in range(200):
        bits = int(rng.integers(1, 27))
        keep = rng.integers(0, 2**32, dtype=np.uint32)
        tmask = (rng.integers(0, 2**bits, size=int(rng.integers(1, 300))) & keep).astype(np.uint32)
        wmask = rng.integers(0, 2**32, size=int(rng.integers(1, 200)), dtype=np.uint64).astype(np.uint32)
        cap = demand = None
        if rng.random() < 0.3:
            cap = rng.integers(1, 4, size=(wmask.size, 2)).astype(np.float64)
            demand = rng.integers(0, 4, size=(tmask.size, 2)).astype(np.float64)
        fit = (tmask[:, None] & ~wmask[None, :]) == 0
        if cap is not None:
            fit &= (demand[:, None, :] <= cap[None, :, :] + 1e-12).all(axis=2)
        want = fit.sum(axis=1)
        assert eligible_worker_counts(tmask, demand, wmask, cap).tolist() == want.tolist()
        assert fits_some_worker(tmask, demand, wmask, cap).tolist() == (want > 0).tolist()
        assert _pairwise_counts(tmask, wmask).tolist() == ((tmask[:, None] & ~wmask[None, :]) == 0).sum(1).tolist()
