"""Trace converters: round trips on small synthetic files in each source schema (written by the tests)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from megha.model.topology import load_cluster
from megha.workload.converters import _csv, convert
from megha.workload.converters.machines import load_machines
from megha.workload.converters.synthetic import write_alibaba2018, write_google2011, write_google2019
from megha.workload.tracefile import load_workload


def _rows(arrival, duration, cpu, mem) -> np.ndarray:
    """Tasks as sorted rows (arrival shifted to 0), for order-free comparison."""
    a = np.asarray(arrival, dtype=float)
    r = np.stack([np.round(a - a.min(), 6), np.round(duration, 6), np.round(cpu, 6), np.round(mem, 6)], axis=1)
    return r[np.lexsort(r.T[::-1])]


def _check_google(out: Path, exp) -> None:
    w = load_workload(out)
    assert w.resource_names == ("cpu", "mem")
    assert w.n_tasks == exp.job.size
    assert w.n_jobs == np.unique(exp.job).size
    got = _rows(w.task_arrival, w.task_duration, w.task_demand[:, 0], w.task_demand[:, 1])
    np.testing.assert_allclose(got, _rows(exp.arrival, exp.duration, exp.cpu, exp.mem), atol=1e-6)
    # jobs are numbered in arrival order and every task of a job shares its arrival
    assert np.all(np.diff(w.job_arrival) >= 0)
    assert w.job_arrival[0] == 0.0
    # per-job task counts match
    _, counts = np.unique(exp.job, return_counts=True)
    assert sorted(w.job_num_tasks.tolist()) == sorted(counts.tolist())
    assert w.job_priority is not None


@pytest.mark.parametrize("block", [None, 2048])
def test_google2011_round_trip(tmp_path: Path, monkeypatch, block) -> None:
    if block:  # many small batches: running tasks are carried across batches and files
        monkeypatch.setattr(_csv, "BLOCK_SIZE", block)
    exp = write_google2011(tmp_path / "g", 60, seed=3, parts=3)
    rep = convert(tmp_path / "g", "google2011", tmp_path / "g.parquet", machines=tmp_path / "m.json", progress=False)
    _check_google(tmp_path / "g.parquet", exp)
    assert rep.tasks == exp.job.size
    assert rep.dropped.get("attempts_not_finished", 0) > 0  # evictions and kills
    assert not any("not in time order" in n for n in rep.notes)
    w = load_workload(tmp_path / "g.parquet")
    assert w.job_user is not None and w.job_user.min() >= 0
    md = json.loads(pq.read_schema(tmp_path / "g.parquet").metadata[b"megha.convert"])
    assert md["format"] == "google2011"
    # machines: 20 added, one updated (capacity 0.5/0.749), one removed but kept
    dc = load_cluster(tmp_path / "m.json")
    assert dc.n_workers == 20
    dcm = load_machines(tmp_path / "m.json")
    assert dcm.resource_names == ("cpu", "mem")
    assert dcm.capacity.shape == (20, 2)
    ids = dcm.meta["machine_ids"]
    assert dcm.capacity[ids.index("1000")].tolist() == [0.5, 0.749]


def test_google2011_single_file_and_max_jobs(tmp_path: Path) -> None:
    exp = write_google2011(tmp_path / "g", 40, seed=5, parts=1, gz=False)
    f = tmp_path / "g" / "task_events" / "part-00000-of-00001.csv"
    rep = convert(f, "google2011", tmp_path / "a.parquet", max_jobs=10, progress=False)
    w = load_workload(tmp_path / "a.parquet")
    assert w.n_jobs == rep.jobs == 10
    # the first 10 jobs by arrival, with all of their finished tasks
    order = np.argsort(exp.arrival, kind="stable")
    first = []
    for j in exp.job[order]:
        if j not in first:
            first.append(j)
    keep = np.isin(exp.job, first[:10])
    assert w.n_tasks == int(keep.sum())


@pytest.mark.parametrize("names", [False, True])
def test_google2019_unordered_export(tmp_path: Path, monkeypatch, names) -> None:
    monkeypatch.setattr(_csv, "BLOCK_SIZE", 4096)  # several batches, out of time order
    exp = write_google2019(tmp_path / "g19", 50, seed=11, shuffle=True, names=names)
    rep = convert(tmp_path / "g19", "google2019", tmp_path / "o.parquet", machines=tmp_path / "m.json", progress=False)
    assert any("not in time order" in n for n in rep.notes)
    _check_google(tmp_path / "o.parquet", exp)
    dcm = load_machines(tmp_path / "m.json")
    assert dcm.n_workers == 10 and dcm.capacity[:2].tolist() == [[0.5, 0.25], [1.0, 0.5]]


def test_google2019_ordered_gz(tmp_path: Path) -> None:
    exp = write_google2019(tmp_path / "g19", 30, seed=2, shuffle=False, gz=True)
    rep = convert(
        tmp_path / "g19" / "instance_events-000000000000.csv.gz", "google2019", tmp_path / "o.parquet", progress=False
    )
    assert not rep.notes
    _check_google(tmp_path / "o.parquet", exp)


def test_alibaba2018_round_trip(tmp_path: Path) -> None:
    exp = write_alibaba2018(tmp_path / "ali", 60, seed=4)
    rep = convert(
        tmp_path / "ali",
        "alibaba2018",
        tmp_path / "a.parquet",
        machines=tmp_path / "m.json",
        lms=2,
        gms=2,
        progress=False,
    )
    w = load_workload(tmp_path / "a.parquet")
    assert w.n_jobs == exp["arrival"].size == rep.jobs
    assert w.n_tasks == int(exp["instances"].sum())
    n = exp["instances"]
    want = _rows(
        np.repeat(exp["arrival"], n), np.repeat(exp["duration"], n), np.repeat(exp["cpu"], n), np.repeat(exp["mem"], n)
    )
    got = _rows(w.task_arrival, w.task_duration, w.task_demand[:, 0], w.task_demand[:, 1])
    np.testing.assert_allclose(got, want)
    assert rep.dropped["not_terminated"] == 60 - exp["arrival"].size
    dc = load_cluster(tmp_path / "m.json")
    assert dc.n_workers == 12
    assert int(dc.lm_of.max()) == 1 and int(dc.partition_of.max()) == 1
    dcm = load_machines(tmp_path / "m.json")
    ids = dcm.meta["machine_ids"]
    assert dcm.capacity[ids.index("m_3")].tolist() == [64.0, 0.5]  # the machine's later record wins
    assert dcm.capacity[ids.index("m_1")].tolist() == [96.0, 1.0]


def test_converted_trace_simulates(tmp_path: Path) -> None:
    from megha.config import RunConfig
    from megha.runner import simulate

    write_google2011(tmp_path / "g", 15, seed=8, parts=1)
    convert(tmp_path / "g", "google2011", tmp_path / "g.parquet", machines=tmp_path / "m.json", progress=False)
    res = simulate(
        RunConfig(
            scheduler="megha",
            trace=str(tmp_path / "g.parquet"),
            cluster=str(tmp_path / "m.json"),
            resources=True,
            capacity={"cpu": 1.0, "mem": 1.0},
            constraints=False,
        )
    )
    assert res.unfinished_reason is None
    assert res.workload.task_demand is not None and res.workload.task_demand[:, 0].max() <= 0.5
    # without a capacity setting, each machine gets its own capacity from the machine list
    res = simulate(
        RunConfig(
            scheduler="megha",
            trace=str(tmp_path / "g.parquet"),
            cluster=str(tmp_path / "m.json"),
            resources=True,
            constraints=False,
        )
    )
    np.testing.assert_array_equal(res.datacenter.capacity, load_machines(tmp_path / "m.json").capacity)
    assert res.unfinished_reason is None and res.feasible.any()
    ran = np.flatnonzero(res.feasible)
    assert (res.workload.task_demand[ran] <= res.datacenter.capacity[res.recorder.worker[ran]] + 1e-12).all()
